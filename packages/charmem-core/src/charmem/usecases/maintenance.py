"""Vector maintenance: rebuild a collection's candidate recall from graph authority (DESIGN §7).

The vector index is derived data: every point is an index entry of a current graph object
(:func:`charmem.usecases.planning.index_entries`), so the whole index can be re-created from the
graph. That is the repair of last resort (a lost or damaged shard, repair markers nobody
replayed), the way to move between the embedded and service vector stores, and, after dropping
the old shard, the way to switch to an embedder of another model or size.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import attrs

from charmem.composition import load_adapter
from charmem.domain.ids import MemoryId
from charmem.domain.model import Episode, MemoryObject, ObjectType, Observation
from charmem.domain.plan import IndexEntry
from charmem.domain.retrieval import CurrencyStatus
from charmem.errors import DraftValidationError
from charmem.log import get_logger
from charmem.ports import EmbeddingProvider, GraphStore, VectorIndex, VectorPoint
from charmem.settings import Settings, validate_collection_name
from charmem.usecases.embedding import embed_texts
from charmem.usecases.planning import index_entries

__all__ = ["ProgressCallback", "VectorRebuildReport", "drop_vector_index", "rebuild_vector_index"]

log = get_logger("charmem.maintenance")

#: ``on_progress(done, total)``: index entries written so far and in all (counts).
ProgressCallback = Callable[[int, int], object]

#: Object types that can have a vector (notions never do).
_INDEXED_TYPES = (ObjectType.EPISODE, ObjectType.OBSERVATION, ObjectType.DERIVED, ObjectType.THREAD)
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


def _episode_entries(
    episodes: Sequence[Episode], observation_texts: dict[MemoryId, set[str]]
) -> list[IndexEntry]:
    """Episode entries as a commit makes them: only a summary that no observation echoes."""
    return [
        entry
        for entry in index_entries(episodes)
        if entry.text.strip() not in observation_texts.get(entry.id, set())
    ]


async def rebuild_vector_index(
    *,
    graph: GraphStore,
    vectors: VectorIndex,
    embedder: EmbeddingProvider,
    batch_size: int = 64,
    on_progress: ProgressCallback | None = None,
) -> VectorRebuildReport:
    """Re-create a collection's vectors from its current graph objects.

    Reads every episode, observation, derived memory and thread id (``graph.object_ids``), their
    objects and currency in batches of 512, and builds their index entries with
    :func:`~charmem.usecases.planning.index_entries` (an episode gets a vector only when its summary
    differs from the text of each of its observations, as at commit). Superseded and suppressed
    objects stay out. The entries are embedded and upserted ``batch_size`` at a time; then points
    that no current object backs are deleted. Running it again is harmless (upserts replace).

    Args:
        graph: the collection's graph authority.
        vectors: the collection's vector index, open with ``embedder``'s fingerprint.
        embedder: the embedding provider.
        batch_size: texts per ``embed_documents`` call and points per upsert (count, >= 1).
        on_progress: called as ``on_progress(done, total)`` with entries written so far and in
            all: once before the first batch and after each batch.

    Returns:
        VectorRebuildReport: counts of objects examined, points written, objects left out and
        stale points removed.

    Raises:
        DraftValidationError: ``batch_size`` is not an int >= 1 (also a ``ValueError``).
        BackendError: a store or the embedder failed (the index may then be partial: run it
            again).
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise DraftValidationError(f"batch_size must be an int >= 1, not {batch_size!r}", field="batch_size")
    ids = await graph.object_ids(_INDEXED_TYPES)
    entries: list[IndexEntry] = []
    episodes: list[Episode] = []
    observation_texts: dict[MemoryId, set[str]] = {}
    not_current = 0
    for start in range(0, len(ids), _READ_BATCH):
        chunk = ids[start : start + _READ_BATCH]
        objects = await graph.get_objects(chunk)
        currency = await graph.currency(chunk)
        current: list[MemoryObject] = []
        for memory_id in chunk:
            obj = objects.get(memory_id)
            if obj is None:
                continue
            if isinstance(obj, Observation):  # echo check uses every observation, as at commit
                observation_texts.setdefault(obj.episode_id, set()).add(obj.text.strip())
            if currency.get(memory_id) is not CurrencyStatus.CURRENT:
                not_current += 1
            elif isinstance(obj, Episode):
                episodes.append(obj)
            else:
                current.append(obj)
        entries += index_entries(current)
    entries += _episode_entries(episodes, observation_texts)
    entries.sort(key=lambda entry: entry.id)
    total = len(entries)
    if on_progress is not None:
        on_progress(0, total)
    for start in range(0, total, batch_size):
        chunk_entries = entries[start : start + batch_size]
        rows = await embed_texts(embedder, [entry.text for entry in chunk_entries])
        await vectors.upsert(
            [
                VectorPoint(id=entry.id, object_type=entry.object_type, vector=row, text=entry.text)
                for entry, row in zip(chunk_entries, rows, strict=True)
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

    Uses the optional hook of the vector adapter ``settings.vector_store_mode`` selects:
    ``drop_from_settings_async(settings, collection)`` or, run in a worker thread,
    ``drop_from_settings(settings, collection)`` (the embedded shard's directory, the service's
    collection). An adapter without either persists nothing to drop (the in-memory index). The
    graph is never touched. Then open the collection with the new embedder and call
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
    factory = load_adapter("vectors", settings.vector_store_mode)
    dropper = getattr(factory, "drop_from_settings_async", None)
    if dropper is not None:
        return bool(await dropper(settings, collection))
    blocking = getattr(factory, "drop_from_settings", None)
    if blocking is not None:
        return bool(await asyncio.to_thread(blocking, settings, collection))
    return False
