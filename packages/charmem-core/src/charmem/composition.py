"""Adapter selection: the settings name a mode, an entry point names the factory of that mode.

One entry-point group per port; the entry-point name is the mode in the settings, and the object
it names is an :class:`AdapterFactory`:

=========================== ================================ ===================================
group                       settings key                     the factory builds
=========================== ================================ ===================================
``charmem.graph_stores``    ``GRAPH_STORE_MODE``             a ``GraphStore`` per collection
``charmem.vector_indexes``  ``VECTOR_STORE_MODE``            a ``VectorIndex`` per collection
                                                             (options ``model_id``,
                                                             ``vector_size``)
``charmem.stats_stores``    ``RETRIEVAL_STATS_STORE_MODE``   a ``RetrievalStatsStore`` per
                                                             collection
``charmem.embedders``       ``EMBEDDING_PROVIDER``           an ``EmbeddingProvider`` (no
                                                             collection)
``charmem.token_counters``  ``TOKEN_COUNTER``                a ``TokenCounter`` (no collection;
                                                             ``whitespace`` is built into core,
                                                             see :func:`load_token_counter`)
=========================== ================================ ===================================

An adapter package registers, for example,
``persistent = "charmem_oxigraph._factory:persistent"``, where ``persistent`` is a
:class:`ClassFactory` (or any object with the :class:`AdapterFactory` methods). An entry point
that names an adapter class with a ``from_settings`` classmethod, as every adapter registered
before factories existed, keeps working: :func:`load_factory` wraps it in a default factory.
"""

from __future__ import annotations

import asyncio
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar, overload, runtime_checkable

from charmem.errors import ConfigurationError
from charmem.tokens import WhitespaceTokenCounter

if TYPE_CHECKING:
    from collections.abc import Callable

    from charmem.ports import EmbeddingProvider, GraphStore, RetrievalStatsStore, TokenCounter, VectorIndex
    from charmem.settings import Settings

__all__ = [
    "GROUPS",
    "AdapterFactory",
    "ClassFactory",
    "load_adapter",
    "load_factory",
    "load_token_counter",
]

AdapterT = TypeVar("AdapterT")
AdapterT_co = TypeVar("AdapterT_co", covariant=True)

#: Port name -> (entry-point group, settings key selecting the mode).
GROUPS: dict[str, tuple[str, str]] = {
    "graph": ("charmem.graph_stores", "GRAPH_STORE_MODE"),
    "vectors": ("charmem.vector_indexes", "VECTOR_STORE_MODE"),
    "stats": ("charmem.stats_stores", "RETRIEVAL_STATS_STORE_MODE"),
    "embedder": ("charmem.embedders", "EMBEDDING_PROVIDER"),
    "token_counter": ("charmem.token_counters", "TOKEN_COUNTER"),
}

#: Which distribution provides each (group, mode).
DISTRIBUTIONS: dict[tuple[str, str], str] = {
    ("charmem.graph_stores", "persistent"): "charmem-oxigraph",
    ("charmem.graph_stores", "in_memory"): "charmem-oxigraph",
    ("charmem.graph_stores", "service"): "charmem-oxigraph",
    ("charmem.stats_stores", "graph"): "charmem-oxigraph",
    ("charmem.vector_indexes", "embedded"): "charmem-qdrant",
    ("charmem.vector_indexes", "service"): "charmem-qdrant",
    ("charmem.embedders", "openai"): "charmem-openai",
    ("charmem.embedders", "local"): "charmem-local-embed",
    ("charmem.token_counters", "local"): "charmem-local-embed",
}


@runtime_checkable
class AdapterFactory(Protocol[AdapterT_co]):
    """Builds one port's adapter from settings: what an adapter's entry point names.

    ``collection`` is the collection a store is bound to; embedders and token counters serve
    every collection and are built without one (``None``). ``options`` are the port's own
    keywords: ``model_id`` and ``vector_size`` (the embedder fingerprint) for vector indexes,
    none for the other ports.

    :class:`ClassFactory` implements every method from an adapter class's ``from_settings``
    with these defaults: ``open`` runs ``build`` in a worker thread, ``exists`` answers ``None``
    and ``drop`` removes nothing and answers ``False``. Subclass it and override what your
    adapter can do better.
    """

    def build(self, settings: Settings, collection: str | None = None, /, **options: Any) -> AdapterT_co:
        """Build the adapter, blocking: for callers without an event loop (scripts, threads).

        Raises:
            ConfigurationError: a setting the adapter reads is missing or malformed (``key``
                names it).
            StoreLockedError, StoreCorruptedError, BackendError: the store could not be opened.
        """
        ...

    async def open(self, settings: Settings, collection: str | None = None, /, **options: Any) -> AdapterT_co:
        """Build the adapter from the caller's event loop, never blocking it.

        What the facade calls. Same result and errors as :meth:`build`; an adapter whose
        opening speaks to a server from the caller's loop does it here.
        """
        ...

    def exists(self, settings: Settings, collection: str) -> bool | None:
        """Whether the store opening ``collection`` would use already exists (opening creates it).

        ``None``: the adapter cannot tell without creating it (servers, in-memory stores); the
        callers then neither refuse a missing store nor rebuild a lost one. Blocking (it may
        look at files): call it from a worker thread inside an event loop.

        Raises:
            ConfigurationError: the collection name is not allowed.
        """
        ...

    async def drop(self, settings: Settings, collection: str) -> bool:
        """Remove the collection's store whatever it holds; vector indexes only.

        For ``CharacterMemory.open(..., rebuild_vectors=True)``: the vectors of another
        embedder go before the index is opened with the new fingerprint. Answers whether
        anything was removed (``False`` for a store that persists nothing).

        Raises:
            StoreLockedError: the store is open elsewhere; nothing was removed.
            BackendError: the store failed.
        """
        ...


