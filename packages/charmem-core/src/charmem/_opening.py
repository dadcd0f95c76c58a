"""How :meth:`CharacterMemory.open` opens a memory: the opener object and the opening steps.

The steps: check the arguments, build the token counter and the embedder, open the stores
(refusing a lost graph, or a server graph that reads as empty beside vectors that hold points;
dropping the vectors when asked; noticing lost derived data), build the facade, then restore
what was lost (statistics, vectors) from the graph.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Coroutine, Generator, Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

import attrs

from charmem._checks import check_embedding_provider
from charmem.composition import load_factory, load_token_counter
from charmem.domain._fields import optional_id
from charmem.domain.character import check_character_identity
from charmem.domain.ids import MemoryId
from charmem.errors import ConfigurationError, MemoryNotOpenedError
from charmem.log import get_logger
from charmem.ports import (
    CharacterRecord,
    Clock,
    EmbeddingProvider,
    GraphStore,
    RetrievalStatsStore,
    TokenCounter,
    VectorIndex,
)
from charmem.settings import Settings, validate_collection_name
from charmem.usecases.lost_graph import refuse_vectors_beside_empty_graph
from charmem.usecases.maintenance import (
    ProgressCallback,
    drop_vector_index,
    ensure_vectors_match_graph,
    refuse_vectors_without_graph,
    stats_lost_beside_graph,
)

if TYPE_CHECKING:
    from charmem.memory import CharacterMemory

__all__ = ["OpenOptions", "open_memory", "opening"]

log = get_logger("charmem.memory")


class _Opening:
    """What :meth:`CharacterMemory.open` returns: awaitable and an async context manager.

    It is not the memory: any other use (``CharacterMemory.open(...).remember``) raises
    :class:`~charmem.errors.MemoryNotOpenedError` saying to ``await`` it, and one never awaited
    nor entered warns (``RuntimeWarning``) when collected, as a coroutine does.
    """

    def __init__(self, build: Callable[[], Coroutine[Any, Any, CharacterMemory]]) -> None:
        self._build = build
        self._memory: CharacterMemory | None = None
        self._used = False

    def _factory(self) -> Coroutine[Any, Any, CharacterMemory]:
        """The opening coroutine (awaited once, by ``await``, ``async with`` or the sync facade)."""
        self._used = True
        return self._build()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        self._used = True  # the error says it all; no second warning when collected
        raise MemoryNotOpenedError(
            f"CharacterMemory.open(...) returns an opener, not the memory, so it has no {name!r}: "
            "write `memory = await CharacterMemory.open(...)` or "
            "`async with CharacterMemory.open(...) as memory:`"
        )

    def __del__(self) -> None:
        if not getattr(self, "_used", True):
            warnings.warn(
                "CharacterMemory.open(...) was never awaited, so nothing was opened: write "
                "`memory = await CharacterMemory.open(...)` or `async with CharacterMemory.open(...) "
                "as memory:`",
                RuntimeWarning,
                stacklevel=2,
                source=self,
            )

    def __enter__(self) -> None:
        self._used = True
        raise MemoryNotOpenedError(
            "CharacterMemory.open(...) is asynchronous: write `async with CharacterMemory.open(...) "
            "as memory:` in a coroutine, or use `with SyncCharacterMemory.open(...) as memory:` in "
            "blocking code"
        )

    def __exit__(self, *exc_info: object) -> None:
        """Never reached: :meth:`__enter__` always raises."""

    def __await__(self) -> Generator[Any, None, CharacterMemory]:
        return self._factory().__await__()

    async def __aenter__(self) -> CharacterMemory:
        self._memory = await self._factory()
        return self._memory

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._memory is not None:
            await self._memory.close()


@attrs.frozen(kw_only=True)
class OpenOptions:
    """The keyword arguments of :meth:`CharacterMemory.open` (see there)."""

    embedding_provider: EmbeddingProvider | None = None
    clock: Clock | None = None
    token_counter: TokenCounter | None = None
    rebuild_vectors: bool = False
    rebuild_progress: ProgressCallback | None = None
    character_id: MemoryId | None = attrs.field(default=None, converter=optional_id)


@attrs.frozen(kw_only=True)
class _OpenedStores:
    """The stores of a memory being opened, and what of its derived data must be rebuilt."""

    graph: GraphStore
    vectors: VectorIndex
    stats: RetrievalStatsStore
    stats_lost: bool
    rebuild_vectors: bool
    character_id: MemoryId | None


async def _open_embedder(settings: Settings) -> EmbeddingProvider:
    """The embedding provider ``EMBEDDING_PROVIDER`` selects, opened from the caller's loop."""
    settings.require_embedding_keys()
    return await load_factory("embedder", settings.embedding_provider).open(settings)


async def _close_quietly(adapters: Iterable[Any]) -> None:
    """Close what was opened before a failure; the failure matters more than a close error."""
    for adapter in adapters:
        try:
            await adapter.close()
        except Exception:  # noqa: BLE001, S110 - the original error matters more
            pass


async def _character(graph: GraphStore, collection: str, given: MemoryId | None) -> MemoryId | None:
    """The character id ``collection`` records, checked against ``given`` (read only).

    Raises:
        CharacterIdentityMismatchError: another id is recorded
            (:func:`charmem.domain.character.check_character_identity`).
        ConfigurationError: ``given`` while the graph store cannot record one.
    """
    if not isinstance(graph, CharacterRecord):
        if given is not None:
            raise ConfigurationError(
                f"the graph store {type(graph).__name__} cannot record a character id; open "
                "without character_id, or use a graph store that implements "
                "charmem.ports.CharacterRecord",
                key="character_id",
            )
        return None
    recorded = await graph.character_id()
    check_character_identity(collection, recorded, given)
    return recorded


