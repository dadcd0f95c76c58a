"""The memory model: object types, relations and stored objects.

Stored objects are immutable; their authored fields are their *content* and never change once
committed. State changes are separate lifecycle records (:mod:`charmem.domain.graph`). Id
collections are kept de-duplicated and sorted because their order carries no meaning (content
equality, :func:`charmem.domain.rules.content_equal`, never compares order).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TypeAlias

import attrs

from charmem.domain import _fields
from charmem.domain._fields import ChoiceEnum, as_float, id_set, optional_id
from charmem.domain.ids import MemoryId, as_memory_id
from charmem.domain.scene import Scene, episode_time
from charmem.errors import DraftValidationError

__all__ = [
    "PREDICATE_TAGS",
    "Actor",
    "BeliefAssertion",
    "BeliefPredicate",
    "Counterpart",
    "DerivedMemory",
    "DerivedType",
    "Entity",
    "Episode",
    "KnownAs",
    "MemoryLink",
    "MemoryObject",
    "MemoryThread",
    "ObjectType",
    "Observation",
    "Relation",
    "ThreadStatus",
    "known_names",
    "object_type_of",
]


class ObjectType(ChoiceEnum):
    """The kind of a memory object. A link is not an object type (it is never an endpoint)."""

    EPISODE = "episode"
    OBSERVATION = "observation"
    ENTITY = "entity"
    THREAD = "thread"
    DERIVED = "derived"


class Relation(ChoiceEnum):
    """Typed relations between memory objects (plan validation checks each one's endpoint types)."""

    HAS_OBSERVATION = "has_observation"
    INVOLVES = "involves"
    MENTIONS = "mentions"
    DERIVED_FROM = "derived_from"
    ABOUT = "about"
    PART_OF_THREAD = "part_of_thread"
    SUPERSEDES = "supersedes"
    SUPPORTS = "supports"
    CONTRADICTS = "contradicts"
    RESOLVES = "resolves"
    CREATES_OPEN_LOOP = "creates_open_loop"
    FULFILLS_COMMITMENT = "fulfills_commitment"
    ASSOCIATED_WITH = "associated_with"


class DerivedType(ChoiceEnum):
    """What an interpreted (derived) memory is."""

    REFLECTION = "reflection"
    USER_PREFERENCE = "user_preference"
    ASSISTANT_PREFERENCE = "assistant_preference"
    COMMITMENT = "commitment"
    OPEN_LOOP = "open_loop"
    CHARACTER_SIGNAL = "character_signal"
    RELATIONSHIP_NOTE = "relationship_note"
    PROJECT_NOTE = "project_note"
    CLAIM = "claim"
    CORRECTION = "correction"


class ThreadStatus(ChoiceEnum):
    """The status a thread is created with."""

    ACTIVE = "active"
    DORMANT = "dormant"
    RESOLVED = "resolved"


def _known_as_name(_instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    _fields.text(_instance, attribute, value)


@attrs.frozen
class KnownAs:
    """A belief predicate: the subject notion is known by ``name``.

    The name is kept exactly as spelled; matching ignores case, width and spacing
    (see :func:`charmem.domain.rules.normalise_name`).

    Raises:
        DraftValidationError: the name is blank.
    """

    name: str = attrs.field(validator=_known_as_name)


@attrs.frozen
class Actor:
    """An obligation role: the subject notion is who owes (does the promised or awaited thing).

    Only on ``commitment`` and ``open_loop`` derived memories, and never with :class:`Counterpart`
    for the same subject of one memory (:func:`charmem.domain.rules.belief_breaches`).
    """


@attrs.frozen
class Counterpart:
    """An obligation role: the subject notion is the party owed (to whom it is promised).

    Same restrictions as :class:`Actor`.
    """


#: What a :class:`BeliefAssertion` may assert of its subject.
BeliefPredicate = KnownAs | Actor | Counterpart

#: The tag of each predicate type (plan JSON, canonical order).
PREDICATE_TAGS: dict[type, str] = {KnownAs: "known_as", Actor: "actor", Counterpart: "counterpart"}


@attrs.frozen(order=False)
class BeliefAssertion:
    """The character's own commitment that ``predicate`` holds of the notion ``subject``."""

    subject: MemoryId = attrs.field(converter=as_memory_id)
    predicate: BeliefPredicate = attrs.field(validator=_fields.instance_of(KnownAs, Actor, Counterpart))

    def sort_key(self) -> tuple[str, str, str]:
        """Canonical order: subject, predicate kind, name (empty for a role)."""
        name = self.predicate.name if isinstance(self.predicate, KnownAs) else ""
        return (str(self.subject), PREDICATE_TAGS[type(self.predicate)], name)


def known_names(assertions: Iterable[BeliefAssertion]) -> list[tuple[MemoryId, str]]:
    """The ``(subject, name)`` of each :class:`KnownAs` assertion, in order (roles left out)."""
    return [(a.subject, a.predicate.name) for a in assertions if isinstance(a.predicate, KnownAs)]


def _assertions(values: object) -> tuple[BeliefAssertion, ...]:
    if values is None:
        return ()
    if not isinstance(values, (list, tuple)):
        raise DraftValidationError("assertions must be a sequence of BeliefAssertion", field="assertions")
    for value in values:
        if not isinstance(value, BeliefAssertion):
            raise DraftValidationError(
                f"assertions must hold BeliefAssertion values, not {type(value).__name__}",
                field="assertions",
            )
    return tuple(sorted(set(values), key=BeliefAssertion.sort_key))


@attrs.frozen(kw_only=True)
class Episode:
    """A remembered event or interaction.

    Attributes:
        id: unique across all object types.
        occurred_at: when it happened (event time, timezone-aware).
        summary: what happened, possibly empty when the observations carry the text.
        participant_entity_ids: notions that took part (sorted, unique).
        thread_ids: threads it belongs to (sorted, unique).
        raw_ref: an opaque caller pointer to the raw source, never resolved by charmem.
        salience: importance in [0, 1].
        created_at: when it was recorded (record time).
        schema_version: the object schema version it was written with.
        scene: the occasion (its ``at`` is ``occurred_at``), or ``None``.

    Raises:
        DraftValidationError: ``scene.at`` differs from ``occurred_at`` in instant or UTC offset
            (:func:`~charmem.domain.scene.episode_time`), e.g. in a hand-edited plan.
    """

    id: MemoryId = attrs.field(converter=as_memory_id)
    occurred_at: datetime = attrs.field(validator=_fields.aware)
    summary: str = attrs.field(default="", converter=_fields.empty_if_none, validator=_fields.plain)
    participant_entity_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set)
    thread_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set)
    raw_ref: str | None = attrs.field(default=None, validator=_fields.plain)
    salience: float = attrs.field(default=0.5, converter=as_float, validator=_fields.salience)
    created_at: datetime = attrs.field(validator=_fields.aware)
    schema_version: int = _fields.SCHEMA_VERSION
    scene: Scene | None = attrs.field(
        default=None, validator=attrs.validators.optional(_fields.instance_of(Scene))
    )

    object_type = ObjectType.EPISODE

    def __attrs_post_init__(self) -> None:
        episode_time(self.occurred_at, self.scene)

    @property
    def involved_entity_ids(self) -> tuple[MemoryId, ...]:
        """The notions it involves: its participants and its scene's participants given by id.

        Returns:
            tuple[MemoryId, ...]: sorted, unique (one ``involves`` link each).
        """
        if self.scene is None:
            return self.participant_entity_ids
        return tuple(sorted({*self.participant_entity_ids, *self.scene.participant_entity_ids}))


