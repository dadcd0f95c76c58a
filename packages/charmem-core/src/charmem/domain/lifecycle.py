"""Lifecycle drafts and outcomes: correct, forget, link (docs/concepts/lifecycle.md).

Every lifecycle operation appends: a correction adds a replacement that supersedes its target, a
forget adds suppression records, a link adds a link. Nothing is rewritten or deleted.
"""

from __future__ import annotations

from datetime import datetime

import attrs

from charmem.domain import _fields
from charmem.domain._fields import ChoiceEnum, id_set, optional_id
from charmem.domain.ids import MemoryId, as_memory_id
from charmem.domain.model import BeliefAssertion, DerivedType, MemoryLink, _assertions
from charmem.domain.plan import RepairMarkerType

__all__ = [
    "CorrectMemoryDraft",
    "CorrectionTarget",
    "CorrectionTargetKind",
    "ExternalSourceReference",
    "ForgetMemoryDraft",
    "LifecycleMutationOutcome",
    "LinkOutcome",
    "ReplacementDerivedMemoryDraft",
    "SourceProvenanceReference",
]


class CorrectionTargetKind(ChoiceEnum):
    """What a correction addresses."""

    DERIVED_MEMORY = "derived_memory"
    SOURCE_OBJECT = "source_object"


@attrs.frozen
class CorrectionTarget:
    """The memory a correction replaces.

    ``CorrectionTarget.derived_memory(id)`` for a belief, ``CorrectionTarget.source_object(id)``
    for an episode or observation.
    """

    kind: CorrectionTargetKind = attrs.field(converter=CorrectionTargetKind)
    id: MemoryId = attrs.field(converter=as_memory_id)

    @classmethod
    def derived_memory(cls, memory_id: MemoryId | str) -> CorrectionTarget:
        """Target a derived memory (a belief, possibly a given one)."""
        return cls(CorrectionTargetKind.DERIVED_MEMORY, memory_id)

    @classmethod
    def source_object(cls, memory_id: MemoryId | str) -> CorrectionTarget:
        """Target an episode or observation (kept as provenance, superseded)."""
        return cls(CorrectionTargetKind.SOURCE_OBJECT, memory_id)


@attrs.frozen
class ExternalSourceReference:
    """An opaque pointer to evidence outside the memory, e.g. ``"application:name-change"``.

    Build with ``ExternalSourceReference.source("application:name-change")``.
    """

    reference: str = attrs.field(validator=_fields.text)

    @classmethod
    def source(cls, reference: str) -> ExternalSourceReference:
        """An external source reference (non-blank, kept as given)."""
        return cls(reference)


def _external_refs(values: object) -> tuple[ExternalSourceReference, ...]:
    if values is None:
        return ()
    items = []
    for value in _fields.items_of(values, "external references", "external_refs"):
        items.append(value if isinstance(value, ExternalSourceReference) else ExternalSourceReference(value))
    return tuple(sorted(set(items), key=lambda ref: ref.reference))


@attrs.frozen(kw_only=True)
class SourceProvenanceReference:
    """Where a correction comes from: experiences in the memory and/or external references."""

    episode_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set)
    observation_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set)
    external_refs: tuple[ExternalSourceReference, ...] = attrs.field(default=(), converter=_external_refs)

    @property
    def is_empty(self) -> bool:
        """No ids and no external references."""
        return not (self.episode_ids or self.observation_ids or self.external_refs)

    @property
    def source_ids(self) -> tuple[MemoryId, ...]:
        """Episode and observation ids together, sorted."""
        return tuple(sorted({*self.episode_ids, *self.observation_ids}))

    def merged(self, other: SourceProvenanceReference | None) -> SourceProvenanceReference:
        """The union of two provenance references."""
        if other is None:
            return self
        return SourceProvenanceReference(
            episode_ids=(*self.episode_ids, *other.episode_ids),
            observation_ids=(*self.observation_ids, *other.observation_ids),
            external_refs=(*self.external_refs, *other.external_refs),
        )


@attrs.frozen
class ReplacementDerivedMemoryDraft:
    """The belief that replaces a corrected target.

    ``ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "The name is Carol.", entity_ids=...,
    assertions=..., given_by_application=..., correction_origin_provenance=...)``. The text may be
    checked blank only by ``correct`` (``EMPTY_REPLACEMENT_TEXT``). When ``id`` is omitted,
    ``correct`` derives it from the target id and this draft's authored content, so replaying a
    correction never creates a second replacement.
    """

    derived_type: DerivedType = attrs.field(converter=DerivedType)
    text: str = attrs.field(validator=_fields.plain)
    id: MemoryId | None = attrs.field(default=None, converter=optional_id, kw_only=True)
    entity_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set, kw_only=True)
    thread_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set, kw_only=True)
    assertions: tuple[BeliefAssertion, ...] = attrs.field(default=(), converter=_assertions, kw_only=True)
    given_by_application: bool = attrs.field(default=False, validator=_fields.boolean, kw_only=True)
    correction_origin_provenance: SourceProvenanceReference | None = attrs.field(
        default=None,
        validator=attrs.validators.optional(_fields.instance_of(SourceProvenanceReference)),
        kw_only=True,
    )
    salience: float | None = attrs.field(default=None, validator=_fields.salience, kw_only=True)
    created_at: datetime | None = attrs.field(default=None, validator=_fields.aware, kw_only=True)


