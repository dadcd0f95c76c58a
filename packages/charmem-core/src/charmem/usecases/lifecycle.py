"""Lifecycle use cases: ``correct``, ``forget``, ``link``: append-only changes of state.

Each operation validates its draft (raising :class:`LifecycleValidationError` with the rule's kind
before anything is written), writes one atomic graph batch (replacement, derived links,
lifecycle records) and then brings vectors and stats in step as repairable writes.

Replays are idempotent: ids are derived deterministically, and an item already stored whose
content differs only in a defaulted timestamp is adopted as stored, so the same correction or
forget applied twice writes nothing new.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import attrs

from charmem.domain.correction import (
    CorrectionFacts,
    CorrectionPlan,
    check_correction_draft,
    check_successors,
    correction_reads,
    plan_correction,
    refuse_purged,
)
from charmem.domain.drafts import LinkDraft
from charmem.domain.graph import GraphBatch, LifecycleRecord
from charmem.domain.ids import MemoryId
from charmem.domain.lifecycle import (
    CorrectMemoryDraft,
    ForgetMemoryDraft,
    LifecycleMutationOutcome,
    LinkOutcome,
)
from charmem.domain.model import DerivedMemory, Entity, MemoryLink, MemoryObject, Relation
from charmem.domain.plan import RememberWritePlan, RepairMarkerType
from charmem.domain.rules import content_equal, recorded_in_order
from charmem.errors import IdConflictError, LifecycleErrorKind, LifecycleValidationError
from charmem.log import get_logger
from charmem.ports import EmbeddingProvider, GraphStore, RetrievalStatsStore, VectorIndex
from charmem.settings import DEFAULT_EMBEDDING_TIMEOUT_S
from charmem.usecases.forgetting import forget_plan, forget_reach, forget_records, read_forget_surroundings
from charmem.usecases.maintenance import maintain_stats, maintain_vectors
from charmem.usecases.planning import derive_links, index_entries
from charmem.usecases.store_writes import exclusive_writes, finish_write
from charmem.usecases.validation import raise_for_invalid, validate

__all__ = ["LifecycleStores", "correct_memory", "forget_memory", "link_memories"]

log = get_logger("charmem.lifecycle")


@attrs.frozen
class LifecycleStores:
    """The ports a lifecycle operation uses (bound to one collection).

    ``embed_timeout_s``: seconds one embedding call may take (``EMBEDDING_TIMEOUT_S``).
    """

    graph: GraphStore
    vectors: VectorIndex
    embedder: EmbeddingProvider
    stats: RetrievalStatsStore
    batch_size: int = 64
    embed_timeout_s: float = DEFAULT_EMBEDDING_TIMEOUT_S


def _refuse(kind: LifecycleErrorKind, message: str) -> LifecycleValidationError:
    return LifecycleValidationError(kind, message)


def _conflict(memory_id: MemoryId) -> IdConflictError:
    return IdConflictError(
        f"id {memory_id} is already stored with different content; nothing was written "
        "(pass another id, or replay the exact same operation)",
        ids=[str(memory_id)],
    )


def _adopt_object(stored: MemoryObject | None, new: DerivedMemory) -> DerivedMemory:
    """The replacement to write: the stored one when only its defaulted ``created_at`` differs.

    Raises:
        IdConflictError: the id is stored with other content.
    """
    if stored is None:
        return new
    if isinstance(stored, DerivedMemory) and content_equal(
        attrs.evolve(new, created_at=stored.created_at), stored
    ):
        return stored
    raise _conflict(new.id)


def _adopt_link(stored: MemoryLink | None, new: MemoryLink) -> MemoryLink:
    """The link to write: the stored one when only its defaulted ``created_at`` differs."""
    if stored is None:
        return new
    if content_equal(attrs.evolve(new, created_at=stored.created_at), stored):
        return stored
    raise _conflict(new.id)


def _adopt_record(stored: LifecycleRecord | None, new: LifecycleRecord) -> LifecycleRecord:
    """The record to write: the stored one when only its defaulted ``recorded_at`` differs."""
    if stored is None:
        return new
    if attrs.evolve(new, recorded_at=stored.recorded_at) == stored:
        return stored
    raise _conflict(new.id)


async def _stored_records(graph: GraphStore, targets: Sequence[MemoryId]) -> dict[MemoryId, LifecycleRecord]:
    return {record.id: record for record in await graph.get_records(list(targets))}


async def _refuse_purged(graph: GraphStore, ids: Sequence[MemoryId], what: str) -> None:
    """Raise :class:`PurgedMemoryError` if any of ``ids`` was purged (``charmem.admin.purge``)."""
    refuse_purged(ids, await graph.tombstones(list(ids)) if ids else {}, what)


async def correct_memory(
    draft: CorrectMemoryDraft, *, collection: str, stores: LifecycleStores, now: datetime
) -> LifecycleMutationOutcome:
    """Correct a memory: add a replacement that supersedes the target.

    Load what the graph holds around the target, plan the replacement and the ``correct`` record
    (:func:`~charmem.domain.correction.plan_correction`: the correction table, what the
    replacement is grounded on and inherits per target kind), write them in one graph batch, then
    bring vectors and stats in step.

    A memory gains successors in one write only: a target another memory already supersedes is
    refused (``ALREADY_SUPERSEDED``, naming the successor) unless this is a replay of the same
    correction. The correction is recorded in time order (:func:`~charmem.domain.rules.recorded_in_order`):
    not before the target or a ``correction_origin`` source was created (the replacement is
    grounded on them), not beyond the clock's skew in the future; an explicit replacement
    ``created_at`` is held to the same rule.

    Args:
        draft: the correction.
        collection: the collection name (namespace of derived ids).
        stores: the ports.
        now: the clock's instant for defaulted timestamps.

    Returns:
        LifecycleMutationOutcome: target and replacement ids, links, repair markers.

    Raises:
        LifecycleValidationError: the draft breaks a rule (its ``kind`` names which, e.g.
            ``ALREADY_SUPERSEDED``, ``RECORDED_BEFORE_TARGET``, ``RECORDED_IN_FUTURE``).
        PurgedMemoryError: the target, a named origin or the replacement id was purged
            (``charmem.admin.purge``); purged ids the target refers to are simply not inherited.
        IdConflictError: a replacement id is stored with other content.
        BackendError: the graph failed; nothing was written.
    """
    check_correction_draft(draft)  # a draft wrong by itself is refused before anything is read
    async with exclusive_writes(stores.graph):  # writers of other processes wait: the checks hold
        facts = await _read_correction(stores.graph, draft)
        plan = plan_correction(draft, facts, collection=collection, now=now)
        replacement, links = await _write_correction(stores.graph, plan, collection)
    target_id = plan.record.target_id
    markers = await _maintain(stores, objects=[replacement], links=links, affected=[target_id])
    log.info(
        "memory_corrected", collection=collection, target=str(target_id), replacement=str(replacement.id)
    )
    return LifecycleMutationOutcome(
        graph_mutated_object_ids=(target_id, replacement.id),
        replacement_ids=(replacement.id,),
        link_ids=tuple(link.id for link in links),
        repair_markers=tuple(markers),
    )


async def _read_correction(graph: GraphStore, draft: CorrectMemoryDraft) -> CorrectionFacts:
    """Read what :func:`~charmem.domain.correction.plan_correction` needs around the target.

    Raises:
        BackendError: the graph failed.
    """
    target_id = draft.target.id
    target = (await graph.get_objects([target_id])).get(target_id)
    is_link = target is None and bool(await graph.get_links([target_id]))
    ids = correction_reads(draft, target)
    return CorrectionFacts(
        target=target,
        target_is_link=is_link,
        stored=await graph.get_objects(list(ids)) if ids else {},
        tombstones=await graph.tombstones(sorted({target_id, *ids})),
    )


async def _write_correction(
    graph: GraphStore, plan: CorrectionPlan, collection: str
) -> tuple[DerivedMemory, tuple[MemoryLink, ...]]:
    """Write a correction's replacement, derived links and record in one batch.

    What is stored with equal content (a replay) is adopted as stored; the target may not have
    gained another successor meanwhile (:func:`~charmem.domain.correction.check_successors`).

    Returns:
        tuple: the replacement as written and its derived links.

    Raises:
        IdConflictError: the replacement or record id is stored with other content.
        LifecycleValidationError: ``ALREADY_SUPERSEDED``.
        BackendError: the graph failed; nothing was written.
    """
    new = plan.replacement
    target_id = plan.record.target_id
    replacement = _adopt_object((await graph.get_objects([new.id])).get(new.id), new)
    supersedes = await graph.links_of([target_id], relations=[Relation.SUPERSEDES])
    check_successors(
        target_id, {link.from_id for link in supersedes if link.to_id == target_id}, replacement.id
    )
    record = _adopt_record((await _stored_records(graph, [target_id])).get(plan.record.id), plan.record)
    links = derive_links(collection, [replacement])
    await finish_write(graph.write_batch(GraphBatch(objects=[replacement], links=links, records=[record])))
    return replacement, links


async def _maintain(
    stores: LifecycleStores,
    *,
    objects: Sequence[MemoryObject] = (),
    links: Sequence[MemoryLink] = (),
    affected: Sequence[MemoryId],
) -> list[RepairMarkerType]:
    """Bring vectors and stats in step after a lifecycle write (repairable; never raises).

    Args:
        stores: the ports.
        objects: memories the write added (indexed when current).
        links: links the write added.
        affected: memories whose currency the write may have changed.

    Returns:
        list[RepairMarkerType]: the failed vector and stats writes.
    """
    markers = await maintain_vectors(
        index_entries(objects),
        affected,
        graph=stores.graph,
        vectors=stores.vectors,
        embedder=stores.embedder,
        batch_size=stores.batch_size,
        embed_timeout_s=stores.embed_timeout_s,
    )
    markers += await maintain_stats(objects, links, affected, graph=stores.graph, stats=stores.stats)
    return markers


async def forget_memory(
    draft: ForgetMemoryDraft, *, collection: str, stores: LifecycleStores, now: datetime
) -> LifecycleMutationOutcome:
    """Forget a memory by suppression; nothing is deleted.

    A derived memory, episode or observation gets a suppression record (:func:`forget_plan`
    says what else is suppressed with it). A thread gets a ``forget_noted`` record (its status and
    vector stay); with ``apply_to_thread_members`` its derived members are suppressed.

    Raises:
        LifecycleValidationError: blank rationale, unknown target, a notion or link target, or a
            ``recorded_at`` before the target was created or beyond the clock's skew in the future
            (:func:`~charmem.domain.rules.recorded_in_order`).
        PurgedMemoryError: the target was purged (``charmem.admin.purge``).
        IdConflictError: a record id is stored with other content.
        BackendError: the graph failed; nothing was written.
    """
    if not draft.rationale.strip():
        raise _refuse(LifecycleErrorKind.EMPTY_RATIONALE, "a forget needs a non-blank rationale")
    async with exclusive_writes(stores.graph):  # writers of other processes wait: the checks hold
        affected = await _write_forget(draft, collection=collection, graph=stores.graph, now=now)
    markers = await _maintain(stores, affected=affected)
    log.info("memory_forgotten", collection=collection, target=str(draft.target_id), affected=len(affected))
    return LifecycleMutationOutcome(graph_mutated_object_ids=affected, repair_markers=tuple(markers))


async def _write_forget(
    draft: ForgetMemoryDraft, *, collection: str, graph: GraphStore, now: datetime
) -> list[MemoryId]:
    """Check a forget against the graph and write its records in one batch.

    Returns:
        list[MemoryId]: the memories the forget suppresses (or notes, for a thread).

    Raises:
        LifecycleValidationError, PurgedMemoryError, IdConflictError, BackendError: as
            :func:`forget_memory`; nothing was written.
    """
    target_id = draft.target_id
    target = (await graph.get_objects([target_id])).get(target_id)
    if target is None:
        if await graph.get_links([target_id]):
            raise _refuse(
                LifecycleErrorKind.UNSUPPORTED_LIFECYCLE_TARGET,
                f"{target_id} is a link; links cannot be forgotten",
            )
        await _refuse_purged(graph, [target_id], "the forget target")
        raise _refuse(
            LifecycleErrorKind.MISSING_FORGET_TARGET, f"no memory {target_id} is stored in this collection"
        )
    if isinstance(target, Entity):
        raise _refuse(
            LifecycleErrorKind.UNSUPPORTED_LIFECYCLE_TARGET,
            f"{target_id} is a notion; forget the beliefs about it instead",
        )
    recorded = recorded_in_order(
        draft.recorded_at or now, targets={target.id: target.created_at}, now=now, what="forget"
    )
    links, around = await read_forget_surroundings(graph, target)
    plan = forget_plan(target, draft, forget_reach(target, links, around))
    stored = await _stored_records(graph, [memory_id for memory_id, _ in plan])
    records = [
        _adopt_record(stored.get(record.id), record)
        for record in forget_records(collection, target, draft, recorded, plan)
    ]
    await finish_write(graph.write_batch(GraphBatch(records=records)))
    return [memory_id for memory_id, _ in plan]


async def link_memories(
    draft: LinkDraft, *, collection: str, stores: LifecycleStores, now: datetime
) -> LinkOutcome:
    """Add a caller-authored link between two stored memory objects.

    The id defaults to a derivation of (collection, from, relation, to), so the same link added
    twice is stored once. ``supersedes`` links are refused (commit and ``correct`` derive them).
    The link is recorded in time order (:func:`~charmem.domain.rules.recorded_in_order`): not before
    either stored endpoint was created, not beyond the clock's skew in the future.

    Raises:
        LifecycleValidationError: ``RECORDED_BEFORE_TARGET`` or ``RECORDED_IN_FUTURE``.
        PlanValidationError: a ``supersedes`` link, an endpoint that is not a stored object, or
            endpoint types the relation does not allow.
        PurgedMemoryError: an endpoint was purged (``charmem.admin.purge``).
        IdConflictError: the id is stored with other content.
        BackendError: the graph failed; nothing was written.
    """
    graph = stores.graph
    async with exclusive_writes(graph):  # writers of other processes wait: the checks hold
        link = await _write_link(draft, collection=collection, graph=graph, now=now)
    markers = await maintain_stats([], [link], [], graph=graph, stats=stores.stats)
    return LinkOutcome(link=link, repair_markers=tuple(markers))


async def _write_link(draft: LinkDraft, *, collection: str, graph: GraphStore, now: datetime) -> MemoryLink:
    """Check a caller-authored link against the graph and write it.

    Returns:
        MemoryLink: the link as written (or as stored, for a replay).

    Raises:
        LifecycleValidationError, PlanValidationError, PurgedMemoryError, IdConflictError,
            BackendError: as :func:`link_memories`; nothing was written.
    """
    endpoints = await graph.get_objects([draft.from_id, draft.to_id])
    created = {memory_id: obj.created_at for memory_id, obj in endpoints.items()}
    recorded = recorded_in_order(draft.recorded_at or now, targets=created, now=now, what="link")
    link = MemoryLink(
        id=draft.id
        or MemoryId.deterministic(collection, "link", draft.from_id, draft.relation.value, draft.to_id),
        from_id=draft.from_id,
        relation=draft.relation,
        to_id=draft.to_id,
        created_at=recorded,
        rationale=draft.rationale,
    )
    link = _adopt_link((await graph.get_links([link.id])).get(link.id), link)
    plan = RememberWritePlan(collection=collection, prepared_at=link.created_at, links=[link])
    raise_for_invalid(await validate(plan, graph), what="link")
    await finish_write(graph.write_batch(GraphBatch(links=[link])))
    return link