@attrs.frozen(kw_only=True)
class Observation:
    """A part of an episode: a turn, an utterance, a perceived detail.

    Attributes:
        id: unique across all object types.
        episode_id: the episode it belongs to.
        text: what was observed (byte-identical on read-back).
        observed_at: when it happened (event time, timezone-aware).
        speaker_entity_id: the notion who said it, if any.
        mentioned_entity_ids: notions it mentions (sorted, unique).
        raw_ref: an opaque caller pointer to the raw source.
        salience: importance in [0, 1].
        created_at: when it was recorded.
        schema_version: the object schema version it was written with.
    """

    id: MemoryId = attrs.field(converter=as_memory_id)
    episode_id: MemoryId = attrs.field(converter=as_memory_id)
    text: str = attrs.field(validator=_fields.text)
    observed_at: datetime = attrs.field(validator=_fields.aware)
    speaker_entity_id: MemoryId | None = attrs.field(default=None, converter=optional_id)
    mentioned_entity_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set)
    raw_ref: str | None = attrs.field(default=None, validator=_fields.plain)
    salience: float = attrs.field(default=0.5, converter=as_float, validator=_fields.salience)
    created_at: datetime = attrs.field(validator=_fields.aware)
    schema_version: int = _fields.SCHEMA_VERSION

    object_type = ObjectType.OBSERVATION