class ClassFactory(Generic[AdapterT]):
    """The default :class:`AdapterFactory`: builds an adapter class with its ``from_settings``.

    ``build`` calls ``adapter.from_settings(settings, collection, **options)`` (``collection``
    left out when ``None``); ``open`` runs ``build`` in a worker thread, since it may block on
    files or locks; ``exists`` answers ``None`` (cannot tell); ``drop`` removes nothing
    (``False``). An adapter package subclasses it to override what its adapter does better.

    Attributes:
        adapter: the adapter class (``adapter.from_settings`` builds its instances).
    """

    def __init__(self, adapter: type[AdapterT]) -> None:
        self.adapter = adapter
        self._from_settings: Callable[..., AdapterT] = adapter.from_settings  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.adapter.__module__}.{self.adapter.__qualname__})"

    def build(self, settings: Settings, collection: str | None = None, /, **options: Any) -> AdapterT:
        """See :meth:`AdapterFactory.build`."""
        if collection is None:
            return self._from_settings(settings, **options)
        return self._from_settings(settings, collection, **options)

    async def open(self, settings: Settings, collection: str | None = None, /, **options: Any) -> AdapterT:
        """See :meth:`AdapterFactory.open`; ``build`` in a worker thread."""
        return await asyncio.to_thread(lambda: self.build(settings, collection, **options))

    def exists(self, settings: Settings, collection: str) -> bool | None:
        """See :meth:`AdapterFactory.exists`; ``None``: cannot tell."""
        del settings, collection
        return None

    async def drop(self, settings: Settings, collection: str) -> bool:
        """See :meth:`AdapterFactory.drop`; nothing to remove."""
        del settings, collection
        return False

    async def migrate(self, settings: Settings, collection: str) -> Any:
        """Upgrade the collection's store to the adapter's current layout (``charmem migrate``).

        Optional hook of a graph store or vector index factory (:func:`charmem.admin.migrate`
        calls both); the default has a single layout and answers ``None``. A graph store adapter
        with several returns a :class:`charmem.admin.LayoutMigration`, a vector index adapter a
        :class:`charmem.admin.VectorLayoutMigration`.
        """
        del settings, collection
        return None

    def outdated(self, settings: Settings, collection: str) -> bool:
        """Whether the collection's vector index is of an older layout only the graph can rebuild.

        Optional hook of a vector index factory: ``CharacterMemory.open`` then drops the index
        and rebuilds it from the graph, with progress, as it does a lost one
        (:func:`~charmem.usecases.maintenance.ensure_vectors_match_graph`). Blocking, like
        :meth:`exists`. The default has a single layout: ``False``.
        """
        del settings, collection
        return False


class _RegisteredClass(ClassFactory[AdapterT]):
    """The factory of an entry point that names an adapter class (registration before factories).

    Besides ``from_settings`` it honours the optional classmethods such classes could have:
    ``from_settings_async`` (same arguments, a coroutine) for ``open``,
    ``exists_from_settings(settings, collection)`` for ``exists``, and
    ``drop_from_settings_async`` / ``drop_from_settings`` (run in a worker thread) for ``drop``.
    """

    def _hook(self, name: str) -> Callable[..., Any] | None:
        hook: Callable[..., Any] | None = getattr(self.adapter, name, None)
        return hook

    async def open(self, settings: Settings, collection: str | None = None, /, **options: Any) -> AdapterT:
        """``from_settings_async`` when the class has it, else ``build`` in a worker thread."""
        opener = self._hook("from_settings_async")
        if opener is None:
            return await super().open(settings, collection, **options)
        args = (settings,) if collection is None else (settings, collection)
        opened: AdapterT = await opener(*args, **options)
        return opened

    def exists(self, settings: Settings, collection: str) -> bool | None:
        """``exists_from_settings`` when the class has it, else ``None``."""
        hook = self._hook("exists_from_settings")
        return None if hook is None else bool(hook(settings, collection))

    async def drop(self, settings: Settings, collection: str) -> bool:
        """``drop_from_settings_async``, else ``drop_from_settings`` in a thread, else ``False``."""
        dropper = self._hook("drop_from_settings_async")
        if dropper is not None:
            return bool(await dropper(settings, collection))
        blocking = self._hook("drop_from_settings")
        if blocking is not None:
            return bool(await asyncio.to_thread(blocking, settings, collection))
        return False


