"""Lifecycle use cases: ``correct``, ``forget``, ``link`` (DESIGN §4, spec "Memory permanence").

Each operation validates its draft (raising :class:`LifecycleValidationError` with the spec's kind
before anything is written), writes one atomic graph batch (replacement, derived links,
lifecycle records) and then brings vectors and stats in step as repairable writes.

Replays are idempotent: ids are derived deterministically, and an item already stored whose
content differs only in a defaulted timestamp is adopted as stored, so the same correction or
forget applied twice writes nothing new.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

import attrs

from charmem.domain.drafts import LinkDraft
from charmem.domain.graph import GraphBatch, LifecycleAction, LifecycleRecord
from charmem.domain.ids import MemoryId
from charmem.domain.lifecycle import (
    CorrectionTargetKind,
    CorrectMemoryDraft,
    ForgetMemoryDraft,
    LifecycleMutationOutcome,
    LinkOutcome,
    SourceProvenanceReference,
)
from charmem.domain.model import (
    DerivedMemory,
    DerivedType,
    Entity,
    Episode,
    MemoryLink,
    MemoryObject,
    MemoryThread,
    Observation,
    Relation,
)
from charmem.domain.plan import RememberWritePlan
from charmem.domain.rules import conflicting_successors, content_equal, recorded_in_order
from charmem.errors import (
    IdConflictError,
    LifecycleErrorKind,
    LifecycleValidationError,
    PurgedMemoryError,
)
from charmem.log import get_logger
from charmem.ports import EmbeddingProvider, GraphStore, RetrievalStatsStore, VectorIndex
from charmem.settings import DEFAULT_EMBEDDING_TIMEOUT_S
from charmem.usecases.forgetting import forget_plan, forget_reach, forget_records, read_forget_surroundings
from charmem.usecases.maintenance import maintain_stats, maintain_vectors
from charmem.usecases.planning import derive_links, index_entries
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
    purged = await graph.tombstones(list(ids)) if ids else {}
    if purged:
        first = next(iter(purged.values()))
        raise PurgedMemoryError(
            f"{what} {first.id} was purged at {first.purged_at.isoformat()}; a purged memory cannot be "
            "corrected, forgotten or used again, nothing was written",
            ids=sorted(str(i) for i in purged),
        )


async def correct_memory(
    draft: CorrectMemoryDraft, *, collection: str, stores: LifecycleStores, now: datetime
) -> LifecycleMutationOutcome:
    """Correct a memory: add a replacement that supersedes the target (DESIGN §4.4 table).

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
    graph = stores.graph
    if not draft.rationale.strip():
        raise _refuse(LifecycleErrorKind.EMPTY_RATIONALE, "a correction needs a non-blank rationale")
    replacement_draft = draft.replacement
    origins = [draft.correction_origin]
    if replacement_draft is not None:
        origins.append(replacement_draft.correction_origin_provenance)
    for origin in origins:
        if origin is not None and origin.is_empty:
            raise _refuse(
                LifecycleErrorKind.EMPTY_CORRECTION_ORIGIN,
                "the correction origin names no episode, observation or external reference; "
                "give at least one, or leave it out",
            )
    if replacement_draft is not None and not replacement_draft.text.strip():
        raise _refuse(LifecycleErrorKind.EMPTY_REPLACEMENT_TEXT, "the replacement text is blank")

    target_id = draft.target.id
    target = (await graph.get_objects([target_id])).get(target_id)
    if target is None:
        if await graph.get_links([target_id]):
            raise _refuse(
                LifecycleErrorKind.UNSUPPORTED_LIFECYCLE_TARGET,
                f"{target_id} is a link; links cannot be corrected",
            )
        await _refuse_purged(graph, [target_id], "the correction target")
        raise _refuse(
            LifecycleErrorKind.MISSING_CORRECTION_TARGET,
            f"no memory {target_id} is stored in this collection",
        )
    if isinstance(target, Entity | MemoryThread):
        raise _refuse(
            LifecycleErrorKind.UNSUPPORTED_LIFECYCLE_TARGET,
            f"{target_id} is a {target.object_type.value}; only derived memories, episodes and "
            "observations can be corrected (rename a notion by superseding its name belief)",
        )
    wants_derived = draft.target.kind is CorrectionTargetKind.DERIVED_MEMORY
    if wants_derived != isinstance(target, DerivedMemory):
        hint = "CorrectionTarget.source_object" if wants_derived else "CorrectionTarget.derived_memory"
        raise _refuse(
            LifecycleErrorKind.UNSUPPORTED_LIFECYCLE_TARGET,
            f"{target_id} is a {target.object_type.value}; address it with {hint}({target_id})",
        )
    origin = (draft.correction_origin or SourceProvenanceReference()).merged(
        replacement_draft.correction_origin_provenance if replacement_draft else None
    )
    found: dict[MemoryId, MemoryObject] = {}
    if origin.source_ids:
        await _refuse_purged(graph, origin.source_ids, "the correction origin")
        found = dict(await graph.get_objects(list(origin.source_ids)))
        for episode_id in origin.episode_ids:
            if not isinstance(found.get(episode_id), Episode):
                raise _refuse(
                    LifecycleErrorKind.MISSING_REPLACEMENT_SOURCE,
                    f"origin episode {episode_id} is not stored",
                )
        for observation_id in origin.observation_ids:
            if not isinstance(found.get(observation_id), Observation):
                raise _refuse(
                    LifecycleErrorKind.MISSING_REPLACEMENT_SOURCE,
                    f"origin observation {observation_id} is not stored",
                )

    # The replacement is grounded on the origin's experiences: it may not predate them either.
    created = {target.id: target.created_at, **{i: o.created_at for i, o in found.items()}}
    recorded = recorded_in_order(draft.recorded_at or now, targets=created, now=now, what="correction")
    replacement_created = recorded
    if replacement_draft is not None and replacement_draft.created_at is not None:
        replacement_created = recorded_in_order(
            replacement_draft.created_at, targets=created, now=now, what="replacement"
        )

    given = bool(replacement_draft and replacement_draft.given_by_application)
    extra_entities = replacement_draft.entity_ids if replacement_draft else ()
    extra_threads = replacement_draft.thread_ids if replacement_draft else ()
    episode_ids: tuple[MemoryId, ...] = origin.episode_ids
    observation_ids: tuple[MemoryId, ...] = origin.observation_ids
    if isinstance(target, DerivedMemory) and target.given_by_application:
        if replacement_draft is None:
            raise _refuse(
                LifecycleErrorKind.MISSING_GIVEN_REPLACEMENT,
                "a given belief is corrected by declaring the replacement's assertions and grounding: "
                "add a ReplacementDerivedMemoryDraft (given_by_application=True with assertions, or a "
                "correction_origin with source experiences)",
            )
        if not origin.source_ids and not given:
            raise _refuse(
                LifecycleErrorKind.MISSING_REPLACEMENT_SOURCE,
                "the replacement of a given belief needs source experiences in correction_origin, or "
                "given_by_application=True",
            )
        if given and not origin.source_ids and not replacement_draft.assertions:
            raise _refuse(
                LifecycleErrorKind.MISSING_GIVEN_REPLACEMENT,
                "a given replacement must declare its assertions (the old ones are never copied)",
            )
        entity_ids, thread_ids = extra_entities, extra_threads
    elif isinstance(target, DerivedMemory):
        if not origin.source_ids and not given:
            episode_ids, observation_ids = target.episode_ids, target.observation_ids
        entity_ids = (*target.entity_ids, *extra_entities)
        thread_ids = (*target.thread_ids, *extra_threads)
    else:
        if isinstance(target, Episode):
            episode_ids = (*episode_ids, target.id)
            inherited: tuple[MemoryId, ...] = target.participant_entity_ids
            thread_ids = (*target.thread_ids, *extra_threads)
        else:
            assert isinstance(target, Observation)
            observation_ids = (*observation_ids, target.id)
            speaker = () if target.speaker_entity_id is None else (target.speaker_entity_id,)
            inherited = (*target.mentioned_entity_ids, *speaker)
            thread_ids = extra_threads
        entity_ids = (*inherited, *extra_entities)
    # What the replacement inherits from the target never includes purged memories: a new memory
    # is not grounded on, about, or in a purged one (charmem.admin.purge).
    inherited_refs = sorted({*episode_ids, *observation_ids, *entity_ids, *thread_ids} - {target.id})
    purged = set(await graph.tombstones(inherited_refs)) if inherited_refs else set()
    named = sorted(purged & {*extra_entities, *extra_threads})
    if named:
        await _refuse_purged(graph, named, "the replacement names")
    if purged:
        episode_ids = tuple(i for i in episode_ids if i not in purged)
        observation_ids = tuple(i for i in observation_ids if i not in purged)
        entity_ids = tuple(i for i in entity_ids if i not in purged)
        thread_ids = tuple(i for i in thread_ids if i not in purged)
    has_sources = bool(episode_ids or observation_ids)
    if given and has_sources:
        raise _refuse(
            LifecycleErrorKind.INVALID_BELIEF,
            "given_by_application cannot coexist with source experiences; drop one of them",
        )
    if not given and not has_sources:
        hint = " (the target's sources were purged: give a correction_origin)" if purged else ""
        raise _refuse(
            LifecycleErrorKind.MISSING_REPLACEMENT_SOURCE,
            f"no grounding can be derived for the replacement{hint}",
        )
    assertions = replacement_draft.assertions if replacement_draft else ()
    subjects = set(entity_ids)
    if given and not subjects:
        raise _refuse(
            LifecycleErrorKind.INVALID_BELIEF, "a given replacement needs at least one notion in entity_ids"
        )
    for assertion in assertions:
        if assertion.subject not in subjects:
            raise _refuse(
                LifecycleErrorKind.INVALID_BELIEF,
                f"assertion subject {assertion.subject} is not among the replacement's entity_ids",
            )
    referenced = sorted({*entity_ids, *thread_ids})
    present = await graph.get_objects(referenced)
    for memory_id in referenced:
        if memory_id not in present:
            raise _refuse(
                LifecycleErrorKind.INVALID_BELIEF,
                f"the replacement refers to {memory_id}, which is not stored",
            )

    derived_type = replacement_draft.derived_type if replacement_draft else DerivedType.CORRECTION
    text = replacement_draft.text if replacement_draft else draft.rationale
    salience = replacement_draft.salience if replacement_draft else None
    authored = {
        "derived_type": derived_type.value,
        "text": text,
        "episode_ids": sorted(map(str, set(episode_ids))),
        "observation_ids": sorted(map(str, set(observation_ids))),
        "entity_ids": sorted(map(str, set(entity_ids))),
        "thread_ids": sorted(map(str, set(thread_ids))),
        "assertions": [[str(a.subject), a.predicate.name] for a in assertions],
        "given": given,
        "salience": salience,
    }
    replacement_id = (replacement_draft.id if replacement_draft else None) or MemoryId.deterministic(
        collection, "correction", target.id, json.dumps(authored, sort_keys=True, ensure_ascii=False)
    )
    replacement = DerivedMemory(
        id=replacement_id,
        derived_type=derived_type,
        text=text,
        episode_ids=episode_ids,
        observation_ids=observation_ids,
        entity_ids=entity_ids,
        thread_ids=thread_ids,
        assertions=assertions,
        given_by_application=given,
        supersedes=(target.id,),
        salience=0.5 if salience is None else salience,
        created_at=replacement_created,
    )
    replacement = _adopt_object((await graph.get_objects([replacement_id])).get(replacement_id), replacement)
    successors = {
        link.from_id
        for link in await graph.links_of([target.id], relations=[Relation.SUPERSEDES])
        if link.to_id == target.id
    }
    blocking = conflicting_successors(successors, {replacement.id})
    if blocking:
        raise _refuse(
            LifecycleErrorKind.ALREADY_SUPERSEDED,
            f"{target.id} is already superseded by {', '.join(map(str, blocking))}; a memory gains "
            f"successors in one plan or correction only: correct {blocking[0]} (or the belief that "
            "now replaces it) instead",
        )
    record_id = MemoryId.deterministic(collection, "correct", target.id, replacement.id)
    record = LifecycleRecord(
        id=record_id,
        target_id=target.id,
        action=LifecycleAction.CORRECT,
        rationale=draft.rationale,
        recorded_at=recorded,
        related_ids=(replacement.id,),
        external_refs=[ref.reference for ref in origin.external_refs],
    )
    record = _adopt_record((await _stored_records(graph, [target.id])).get(record_id), record)
    links = derive_links(collection, [replacement])
    await graph.write_batch(GraphBatch(objects=[replacement], links=links, records=[record]))
    markers = await maintain_vectors(
        index_entries([replacement]),
        [target.id],
        graph=graph,
        vectors=stores.vectors,
        embedder=stores.embedder,
        batch_size=stores.batch_size,
        embed_timeout_s=stores.embed_timeout_s,
    )
    markers += await maintain_stats([replacement], links, [target.id], graph=graph, stats=stores.stats)
    log.info(
        "memory_corrected", collection=collection, target=str(target.id), replacement=str(replacement.id)
    )
    return LifecycleMutationOutcome(
        graph_mutated_object_ids=(target.id, replacement.id),
        replacement_ids=(replacement.id,),
        link_ids=tuple(link.id for link in links),
        repair_markers=tuple(markers),
    )