@attrs.frozen(kw_only=True)
class Entity:
    """A notion the character holds: no name, no vector. Names are beliefs about it."""

    id: MemoryId = attrs.field(converter=as_memory_id)
    entity_type: str = attrs.field(default="notion", validator=_fields.text)
    created_at: datetime = attrs.field(validator=_fields.aware)
    schema_version: int = _fields.SCHEMA_VERSION

    object_type = ObjectType.ENTITY


@attrs.frozen(kw_only=True)
class MemoryThread:
    """A soft grouping of episodes and derived memories (a project, an arc)."""

    id: MemoryId = attrs.field(converter=as_memory_id)
    title: str = attrs.field(validator=_fields.text)
    summary: str = attrs.field(default="", converter=_fields.empty_if_none, validator=_fields.plain)
    status: ThreadStatus = attrs.field(default=ThreadStatus.ACTIVE, converter=ThreadStatus)
    created_at: datetime = attrs.field(validator=_fields.aware)
    schema_version: int = _fields.SCHEMA_VERSION

    object_type = ObjectType.THREAD


@attrs.frozen(kw_only=True)
class DerivedMemory:
    """An interpreted memory: a belief grounded on sources or given by the application.

    Attributes:
        derived_type: what kind of interpretation it is.
        text: the belief as text.
        episode_ids, observation_ids: the source experiences it is grounded on.
        entity_ids: the notions it is about (its subjects).
        thread_ids: threads it belongs to.
        assertions: :class:`BeliefAssertion` values (``KnownAs`` names) about subjects in
            ``entity_ids``, in canonical order.
        given_by_application: the application gives this belief without sources.
        supersedes: derived memories this one replaces (commit derives ``supersedes`` links).
        salience: importance in [0, 1].
        created_at: when it was recorded.
    """

    id: MemoryId = attrs.field(converter=as_memory_id)
    derived_type: DerivedType = attrs.field(converter=DerivedType)
    text: str = attrs.field(validator=_fields.text)
    episode_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set)
    observation_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set)
    entity_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set)
    thread_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set)
    assertions: tuple[BeliefAssertion, ...] = attrs.field(default=(), converter=_assertions)
    given_by_application: bool = attrs.field(default=False, validator=_fields.boolean)
    supersedes: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set)
    salience: float = attrs.field(default=0.5, converter=as_float, validator=_fields.salience)
    created_at: datetime = attrs.field(validator=_fields.aware)
    schema_version: int = _fields.SCHEMA_VERSION

    object_type = ObjectType.DERIVED

    @property
    def source_ids(self) -> tuple[MemoryId, ...]:
        """Episode and observation sources together, sorted."""
        return tuple(sorted({*self.episode_ids, *self.observation_ids}))


@attrs.frozen(kw_only=True)
class MemoryLink:
    """A typed relation between two memory objects; it has its own id and is never an endpoint."""

    id: MemoryId = attrs.field(converter=as_memory_id)
    from_id: MemoryId = attrs.field(converter=as_memory_id)
    relation: Relation = attrs.field(converter=Relation)
    to_id: MemoryId = attrs.field(converter=as_memory_id)
    created_at: datetime = attrs.field(validator=_fields.aware)
    rationale: str | None = attrs.field(default=None, validator=_fields.plain)
    schema_version: int = _fields.SCHEMA_VERSION


MemoryObject: TypeAlias = Episode | Observation | Entity | MemoryThread | DerivedMemory

_TYPES: dict[type, ObjectType] = {
    Episode: ObjectType.EPISODE,
    Observation: ObjectType.OBSERVATION,
    Entity: ObjectType.ENTITY,
    MemoryThread: ObjectType.THREAD,
    DerivedMemory: ObjectType.DERIVED,
}


def object_type_of(obj: MemoryObject) -> ObjectType:
    """Return the :class:`ObjectType` of a stored object."""
    return _TYPES[type(obj)]
