"""Vector and stats maintenance: keep the derived stores in step with graph authority.

The graph is the record; the vector index (candidate recall) and the retrieval statistics are
derived from it. Everything that brings them in step lives here:

* after each write (commit, correct, forget, link): :func:`maintain_vectors` embeds and upserts
  the current index entries and deletes what is no longer current; :func:`maintain_stats`
  refreshes the stats rows (:func:`object_stats_row`, :func:`link_stats_row`). Both are
  repairable writes: a failure comes back as a repair marker, never as an error;
* whole rebuilds: :func:`rebuild_vector_index` re-creates a collection's vectors from its current
  graph objects (the repair of last resort for a lost or damaged shard or unreplayed repair
  markers, the way to move between the embedded and service vector stores, and, after
  :func:`drop_vector_index`, the way to switch to an embedder of another model or size);
  :func:`rebuild_stats` recomputes every stats row (:func:`graph_stats_rows`);
* checks on open: ``CharacterMemory.open`` calls the checks at the end of this module so a
  collection never opens with silent amnesia: a lost shard beside a non-empty graph is rebuilt
  (or refused, with ``VECTOR_REBUILD_ON_OPEN=false``), lost statistics are rebuilt, and a graph
  store is never created empty beside existing vectors.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence

import attrs

from charmem.composition import load_factory
from charmem.domain.ids import ID_ORDER, MemoryId
from charmem.domain.model import Episode, MemoryLink, MemoryObject, ObjectType, Observation, object_type_of
from charmem.domain.plan import IndexEntry, RepairMarker, RepairMarkerType, VectorOperation
from charmem.domain.retrieval import CurrencyStatus
from charmem.errors import DraftValidationError, StoreCorruptedError, excerpt
from charmem.log import get_logger
from charmem.ports import (
    EmbeddingProvider,
    GraphStore,
    RetrievalStatsStore,
    StatsEntry,
    VectorIndex,
    VectorPoint,
    VectorSurface,
)
from charmem.settings import DEFAULT_EMBEDDING_TIMEOUT_S, Settings, validate_collection_name
from charmem.usecases.embedding import embed_texts, provider_batch_size
from charmem.usecases.embedding_pipeline import UPSERT_POINTS, VectorWork, embed_and_upsert_chunks
from charmem.usecases.names import embedding_texts
from charmem.usecases.planning import index_entries
from charmem.usecases.store_writes import finish_write

__all__ = [
    "INDEXED_TYPES",
    "UPSERT_POINTS",
    "ProgressCallback",
    "VectorRebuildReport",
    "VectorWork",
    "current_index_entries",
    "drop_vector_index",
    "ensure_vectors_match_graph",
    "graph_stats_rows",
    "link_stats_row",
    "maintain_stats",
    "maintain_vectors",
    "object_stats_row",
    "rebuild_stats",
    "rebuild_vector_index",
    "refuse_vectors_without_graph",
    "stats_lost_beside_graph",
    "vector_work",
]

log = get_logger("charmem.maintenance")

#: ``on_progress(done, total)``: index entries written so far and in all (counts).
ProgressCallback = Callable[[int, int], object]

#: Object types that can have a vector (notions never do).
INDEXED_TYPES = (ObjectType.EPISODE, ObjectType.OBSERVATION, ObjectType.DERIVED, ObjectType.THREAD)
_READ_BATCH = 512
_REBUILD_BATCH = 512


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


def _cause(exc: BaseException, context: str = "") -> str:
    """A repair marker's ``cause``: the error's type and text, cut to 200 characters."""
    return excerpt(f"{context}{type(exc).__name__}: {exc}")


def object_stats_row(obj: MemoryObject, currency: Mapping[MemoryId, CurrencyStatus]) -> StatsEntry:
    """The stats row of a stored object: its type and whether ``currency`` says it is current."""
    return StatsEntry(
        id=obj.id,
        kind="object",
        key=object_type_of(obj).value,
        current=currency.get(obj.id) is CurrencyStatus.CURRENT,
    )


def link_stats_row(link: MemoryLink) -> StatsEntry:
    """The stats row of a stored link: its relation and endpoints (for degree counts)."""
    return StatsEntry(
        id=link.id, kind="link", key=link.relation.value, from_id=link.from_id, to_id=link.to_id
    )


def _upsert_failed(failed: Sequence[IndexEntry | VectorPoint], exc: BaseException) -> RepairMarkerType:
    log.warning("vector_upsert_failed", ids=len(failed), error=type(exc).__name__)
    ids = tuple(dict.fromkeys(e.id for e in failed))  # an episode's surfaces share its id
    return RepairMarker.VectorMaintenance(VectorOperation.UPSERT, ids, _cause(exc))


async def vector_work(
    entries: Sequence[IndexEntry],
    also_check: Sequence[MemoryId],
    *,
    graph: GraphStore,
    stored: Sequence[MemoryObject] = (),
) -> VectorWork:
    """What :func:`maintain_vectors` must apply for some ids, as graph currency says now; never raises.

    Current entries are to be upserted with their embedding texts
    (:func:`~charmem.usecases.names.embedding_texts`); entries and ``also_check`` ids that are no
    longer current are to be deleted. A failed graph read becomes a marker instead.
    """
    ids = sorted({*(e.id for e in entries), *also_check}, key=ID_ORDER)
    if not ids:
        return VectorWork()
    try:
        currency = await graph.currency(ids)
    except Exception as exc:  # noqa: BLE001 - reported as a repair marker, by contract
        log.warning("vector_currency_lookup_failed", ids=len(ids), error=type(exc).__name__)
        marker = RepairMarker.VectorMaintenance(
            VectorOperation.UPSERT, tuple(ids), _cause(exc, "currency lookup failed: ")
        )
        return VectorWork(markers=(marker,))
    upserts = [e for e in entries if currency.get(e.id) is CurrencyStatus.CURRENT]
    deletes = tuple(i for i in ids if i in currency and currency[i] is not CurrencyStatus.CURRENT)
    try:
        texts = await embedding_texts(upserts, graph, stored)
    except Exception as exc:  # noqa: BLE001 - reported as a repair marker, like currency
        log.warning("vector_text_lookup_failed", ids=len(upserts), error=type(exc).__name__)
        marker = RepairMarker.VectorMaintenance(
            VectorOperation.UPSERT,
            tuple(dict.fromkeys(e.id for e in upserts)),
            _cause(exc, "speaker name lookup failed: "),
        )
        return VectorWork(deletes=deletes, markers=(marker,))
    return VectorWork(upserts=tuple(upserts), texts=tuple(texts), deletes=deletes)


async def maintain_vectors(
    entries: Sequence[IndexEntry],
    also_check: Sequence[MemoryId],
    *,
    graph: GraphStore,
    vectors: VectorIndex,
    embedder: EmbeddingProvider,
    batch_size: int,
    stored: Sequence[MemoryObject] = (),
    embed_timeout_s: float = DEFAULT_EMBEDDING_TIMEOUT_S,
) -> list[RepairMarkerType]:
    """Bring candidate recall in step with graph currency for some ids; never raises.

    Current entries are embedded (``batch_size`` texts per provider call) and upserted (about
    :data:`UPSERT_POINTS` points per vector-index call); entries and ``also_check`` ids that are
    no longer current are deleted (:func:`vector_work`). Graph currency is consulted first, so a
    replayed plan never puts a superseded or suppressed memory back into the index
    (docs/concepts/lifecycle.md).

    ``stored`` may give objects as the graph holds them (a commit's objects, once written), so
    their utterances' speakers are not read back (:func:`~charmem.usecases.names.embedding_texts`).

    Each embedding call may take ``embed_timeout_s`` seconds (``EMBEDDING_TIMEOUT_S``); one that
    takes longer is cancelled and becomes a marker like any other embedder failure.

    Returns:
        list[RepairMarkerType]: the failed operations (one marker per failed embedding call or
        upsert call, naming its ids); empty when everything was applied.
    """
    work = await vector_work(entries, also_check, graph=graph, stored=stored)
    markers = list(work.markers)
    markers += await _upsert_entries(
        work.upserts,
        work.texts,
        vectors=vectors,
        embedder=embedder,
        batch_size=batch_size,
        embed_timeout_s=embed_timeout_s,
    )
    markers += await _delete_points(work.deletes, vectors)
    return markers


async def _upsert_entries(
    entries: Sequence[IndexEntry],
    texts: Sequence[str],
    *,
    vectors: VectorIndex,
    embedder: EmbeddingProvider,
    batch_size: int,
    embed_timeout_s: float,
) -> list[RepairMarkerType]:
    """Embed ``entries`` (``texts``, one per entry) and upsert their points; never raises.

    Embeds ``batch_size`` texts per provider call, but upserts up to :data:`UPSERT_POINTS` points
    per vector-index call: each upsert is durable on return (a flush), which costs far more than
    the points themselves. A failed embedding call leaves the rest of its group upserted.

    Returns:
        list[RepairMarkerType]: one upsert marker per failed embedding or upsert call.
    """
    markers: list[RepairMarkerType] = []
    group = batch_size * max(1, UPSERT_POINTS // batch_size)
    for group_start in range(0, len(entries), group):
        points: list[VectorPoint] = []
        for start in range(group_start, min(group_start + group, len(entries)), batch_size):
            chunk = entries[start : start + batch_size]
            chunk_texts = texts[start : start + batch_size]
            try:
                rows = await embed_texts(embedder, chunk_texts, timeout_s=embed_timeout_s)
            except Exception as exc:  # noqa: BLE001 - repairable write
                markers.append(_upsert_failed(chunk, exc))
                continue
            points += [
                VectorPoint(id=e.id, object_type=e.object_type, vector=row, text=text, surface=e.surface)
                for e, text, row in zip(chunk, chunk_texts, rows, strict=True)
            ]
        if not points:
            continue
        try:
            await finish_write(vectors.upsert(points))
        except Exception as exc:  # noqa: BLE001 - repairable write
            markers.append(_upsert_failed(points, exc))
    return markers


async def _delete_points(ids: Sequence[MemoryId], vectors: VectorIndex) -> list[RepairMarkerType]:
    """Delete the points of ``ids`` (no longer current); a failure becomes a delete marker."""
    if not ids:
        return []
    try:
        await finish_write(vectors.delete(ids))
    except Exception as exc:  # noqa: BLE001 - repairable write
        log.warning("vector_delete_failed", ids=len(ids), error=type(exc).__name__)
        return [RepairMarker.VectorMaintenance(VectorOperation.DELETE, tuple(ids), _cause(exc))]
    return []


async def maintain_stats(
    objects: Sequence[MemoryObject],
    links: Sequence[MemoryLink],
    also_check: Sequence[MemoryId],
    *,
    graph: GraphStore,
    stats: RetrievalStatsStore,
) -> list[RepairMarkerType]:
    """Write retrieval-stats rows for objects and links, keyed by id; never raises.

    Rows of ``also_check`` ids (for example memories just superseded) are refreshed too, so the
    current counters cache graph currency (the stats are a cache of the graph, rebuilt from it).

    Returns:
        list[RepairMarkerType]: one ``StatsMaintenance`` marker on failure, else empty.
    """
    ids = sorted({*(o.id for o in objects), *(link.id for link in links), *also_check}, key=ID_ORDER)
    if not ids:
        return []
    try:
        known = {o.id for o in objects}
        extra = await graph.get_objects([i for i in also_check if i not in known])
        every = [*objects, *extra.values()]
        currency = await graph.currency([o.id for o in every])
        rows = [object_stats_row(o, currency) for o in every]
        rows += [link_stats_row(link) for link in links]
        await finish_write(stats.record(rows))
    except Exception as exc:  # noqa: BLE001 - repairable write
        log.warning("stats_update_failed", ids=len(ids), error=type(exc).__name__)
        return [RepairMarker.StatsMaintenance(tuple(ids), _cause(exc))]
    return []


async def graph_stats_rows(graph: GraphStore) -> AsyncIterator[list[StatsEntry]]:
    """Every stats row the graph implies, in batches of 512 (objects first, then links).

    One row per stored object (current or not, as the graph says) and per stored link: what
    :func:`rebuild_stats` writes and what :func:`charmem.admin.check` compares the stats with.

    Yields:
        list[StatsEntry]: up to 512 rows.

    Raises:
        BackendError: the graph failed.
    """
    object_ids = await graph.object_ids()
    link_ids = await graph.link_ids()
    for start in range(0, len(object_ids), _REBUILD_BATCH):
        chunk = object_ids[start : start + _REBUILD_BATCH]
        objects = await graph.get_objects(chunk)
        currency = await graph.currency(chunk)
        yield [object_stats_row(o, currency) for o in objects.values()]
    for start in range(0, len(link_ids), _REBUILD_BATCH):
        links = await graph.get_links(link_ids[start : start + _REBUILD_BATCH])
        yield [link_stats_row(link) for link in links.values()]


async def rebuild_stats(graph: GraphStore, stats: RetrievalStatsStore) -> int:
    """Recompute every stats row of a collection from the graph (the stats are derived data).

    Clears the collection's rows, then writes :func:`graph_stats_rows` in batches.

    Returns:
        int: rows written.

    Raises:
        BackendError: a store failed.
    """
    await finish_write(stats.clear())
    written = 0
    async for rows in graph_stats_rows(graph):
        await finish_write(stats.record(rows))
        written += len(rows)
    return written


def current_index_entries(
    objects: Iterable[MemoryObject], currency: Mapping[MemoryId, CurrencyStatus]
) -> tuple[list[IndexEntry], int]:
    """The index entries a collection's current objects should have, as a rebuild makes them.

    Observations, derived memories and threads that ``currency`` says are current get an entry
    (:func:`~charmem.usecases.planning.index_entries`); a current episode gets one only when its
    summary differs from the text of every stored observation of it (the echo rule of commit,
    checked against all observations, superseded or not), and one per scene surface; notions
    never do.

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
        if entry.surface is not VectorSurface.CONTENT
        or entry.text.strip() not in observation_texts.get(entry.id, set())
    ]
    entries.sort(key=lambda entry: entry.id)  # stable: an episode's content entry stays first
    return entries, not_current


