"""Vector maintenance: rebuild a collection's candidate recall from graph authority (DESIGN §7).

The vector index is derived data: every point is an index entry of a current graph object
(:func:`charmem.usecases.planning.index_entries`), so the whole index can be re-created from the
graph. That is the repair of last resort (a lost or damaged shard, repair markers nobody
replayed), the way to move between the embedded and service vector stores, and, after dropping
the old shard, the way to switch to an embedder of another model or size.

``CharacterMemory.open`` calls the checks at the end of this module so a collection never opens
with silent amnesia: a lost shard beside a non-empty graph is rebuilt (or refused, with
``VECTOR_REBUILD_ON_OPEN=false``), lost statistics are rebuilt, and a graph store is never created
empty beside existing vectors.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping

import attrs

from charmem.composition import load_factory
from charmem.domain.ids import MemoryId
from charmem.domain.model import Episode, MemoryObject, ObjectType, Observation
from charmem.domain.plan import IndexEntry
from charmem.domain.retrieval import CurrencyStatus
from charmem.errors import DraftValidationError, StoreCorruptedError
from charmem.log import get_logger
from charmem.ports import EmbeddingProvider, GraphStore, RetrievalStatsStore, VectorIndex, VectorPoint
from charmem.settings import DEFAULT_EMBEDDING_TIMEOUT_S, Settings, validate_collection_name
from charmem.usecases.embedding import embed_texts
from charmem.usecases.names import embedding_texts
from charmem.usecases.planning import index_entries

__all__ = [
    "INDEXED_TYPES",
    "ProgressCallback",
    "VectorRebuildReport",
    "current_index_entries",
    "drop_vector_index",
    "ensure_vectors_match_graph",
    "rebuild_vector_index",
    "refuse_vectors_without_graph",
    "stats_lost_beside_graph",
]

log = get_logger("charmem.maintenance")

#: ``on_progress(done, total)``: index entries written so far and in all (counts).
ProgressCallback = Callable[[int, int], object]

#: Object types that can have a vector (notions never do).
INDEXED_TYPES = (ObjectType.EPISODE, ObjectType.OBSERVATION, ObjectType.DERIVED, ObjectType.THREAD)
_READ_BATCH = 512


@attrs.frozen(kw_only=True)
class VectorRebuildReport:
    """What :func:`rebuild_vector_index` did.

    Attributes:
        objects: graph objects of an indexable type examined (episodes, observations, derived
            memories, threads).
        indexed: points written (current objects with a vector surface).
        not_current: objects left out because they are superseded or suppressed.
        removed: points deleted from the index because no current object backs them.
    """

    objects: int
    indexed: int
    not_current: int
    removed: int


def current_index_entries(
    objects: Iterable[MemoryObject], currency: Mapping[MemoryId, CurrencyStatus]
) -> tuple[list[IndexEntry], int]:
    """The index entries a collection's current objects should have, as a rebuild makes them.

    Observations, derived memories and threads that ``currency`` says are current get an entry
    (:func:`~charmem.usecases.planning.index_entries`); a current episode gets one only when its
    summary differs from the text of every stored observation of it (the echo rule of commit,
    checked against all observations, superseded or not); notions never do.

    Args:
        objects: every stored object of the collection (of any type; notions are skipped).
        currency: the status of each of them (an absent id counts as not current).

    Returns:
        tuple: (entries sorted by id, number of objects of an indexable type left out because
        they are superseded or suppressed).
    """
    current: list[MemoryObject] = []
    episodes: list[Episode] = []
    observation_texts: dict[MemoryId, set[str]] = {}
    not_current = 0
    for obj in objects:
        if obj.object_type not in INDEXED_TYPES:
            continue
        if isinstance(obj, Observation):  # echo check uses every observation, as at commit
            observation_texts.setdefault(obj.episode_id, set()).add(obj.text.strip())
        if currency.get(obj.id) is not CurrencyStatus.CURRENT:
            not_current += 1
        elif isinstance(obj, Episode):
            episodes.append(obj)
        else:
            current.append(obj)
    entries = list(index_entries(current))
    entries += [
        entry
        for entry in index_entries(episodes)
        if entry.text.strip() not in observation_texts.get(entry.id, set())
    ]
    entries.sort(key=lambda entry: entry.id)
    return entries, not_current


async def rebuild_vector_index(
    *,
    graph: GraphStore,
    vectors: VectorIndex,
    embedder: EmbeddingProvider,
    batch_size: int = 64,
    on_progress: ProgressCallback | None = None,
    embed_timeout_s: float = DEFAULT_EMBEDDING_TIMEOUT_S,
) -> VectorRebuildReport:
    """Re-create a collection's vectors from its current graph objects.

    Reads every episode, observation, derived memory and thread id (``graph.object_ids``), their
    objects and currency in batches of 512, and builds their index entries with
    :func:`current_index_entries` (an episode gets a vector only when its summary differs from the
    text of each of its observations, as at commit). Superseded and suppressed objects stay out.
    The entries are embedded and upserted ``batch_size`` at a time; then points that no current
    object backs are deleted. Running it again is harmless (upserts replace).

    Args:
        graph: the collection's graph authority.
        vectors: the collection's vector index, open with ``embedder``'s fingerprint.
        embedder: the embedding provider.
        batch_size: texts per ``embed_documents`` call and points per upsert (count, >= 1).
        on_progress: called as ``on_progress(done, total)`` with entries written so far and in
            all: once before the first batch and after each batch.
        embed_timeout_s: seconds one ``embed_documents`` call may take (``EMBEDDING_TIMEOUT_S``).

    Returns:
        VectorRebuildReport: counts of objects examined, points written, objects left out and
        stale points removed.

    Raises:
        DraftValidationError: ``batch_size`` is not an int >= 1 (also a ``ValueError``).
        BackendError: a store or the embedder failed, or an embedding call timed out
            (``EmbeddingTimeoutError``); the index may then be partial: run it again.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise DraftValidationError(f"batch_size must be an int >= 1, not {batch_size!r}", field="batch_size")
    ids = await graph.object_ids(INDEXED_TYPES)
    objects: list[MemoryObject] = []
    currency: dict[MemoryId, CurrencyStatus] = {}
    for start in range(0, len(ids), _READ_BATCH):
        chunk = ids[start : start + _READ_BATCH]
        objects += (await graph.get_objects(chunk)).values()
        currency.update(await graph.currency(chunk))
    entries, not_current = current_index_entries(objects, currency)
    total = len(entries)
    if on_progress is not None:
        on_progress(0, total)
    for start in range(0, total, batch_size):
        chunk_entries = entries[start : start + batch_size]
        texts = await embedding_texts(chunk_entries, graph)
        rows = await embed_texts(embedder, texts, timeout_s=embed_timeout_s)
        await vectors.upsert(
            [
                VectorPoint(id=entry.id, object_type=entry.object_type, vector=row, text=text)
                for entry, text, row in zip(chunk_entries, texts, rows, strict=True)
            ]
        )
        if on_progress is not None:
            on_progress(start + len(chunk_entries), total)
    indexed = {entry.id for entry in entries}
    stale = sorted(await vectors.point_ids() - indexed)
    if stale:
        await vectors.delete(stale)
    report = VectorRebuildReport(objects=len(ids), indexed=total, not_current=not_current, removed=len(stale))
    log.info(
        "vector_index_rebuilt",
        objects=report.objects,
        indexed=report.indexed,
        not_current=report.not_current,
        removed=report.removed,
        model=embedder.model_id,
    )
    return report


