"""Write plans, validation results, outcomes and repair markers (docs/architecture.md)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import attrs

from charmem.domain import _fields
from charmem.domain._fields import ChoiceEnum, as_tuple
from charmem.domain.ids import MemoryId, as_memory_id
from charmem.domain.model import MemoryLink, MemoryObject, ObjectType
from charmem.domain.surfaces import VectorSurface
from charmem.errors import DraftValidationError

__all__ = [
    "PLAN_FORMAT_VERSION",
    "CandidateValidation",
    "CandidateValidationStatus",
    "CommitOptions",
    "IndexEntry",
    "PrepareOptions",
    "RememberOptions",
    "RememberOutcome",
    "RememberWritePlan",
    "RepairMarker",
    "ValidationWarning",
    "VectorOperation",
    "WarningKind",
]

#: Version of the JSON form of :class:`RememberWritePlan`: 2 tags each belief predicate with its
#: ``"kind"`` (``known_as``, ``actor``, ``counterpart``); 3 lets an episode carry its ``"scene"``.
#: Plans of versions 1 (names only, untagged) and 2 still load.
PLAN_FORMAT_VERSION = 3


@attrs.frozen(kw_only=True)
class PrepareOptions:
    """Options of ``prepare``.

    Attributes:
        now: the instant used for every defaulted timestamp of the plan (default: the clock).
    """

    now: datetime | None = attrs.field(default=None, validator=_fields.aware)


def _positive(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DraftValidationError(f"{attribute.name} must be a positive int", field=attribute.name)


@attrs.frozen(kw_only=True)
class CommitOptions:
    """Options of ``commit``.

    Attributes:
        embed_batch_size: texts per ``embed_documents`` call (count, >= 1), or ``None`` (the
            default) for the provider's ``preferred_batch_size`` (64 when it states none).
    """

    embed_batch_size: int | None = attrs.field(default=None, validator=attrs.validators.optional(_positive))


@attrs.frozen(kw_only=True)
class RememberOptions:
    """Options of ``remember``: those of its prepare and commit steps."""

    prepare: PrepareOptions = attrs.field(
        factory=PrepareOptions, validator=_fields.instance_of(PrepareOptions)
    )
    commit: CommitOptions = attrs.field(factory=CommitOptions, validator=_fields.instance_of(CommitOptions))


@attrs.frozen(kw_only=True)
class IndexEntry:
    """One point the plan puts into candidate recall: an object's surface and the text embedded.

    ``surface`` is :attr:`~charmem.domain.surfaces.VectorSurface.CONTENT` unless the entry is one
    of an episode's scene surfaces (a plan written without it loads as content).
    """

    id: MemoryId = attrs.field(converter=as_memory_id)
    object_type: ObjectType = attrs.field(converter=ObjectType)
    text: str
    surface: VectorSurface = attrs.field(default=VectorSurface.CONTENT, converter=VectorSurface)


def _plan_from_version_1(data: dict[str, Any]) -> dict[str, Any]:
    """A version-1 plan in the current form: its (untagged, name-only) predicates tagged."""
    objects = data.get("objects")
    for obj in objects if isinstance(objects, list) else ():
        assertions = obj.get("assertions") if isinstance(obj, dict) else None
        for assertion in assertions if isinstance(assertions, list) else ():
            predicate = assertion.get("predicate") if isinstance(assertion, dict) else None
            if isinstance(predicate, dict) and "kind" not in predicate:
                predicate["kind"] = "known_as"
    return {**data, "format_version": PLAN_FORMAT_VERSION}


@attrs.frozen(kw_only=True)
class RememberWritePlan:
    """An inspectable plan: what ``commit`` would write. Building it writes nothing.

    Attributes:
        format_version: version of the JSON form (:data:`PLAN_FORMAT_VERSION`).
        collection: the collection the plan was prepared for.
        prepared_at: when ``prepare`` ran (the clock's instant).
        objects: the stored objects to write, in plan order.
        links: caller-authored links.
        derived_links: links commit derives from the objects (``has_observation``, ``involves``,
            ``mentions``, ``derived_from``, ``about``, ``part_of_thread``, ``supersedes``), with
            deterministic ids so replays never duplicate them.
        index_entries: the objects that get a vector and the text embedded for each.
    """

    format_version: int = PLAN_FORMAT_VERSION
    collection: str
    prepared_at: datetime = attrs.field(validator=_fields.aware)
    objects: tuple[MemoryObject, ...] = attrs.field(default=(), converter=as_tuple)
    links: tuple[MemoryLink, ...] = attrs.field(default=(), converter=as_tuple)
    derived_links: tuple[MemoryLink, ...] = attrs.field(default=(), converter=as_tuple)
    index_entries: tuple[IndexEntry, ...] = attrs.field(default=(), converter=as_tuple)

    @property
    def object_ids(self) -> tuple[MemoryId, ...]:
        """Ids of the plan's objects, in plan order."""
        return tuple(obj.id for obj in self.objects)

    def to_json(self) -> str:
        """Serialise the plan to JSON (cattrs, tagged unions, ``format_version``)."""
        from charmem.domain.serde import converter

        return json.dumps(converter.unstructure(self), ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RememberWritePlan:
        """Load a plan written by :meth:`to_json`, possibly in another process.

        Raises:
            DraftValidationError: the JSON is malformed, of an unknown ``format_version``, or
                holds invalid objects.
        """
        from charmem.domain.serde import converter

        if not isinstance(text, str | bytes | bytearray):
            raise DraftValidationError(
                f"a plan's JSON is a str (from to_json()), not {type(text).__name__}", field="plan"
            )
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise DraftValidationError(f"plan JSON is malformed: {exc}", field="plan") from exc
        version = data.get("format_version") if isinstance(data, dict) else None
        if version == 1:
            data = _plan_from_version_1(data)
            version = PLAN_FORMAT_VERSION
        elif version == 2:  # the current form without scenes, which it cannot hold
            data = {**data, "format_version": PLAN_FORMAT_VERSION}
            version = PLAN_FORMAT_VERSION
        if version != PLAN_FORMAT_VERSION:
            raise DraftValidationError(
                f"plan format_version {version!r} is not supported (expected "
                f"{PLAN_FORMAT_VERSION}); re-prepare the plan with this charmem version",
                field="format_version",
            )
        try:
            return converter.structure(data, cls)
        except DraftValidationError:
            raise
        except Exception as exc:
            invalid = _first_draft_error(exc)
            if invalid is not None:  # an object of the plan refused itself: say why
                raise DraftValidationError(
                    f"plan JSON holds an invalid object: {invalid}", field=invalid.field
                ) from exc
            raise DraftValidationError(f"plan JSON does not describe a plan: {exc}", field="plan") from exc


def _first_draft_error(exc: BaseException) -> DraftValidationError | None:
    """The first :class:`DraftValidationError` in ``exc`` or its groups (cattrs wraps them)."""
    if isinstance(exc, DraftValidationError):
        return exc
    for inner in exc.exceptions if isinstance(exc, BaseExceptionGroup) else ():
        found = _first_draft_error(inner)
        if found is not None:
            return found
    return None


class CandidateValidationStatus(ChoiceEnum):
    """Whether a plan candidate may be committed."""

    VALID = "valid"
    INVALID = "invalid"


class WarningKind(ChoiceEnum):
    """What a :class:`ValidationWarning` is about. A warning never refuses a write.

    ``ALREADY_STORED``: the candidate (or, on an outcome, each of ``ids``) was stored already with
    equal content: a replay, accepted. ``DUPLICATE_OBSERVATION_ECHO``: an observation repeats its
    episode's summary (``ids``: the observation, then the episode): the same words will be
    recalled twice. ``RESOLVER_WITHOUT_SHARED_SUBJECT_OR_THREAD``: a ``resolves`` or
    ``fulfills_commitment`` link joins memories that name no common notion and no common thread
    (``ids``: the link, its resolver, its matter): perhaps the wrong matter.
    ``REPEATED_SCENE_PARTICIPANT``: an episode's scene lists one participant twice (same notion
    id, or same name or description once normalised; ``ids``: the episode): one person may
    count twice.
    """

    ALREADY_STORED = "already_stored"
    DUPLICATE_OBSERVATION_ECHO = "duplicate_observation_echo"
    RESOLVER_WITHOUT_SHARED_SUBJECT_OR_THREAD = "resolver_without_shared_subject_or_thread"
    REPEATED_SCENE_PARTICIPANT = "repeated_scene_participant"


_WARNING_TEXT = {
    WarningKind.ALREADY_STORED: "already stored with equal content (a replay)",
    WarningKind.DUPLICATE_OBSERVATION_ECHO: "the observation repeats its episode's summary",
    WarningKind.RESOLVER_WITHOUT_SHARED_SUBJECT_OR_THREAD: (
        "the resolver and the matter it resolves share no notion and no thread"
    ),
    WarningKind.REPEATED_SCENE_PARTICIPANT: "the episode's scene lists one participant twice",
}


def _ids_in_order(values: Iterable[MemoryId | uuid.UUID | str]) -> tuple[MemoryId, ...]:
    return tuple(as_memory_id(value) for value in values)


@attrs.frozen
class ValidationWarning:
    """Something worth knowing about a write that does not block it.

    Attributes:
        kind: what it is about (:class:`WarningKind`).
        ids: the memories (objects or links) concerned, in the order the kind documents.

    ``str(warning)`` reads as a sentence naming the ids.
    """

    kind: WarningKind = attrs.field(converter=WarningKind)
    ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=_ids_in_order)

    def __str__(self) -> str:
        named = f" ({', '.join(str(i) for i in self.ids)})" if self.ids else ""
        return f"{_WARNING_TEXT[self.kind]}{named}"


@attrs.frozen(kw_only=True)
class CandidateValidation:
    """The verdict on one candidate (object or link) of a plan.

    Attributes:
        candidate_id: the object's or link's id.
        kind: ``"episode"``, ``"observation"``, ``"entity"``, ``"thread"``, ``"derived"`` or
            ``"link"``.
        status: VALID or INVALID.
        reasons: why it is invalid (empty when valid).
        warnings: things worth knowing that do not block the commit (:class:`ValidationWarning`).
    """

    candidate_id: MemoryId
    kind: str
    status: CandidateValidationStatus
    reasons: tuple[str, ...] = ()
    warnings: tuple[ValidationWarning, ...] = ()


class VectorOperation(ChoiceEnum):
    """A vector-index write that can fail and be repaired by replay."""

    UPSERT = "upsert"
    DELETE = "delete"


class RepairMarker:
    """Namespace of repairable-write failures reported in outcomes (docs/architecture.md).

    ``RepairMarker.VectorMaintenance(operation, ids, cause)`` and
    ``RepairMarker.StatsMaintenance(ids, cause)``: the graph write succeeded; replaying the same
    plan or lifecycle operation repairs the derived store.
    """

    @attrs.frozen
    class VectorMaintenance:
        """A vector upsert or delete that failed; ``cause`` is the error's text."""

        operation: VectorOperation
        ids: tuple[MemoryId, ...]
        cause: str

    @attrs.frozen
    class StatsMaintenance:
        """A retrieval-stats update that failed; ``cause`` is the error's text."""

        ids: tuple[MemoryId, ...]
        cause: str


RepairMarkerType = RepairMarker.VectorMaintenance | RepairMarker.StatsMaintenance


@attrs.frozen(kw_only=True)
class RememberOutcome:
    """What a commit wrote.

    The ids of the plan's objects are also named by role, each in plan order, so a caller keeps
    the episode and the utterance of a ``remember(RememberInput(...))`` without counting
    positions (``outcome.episode_ids[0]``, ``outcome.observation_ids[0]``).

    Attributes:
        object_ids: ids of the plan's objects, now stored (new or already equal), in plan order.
        link_ids: ids of caller and derived links, now stored.
        repair_markers: repairable writes that failed; empty when vectors and stats are in step.
        warnings: things worth knowing that did not block the write (:class:`ValidationWarning`):
            the ids stored already with equal content (one ``ALREADY_STORED`` warning naming
            them, in plan order), then the plan's other validation warnings.
        episode_ids: the episodes among ``object_ids``.
        observation_ids: the observations among ``object_ids``.
        derived_ids: the derived memories (beliefs) among ``object_ids``.
        entity_ids: the notions among ``object_ids``.
        thread_ids: the threads among ``object_ids``.
    """

    object_ids: tuple[MemoryId, ...] = ()
    link_ids: tuple[MemoryId, ...] = ()
    repair_markers: tuple[RepairMarkerType, ...] = ()
    warnings: tuple[ValidationWarning, ...] = ()
    episode_ids: tuple[MemoryId, ...] = ()
    observation_ids: tuple[MemoryId, ...] = ()
    derived_ids: tuple[MemoryId, ...] = ()
    entity_ids: tuple[MemoryId, ...] = ()
    thread_ids: tuple[MemoryId, ...] = ()