async def rebuild_vector_index(
    *,
    graph: GraphStore,
    vectors: VectorIndex,
    embedder: EmbeddingProvider,
    batch_size: int | None = None,
    on_progress: ProgressCallback | None = None,
    embed_timeout_s: float = DEFAULT_EMBEDDING_TIMEOUT_S,
) -> VectorRebuildReport:
    """Re-create a collection's vectors from its current graph objects.

    Reads every episode, observation, derived memory and thread id (``graph.object_ids``), their
    objects and currency in batches of 512, and builds their index entries with
    :func:`current_index_entries` (an episode gets a vector only when its summary differs from the
    text of each of its observations, as at commit). Superseded and suppressed objects stay out.
    The entries are embedded and upserted ``batch_size`` at a time, the next batch embedding
    while the current one is upserted; then points that no current object backs are deleted.
    Running it again is harmless (upserts replace).

    Args:
        graph: the collection's graph authority.
        vectors: the collection's vector index, open with ``embedder``'s fingerprint.
        embedder: the embedding provider.
        batch_size: texts per ``embed_documents`` call and points per upsert (count, >= 1), or
            ``None`` for the provider's ``preferred_batch_size``
            (:func:`~charmem.usecases.embedding.provider_batch_size`).
        on_progress: called as ``on_progress(done, total)`` with entries written so far and in
            all: once before the first batch and after each batch.
        embed_timeout_s: seconds one ``embed_documents`` call may take (``EMBEDDING_TIMEOUT_S``).

    Returns:
        VectorRebuildReport: counts of objects examined, points written, objects left out and
        stale points removed.

    Raises:
        DraftValidationError: ``batch_size`` is not ``None`` or an int >= 1 (also a ``ValueError``).
        BackendError: a store or the embedder failed, or an embedding call timed out
            (``EmbeddingTimeoutError``); the index may then be partial: run it again.
    """
    if batch_size is not None and (
        isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1
    ):
        raise DraftValidationError(
            f"batch_size must be None or an int >= 1, not {batch_size!r}", field="batch_size"
        )
    ids = await graph.object_ids(INDEXED_TYPES)
    objects: list[MemoryObject] = []
    currency: dict[MemoryId, CurrencyStatus] = {}
    for start in range(0, len(ids), _READ_BATCH):
        chunk = ids[start : start + _READ_BATCH]
        objects += (await graph.get_objects(chunk)).values()
        currency.update(await graph.currency(chunk))
    entries, not_current = current_index_entries(objects, currency)
    size = provider_batch_size(embedder, batch_size)
    chunks = [entries[start : start + size] for start in range(0, len(entries), size)]
    await embed_and_upsert_chunks(chunks, graph, vectors, embedder, on_progress, embed_timeout_s)
    indexed = {entry.id for entry in entries}
    stored: set[MemoryId] = set()
    for surface in VectorSurface:
        stored |= await vectors.point_ids(surface)
    stale = sorted(stored - indexed)
    if stale:
        await finish_write(vectors.delete(stale))
    report = VectorRebuildReport(
        objects=len(ids), indexed=len(entries), not_current=not_current, removed=len(stale)
    )
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