async def drop_vector_index(settings: Settings, collection: str) -> bool:
    """Drop a collection's vectors, whatever their embedder fingerprint, before a rebuild.

    Asks the factory of the vector adapter ``settings.vector_store_mode`` selects
    (:meth:`~charmem.composition.AdapterFactory.drop`: the embedded shard's directory, the
    service's collection; the in-memory index persists nothing to drop). The graph is never
    touched. Then open the collection with the new embedder and call
    :func:`rebuild_vector_index`; ``CharacterMemory.open(..., rebuild_vectors=True)`` does both.

    Args:
        settings: the deployment settings.
        collection: the collection name, checked first.

    Returns:
        bool: whether the adapter removed something.

    Raises:
        ConfigurationError: bad collection name, or the vector adapter is not installed.
        StoreLockedError: the embedded shard is open elsewhere; nothing was removed.
        BackendError: the store failed.
    """
    validate_collection_name(collection)
    return bool(await load_factory("vectors", settings.vector_store_mode).drop(settings, collection))


async def _store_exists(port: str, mode: str, settings: Settings, collection: str) -> bool | None:
    """The adapter factory's ``exists`` answer (``None``: it cannot tell), from a worker thread."""
    return await asyncio.to_thread(load_factory(port, mode).exists, settings, collection)