def _package(group: str, mode: str) -> str:
    return DISTRIBUTIONS.get((group, mode), "a package registering it")


def _load_entry_point(port: str, mode: str) -> tuple[EntryPoint, object]:
    """The entry point registered for ``mode`` in ``port``'s group, and the object it names."""
    group, key = GROUPS[port]
    found = [ep for ep in entry_points(group=group) if ep.name == mode]
    if not found:
        package = _package(group, mode)
        raise ConfigurationError(
            f"{key}={mode!r} needs an adapter registered in the entry-point group {group!r} under "
            f"the name {mode!r}; none is installed. Install {package} (pip install {package}) or "
            f"choose another {key}",
            key=key,
        )
    try:
        return found[0], found[0].load()
    except ImportError as exc:
        raise ConfigurationError(
            f"{key}={mode!r}: the adapter {found[0].value} failed to import ({exc}); reinstall "
            f"{DISTRIBUTIONS.get((group, mode), found[0].value)}",
            key=key,
        ) from exc


@overload
def load_factory(port: Literal["graph"], mode: str) -> AdapterFactory[GraphStore]: ...
@overload
def load_factory(port: Literal["vectors"], mode: str) -> AdapterFactory[VectorIndex]: ...
@overload
def load_factory(port: Literal["stats"], mode: str) -> AdapterFactory[RetrievalStatsStore]: ...
@overload
def load_factory(port: Literal["embedder"], mode: str) -> AdapterFactory[EmbeddingProvider]: ...
@overload
def load_factory(port: Literal["token_counter"], mode: str) -> AdapterFactory[TokenCounter]: ...
@overload
def load_factory(port: str, mode: str) -> AdapterFactory[Any]: ...
def load_factory(port: str, mode: str) -> AdapterFactory[Any]:
    """The factory registered for ``mode`` in ``port``'s entry-point group.

    An entry point naming an adapter class (with ``from_settings``) is wrapped in a default
    factory that also honours the class's optional ``from_settings_async``,
    ``exists_from_settings`` and ``drop_from_settings(_async)`` classmethods.

    Args:
        port: ``"graph"``, ``"vectors"``, ``"stats"``, ``"embedder"`` or ``"token_counter"``.
        mode: the mode named in the settings (e.g. ``"persistent"``).

    Returns:
        AdapterFactory: the factory of that mode.

    Raises:
        ConfigurationError: no installed distribution registers that mode, its module fails to
            import, or it names neither a factory nor an adapter class; the message names the
            setting, the entry-point group, the mode and the distribution to install.
    """
    entry_point, loaded = _load_entry_point(port, mode)
    if isinstance(loaded, type) and hasattr(loaded, "from_settings"):
        return _RegisteredClass(loaded)
    if not isinstance(loaded, type) and isinstance(loaded, AdapterFactory):
        return loaded
    group, key = GROUPS[port]
    package = _package(group, mode)
    raise ConfigurationError(
        f"{key}={mode!r}: the entry point {entry_point.value!r} of the group {group!r} names "
        f"{loaded!r}, which is neither an adapter factory (build, open, exists, drop) nor an "
        f"adapter class with from_settings; install a version of {package} made for this "
        f"charmem-core (pip install -U {package}) or choose another {key}",
        key=key,
    )


def load_adapter(port: str, mode: str) -> Any:
    """The adapter class registered for ``mode`` in ``port``'s entry-point group.

    For callers that build with the class's own ``from_settings``; new code asks
    :func:`load_factory`. A factory that wraps no class is returned as it is.

    Args:
        port: ``"graph"``, ``"vectors"``, ``"stats"``, ``"embedder"`` or ``"token_counter"``.
        mode: the mode named in the settings (e.g. ``"persistent"``).

    Returns:
        The adapter class (:attr:`ClassFactory.adapter` of the registered factory).

    Raises:
        ConfigurationError: as :func:`load_factory`.
    """
    factory = load_factory(port, mode)
    return factory.adapter if isinstance(factory, ClassFactory) else factory


def load_token_counter(settings: Settings) -> TokenCounter:
    """Build the counter ``TOKEN_COUNTER`` selects, for ``render(max_tokens=...)``.

    ``whitespace`` is core's own :class:`~charmem.tokens.WhitespaceTokenCounter`, built here with
    no discovery; any other mode (``local``: charmem-local-embed's WordPiece counter) is looked up
    in the ``charmem.token_counters`` entry-point group and built by its factory.

    Args:
        settings: validated settings; ``settings.token_counter`` names the mode.

    Returns:
        TokenCounter: a counter with ``name`` and ``count(text)``.

    Raises:
        ConfigurationError: no installed distribution registers the mode, or its adapter cannot
            be built (for example the packaged tokenizer is missing); the error names
            ``TOKEN_COUNTER``.
    """
    if settings.token_counter == "whitespace":  # noqa: S105 - a mode name, not a secret
        return WhitespaceTokenCounter()
    return load_factory("token_counter", settings.token_counter).build(settings)
