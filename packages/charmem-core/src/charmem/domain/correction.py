"""The correction table: what a correction's replacement is grounded on and inherits, and its errors.

A correction adds a replacement derived memory that supersedes its target and a ``correct``
lifecycle record; nothing is rewritten. :func:`plan_correction` decides both from the draft and
what the graph holds around the target (:class:`CorrectionFacts`), without I/O. Per target kind:

==================  ======================================================================
target              the replacement
==================  ======================================================================
derived memory      grounded on the ``correction_origin`` sources, or else on the target's
                    own sources (unless the replacement is given); about the target's
                    notions and in its threads, plus those the replacement draft names
given belief        needs a replacement draft; grounded on the origin's sources, or given
                    itself with declared assertions (the old ones are never copied); about
                    and in only what the replacement draft names
episode             grounded on the origin's sources and the episode; about its
                    participants, in its threads, plus what the draft names
observation         grounded on the origin's sources and the observation; about its
                    mentioned notions and speaker, plus what the draft names
notion, thread,     refused (``UNSUPPORTED_LIFECYCLE_TARGET``): rename a notion by
link                superseding its name belief
==================  ======================================================================

Purged memories the target refers to are not inherited; purged ones the draft names are
refused. The replacement then obeys the grounding rule (:func:`~charmem.domain.rules.belief_breaches`),
and every notion and thread it names must be stored. Its id is derived from the target and its
authored content unless the draft gives one, so replaying a correction never makes a second one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from datetime import datetime

import attrs

from charmem.domain.graph import LifecycleAction, LifecycleRecord, Tombstone
from charmem.domain.ids import MemoryId
from charmem.domain.lifecycle import CorrectionTargetKind, CorrectMemoryDraft, SourceProvenanceReference
from charmem.domain.model import (
    PREDICATE_TAGS,
    BeliefAssertion,
    DerivedMemory,
    DerivedType,
    Entity,
    Episode,
    KnownAs,
    MemoryObject,
    MemoryThread,
    Observation,
)
from charmem.domain.rules import BeliefBreachKind, belief_breaches, conflicting_successors, recorded_in_order
from charmem.errors import LifecycleErrorKind, LifecycleValidationError, PurgedMemoryError, with_article

__all__ = [
    "CorrectionFacts",
    "CorrectionPlan",
    "check_correction_draft",
    "check_successors",
    "correction_origin",
    "correction_reads",
    "plan_correction",
    "refuse_purged",
]

#: The objects a correction may target.
Correctable = DerivedMemory | Episode | Observation


@attrs.frozen(kw_only=True)
class CorrectionFacts:
    """What the graph holds that a correction's plan depends on (read before planning).

    Attributes:
        target: the stored object of the target id, or ``None``.
        target_is_link: the target id is a stored link (only looked at without ``target``).
        stored: the stored objects among the ids of :func:`correction_reads`, by id.
        tombstones: the tombstones among those ids and the target id, by id.
    """

    target: MemoryObject | None
    target_is_link: bool = False
    stored: Mapping[MemoryId, MemoryObject] = attrs.field(factory=dict)
    tombstones: Mapping[MemoryId, Tombstone] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class CorrectionPlan:
    """What a correction writes: the replacement and the ``correct`` record.

    Attributes:
        replacement: the new derived memory; it supersedes the target.
        record: the ``correct`` lifecycle record about the target, naming the replacement.
    """

    replacement: DerivedMemory
    record: LifecycleRecord


@attrs.frozen(kw_only=True)
class _Grounding:
    """What a replacement is grounded on, about and in (ids may repeat; the memory sorts them)."""

    episode_ids: tuple[MemoryId, ...]
    observation_ids: tuple[MemoryId, ...]
    entity_ids: tuple[MemoryId, ...]
    thread_ids: tuple[MemoryId, ...]

    @property
    def ids(self) -> set[MemoryId]:
        return {*self.episode_ids, *self.observation_ids, *self.entity_ids, *self.thread_ids}

    def without(self, purged: set[MemoryId]) -> _Grounding:
        def kept(ids: tuple[MemoryId, ...]) -> tuple[MemoryId, ...]:
            return tuple(i for i in ids if i not in purged)

        return _Grounding(
            episode_ids=kept(self.episode_ids),
            observation_ids=kept(self.observation_ids),
            entity_ids=kept(self.entity_ids),
            thread_ids=kept(self.thread_ids),
        )


def _refuse(kind: LifecycleErrorKind, message: str) -> LifecycleValidationError:
    return LifecycleValidationError(kind, message)


def refuse_purged(ids: Iterable[MemoryId], tombstones: Mapping[MemoryId, Tombstone], what: str) -> None:
    """Raise :class:`PurgedMemoryError` if any of ``ids`` was purged (``charmem.admin.purge``).

    A purged memory cannot be corrected, forgotten or used again by any lifecycle operation.

    Args:
        ids: the ids to check, in the order the message names the first purged one.
        tombstones: the known tombstones, by id (at least those of ``ids``).
        what: how the message names the ids (``"the correction target"``, ...).
    """
    purged = [tombstones[i] for i in ids if i in tombstones]
    if purged:
        first = purged[0]
        raise PurgedMemoryError(
            f"{what} {first.id} was purged at {first.purged_at.isoformat()}; a purged memory cannot be "
            "corrected, forgotten or used again, nothing was written",
            ids=sorted(str(t.id) for t in purged),
        )


def check_correction_draft(draft: CorrectMemoryDraft) -> None:
    """Refuse a correction draft that is wrong by itself, before anything is read.

    Raises:
        LifecycleValidationError: ``EMPTY_RATIONALE``, ``EMPTY_CORRECTION_ORIGIN`` (an origin
            naming nothing) or ``EMPTY_REPLACEMENT_TEXT``.
    """
    if not draft.rationale.strip():
        raise _refuse(LifecycleErrorKind.EMPTY_RATIONALE, "a correction needs a non-blank rationale")
    replacement = draft.replacement
    origins = [draft.correction_origin]
    if replacement is not None:
        origins.append(replacement.correction_origin_provenance)
    for origin in origins:
        if origin is not None and origin.is_empty:
            raise _refuse(
                LifecycleErrorKind.EMPTY_CORRECTION_ORIGIN,
                "the correction origin names no episode, observation or external reference; "
                "give at least one, or leave it out",
            )
    if replacement is not None and not replacement.text.strip():
        raise _refuse(LifecycleErrorKind.EMPTY_REPLACEMENT_TEXT, "the replacement text is blank")


def correction_origin(draft: CorrectMemoryDraft) -> SourceProvenanceReference:
    """The correction's evidence: its ``correction_origin`` and the replacement's, merged."""
    replacement = draft.replacement
    return (draft.correction_origin or SourceProvenanceReference()).merged(
        replacement.correction_origin_provenance if replacement else None
    )


def _inherited(
    draft: CorrectMemoryDraft, target: Correctable, origin: SourceProvenanceReference
) -> _Grounding:
    """The table of the module docstring: the replacement's grounding before purged ids leave."""
    replacement = draft.replacement
    given = bool(replacement and replacement.given_by_application)
    extra_entities = replacement.entity_ids if replacement else ()
    extra_threads = replacement.thread_ids if replacement else ()
    episode_ids, observation_ids = origin.episode_ids, origin.observation_ids
    if isinstance(target, DerivedMemory) and target.given_by_application:
        entity_ids, thread_ids = extra_entities, extra_threads
    elif isinstance(target, DerivedMemory):
        if not origin.source_ids and not given:
            episode_ids, observation_ids = target.episode_ids, target.observation_ids
        entity_ids = (*target.entity_ids, *extra_entities)
        thread_ids = (*target.thread_ids, *extra_threads)
    elif isinstance(target, Episode):
        episode_ids = (*episode_ids, target.id)
        entity_ids = (*target.participant_entity_ids, *extra_entities)
        thread_ids = (*target.thread_ids, *extra_threads)
    else:
        observation_ids = (*observation_ids, target.id)
        speaker = () if target.speaker_entity_id is None else (target.speaker_entity_id,)
        entity_ids = (*target.mentioned_entity_ids, *speaker, *extra_entities)
        thread_ids = extra_threads
    return _Grounding(
        episode_ids=episode_ids, observation_ids=observation_ids, entity_ids=entity_ids, thread_ids=thread_ids
    )