async def _store_outdated(mode: str, settings: Settings, collection: str) -> bool:
    """The vector factory's optional ``outdated`` answer (False when it has none), from a thread."""
    outdated = getattr(load_factory("vectors", mode), "outdated", None)
    return outdated is not None and bool(await asyncio.to_thread(outdated, settings, collection))


async def ensure_vectors_match_graph(settings: Settings, collection: str, graph: GraphStore) -> bool:
    """Whether the collection's vector index must be dropped and rebuilt on open.

    A missing index (the adapter factory's ``exists`` says so; a lost shard) or one of an older
    layout (the factory's optional ``outdated(settings, collection)`` says so: an Edge shard of
    an older schema version) beside a graph that holds statements counts; adapters that cannot
    tell (``None``) are never rebuilt on open.

    Returns:
        bool: True when the index is missing or outdated and ``VECTOR_REBUILD_ON_OPEN`` is true.

    Raises:
        StoreCorruptedError: the index is missing or outdated and ``VECTOR_REBUILD_ON_OPEN`` is
            false.
    """
    mode = settings.vector_store_mode
    exists = await _store_exists("vectors", mode, settings, collection)
    outdated = exists is not False and await _store_outdated(mode, settings, collection)
    if exists is not False and not outdated:
        return False
    statements = await graph.statement_count()
    if not statements:
        return False
    state = "an outdated vector index (an older layout)" if outdated else "no vector index"
    if not settings.vector_rebuild_on_open:
        raise StoreCorruptedError(
            f"collection {collection!r} has {state} under {settings.vector_store_path} "
            f"while its graph holds {statements} statements, so recall would miss memories; "
            "rebuild it from the graph with `charmem rebuild-vectors --drop` or "
            "CharacterMemory.open(..., rebuild_vectors=True) (or set VECTOR_REBUILD_ON_OPEN=true)",
            path=str(settings.vector_store_path),
        )
    event = "vector_index_outdated" if outdated else "vector_index_missing"
    log.warning(event, collection=collection, statements=statements, action="rebuild")
    return True


async def stats_lost_beside_graph(settings: Settings, graph: GraphStore, stats: RetrievalStatsStore) -> bool:
    """Whether the statistics are empty while the graph is not (a lost or discarded stats file).

    ``RETRIEVAL_STATS_STORE_MODE=in_memory`` starts empty by design and is left as it is; a store
    that records no rows (``records_rows`` False: counters computed from the graph) loses none.
    """
    if (
        settings.retrieval_stats_store_mode == "in_memory"
        or not getattr(stats, "records_rows", True)
        or await stats.row_count()
    ):
        return False
    statements = await graph.statement_count()
    if statements:
        log.warning(
            "retrieval_stats_missing", collection=graph.collection, statements=statements, action="rebuild"
        )
    return bool(statements)
