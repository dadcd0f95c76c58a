"""What to recall: the retrieval context, the bounds of graph expansion and the pack's sections."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

import attrs

from charmem.domain import _fields
from charmem.domain._fields import id_set
from charmem.domain.ids import MemoryId
from charmem.domain.model import DerivedType, ObjectType, Relation
from charmem.domain.scene import Scene
from charmem.errors import DraftValidationError

__all__ = [
    "DEFAULT_SECTION_LIMITS",
    "SECTION_OF_DERIVED_TYPE",
    "SETTLED_SECTION",
    "GraphLimits",
    "RetrievalContext",
    "reference_time",
]


def _positive_int(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise DraftValidationError(f"{attribute.name} must be a non-negative int", field=attribute.name)


def _object_types(values: Any) -> tuple[ObjectType, ...]:
    if isinstance(values, (str, ObjectType)):
        raise DraftValidationError(
            "object types must be a sequence, e.g. (ObjectType.EPISODE,) or ['episode']", field="object_types"
        )
    chosen = _fields.items_of(values, "object types", "object_types")
    return tuple(sorted({ObjectType(value) for value in chosen}, key=lambda t: t.value))


def _recall_scope(values: Any) -> tuple[ObjectType, ...]:
    chosen = _object_types(values)
    if ObjectType.ENTITY in chosen:
        raise DraftValidationError(
            "notions (entities) have no vectors, so candidate recall cannot find them: leave "
            "ObjectType.ENTITY out of object_type_defaults; name a notion in the query or pass it "
            "in focus_entity_ids to recall the memories about it",
            field="object_type_defaults",
        )
    return chosen


def _cosine_floor(instance: object, attribute: attrs.Attribute[float], value: object) -> None:
    _number(instance, attribute, value)
    if not -1.0 <= float(value) <= 1.0:  # type: ignore[arg-type]
        raise DraftValidationError(
            f"{attribute.name} is a cosine similarity, between -1 and 1, not {value!r}", field=attribute.name
        )


def _relations(values: Any) -> tuple[Relation, ...] | None:
    if values is None:
        return None
    chosen = _fields.items_of(values, "relations", "allowed_relation_types")
    return tuple(sorted({Relation(value) for value in chosen}, key=lambda r: r.value))


@attrs.frozen(kw_only=True)
class GraphLimits:
    """Bounds of graph expansion around admitted candidates (the caller's, per query).

    Attributes:
        depth: hops from each admitted root (this version expands at most 1).
        node_budget: most nodes added by expansion per query (count).
        per_node_fanout: most neighbours followed from one node (count).
        hub_edge_cap: a node with more edges of one relation than this is a hub; its edges of that
            relation are not followed (count).
        allowed_object_types: object types expansion may add (entities included by default).
        allowed_relation_types: relations expansion may follow (``None``: all but ``supersedes``).
        context_window: observations before and after a recalled observation, in its episode,
            that are recalled with it (count; 0 turns it off). Default 2: a third turn adds
            nothing measurable (``benchmarks/README.md``, "Retrieval tuning history").
    """

    depth: int = attrs.field(default=1, validator=_positive_int)
    node_budget: int = attrs.field(default=48, validator=_positive_int)
    per_node_fanout: int = attrs.field(default=8, validator=_positive_int)
    hub_edge_cap: int = attrs.field(default=64, validator=_positive_int)
    allowed_object_types: tuple[ObjectType, ...] = attrs.field(
        default=tuple(ObjectType), converter=_object_types
    )
    allowed_relation_types: tuple[Relation, ...] | None = attrs.field(default=None, converter=_relations)
    context_window: int = attrs.field(default=2, validator=_positive_int)


#: Pack sections in display order with their default caps (count of items each).
DEFAULT_SECTION_LIMITS: Mapping[str, int] = {
    "active_threads": 6,
    "relevant_episodes": 8,
    "salient_observations": 16,
    "derived_memories": 12,
    "preferences": 8,
    "relationship_notes": 8,
    "open_loops": 8,
    "commitments": 8,
    "character_signals": 8,
}

#: Which section each derived type is listed in.
SECTION_OF_DERIVED_TYPE: Mapping[DerivedType, str] = {
    DerivedType.REFLECTION: "derived_memories",
    DerivedType.CLAIM: "derived_memories",
    DerivedType.CORRECTION: "derived_memories",
    DerivedType.PROJECT_NOTE: "derived_memories",
    DerivedType.USER_PREFERENCE: "preferences",
    DerivedType.ASSISTANT_PREFERENCE: "preferences",
    DerivedType.RELATIONSHIP_NOTE: "relationship_notes",
    DerivedType.OPEN_LOOP: "open_loops",
    DerivedType.COMMITMENT: "commitments",
    DerivedType.CHARACTER_SIGNAL: "character_signals",
}

#: The section of a settled obligation (a commitment or open loop with a resolver): it leaves
#: ``open_loops`` / ``commitments`` and is listed with the other derived memories.
SETTLED_SECTION = "derived_memories"

_DEFAULT_SCOPE = (ObjectType.EPISODE, ObjectType.OBSERVATION, ObjectType.DERIVED, ObjectType.THREAD)


def _section_limits(values: Any) -> Mapping[str, int]:
    merged = dict(DEFAULT_SECTION_LIMITS)
    if values is not None and not isinstance(values, Mapping):
        raise DraftValidationError(
            f"section_limits must be a mapping of section name to count, not {type(values).__name__}",
            field="section_limits",
        )
    for key, value in (values or {}).items():
        if key not in DEFAULT_SECTION_LIMITS:
            raise DraftValidationError(
                f"unknown pack section {key!r}; sections are {sorted(DEFAULT_SECTION_LIMITS)}",
                field="section_limits",
            )
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise DraftValidationError(
                f"section limit {key!r} must be a non-negative int", field="section_limits"
            )
        merged[key] = value
    return merged


def _number(_instance: object, attribute: attrs.Attribute[float], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise DraftValidationError(
            f"{attribute.name} must be a finite number, not {value!r}", field=attribute.name
        )


def _optional_count(_instance: object, attribute: attrs.Attribute[int | None], value: object) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise DraftValidationError(f"{attribute.name} must be a positive int or None", field=attribute.name)


def _query(_instance: object, attribute: attrs.Attribute[str | None], value: str | None) -> None:
    if value is not None:
        _fields.text(_instance, attribute, value)


def _range(value: Any) -> tuple[datetime, datetime] | None:
    """``(start, end)`` of a supplied time range: two aware datetimes, start <= end."""
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, tuple | list) or len(value) != 2:
        raise DraftValidationError(
            f"time_range must be a (start, end) pair of datetimes or None, not {value!r}", field="time_range"
        )
    start, end = value
    for side in (start, end):
        if not isinstance(side, datetime) or side.utcoffset() is None:
            raise DraftValidationError(
                f"time_range needs two timezone-aware datetimes, not {side!r}", field="time_range"
            )
    if start > end:
        raise DraftValidationError(
            f"time_range starts after it ends ({start.isoformat()} > {end.isoformat()}); swap them",
            field="time_range",
        )
    return (start, end)


def _window(value: Any) -> tuple[datetime | None, datetime | None] | None:
    """``(start, end)`` of an event-time window: aware datetimes or ``None`` for an open side."""
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, tuple | list) or len(value) != 2:
        raise DraftValidationError(
            f"occurred_between must be a (start, end) pair of datetimes or None, not {value!r}",
            field="occurred_between",
        )
    start, end = value
    for side in (start, end):
        if side is not None and (not isinstance(side, datetime) or side.utcoffset() is None):
            raise DraftValidationError(
                f"occurred_between needs timezone-aware datetimes (or None for an open side), not {side!r}",
                field="occurred_between",
            )
    if start is None and end is None:
        return None
    if start is not None and end is not None and start > end:
        raise DraftValidationError(
            f"occurred_between starts after it ends ({start.isoformat()} > {end.isoformat()}); swap them",
            field="occurred_between",
        )
    return (start, end)


def _half_life(_instance: object, attribute: attrs.Attribute[timedelta | None], value: object) -> None:
    if value is not None and (not isinstance(value, timedelta) or value <= timedelta(0)):
        raise DraftValidationError(
            f"{attribute.name} must be a positive timedelta (a half-life) or None, not {value!r}",
            field=attribute.name,
        )


@attrs.frozen(kw_only=True)
class RetrievalContext:
    """What to recall: ``RetrievalContext(query="...", ...)``.

    Attributes:
        query: the cue text (for example the user's message), or ``None`` to recall from the
            scene, activity or time range alone; must not be blank. At least one of ``query``,
            ``scene``, ``activity`` and ``time_range`` is given (``DraftValidationError``).
        object_type_defaults: object types candidate recall searches (vector scope); default
            episode, observation, derived, thread; ``()`` searches every type with vectors.
            Entities have none (``DraftValidationError`` if named here).
        candidate_limit: vector candidates fetched before graph authority (count).
        max_items: most items in the pack (count). The default 32 keeps a pack near 1,400 word
            pieces when rendered, with the recall of larger packs (``benchmarks/README.md``).
        graph_limits: bounds of expansion (:class:`GraphLimits`).
        section_limits: per-section caps, merged over :data:`DEFAULT_SECTION_LIMITS`.
        max_tokens: if set, :meth:`~charmem.domain.retrieval.ContinuityContextPack.render`
            defaults to this budget.
        score_floor: a floor on the dense similarity (cosine) of candidate recall: memories
            less similar than this to the query are not candidates, unless the lexical cue finds
            a shared term (near-zero similarity is noise, not memory). Default 0.1; between -1
            and 1 (``DraftValidationError`` otherwise). Below 0, a less similar memory ranks as
            one with nothing in common, at 0 (:func:`~charmem.domain.scoring.candidate_score`).
        focus_entity_ids: notions the caller is focused on; memories about, involving or
            mentioning them are recalled through the graph (hubs excepted).
        include_superseded: return superseded memories met during recall as items with status
            ``superseded`` (default: list them among the omissions). They have left candidate
            recall, so they are met through the graph: one hop of ``supersedes`` around recalled
            memories, focus entities and notions named in the query.
        include_suppressed: the same for suppressed (forgotten) memories.
        as_of: record time: only what was recorded by then, with the currency it had then.
        occurred_between: event-time window ``(start, end)``, inclusive, either side ``None`` for
            open: only memories that happened inside it are items (an episode or observation by
            its event time, any other memory by its record time). Candidate recall fetches
            ``window_overfetch`` (:class:`~charmem.domain.scoring.ScoringPolicy`) times
            ``candidate_limit`` candidates so the window still fills.
        recency: a preference for what happened lately, as a half-life (``timedelta``): a memory
            one half-life older than the reference time (``as_of``, else now) keeps 0.9 of its
            score, two half-lives 0.85, never less than 0.8 (the policy's ``recency_floor``):
            meaning still outranks age (``None``, the default: no preference).
        time_cues: read dates and relative times in the query ("on 9 November 2022", "in
            March 2023", "two weeks ago", "last summer", against the reference time:
            :func:`charmem.domain.timecues.time_cues`) as a preference for memories that
            happened then: they score ``time_cue_weight`` times more
            (:class:`~charmem.domain.scoring.ScoringPolicy`), and candidate recall over-fetches
            to find them (default on; an explicit ``occurred_between`` is a filter, this is a
            preference).
        scene: the occasion the character is in (:class:`~charmem.domain.scene.Scene`): its
            participants, setting and custom values bring memories to mind with no topic at all,
            and its ``at`` is the reference time (not an ``as_of`` view: currency stays today's).
        activity: what the character is doing: a thread id (its members come to mind) or an
            open loop's id (its sources).
        time_range: ``(start, end)``, aware datetimes: occasions inside it come to mind (a cue,
            not a filter like ``occurred_between``).
        trace: add per-item score components and cue kinds to the pack
            (``PackItem.trace``); never changes selection, order or scores.

    With a scene, an activity or a time range, nothing that happened after the reference time
    (the scene's ``at``, else ``as_of``, else now) is recalled, judged by event time (an
    episode's ``occurred_at``, an observation's ``observed_at``, another memory's
    ``created_at``); packs of a query alone are unchanged.
    """

    query: str | None = attrs.field(default=None, validator=_query)
    object_type_defaults: tuple[ObjectType, ...] = attrs.field(
        default=_DEFAULT_SCOPE, converter=_recall_scope
    )
    candidate_limit: int = attrs.field(default=40, validator=_positive_int)
    max_items: int = attrs.field(default=32, validator=_positive_int)
    graph_limits: GraphLimits = attrs.field(factory=GraphLimits, validator=_fields.instance_of(GraphLimits))
    section_limits: Mapping[str, int] = attrs.field(factory=dict, converter=_section_limits)
    max_tokens: int | None = attrs.field(default=None, validator=_optional_count)
    score_floor: float = attrs.field(default=0.1, validator=_cosine_floor)
    focus_entity_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set)
    include_superseded: bool = attrs.field(default=False, validator=_fields.boolean)
    include_suppressed: bool = attrs.field(default=False, validator=_fields.boolean)
    as_of: datetime | None = attrs.field(default=None, validator=_fields.aware)
    occurred_between: tuple[datetime | None, datetime | None] | None = attrs.field(
        default=None, converter=_window
    )
    recency: timedelta | None = attrs.field(default=None, validator=_half_life)
    time_cues: bool = attrs.field(default=True, validator=attrs.validators.instance_of(bool))
    scene: Scene | None = attrs.field(
        default=None, validator=attrs.validators.optional(_fields.instance_of(Scene))
    )
    activity: MemoryId | None = attrs.field(default=None, converter=_fields.optional_id)
    time_range: tuple[datetime, datetime] | None = attrs.field(default=None, converter=_range)
    trace: bool = attrs.field(default=False, validator=_fields.boolean)

    def __attrs_post_init__(self) -> None:
        if self.query is None and self.scene is None and self.activity is None and self.time_range is None:
            raise DraftValidationError(
                "a RetrievalContext needs something to recall from: a query, a scene, an activity "
                "or a time_range",
                field="query",
            )

    @property
    def situated(self) -> bool:
        """Whether a scene, an activity or a time range is given (recall stops at the reference time)."""
        return self.scene is not None or self.activity is not None or self.time_range is not None


def reference_time(context: RetrievalContext, now: datetime) -> datetime:
    """The instant a retrieval is situated at and measures ages from.

    The scene's ``at``, else ``as_of``, else ``now``: the ``recency`` preference,
    ``PackItem.seconds_since_support``, last interactions and the bound of a situated context
    (nothing after it is recalled) all use it.

    Args:
        context: the retrieval context.
        now: the memory clock's now (timezone-aware).

    Returns:
        datetime: the reference time (timezone-aware).
    """
    if context.scene is not None:
        return context.scene.at
    return context.as_of or now
