"""``commit``: write a validated plan (spec "Write path").

The plan is validated again against the graph, its batch is written to the graph first and
atomically, then vectors and stats are brought in step as repairable writes
(:mod:`charmem.usecases.maintenance`). Equal content is accepted, so a replay writes nothing new.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Final

from charmem.domain.graph import GraphBatch, GraphWriteResult
from charmem.domain.ids import ID_ORDER, MemoryId
from charmem.domain.model import DerivedMemory, MemoryLink, MemoryObject, ObjectType, object_type_of
from charmem.domain.plan import CommitOptions, RememberOutcome, RememberWritePlan, RepairMarkerType
from charmem.errors import PlanValidationError
from charmem.log import get_logger
from charmem.ports import EmbeddingProvider, GraphStore, RetrievalStatsStore, VectorIndex
from charmem.settings import DEFAULT_EMBEDDING_TIMEOUT_S

# Vector and stats maintenance live in charmem.usecases.maintenance; these names stay importable
# from here, where they used to be defined.
from charmem.usecases.maintenance import (
    UPSERT_POINTS,
    graph_stats_rows,
    link_stats_row,
    maintain_stats,
    maintain_vectors,
    object_stats_row,
    rebuild_stats,
)
from charmem.usecases.validation import raise_for_invalid, validate_against_graph

__all__ = [
    "UPSERT_POINTS",
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
    return _outcome(plan, links, result, markers)


def _outcome(
    plan: RememberWritePlan,
    links: Sequence[MemoryLink],
    result: GraphWriteResult,
    markers: Sequence[RepairMarkerType],
) -> RememberOutcome:
    """What a commit reports (and logs): ids by role, links written, markers, replay warnings."""
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
