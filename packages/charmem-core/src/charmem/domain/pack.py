"""What a context pack is made of: items, notions, omissions, currency and recall completeness.

Also the rules that turn a memory into an item: when it happened (:func:`event_time`), its text,
its provenance, the notions it involves and the pack section it is listed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

import attrs

from charmem.domain._fields import ChoiceEnum
from charmem.domain.context import SECTION_OF_DERIVED_TYPE, SETTLED_SECTION
from charmem.domain.ids import MemoryId
from charmem.domain.model import (
    DerivedMemory,
    DerivedType,
    Episode,
    MemoryObject,
    MemoryThread,
    ObjectType,
    Observation,
    ThreadStatus,
)

__all__ = [
    "DUPLICATE_TEXT",
    "NOT_IN_GRAPH",
    "AdmissionRoad",
    "CompletenessKind",
    "CurrencyStatus",
    "ItemTrace",
    "LastInteraction",
    "ObligationDirection",
    "Omission",
    "PackEntity",
    "PackItem",
    "SceneResolution",
    "SceneResolutionStatus",
    "VectorRecallCompleteness",
    "entities_of",
    "event_time",
    "item_text",
    "provenance_of",
    "seconds_since_support",
    "section_of",
    "support_time",
]


class CurrencyStatus(ChoiceEnum):
    """A memory's currency: current, superseded (incoming ``supersedes``) or suppressed."""

    CURRENT = "current"
    SUPERSEDED = "superseded"
    SUPPRESSED = "suppressed"


class CompletenessKind(ChoiceEnum):
    """How complete candidate recall was."""

    NOT_REQUESTED = "not_requested"
    EXHAUSTIVE = "exhaustive"
    APPROXIMATE = "approximate"


@attrs.frozen
class VectorRecallCompleteness:
    """Candidate recall completeness: ``kind`` plus the points scanned and fetched (counts)."""

    kind: CompletenessKind = attrs.field(converter=CompletenessKind)
    scanned: int | None = None
    fetched: int | None = None


class AdmissionRoad(ChoiceEnum):
    """A road that brought a memory to mind (:attr:`PackItem.admitted_by`).

    ``PARTICIPANT``: a scene participant known by id or current name (occasions they were at,
    what is held about them). ``PLACE``: the scene's setting key or a custom value. ``ACTIVITY``:
    the context's activity (a thread's members, an open loop's sources). ``TOPIC``: the query.
    ``PERSON_DESCRIPTION`` and ``SETTING_WORDS``: occasions whose participants or setting were
    described alike. ``RANGE``: an occasion inside the context's ``time_range``. ``ANNIVERSARY``:
    the same local month and day in an earlier year. ``RECENCY``: a recent occasion at or before
    the reference time.
    """

    PARTICIPANT = "participant"
    PLACE = "place"
    ACTIVITY = "activity"
    TOPIC = "topic"
    PERSON_DESCRIPTION = "person_description"
    SETTING_WORDS = "setting_words"
    RANGE = "range"
    ANNIVERSARY = "anniversary"
    RECENCY = "recency"


class ObligationDirection(ChoiceEnum):
    """Who owes in an obligation, relative to the character (:attr:`PackItem.direction`)."""

    OWED_BY_CHARACTER = "owed_by_character"
    OWED_TO_CHARACTER = "owed_to_character"


class SceneResolutionStatus(ChoiceEnum):
    """How a scene participant reference resolved: to one notion, to several, or to none."""

    RESOLVED = "resolved"
    AMBIGUOUS = "ambiguous"
    UNKNOWN = "unknown"


@attrs.frozen(kw_only=True)
class SceneResolution:
    """How the scene's participant number ``participant_index`` resolved.

    Attributes:
        participant_index: its index in ``Scene.participants`` (0-based).
        status: resolved (one notion), ambiguous (a name several notions are known by) or unknown.
        entity_ids: the notions it resolved to (sorted; empty when unknown).
    """

    participant_index: int
    status: SceneResolutionStatus = attrs.field(converter=SceneResolutionStatus)
    entity_ids: tuple[MemoryId, ...] = ()


@attrs.frozen(kw_only=True)
class LastInteraction:
    """When the character last met a recognised participant, at or before the reference time.

    Attributes:
        entity_id: the notion.
        last_met_at: the event time of the latest episode whose scene lists the notion or that
            involves it, or ``None`` when never met.
        elapsed: reference time - ``last_met_at``, or ``None`` when never met.
    """

    entity_id: MemoryId
    last_met_at: datetime | None = None
    elapsed: timedelta | None = None