def correction_reads(draft: CorrectMemoryDraft, target: MemoryObject | None) -> tuple[MemoryId, ...]:
    """The ids whose stored objects and tombstones :class:`CorrectionFacts` holds, sorted.

    The origin's sources and every id the replacement may inherit from ``target`` or name.

    Args:
        draft: the correction.
        target: the stored target, or ``None`` (then only the draft's ids).
    """
    origin = correction_origin(draft)
    ids: set[MemoryId] = set(origin.source_ids)
    if isinstance(target, Correctable):
        ids |= _inherited(draft, target, origin).ids
    elif draft.replacement is not None:
        ids |= {*draft.replacement.entity_ids, *draft.replacement.thread_ids}
    return tuple(sorted(ids))


def _correctable_target(draft: CorrectMemoryDraft, facts: CorrectionFacts) -> Correctable:
    """The stored target, or the error that it is absent, purged or of a kind not corrected."""
    target_id = draft.target.id
    target = facts.target
    if target is None:
        if facts.target_is_link:
            raise _refuse(
                LifecycleErrorKind.UNSUPPORTED_LIFECYCLE_TARGET,
                f"{target_id} is a link; links cannot be corrected",
            )
        refuse_purged([target_id], facts.tombstones, "the correction target")
        raise _refuse(
            LifecycleErrorKind.MISSING_CORRECTION_TARGET,
            f"no memory {target_id} is stored in this collection",
        )
    if isinstance(target, Entity | MemoryThread):
        raise _refuse(
            LifecycleErrorKind.UNSUPPORTED_LIFECYCLE_TARGET,
            f"{target_id} is {with_article(target.object_type.value)}; only derived memories, episodes and "
            "observations can be corrected (rename a notion by superseding its name belief)",
        )
    wants_derived = draft.target.kind is CorrectionTargetKind.DERIVED_MEMORY
    if wants_derived != isinstance(target, DerivedMemory):
        hint = "CorrectionTarget.source_object" if wants_derived else "CorrectionTarget.derived_memory"
        raise _refuse(
            LifecycleErrorKind.UNSUPPORTED_LIFECYCLE_TARGET,
            f"{target_id} is {with_article(target.object_type.value)}; address it with {hint}({target_id})",
        )
    return target


