"""``commit``: write a validated plan (docs/architecture.md).

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
from charmem.domain.plan import (
    CommitOptions,
    RememberOutcome,
    RememberWritePlan,
    RepairMarkerType,
    ValidationWarning,
    WarningKind,
)
from charmem.errors import CharmemError, PlanSequenceError
from charmem.log import get_logger
from charmem.ports import EmbeddingProvider, GraphStore, RetrievalStatsStore, VectorIndex
from charmem.settings import DEFAULT_EMBEDDING_TIMEOUT_S
from charmem.usecases.embedding import provider_batch_size
from charmem.usecases.embedding_pipeline import VectorPipeline

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
    vector_work,
)
from charmem.usecases.store_writes import exclusive_writes, finish_write
from charmem.usecases.validation import raise_for_invalid, validate_against_graph

__all__ = [
    "UPSERT_POINTS",
    "commit_plan",
    "commit_plans",
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
        PlanValidationError: a candidate is invalid, or the plan was prepared for another
            collection; nothing was written.
        PurgedMemoryError: a candidate is, or newly refers to, a purged memory
            (``charmem.admin.purge``); nothing was written.
        IdConflictError: an id is stored with different content; nothing was written.
        BackendError: the graph write failed; nothing was written.
    """
    links, result, superseded, warnings = await _write_graph(plan, graph, now)
    markers = await maintain_vectors(
        plan.index_entries,
        superseded,
        graph=graph,
        vectors=vectors,
        embedder=embedder,
        batch_size=provider_batch_size(embedder, options.embed_batch_size),
        stored=plan.objects,  # written, or stored with equal content: the same speakers
        embed_timeout_s=embed_timeout_s,
    )
    markers += await maintain_stats(plan.objects, links, superseded, graph=graph, stats=stats)
    return _outcome(plan, links, result, markers, warnings)


async def _write_graph(
    plan: RememberWritePlan, graph: GraphStore, now: datetime | None
) -> tuple[tuple[MemoryLink, ...], GraphWriteResult, list[MemoryId], tuple[ValidationWarning, ...]]:
    """Validate ``plan`` against the graph and write its batch atomically.

    Returns:
        tuple: (the links written: the plan's and the derived ones; the graph's write result;
        the ids the plan's derived memories supersede, sorted; the validation warnings other than
        ``ALREADY_STORED``, which the write result tells exactly).

    Raises:
        PlanValidationError, PurgedMemoryError, IdConflictError, BackendError: as
            :func:`commit_plan`; nothing was written.
    """
    async with exclusive_writes(graph):  # writers of other processes wait: the checks hold
        validations, tombstones, derived_links = await validate_against_graph(plan, graph, now)
        raise_for_invalid(validations)
        # A replayed memory that refers to a purged one is accepted as stored; its derived link to
        # the purged memory was erased with it and is not written again.
        derived = [
            link for link in derived_links if link.from_id not in tombstones and link.to_id not in tombstones
        ]
        links = (*plan.links, *derived)
        result = await finish_write(graph.write_batch(GraphBatch(objects=plan.objects, links=links)))
    superseded = sorted(
        {t for o in plan.objects if isinstance(o, DerivedMemory) for t in o.supersedes}, key=ID_ORDER
    )
    warnings = tuple(
        dict.fromkeys(w for v in validations for w in v.warnings if w.kind is not WarningKind.ALREADY_STORED)
    )
    return links, result, superseded, warnings