async def _record_character(memory: CharacterMemory, graph: GraphStore, given: MemoryId) -> None:
    """Record ``given`` as the collection's character once every store is open and in step.

    Recorded last, so a new collection's first open finds its graph empty beside empty derived
    stores (nothing to rebuild). A rival opener that recorded another id meanwhile wins: this
    memory is closed and the mismatch raised.
    """
    record = cast(CharacterRecord, graph)  # _character checked it before any store opened
    try:
        recorded = await record.record_character_id(given)
        check_character_identity(memory.collection, recorded, given)
    except BaseException:
        await memory.close()
        raise
    memory.character_id = recorded


async def _open_each_store(
    settings: Settings,
    collection: str,
    embedder: EmbeddingProvider,
    options: OpenOptions,
    opened: list[Any],
) -> _OpenedStores:
    """Open graph, stats and vectors in that order, appending each to ``opened``.

    The character id is checked once the graph is open, before any other store (a new one is
    recorded once every store is open: :func:`_record_character`).
    """
    rebuild_vectors = options.rebuild_vectors
    if not rebuild_vectors:
        await refuse_vectors_without_graph(settings, collection)
    graph = await load_factory("graph", settings.graph_store_mode).open(settings, collection)
    opened.append(graph)
    character_id = await _character(graph, collection, options.character_id)
    stats = await load_factory("stats", settings.retrieval_stats_store_mode).open(settings, collection)
    opened.append(stats)
    stats_lost = await stats_lost_beside_graph(settings, graph, stats)
    rebuild = rebuild_vectors or await ensure_vectors_match_graph(settings, collection, graph)
    if rebuild:  # asked for, or a lost (nothing to drop) or outdated index
        dropped = await drop_vector_index(settings, collection)
        log.info("vector_index_dropped", collection=collection, dropped=dropped)
    vectors = await load_factory("vectors", settings.vector_store_mode).open(
        settings, collection, model_id=embedder.model_id, vector_size=embedder.vector_size
    )
    opened.append(vectors)
    if not rebuild_vectors:
        await refuse_vectors_beside_empty_graph(settings, collection, graph, vectors)
    return _OpenedStores(
        graph=graph,
        vectors=vectors,
        stats=stats,
        stats_lost=stats_lost,
        rebuild_vectors=rebuild,
        character_id=character_id,
    )


async def _open_stores(
    settings: Settings,
    collection: str,
    embedder: EmbeddingProvider,
    options: OpenOptions,
) -> _OpenedStores:
    """Open the stores; on any failure close those already open, then raise."""
    opened: list[Any] = []
    try:
        return await _open_each_store(settings, collection, embedder, options, opened)
    except BaseException:
        await _close_quietly(reversed(opened))
        raise


async def _restore_derived(memory: CharacterMemory, stores: _OpenedStores, options: OpenOptions) -> None:
    """Rebuild lost statistics and vectors from the graph; close the memory if that fails."""
    try:
        if stores.stats_lost:
            rows = await memory.rebuild_stats()
            log.warning("retrieval_stats_rebuilt", collection=memory.collection, rows=rows)
        if stores.rebuild_vectors:
            await memory.rebuild_vector_index(on_progress=options.rebuild_progress)
    except BaseException:
        await memory.close()
        raise


async def open_memory(
    cls: type[CharacterMemory], settings: Settings, collection: str, options: OpenOptions
) -> CharacterMemory:
    """Open the memory of ``collection`` as :meth:`CharacterMemory.open` documents.

    Args:
        cls: the facade class to build.
        settings: validated settings.
        collection: the collection name.
        options: the keyword arguments of ``open``.

    Returns:
        CharacterMemory: open, with lost derived data rebuilt.

    Raises:
        See :meth:`CharacterMemory.open`.
    """
    validate_collection_name(collection)
    if options.embedding_provider is not None:
        check_embedding_provider(options.embedding_provider)
    counter = options.token_counter if options.token_counter is not None else load_token_counter(settings)
    embedder = options.embedding_provider
    if embedder is None:
        embedder = await _open_embedder(settings)
    stores = await _open_stores(settings, collection, embedder, options)
    log.info(
        "memory_opened",
        collection=collection,
        graph=settings.graph_store_mode,
        vectors=settings.vector_store_mode,
        model=embedder.model_id,
        token_counter=counter.name,
    )
    memory = cls(
        graph=stores.graph,
        vectors=stores.vectors,
        embedder=embedder,
        stats=stores.stats,
        collection=collection,
        clock=options.clock,
        token_counter=counter,
        log_memory_text=settings.log_memory_text,
        embedding_timeout_s=settings.embedding_timeout_s,
        character_id=stores.character_id,
    )
    await _restore_derived(memory, stores, options)
    if options.character_id is not None and stores.character_id is None:
        await _record_character(memory, stores.graph, options.character_id)
    return memory


def opening(
    cls: type[CharacterMemory], settings: Settings, collection: str, options: OpenOptions
) -> _Opening:
    """The opener :meth:`CharacterMemory.open` returns: it opens when awaited or entered."""
    return _Opening(lambda: open_memory(cls, settings, collection, options))