def _origin_created(origin: SourceProvenanceReference, facts: CorrectionFacts) -> dict[MemoryId, datetime]:
    """The ``created_at`` of the origin's sources, refusing purged or absent ones."""
    if not origin.source_ids:
        return {}
    refuse_purged(origin.source_ids, facts.tombstones, "the correction origin")
    for ids, kind, what in (
        (origin.episode_ids, Episode, "episode"),
        (origin.observation_ids, Observation, "observation"),
    ):
        for memory_id in ids:
            if not isinstance(facts.stored.get(memory_id), kind):
                raise _refuse(
                    LifecycleErrorKind.MISSING_REPLACEMENT_SOURCE,
                    f"origin {what} {memory_id} is not stored",
                )
    return {memory_id: facts.stored[memory_id].created_at for memory_id in origin.source_ids}


def _check_given_target(draft: CorrectMemoryDraft, origin: SourceProvenanceReference) -> None:
    """The rows of the table for a given belief: a replacement draft with grounding is needed."""
    replacement = draft.replacement
    if replacement is None:
        raise _refuse(
            LifecycleErrorKind.MISSING_GIVEN_REPLACEMENT,
            "a given belief is corrected by declaring the replacement's assertions and grounding: "
            "add a ReplacementDerivedMemoryDraft (given_by_application=True with assertions, or a "
            "correction_origin with source experiences)",
        )
    given = replacement.given_by_application
    if not origin.source_ids and not given:
        raise _refuse(
            LifecycleErrorKind.MISSING_REPLACEMENT_SOURCE,
            "the replacement of a given belief needs source experiences in correction_origin, or "
            "given_by_application=True",
        )
    if given and not origin.source_ids and not replacement.assertions:
        raise _refuse(
            LifecycleErrorKind.MISSING_GIVEN_REPLACEMENT,
            "a given replacement must declare its assertions (the old ones are never copied)",
        )