async def forget_memory(
    draft: ForgetMemoryDraft, *, collection: str, stores: LifecycleStores, now: datetime
) -> LifecycleMutationOutcome:
    """Forget a memory by suppression (DESIGN §4.6); nothing is deleted.

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
    graph = stores.graph
    if not draft.rationale.strip():
        raise _refuse(LifecycleErrorKind.EMPTY_RATIONALE, "a forget needs a non-blank rationale")
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
    await graph.write_batch(GraphBatch(records=records))
    affected = [memory_id for memory_id, _ in plan]
    markers = await maintain_vectors(
        [],
        affected,
        graph=graph,
        vectors=stores.vectors,
        embedder=stores.embedder,
        batch_size=stores.batch_size,
        embed_timeout_s=stores.embed_timeout_s,
    )
    markers += await maintain_stats([], [], affected, graph=graph, stats=stores.stats)
    log.info("memory_forgotten", collection=collection, target=str(target.id), affected=len(affected))
    return LifecycleMutationOutcome(graph_mutated_object_ids=affected, repair_markers=tuple(markers))


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
    await graph.write_batch(GraphBatch(links=[link]))
    markers = await maintain_stats([], [link], [], graph=graph, stats=stores.stats)
    return LinkOutcome(link=link, repair_markers=tuple(markers))