@attrs.frozen
class CorrectMemoryDraft:
    """``CorrectMemoryDraft(CorrectionTarget.derived_memory(id), "rationale")``.

    Attributes:
        target: what is corrected.
        rationale: why (never blank).
        replacement: the replacing belief; without one a default replacement (``correction``,
            text = rationale) is grounded as the correction table says
            (:mod:`charmem.domain.correction`).
        correction_origin: the evidence for the correction (``None``: none given; an empty
            reference is an error).
        recorded_at: record time of the correction (default: the clock); not before the target's
            ``created_at``, not beyond ``RECORDED_AT_SKEW`` ahead of the clock (refused with
            ``RECORDED_BEFORE_TARGET`` / ``RECORDED_IN_FUTURE``).
    """

    target: CorrectionTarget = attrs.field(validator=_fields.instance_of(CorrectionTarget))
    rationale: str = attrs.field(validator=_fields.plain)
    replacement: ReplacementDerivedMemoryDraft | None = attrs.field(
        default=None,
        validator=attrs.validators.optional(_fields.instance_of(ReplacementDerivedMemoryDraft)),
        kw_only=True,
    )
    correction_origin: SourceProvenanceReference | None = attrs.field(
        default=None,
        validator=attrs.validators.optional(_fields.instance_of(SourceProvenanceReference)),
        kw_only=True,
    )
    recorded_at: datetime | None = attrs.field(default=None, validator=_fields.aware, kw_only=True)

    def with_replacement(self, replacement: ReplacementDerivedMemoryDraft) -> CorrectMemoryDraft:
        """A copy with ``replacement`` set."""
        return attrs.evolve(self, replacement=replacement)


@attrs.frozen(kw_only=True)
class ForgetMemoryDraft:
    """A forget: suppress a memory (and by default its parts and what was derived from them).

    Build with :meth:`suppress`.

    Attributes:
        target_id: the memory to forget.
        rationale: why (never blank).
        apply_to_derived_from_target: also suppress the derived memories grounded on the target
            (and, for an episode whose parts are forgotten with it, on those parts).
        apply_to_thread_members: for a thread, also suppress its derived members.
        apply_to_episode_observations: for an episode, also suppress its observations (its parts,
            reached by ``has_observation``): forgetting what happened forgets what was said.
        recorded_at: record time (default: the clock).
    """

    target_id: MemoryId = attrs.field(converter=as_memory_id)
    rationale: str = attrs.field(validator=_fields.plain)
    apply_to_derived_from_target: bool = attrs.field(default=True, validator=_fields.boolean)
    apply_to_thread_members: bool = attrs.field(default=False, validator=_fields.boolean)
    apply_to_episode_observations: bool = attrs.field(default=True, validator=_fields.boolean)
    recorded_at: datetime | None = attrs.field(default=None, validator=_fields.aware)

    @classmethod
    def suppress(
        cls,
        target_id: MemoryId | str,
        rationale: str,
        *,
        apply_to_derived_from_target: bool = True,
        apply_to_thread_members: bool = False,
        recorded_at: datetime | None = None,
        apply_to_episode_observations: bool = True,
    ) -> ForgetMemoryDraft:
        """Suppress ``target_id`` for ``rationale``.

        Args:
            target_id: the memory to forget.
            rationale: why (never blank).
            apply_to_derived_from_target: also suppress derived memories grounded on the target
                (and on the parts of an episode forgotten with it).
            apply_to_thread_members: for a thread, also suppress its derived members.
            recorded_at: record time (default: the clock).
            apply_to_episode_observations: for an episode, also suppress its observations.
        """
        return cls(
            target_id=as_memory_id(target_id),
            rationale=rationale,
            apply_to_derived_from_target=apply_to_derived_from_target,
            apply_to_thread_members=apply_to_thread_members,
            recorded_at=recorded_at,
            apply_to_episode_observations=apply_to_episode_observations,
        )


@attrs.frozen(kw_only=True)
class LifecycleMutationOutcome:
    """What a correct or forget changed.

    Attributes:
        graph_mutated_object_ids: objects whose state changed (targets, cascaded members, new
            replacements), sorted.
        replacement_ids: the replacements a correction created (persist these), sorted.
        link_ids: links written (``supersedes``, ``derived_from``, ``about``...), sorted.
        repair_markers: repairable vector or stats writes that failed.
    """

    graph_mutated_object_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set)
    replacement_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set)
    link_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set)
    repair_markers: tuple[RepairMarkerType, ...] = ()


@attrs.frozen(kw_only=True)
class LinkOutcome:
    """What ``link`` wrote: the link (with its id) and any repair markers."""

    link: MemoryLink
    repair_markers: tuple[RepairMarkerType, ...] = ()