def _without_purged(
    draft: CorrectMemoryDraft, target: Correctable, grounding: _Grounding, facts: CorrectionFacts
) -> tuple[_Grounding, bool]:
    """The grounding without purged memories: inherited ones leave, named ones are refused.

    A new memory is not grounded on, about, or in a purged one (``charmem.admin.purge``).

    Returns:
        tuple: the grounding left, and whether any purged memory left it.
    """
    purged = {i for i in grounding.ids - {target.id} if i in facts.tombstones}
    replacement = draft.replacement
    named = {*replacement.entity_ids, *replacement.thread_ids} if replacement else set()
    refuse_purged(sorted(purged & named), facts.tombstones, "the replacement names")
    return (grounding.without(purged), True) if purged else (grounding, False)


def _assertion_key(assertion: BeliefAssertion) -> list[str | None]:
    """An assertion in a replacement's id derivation: ``[subject, name]``, ``[subject, None, role]``."""
    if isinstance(assertion.predicate, KnownAs):
        return [str(assertion.subject), assertion.predicate.name]
    return [str(assertion.subject), None, PREDICATE_TAGS[type(assertion.predicate)]]


def _check_replacement(
    draft: CorrectMemoryDraft, grounding: _Grounding, *, purged: bool, facts: CorrectionFacts
) -> None:
    """The replacement obeys the grounding rule and names only stored notions and threads."""
    replacement = draft.replacement
    breaches = belief_breaches(
        given=bool(replacement and replacement.given_by_application),
        has_sources=bool(grounding.episode_ids or grounding.observation_ids),
        entity_ids=grounding.entity_ids,
        assertions=replacement.assertions if replacement else (),
        derived_type=replacement.derived_type if replacement else DerivedType.CORRECTION,
    )
    if breaches:
        breach = breaches[0]
        if breach.kind is BeliefBreachKind.GIVEN_WITH_SOURCES:
            message = "given_by_application cannot coexist with source experiences; drop one of them"
        elif breach.kind is BeliefBreachKind.UNGROUNDED:
            hint = " (the target's sources were purged: give a correction_origin)" if purged else ""
            raise _refuse(
                LifecycleErrorKind.MISSING_REPLACEMENT_SOURCE,
                f"no grounding can be derived for the replacement{hint}",
            )
        elif breach.kind is BeliefBreachKind.GIVEN_WITHOUT_SUBJECT:
            message = "a given replacement needs at least one notion in entity_ids"
        elif breach.kind is BeliefBreachKind.ROLE_ON_OTHER_TYPE:
            message = f"{breach.subject} holds an obligation role; only a commitment or open_loop may"
        elif breach.kind is BeliefBreachKind.BOTH_ROLES:
            message = f"{breach.subject} is both Actor and Counterpart of the replacement"
        else:
            message = f"assertion subject {breach.subject} is not among the replacement's entity_ids"
        raise _refuse(LifecycleErrorKind.INVALID_BELIEF, message)
    for memory_id in sorted({*grounding.entity_ids, *grounding.thread_ids}):
        if memory_id not in facts.stored:
            raise _refuse(
                LifecycleErrorKind.INVALID_BELIEF,
                f"the replacement refers to {memory_id}, which is not stored",
            )


def _replacement(
    draft: CorrectMemoryDraft,
    target: Correctable,
    grounding: _Grounding,
    *,
    collection: str,
    created_at: datetime,
) -> DerivedMemory:
    """The replacement memory; its id is derived from the target and its authored content."""
    replacement = draft.replacement
    given = bool(replacement and replacement.given_by_application)
    assertions = replacement.assertions if replacement else ()
    derived_type = replacement.derived_type if replacement else DerivedType.CORRECTION
    text = replacement.text if replacement else draft.rationale
    salience = replacement.salience if replacement else None
    authored = {
        "derived_type": derived_type.value,
        "text": text,
        "episode_ids": sorted(map(str, set(grounding.episode_ids))),
        "observation_ids": sorted(map(str, set(grounding.observation_ids))),
        "entity_ids": sorted(map(str, set(grounding.entity_ids))),
        "thread_ids": sorted(map(str, set(grounding.thread_ids))),
        "assertions": [_assertion_key(a) for a in assertions],
        "given": given,
        "salience": salience,
    }
    replacement_id = (replacement.id if replacement else None) or MemoryId.deterministic(
        collection, "correction", target.id, json.dumps(authored, sort_keys=True, ensure_ascii=False)
    )
    return DerivedMemory(
        id=replacement_id,
        derived_type=derived_type,
        text=text,
        episode_ids=grounding.episode_ids,
        observation_ids=grounding.observation_ids,
        entity_ids=grounding.entity_ids,
        thread_ids=grounding.thread_ids,
        assertions=assertions,
        given_by_application=given,
        supersedes=(target.id,),
        salience=0.5 if salience is None else salience,
        created_at=created_at,
    )