@attrs.frozen(kw_only=True)
class ItemTrace:
    """How an item got its score (``RetrievalContext(trace=True)``); tracing changes nothing else.

    ``score`` = ``combined`` times every factor, in order.

    Attributes:
        road_scores: the best score each road gave it before ranking, in
            :class:`AdmissionRoad` order (the topic's is candidate recall's fused relevance, or
            expansion's share of it; under a time cue, a candidate of the cue's period lifted
            by :func:`~charmem.domain.scoring.period_lifts`, signal ``"time_cue_rank"``).
        combined: what the road scores combine to
            (:func:`~charmem.domain.scoring.combined_road_score`: the best, plus a bonus per
            further road).
        factors: the ranking factors applied after, in order, as ``(name, factor)``:
            ``"name_belief"``, ``"obligation"``, ``"question"``, ``"time_cue"``, ``"recency"``,
            ``"episode_repeat"``, ``"corrected_source"``.
        cues: the kinds of cue that reached it (its signals, sorted): ``"vector"``,
            ``"expansion:<relation>"``, ``"named_notion"``, ``"scene:<road>"``, ...
    """

    road_scores: tuple[tuple[AdmissionRoad, float], ...]
    combined: float
    factors: tuple[tuple[str, float], ...] = ()
    cues: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class PackItem:
    """One recalled memory in the pack.

    Attributes:
        id: the object's id.
        object_type: its type.
        text: its text (observation text, derived text, episode summary, thread title+summary).
        occurred_at: event time (episodes, observations) or record time (others).
        score: the fused relevance score (higher first).
        signals: what admitted it (``"vector"``, ``"expansion:<relation>"``), sorted.
        status: its :class:`CurrencyStatus`.
        provenance_ids: the sources it is grounded on or belongs to (episode of an observation,
            sources of a derived memory), sorted.
        derived_type: the derived type, for derived memories.
        entity_ids: notions it involves, mentions or is about, sorted.
        admitted_by: every :class:`AdmissionRoad` that reached it, in the enum's order
            (``(AdmissionRoad.TOPIC,)`` for every item of a query-only retrieval).
        seconds_since_support: whole seconds from its latest supporting event
            (:func:`support_time`) to the reference time (``as_of``, else now), or ``None`` when
            that event lies after the reference time (:func:`seconds_since_support`).
        direction: for an obligation (commitment, open loop), who owes relative to the
            character, or ``None`` (neither party is the character, or no character id;
            :func:`charmem.domain.obligations.obligation_direction`).
        resolved_by: for an obligation, the memories that settle it (``resolves`` /
            ``fulfills_commitment`` links to it, forgotten resolvers included), sorted; a
            settled obligation is listed in ``derived_memories``
            (:func:`charmem.domain.obligations.settled_by`).
    """

    id: MemoryId
    object_type: ObjectType
    text: str
    occurred_at: datetime
    score: float
    signals: tuple[str, ...] = ()
    status: CurrencyStatus = CurrencyStatus.CURRENT
    provenance_ids: tuple[MemoryId, ...] = ()
    derived_type: DerivedType | None = None
    entity_ids: tuple[MemoryId, ...] = ()
    admitted_by: tuple[AdmissionRoad, ...] = ()
    seconds_since_support: int | None = None
    direction: ObligationDirection | None = None
    resolved_by: tuple[MemoryId, ...] = ()
    trace: ItemTrace | None = None


#: Omission reason of an item whose text repeats a higher-ranked item's
#: (:func:`~charmem.domain.render.same_text_key`).
DUPLICATE_TEXT = "duplicate_text"


@attrs.frozen
class Omission:
    """A memory met during recall that is not in ``items``, and why.

    Attributes:
        id: the memory left out.
        reason: ``"not_in_graph"`` (a candidate the graph does not hold), ``"superseded"`` or
            ``"suppressed"`` (not current; suppressed beats superseded), or ``"duplicate_text"``
            (its text is the text of a higher-ranked item with the same status, by
            :func:`~charmem.domain.render.same_text_key`: it would only repeat that line).
        duplicate_of: for ``"duplicate_text"``, the id of the item kept in its place; else
            ``None``.
    """

    id: MemoryId
    reason: str
    duplicate_of: MemoryId | None = attrs.field(default=None, kw_only=True)


@attrs.frozen(kw_only=True)
class PackEntity:
    """A notion met during recall with its current ``KnownAs`` names (as spelled, sorted)."""

    id: MemoryId
    entity_type: str
    names: tuple[str, ...] = ()


#: Omission reason of a candidate the graph does not hold (graph authority).
NOT_IN_GRAPH = "not_in_graph"


