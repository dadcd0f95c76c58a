"""``commit``: write a validated plan (spec "Write path", DESIGN §4.3, §5).

The graph first and atomically, then repairable vector and stats writes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import datetime
from typing import Final

from charmem.domain.graph import GraphBatch
from charmem.domain.ids import ID_ORDER, MemoryId
from charmem.domain.model import DerivedMemory, MemoryLink, MemoryObject, ObjectType, object_type_of
from charmem.domain.plan import (
    CommitOptions,
    IndexEntry,
    RememberOutcome,
    RememberWritePlan,
    RepairMarker,
    RepairMarkerType,
    VectorOperation,
)
from charmem.domain.retrieval import CurrencyStatus
from charmem.errors import PlanValidationError, excerpt
from charmem.log import get_logger
from charmem.ports import (
    EmbeddingProvider,
    GraphStore,
    RetrievalStatsStore,
    StatsEntry,
    VectorIndex,
    VectorPoint,
)
from charmem.settings import DEFAULT_EMBEDDING_TIMEOUT_S
from charmem.usecases.embedding import embed_texts
from charmem.usecases.names import embedding_texts
from charmem.usecases.validation import raise_for_invalid, validate_against_graph

__all__ = [
    "commit_plan",
    "graph_stats_rows",
    "ids_by_role",
    "link_stats_row",
    "maintain_stats",
    "maintain_vectors",
    "object_stats_row",
    "rebuild_stats",
]

log = get_logger("charmem.commit")
_REBUILD_BATCH = 512
#: About the most points one ``VectorIndex.upsert`` call of a commit carries (a whole number of
#: embedding batches, at least one):
#: each upsert is durable on return, so fewer, larger calls write faster (bounded memory: 512
#: vectors of 1,536 floats are about 25 MB of Python floats).
UPSERT_POINTS: Final = 512


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
    return RepairMarker.VectorMaintenance(VectorOperation.UPSERT, tuple(e.id for e in failed), _cause(exc))


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
    no longer current are deleted. Graph currency is consulted first, so a replayed plan never puts a
    superseded or suppressed memory back into the index (spec "Memory permanence").

    ``stored`` may give objects as the graph holds them (a commit's objects, once written), so
    their utterances' speakers are not read back (:func:`~charmem.usecases.names.embedding_texts`).

    Each embedding call may take ``embed_timeout_s`` seconds (``EMBEDDING_TIMEOUT_S``); one that
    takes longer is cancelled and becomes a marker like any other embedder failure.

    Returns:
        list[RepairMarkerType]: the failed operations (one marker per failed embedding call or
        upsert call, naming its ids); empty when everything was applied.
    """
    ids = sorted({*(e.id for e in entries), *also_check}, key=ID_ORDER)
    if not ids:
        return []
    try:
        currency = await graph.currency(ids)
    except Exception as exc:  # noqa: BLE001 - reported as a repair marker, by contract
        log.warning("vector_currency_lookup_failed", ids=len(ids), error=type(exc).__name__)
        return [
            RepairMarker.VectorMaintenance(
                VectorOperation.UPSERT, tuple(ids), _cause(exc, "currency lookup failed: ")
            )
        ]
    upserts = [e for e in entries if currency.get(e.id) is CurrencyStatus.CURRENT]
    deletes = [i for i in ids if i in currency and currency[i] is not CurrencyStatus.CURRENT]
    markers: list[RepairMarkerType] = []
    try:
        texts = await embedding_texts(upserts, graph, stored)
    except Exception as exc:  # noqa: BLE001 - reported as a repair marker, like currency
        log.warning("vector_text_lookup_failed", ids=len(upserts), error=type(exc).__name__)
        markers.append(
            RepairMarker.VectorMaintenance(
                VectorOperation.UPSERT,
                tuple(e.id for e in upserts),
                _cause(exc, "speaker name lookup failed: "),
            )
        )
        upserts, texts = [], []
    # Embed ``batch_size`` texts per provider call, but upsert up to UPSERT_POINTS points per
    # vector-index call: each upsert is durable on return (a flush), which costs far more than
    # the points themselves.
    group = batch_size * max(1, UPSERT_POINTS // batch_size)
    for group_start in range(0, len(upserts), group):
        points: list[VectorPoint] = []
        for start in range(group_start, min(group_start + group, len(upserts)), batch_size):
            chunk = upserts[start : start + batch_size]
            chunk_texts = texts[start : start + batch_size]
            try:
                rows = await embed_texts(embedder, chunk_texts, timeout_s=embed_timeout_s)
            except Exception as exc:  # noqa: BLE001 - repairable write
                markers.append(_upsert_failed(chunk, exc))
                continue
            points += [
                VectorPoint(id=e.id, object_type=e.object_type, vector=row, text=text)
                for e, text, row in zip(chunk, chunk_texts, rows, strict=True)
            ]
        if not points:
            continue
        try:
            await vectors.upsert(points)
        except Exception as exc:  # noqa: BLE001 - repairable write
            markers.append(_upsert_failed(points, exc))
    if deletes:
        try:
            await vectors.delete(deletes)
        except Exception as exc:  # noqa: BLE001 - repairable write
            log.warning("vector_delete_failed", ids=len(deletes), error=type(exc).__name__)
            markers.append(
                RepairMarker.VectorMaintenance(VectorOperation.DELETE, tuple(deletes), _cause(exc))
            )
    return markers


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
    current counters cache graph currency (DESIGN §4.9).

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
        await stats.record(rows)
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
    """Recompute every stats row of a collection from the graph (DESIGN §4.9).

    Clears the collection's rows, then writes :func:`graph_stats_rows` in batches.

    Returns:
        int: rows written.

    Raises:
        BackendError: a store failed.
    """
    await stats.clear()
    written = 0
    async for rows in graph_stats_rows(graph):
        await stats.record(rows)
        written += len(rows)
    return written


async def commit_plan(
    plan: RememberWritePlan,
    options: CommitOptions,
    *,
    graph: GraphStore,
    vectors: VectorIndex,
    embedder: EmbeddingProvider,
    stats: RetrievalStatsStore,
    embed_timeout_s: float = DEFAULT_EMBEDDING_TIMEOUT_S,
    now: datetime | None = None,
) -> RememberOutcome:
    """Re-validate and persist a plan.

    ``now`` is the clock's now: a candidate dated beyond the clock's skew after it is refused
    (``None`` skips that check; time order between memories is checked either way).

    The graph batch (objects, caller links, derived links) is written atomically first; then
    vectors and stats are brought in step as repairable writes whose failures (including an
    embedding call slower than ``embed_timeout_s`` seconds) come back as repair markers.
    Replaying the same plan accepts equal content and re-applies the repairable writes.

    Cancelled after the graph batch (a cancelled task, a timeout around the call), the commit
    returns no outcome and so no markers, but the graph holds the batch: the vectors and stats it
    did not write show in ``charmem.admin.check`` as missing vectors and stats drift (the graph
    is the record), and replaying the plan, or ``check``'s repair, brings them in step.

    Raises:
        PlanValidationError: a candidate is invalid; nothing was written.
        PurgedMemoryError: a candidate is, or newly refers to, a purged memory
            (``charmem.admin.purge``); nothing was written.
        IdConflictError: an id is stored with different content; nothing was written.
        BackendError: the graph write failed; nothing was written.
    """
    if plan.collection != graph.collection:
        raise PlanValidationError(
            f"the plan was prepared for collection {plan.collection!r}, not {graph.collection!r}; "
            "prepare it with this memory"
        )
    validations, tombstones, derived_links = await validate_against_graph(plan, graph, now)
    raise_for_invalid(validations)
    # A replayed memory that refers to a purged one is accepted as stored; its derived link to
    # the purged memory was erased with it and is not written again.
    derived = [
        link for link in derived_links if link.from_id not in tombstones and link.to_id not in tombstones
    ]
    links = (*plan.links, *derived)
    result = await graph.write_batch(GraphBatch(objects=plan.objects, links=links))
    superseded = sorted(
        {t for o in plan.objects if isinstance(o, DerivedMemory) for t in o.supersedes}, key=ID_ORDER
    )
    markers = await maintain_vectors(
        plan.index_entries,
        superseded,
        graph=graph,
        vectors=vectors,
        embedder=embedder,
        batch_size=options.embed_batch_size,
        stored=plan.objects,  # written, or stored with equal content: the same speakers
        embed_timeout_s=embed_timeout_s,
    )
    markers += await maintain_stats(plan.objects, links, superseded, graph=graph, stats=stats)
    log.info(
        "plan_committed",
        collection=plan.collection,
        objects=len(plan.objects),
        links=len(links),
        inserted=len(result.inserted_ids),
        existing=len(result.existing_ids),
        repair_markers=len(markers),
    )
    warnings: tuple[str, ...] = ()
    if result.existing_ids:
        warnings = (f"{len(result.existing_ids)} item(s) were already stored with equal content",)
    return RememberOutcome(
        object_ids=plan.object_ids,
        link_ids=tuple(link.id for link in links),
        repair_markers=tuple(markers),
        warnings=warnings,
        **ids_by_role(plan.objects),
    )


#: The :class:`RememberOutcome` field naming the objects of each type.
_ROLE_OF_TYPE: Final = {
    ObjectType.EPISODE: "episode_ids",
    ObjectType.OBSERVATION: "observation_ids",
    ObjectType.DERIVED: "derived_ids",
    ObjectType.ENTITY: "entity_ids",
    ObjectType.THREAD: "thread_ids",
}


def ids_by_role(objects: Sequence[MemoryObject]) -> dict[str, tuple[MemoryId, ...]]:
    """The ids of ``objects`` by :class:`RememberOutcome` role field, each in the given order.

    Returns:
        dict[str, tuple[MemoryId, ...]]: ``episode_ids``, ``observation_ids``, ``derived_ids``,
        ``entity_ids``, ``thread_ids`` (every role present, possibly empty).
    """
    roles: dict[str, list[MemoryId]] = {role: [] for role in _ROLE_OF_TYPE.values()}
    for obj in objects:
        roles[_ROLE_OF_TYPE[object_type_of(obj)]].append(obj.id)
    return {role: tuple(ids) for role, ids in roles.items()}