def _record(
    collection: str,
    draft: CorrectMemoryDraft,
    target_id: MemoryId,
    replacement_id: MemoryId,
    *,
    recorded_at: datetime,
    external_refs: Sequence[str] = (),
) -> LifecycleRecord:
    """The ``correct`` record: its id is derived from the collection, target and replacement."""
    return LifecycleRecord(
        id=MemoryId.deterministic(collection, "correct", target_id, replacement_id),
        target_id=target_id,
        action=LifecycleAction.CORRECT,
        rationale=draft.rationale,
        recorded_at=recorded_at,
        related_ids=(replacement_id,),
        external_refs=list(external_refs),
    )


def check_successors(
    target_id: MemoryId, successors: AbstractSet[MemoryId], replacement_id: MemoryId
) -> None:
    """Refuse a correction of a memory another memory already supersedes, unless it is a replay.

    A memory gains successors in one write only (:func:`~charmem.domain.rules.conflicting_successors`).

    Args:
        target_id: the corrected memory.
        successors: the memories whose stored ``supersedes`` links point at it.
        replacement_id: the replacement's id (stored already on a replay).

    Raises:
        LifecycleValidationError: ``ALREADY_SUPERSEDED``, naming the successor to correct instead.
    """
    blocking = conflicting_successors(successors, {replacement_id})
    if blocking:
        raise _refuse(
            LifecycleErrorKind.ALREADY_SUPERSEDED,
            f"{target_id} is already superseded by {', '.join(map(str, blocking))}; a memory gains "
            f"successors in one plan or correction only: correct {blocking[0]} (or the belief that "
            "now replaces it) instead",
        )


def plan_correction(
    draft: CorrectMemoryDraft, facts: CorrectionFacts, *, collection: str, now: datetime
) -> CorrectionPlan:
    """Plan a correction: the table of the module docstring, checks in the order they apply.

    The correction is recorded in time order (:func:`~charmem.domain.rules.recorded_in_order`):
    not before the target or an origin source was created (the replacement is grounded on them),
    not beyond the clock's skew in the future; an explicit replacement ``created_at`` is held to
    the same rule. Whether the target already has another successor is checked when writing
    (:func:`check_successors`), after the replacement is adopted from the store on a replay.

    Args:
        draft: the correction.
        facts: what the graph holds around it (read with :func:`correction_reads`).
        collection: the collection name (namespace of derived ids).
        now: the clock's instant for defaulted timestamps.

    Returns:
        CorrectionPlan: the replacement and the record, as new (not yet adopted from the store).

    Raises:
        LifecycleValidationError: the draft breaks a rule (its ``kind`` says which).
        PurgedMemoryError: the target, a named origin or a named notion or thread was purged.
    """
    check_correction_draft(draft)
    target = _correctable_target(draft, facts)
    origin = correction_origin(draft)
    created = {target.id: target.created_at, **_origin_created(origin, facts)}
    recorded = recorded_in_order(draft.recorded_at or now, targets=created, now=now, what="correction")
    replacement_created = recorded
    if draft.replacement is not None and draft.replacement.created_at is not None:
        replacement_created = recorded_in_order(
            draft.replacement.created_at, targets=created, now=now, what="replacement"
        )
    if isinstance(target, DerivedMemory) and target.given_by_application:
        _check_given_target(draft, origin)
    grounding, purged = _without_purged(draft, target, _inherited(draft, target, origin), facts)
    _check_replacement(draft, grounding, purged=purged, facts=facts)
    replacement = _replacement(
        draft, target, grounding, collection=collection, created_at=replacement_created
    )
    record = _record(
        collection,
        draft,
        target.id,
        replacement.id,
        recorded_at=recorded,
        external_refs=[ref.reference for ref in origin.external_refs],
    )
    return CorrectionPlan(replacement=replacement, record=record)