async def commit_plans(
    plans: Sequence[RememberWritePlan],
    options: CommitOptions,
    *,
    graph: GraphStore,
    vectors: VectorIndex,
    embedder: EmbeddingProvider,
    stats: RetrievalStatsStore,
    embed_timeout_s: float = DEFAULT_EMBEDDING_TIMEOUT_S,
    now: datetime | None = None,
) -> list[RememberOutcome]:
    """Commit plans in order, each as :func:`commit_plan` would, embedding across them.

    Each plan is validated against the graph as the earlier plans left it and its graph batch is
    written atomically, in order. Its vector work (:func:`~charmem.usecases.maintenance.vector_work`,
    read right after its batch) goes to a :class:`~charmem.usecases.embedding_pipeline.VectorPipeline`,
    which embeds the texts of consecutive plans in calls of the provider's batch size
    (``options.embed_batch_size``, else
    :func:`~charmem.usecases.embedding.provider_batch_size`) while the next graph batches are
    written, and applies upserts and deletes in plan order. Statistics are written per plan.
    The vectors, statistics and outcomes are those of committing the plans one by one.

    Returns:
        list[RememberOutcome]: one per plan, in order, once all vector work is applied.

    Raises:
        PlanSequenceError: plan ``index`` failed as :func:`commit_plan` raises (its error is the
            cause and ``error``): the plans before it are committed, their vector and stats work
            applied, and their outcomes are in ``outcomes``; it and those after wrote nothing.
    """
    pipeline = VectorPipeline(
        vectors=vectors,
        embedder=embedder,
        batch_size=provider_batch_size(embedder, options.embed_batch_size),
        embed_timeout_s=embed_timeout_s,
    )
    written: list[
        tuple[tuple[MemoryLink, ...], GraphWriteResult, list[RepairMarkerType], tuple[ValidationWarning, ...]]
    ] = []
    failure: CharmemError | None = None
    try:
        for index, plan in enumerate(plans):
            try:
                links, result, superseded, warnings = await _write_graph(plan, graph, now)
            except CharmemError as exc:
                failure = exc
                break
            pipeline.submit(
                index, await vector_work(plan.index_entries, superseded, graph=graph, stored=plan.objects)
            )
            stats_markers = await maintain_stats(plan.objects, links, superseded, graph=graph, stats=stats)
            written.append((links, result, stats_markers, warnings))
    except Exception:  # not a charmem error (a faulty adapter): apply what was submitted first
        await pipeline.finish()
        raise
    except BaseException:  # cancelled: what was not applied shows in charmem.admin.check
        await pipeline.cancel()
        raise
    vector_markers = await pipeline.finish()
    outcomes = [
        _outcome(plan, links, result, [*vector_markers.get(index, ()), *stats_markers], warnings)
        for index, (plan, (links, result, stats_markers, warnings)) in enumerate(
            zip(plans, written, strict=False)
        )
    ]
    if failure is not None:
        raise _sequence_error(len(written), len(plans), outcomes, failure) from failure
    return outcomes


def _sequence_error(
    index: int, total: int, outcomes: Sequence[RememberOutcome], error: CharmemError
) -> PlanSequenceError:
    """The error of a sequence whose plan ``index`` (of ``total``) failed with ``error``."""
    before = f"plans 0-{index - 1} are committed" if index else "no plan was committed"
    return PlanSequenceError(
        f"plan {index} of {total} failed ({type(error).__name__}: {error}); {before}, plan {index} "
        f"and the {total - index - 1} after it wrote nothing: fix plan {index} and commit "
        f"plans[{index}:]",
        index=index,
        outcomes=outcomes,
        error=error,
    )


def _outcome(
    plan: RememberWritePlan,
    links: Sequence[MemoryLink],
    result: GraphWriteResult,
    markers: Sequence[RepairMarkerType],
    validation_warnings: Sequence[ValidationWarning] = (),
) -> RememberOutcome:
    """What a commit reports (and logs): ids by role, links written, markers, warnings.

    Warnings: one ``ALREADY_STORED`` naming the ids the store found with equal content (in
    batch order), then ``validation_warnings``.
    """
    log.info(
        "plan_committed",
        collection=plan.collection,
        objects=len(plan.objects),
        links=len(links),
        inserted=len(result.inserted_ids),
        existing=len(result.existing_ids),
        repair_markers=len(markers),
        warnings=len(validation_warnings),
    )
    replayed = (
        (ValidationWarning(WarningKind.ALREADY_STORED, result.existing_ids),) if result.existing_ids else ()
    )
    warnings = (*replayed, *validation_warnings)
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