async def refuse_vectors_without_graph(settings: Settings, collection: str) -> None:
    """Refuse to create an empty graph store beside a collection's existing vectors.

    The graph is the authority: a missing graph store next to the collection's vector shard means
    the graph was lost or ``OXIGRAPH_PATH`` points elsewhere, and creating an empty one would
    present the collection as empty (and a rebuild would then delete its vectors).

    Raises:
        StoreCorruptedError: the graph store does not exist but the vector index does.
    """
    if await _store_exists("graph", settings.graph_store_mode, settings, collection) is not False:
        return
    if not await _store_exists("vectors", settings.vector_store_mode, settings, collection):
        return
    raise StoreCorruptedError(
        f"collection {collection!r} has vectors under {settings.vector_store_path} but no graph "
        f"store at {settings.oxigraph_path}; the graph is the authority, so none was created. "
        "Restore the graph store directory (or point OXIGRAPH_PATH / --store at it), or drop "
        "these vectors explicitly (CharacterMemory.open(..., rebuild_vectors=True), or remove "
        "the shard directory) and restore a backup with `charmem import`",
        path=str(settings.oxigraph_path),
    )


async def ensure_vectors_match_graph(settings: Settings, collection: str, graph: GraphStore) -> bool:
    """Whether the collection's vector index must be rebuilt on open (a lost shard).

    Only a missing index (the adapter factory's ``exists`` says so) beside a graph that holds
    statements counts; adapters that cannot tell (``None``) are never rebuilt on open.

    Returns:
        bool: True when the index is missing and ``VECTOR_REBUILD_ON_OPEN`` is true.

    Raises:
        StoreCorruptedError: the index is missing and ``VECTOR_REBUILD_ON_OPEN`` is false.
    """
    if await _store_exists("vectors", settings.vector_store_mode, settings, collection) is not False:
        return False
    statements = await graph.statement_count()
    if not statements:
        return False
    if not settings.vector_rebuild_on_open:
        raise StoreCorruptedError(
            f"collection {collection!r} has no vector index under {settings.vector_store_path} "
            f"while its graph holds {statements} statements, so recall would find nothing; "
            "rebuild it from the graph with `charmem rebuild-vectors` or "
            "CharacterMemory.open(..., rebuild_vectors=True) (or set VECTOR_REBUILD_ON_OPEN=true)",
            path=str(settings.vector_store_path),
        )
    log.warning("vector_index_missing", collection=collection, statements=statements, action="rebuild")
    return True


async def stats_lost_beside_graph(settings: Settings, graph: GraphStore, stats: RetrievalStatsStore) -> bool:
    """Whether the statistics are empty while the graph is not (a lost or discarded stats file).

    ``RETRIEVAL_STATS_STORE_MODE=in_memory`` starts empty by design and is left as it is.
    """
    if settings.retrieval_stats_store_mode == "in_memory" or await stats.row_count():
        return False
    statements = await graph.statement_count()
    if statements:
        log.warning(
            "retrieval_stats_missing", collection=graph.collection, statements=statements, action="rebuild"
        )
    return bool(statements)
