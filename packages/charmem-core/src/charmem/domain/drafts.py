"""Drafts: what a caller authors before charmem turns it into stored objects (``prepare``).

Every draft is a frozen attrs class built with keyword arguments (the first one or two fields may be
positional) and changed with ``attrs.evolve``. Optional ``id`` and ``created_at`` are filled by
``prepare``: a fresh id and the clock's time. Callers who want idempotent re-runs pass both.

Raises (at construction):
    DraftValidationError: a naive datetime, blank text, salience outside [0, 1], a non-UUID id.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs

from charmem.domain import _fields
from charmem.domain._fields import id_set, optional_id
from charmem.domain.ids import MemoryId, as_memory_id
from charmem.domain.model import BeliefAssertion, DerivedType, Relation, ThreadStatus, _assertions
from charmem.domain.scene import Scene, episode_time
from charmem.errors import DraftValidationError

__all__ = [
    "DerivedMemoryDraft",
    "EntityDraft",
    "EpisodeDraft",
    "LinkDraft",
    "ObservationDraft",
    "RememberDrafts",
    "RememberInput",
    "ThreadDraft",
]


def _drafts_of(kind: type) -> Any:
    def check(_instance: object, attribute: attrs.Attribute[Any], values: tuple[Any, ...]) -> None:
        for value in values:
            if not isinstance(value, kind):
                raise DraftValidationError(
                    f"{attribute.name} must hold {kind.__name__} values, not {type(value).__name__}",
                    field=attribute.name,
                )

    return check


def _sequence(values: Any) -> tuple[Any, ...]:
    if values is None:
        return ()
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise DraftValidationError(
            f"expected a sequence of drafts, got {type(values).__name__}", field="drafts"
        )
    return tuple(values)


@attrs.frozen(kw_only=True)
class EpisodeDraft:
    """A remembered event to store. ``occurred_at`` defaults to the scene's ``at``, else the clock's now.

    Raises:
        DraftValidationError: ``occurred_at`` and ``scene.at`` are both given and differ in
            instant or UTC offset (:func:`~charmem.domain.scene.episode_time`), here or in
            ``attrs.evolve``.
    """

    summary: str = attrs.field(default="", converter=_fields.empty_if_none, validator=_fields.plain)
    occurred_at: datetime | None = attrs.field(default=None, validator=_fields.aware)
    id: MemoryId | None = attrs.field(default=None, converter=optional_id)
    participant_entity_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set)
    thread_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set)
    raw_ref: str | None = attrs.field(default=None, validator=_fields.plain)
    salience: float | None = attrs.field(default=None, validator=_fields.salience)
    created_at: datetime | None = attrs.field(default=None, validator=_fields.aware)
    scene: Scene | None = attrs.field(
        default=None, validator=attrs.validators.optional(_fields.instance_of(Scene))
    )

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "occurred_at", episode_time(self.occurred_at, self.scene))


@attrs.frozen(kw_only=True)
class ObservationDraft:
    """A part of an episode (a turn). ``episode_id`` names an episode in the plan or the store."""

    text: str = attrs.field(validator=_fields.text)
    episode_id: MemoryId = attrs.field(converter=as_memory_id)
    observed_at: datetime | None = attrs.field(default=None, validator=_fields.aware)
    id: MemoryId | None = attrs.field(default=None, converter=optional_id)
    speaker_entity_id: MemoryId | None = attrs.field(default=None, converter=optional_id)
    mentioned_entity_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set)
    raw_ref: str | None = attrs.field(default=None, validator=_fields.plain)
    salience: float | None = attrs.field(default=None, validator=_fields.salience)
    created_at: datetime | None = attrs.field(default=None, validator=_fields.aware)


@attrs.frozen(kw_only=True)
class EntityDraft:
    """A notion: an id and a free-form type (``"person"``, ``"place"``). It has no name."""

    id: MemoryId | None = attrs.field(default=None, converter=optional_id)
    entity_type: str = attrs.field(default="notion", validator=_fields.text)
    created_at: datetime | None = attrs.field(default=None, validator=_fields.aware)


@attrs.frozen(kw_only=True)
class ThreadDraft:
    """A soft grouping (a project, an arc) with a title."""

    title: str = attrs.field(validator=_fields.text)
    summary: str = attrs.field(default="", converter=_fields.empty_if_none, validator=_fields.plain)
    status: ThreadStatus = attrs.field(default=ThreadStatus.ACTIVE, converter=ThreadStatus)
    id: MemoryId | None = attrs.field(default=None, converter=optional_id)
    created_at: datetime | None = attrs.field(default=None, validator=_fields.aware)


@attrs.frozen
class DerivedMemoryDraft:
    """An interpreted memory: ``DerivedMemoryDraft(DerivedType.REFLECTION, "text", ...)``.

    A derived memory must be grounded on ``episode_ids`` / ``observation_ids`` or declared
    ``given_by_application=True`` with at least one notion in ``entity_ids`` and no sources
    (docs/concepts/memory-model.md, "Names are beliefs"); ``prepare`` attaches the convenience episode and
    observation of a :class:`RememberInput` as sources unless the draft names its own or is given.
    """

    derived_type: DerivedType = attrs.field(converter=DerivedType)
    text: str = attrs.field(validator=_fields.text)
    id: MemoryId | None = attrs.field(default=None, converter=optional_id, kw_only=True)
    entity_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set, kw_only=True)
    assertions: tuple[BeliefAssertion, ...] = attrs.field(default=(), converter=_assertions, kw_only=True)
    given_by_application: bool = attrs.field(default=False, validator=_fields.boolean, kw_only=True)
    supersedes: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set, kw_only=True)
    episode_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set, kw_only=True)
    observation_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set, kw_only=True)
    thread_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set, kw_only=True)
    salience: float | None = attrs.field(default=None, validator=_fields.salience, kw_only=True)
    created_at: datetime | None = attrs.field(default=None, validator=_fields.aware, kw_only=True)

    @property
    def has_sources(self) -> bool:
        """Whether the draft names source episodes or observations."""
        return bool(self.episode_ids or self.observation_ids)


@attrs.frozen
class LinkDraft:
    """A caller-authored relation: ``LinkDraft(from_id, Relation.SUPPORTS, to_id)``.

    ``supersedes`` links are never caller-authored (commit and ``correct`` derive them).
    ``recorded_at`` defaults to the clock's now and becomes the link's ``created_at``.
    """

    from_id: MemoryId = attrs.field(converter=as_memory_id)
    relation: Relation = attrs.field(converter=Relation)
    to_id: MemoryId = attrs.field(converter=as_memory_id)
    id: MemoryId | None = attrs.field(default=None, converter=optional_id, kw_only=True)
    rationale: str | None = attrs.field(default=None, validator=_fields.plain, kw_only=True)
    recorded_at: datetime | None = attrs.field(default=None, validator=_fields.aware, kw_only=True)


@attrs.frozen
class RememberInput:
    """The convenience path: one episode plus one observation of ``text``.

    ``RememberInput("text", occurred_at=...)``; attach interpretations with
    :meth:`with_derived_memory` and the occasion with :meth:`with_scene`. The episode gets its own
    vector only when ``summary`` is given and differs from ``text`` (no echo duplicates).
    ``occurred_at`` defaults to the scene's ``at``, else the clock's now.

    Raises:
        DraftValidationError: ``occurred_at`` and ``scene.at`` are both given and differ in
            instant or UTC offset (:func:`~charmem.domain.scene.episode_time`), here, in
            :meth:`with_scene` or in ``attrs.evolve``.
    """

    text: str = attrs.field(validator=_fields.text)
    occurred_at: datetime | None = attrs.field(default=None, validator=_fields.aware, kw_only=True)
    summary: str | None = attrs.field(default=None, validator=_fields.plain, kw_only=True)
    speaker_entity_id: MemoryId | None = attrs.field(default=None, converter=optional_id, kw_only=True)
    participant_entity_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set, kw_only=True)
    mentioned_entity_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set, kw_only=True)
    thread_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set, kw_only=True)
    raw_ref: str | None = attrs.field(default=None, validator=_fields.plain, kw_only=True)
    salience: float | None = attrs.field(default=None, validator=_fields.salience, kw_only=True)
    episode_id: MemoryId | None = attrs.field(default=None, converter=optional_id, kw_only=True)
    observation_id: MemoryId | None = attrs.field(default=None, converter=optional_id, kw_only=True)
    created_at: datetime | None = attrs.field(default=None, validator=_fields.aware, kw_only=True)
    derived: tuple[DerivedMemoryDraft, ...] = attrs.field(
        default=(), converter=_sequence, validator=_drafts_of(DerivedMemoryDraft), kw_only=True
    )
    scene: Scene | None = attrs.field(
        default=None, validator=attrs.validators.optional(_fields.instance_of(Scene)), kw_only=True
    )

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "occurred_at", episode_time(self.occurred_at, self.scene))

    def with_scene(self, scene: Scene) -> RememberInput:
        """Return a copy whose episode happens in ``scene`` (its ``at`` is the episode's time).

        A time that came with the scene this input already has moves to the new scene's ``at``;
        an ``occurred_at`` of its own must agree with it.

        Raises:
            DraftValidationError: this input's own ``occurred_at`` differs from ``scene.at``.
        """
        own = self.occurred_at if self.scene is None else None
        return attrs.evolve(self, scene=scene, occurred_at=own)

    def with_derived_memory(self, draft: DerivedMemoryDraft) -> RememberInput:
        """Return a copy with ``draft`` attached (grounded on this input unless given/sourced)."""
        return attrs.evolve(self, derived=(*self.derived, draft))


@attrs.frozen(kw_only=True)
class RememberDrafts:
    """The explicit path: any mix of drafts with caller ids and timestamps.

    A notion and its given name with no episode at all, or a whole session with its turns.
    """

    episodes: tuple[EpisodeDraft, ...] = attrs.field(
        default=(), converter=_sequence, validator=_drafts_of(EpisodeDraft)
    )
    observations: tuple[ObservationDraft, ...] = attrs.field(
        default=(), converter=_sequence, validator=_drafts_of(ObservationDraft)
    )
    entities: tuple[EntityDraft, ...] = attrs.field(
        default=(), converter=_sequence, validator=_drafts_of(EntityDraft)
    )
    threads: tuple[ThreadDraft, ...] = attrs.field(
        default=(), converter=_sequence, validator=_drafts_of(ThreadDraft)
    )
    derived: tuple[DerivedMemoryDraft, ...] = attrs.field(
        default=(), converter=_sequence, validator=_drafts_of(DerivedMemoryDraft)
    )
    links: tuple[LinkDraft, ...] = attrs.field(
        default=(), converter=_sequence, validator=_drafts_of(LinkDraft)
    )

    def __len__(self) -> int:
        return (
            len(self.episodes)
            + len(self.observations)
            + len(self.entities)
            + len(self.threads)
            + len(self.derived)
            + len(self.links)
        )