def event_time(obj: MemoryObject) -> datetime:
    """When a memory happened: episode and observation event time, else record time."""
    if isinstance(obj, Episode):
        return obj.occurred_at
    if isinstance(obj, Observation):
        return obj.observed_at
    return obj.created_at


def item_text(obj: MemoryObject) -> str:
    """A memory's text in the pack (observation or derived text, episode summary, thread title)."""
    if isinstance(obj, Episode):
        return obj.summary or f"(episode of {obj.occurred_at.date().isoformat()})"
    if isinstance(obj, Observation | DerivedMemory):
        return obj.text
    if isinstance(obj, MemoryThread):
        return f"{obj.title}: {obj.summary}" if obj.summary else obj.title
    return obj.entity_type


def provenance_of(obj: MemoryObject) -> tuple[MemoryId, ...]:
    """What a memory is grounded on or belongs to: an observation's episode, a derived memory's sources."""
    if isinstance(obj, Observation):
        return (obj.episode_id,)
    if isinstance(obj, DerivedMemory):
        return obj.source_ids
    return ()


def entities_of(obj: MemoryObject) -> tuple[MemoryId, ...]:
    """The notions a memory involves (participants, speaker and mentions, or what it is about)."""
    if isinstance(obj, Episode):
        return obj.participant_entity_ids
    if isinstance(obj, Observation):
        ids = set(obj.mentioned_entity_ids)
        if obj.speaker_entity_id is not None:
            ids.add(obj.speaker_entity_id)
        return tuple(sorted(ids))
    if isinstance(obj, DerivedMemory):
        return obj.entity_ids
    return ()


def section_of(obj: MemoryObject, *, settled: bool = False) -> str | None:
    """The pack section a memory is listed in (``None``: in no section, like a resolved thread).

    A derived memory is listed by its type (:data:`~charmem.domain.context.SECTION_OF_DERIVED_TYPE`),
    except a ``settled`` obligation (one with resolvers,
    :func:`charmem.domain.obligations.settled_by`): it is no longer open or owed, so it leaves
    ``open_loops`` / ``commitments`` for :data:`~charmem.domain.context.SETTLED_SECTION`.
    """
    if isinstance(obj, MemoryThread):
        return "active_threads" if obj.status is ThreadStatus.ACTIVE else None
    if isinstance(obj, Episode):
        return "relevant_episodes"
    if isinstance(obj, Observation):
        return "salient_observations"
    if isinstance(obj, DerivedMemory):
        return SETTLED_SECTION if settled else SECTION_OF_DERIVED_TYPE[obj.derived_type]
    return None


def support_time(
    obj: MemoryObject, read: Mapping[MemoryId, datetime], members: Iterable[MemoryId] = ()
) -> datetime:
    """When a memory was last supported by something that happened.

    The rule, by type:

    * an episode or observation: its event time (:func:`event_time`);
    * a derived memory: the latest event time of its sources when every one of them is in
      ``read``, else its ``created_at`` (the record time comes after what it was drawn from, so
      the age is never overstated by sources left unread);
    * a thread: the latest event time of its ``members`` in ``read``, else its ``created_at``;
    * a notion: its ``created_at`` (notions are listed in ``pack.entities``, never as items).

    Args:
        obj: the memory.
        read: event time (:func:`event_time`) of the memories recall read and may show the
            support of: recorded by the view's ``as_of``, not forgotten.
        members: a thread's members as recall read them (ignored for other types).

    Returns:
        datetime: the instant of its latest support (timezone-aware).
    """
    if isinstance(obj, Episode | Observation):
        return event_time(obj)
    if isinstance(obj, DerivedMemory):
        sources = obj.source_ids
        if sources and all(s in read for s in sources):
            return max(read[s] for s in sources)
        return obj.created_at
    if isinstance(obj, MemoryThread):
        times = [read[m] for m in members if m in read]
        return max(times) if times else obj.created_at
    return obj.created_at


def seconds_since_support(support: datetime, reference: datetime) -> int | None:
    """``PackItem.seconds_since_support``: whole seconds from ``support`` to ``reference``.

    The rule: the elapsed time rounded down to whole seconds, or ``None`` when the support lies
    after the reference time (an event dated ahead, or after an ``as_of`` view): it has not
    happened yet as seen from there, so it has no age (0 would say "just now"). Never negative.

    Args:
        support: :func:`support_time` of the item.
        reference: the retrieval's reference time
            (:func:`~charmem.domain.context.reference_time`).

    Returns:
        int | None: seconds (>= 0), or ``None``.
    """
    if support > reference:
        return None
    return (reference - support) // timedelta(seconds=1)
