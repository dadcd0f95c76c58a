"""Adapter discovery through entry points (DESIGN §1).

One entry-point group per port; the entry-point name is the mode in the settings. The loaded
object has a ``from_settings`` classmethod:

* ``charmem.graph_stores``: ``from_settings(settings, collection) -> GraphStore``
* ``charmem.vector_indexes``: ``from_settings(settings, collection, *, model_id, vector_size)``
* ``charmem.stats_stores``: ``from_settings(settings, collection) -> RetrievalStatsStore``
* ``charmem.embedders``: ``from_settings(settings) -> EmbeddingProvider``
* ``charmem.token_counters``: ``from_settings(settings) -> TokenCounter`` (``TOKEN_COUNTER``;
  ``whitespace`` is built into core and needs no entry point, see :func:`load_token_counter`)

Optional hooks the facade uses when an adapter has them: ``from_settings_async`` (same arguments,
a coroutine: preferred over ``from_settings``, for adapters whose opening speaks to a server from
the caller's event loop) and, on vector indexes, ``drop_from_settings(settings, collection)`` or
``drop_from_settings_async`` (remove a collection's vectors whatever their fingerprint, for
``CharacterMemory.open(..., rebuild_vectors=True)``), and, on any store,
``exists_from_settings(settings, collection) -> bool`` (whether the store a persistent mode would
open already exists, so :func:`charmem.admin.check_settings` can check without creating one).
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from charmem.errors import ConfigurationError
from charmem.tokens import WhitespaceTokenCounter

if TYPE_CHECKING:
    from charmem.ports import TokenCounter
    from charmem.settings import Settings

__all__ = ["GROUPS", "load_adapter", "load_token_counter"]

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
    ("charmem.vector_indexes", "embedded"): "charmem-qdrant",
    ("charmem.vector_indexes", "service"): "charmem-qdrant",
    ("charmem.embedders", "openai"): "charmem-openai",
    ("charmem.embedders", "local"): "charmem-local-embed",
    ("charmem.token_counters", "local"): "charmem-local-embed",
}


def load_adapter(port: str, mode: str) -> Any:
    """Load the adapter class registered for ``mode`` in ``port``'s entry-point group.

    Args:
        port: ``"graph"``, ``"vectors"``, ``"stats"``, ``"embedder"`` or ``"token_counter"``.
        mode: the mode named in the settings (e.g. ``"persistent"``).

    Returns:
        The loaded object (a class with ``from_settings``).

    Raises:
        ConfigurationError: no installed distribution registers that mode; the message names the
            setting, the entry-point group, the mode and the distribution to install.
    """
    group, key = GROUPS[port]
    found = [ep for ep in entry_points(group=group) if ep.name == mode]
    if not found:
        package = DISTRIBUTIONS.get((group, mode), "a package registering it")
        raise ConfigurationError(
            f"{key}={mode!r} needs an adapter registered in the entry-point group {group!r} under "
            f"the name {mode!r}; none is installed. Install {package} (pip install {package}) or "
            f"choose another {key}",
            key=key,
        )
    try:
        return found[0].load()
    except ImportError as exc:
        raise ConfigurationError(
            f"{key}={mode!r}: the adapter {found[0].value} failed to import ({exc}); reinstall "
            f"{DISTRIBUTIONS.get((group, mode), found[0].value)}",
            key=key,
        ) from exc


def load_token_counter(settings: Settings) -> TokenCounter:
    """Build the counter ``TOKEN_COUNTER`` selects, for ``render(max_tokens=...)`` (DESIGN §6.7).

    ``whitespace`` is core's own :class:`~charmem.tokens.WhitespaceTokenCounter`, built here with
    no discovery; any other mode (``local``: charmem-local-embed's WordPiece counter) is looked up
    in the ``charmem.token_counters`` entry-point group and built with ``from_settings(settings)``.

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
    counter: TokenCounter = load_adapter("token_counter", settings.token_counter).from_settings(settings)
    return counter
