"""Retrieval inputs and the continuity context pack (DESIGN §6, spec "Core idea")."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import attrs

from charmem.domain import _fields
from charmem.domain._fields import ChoiceEnum, id_set
from charmem.domain.ids import MemoryId
from charmem.domain.model import DerivedType, MemoryLink, ObjectType, Relation
from charmem.errors import DraftValidationError
from charmem.tokens import WhitespaceTokenCounter, token_floor

if TYPE_CHECKING:
    from charmem.ports import TokenCounter

__all__ = [
    "DEFAULT_SECTION_LIMITS",
    "DUPLICATE_TEXT",
    "PACK_FORMAT_VERSION",
    "SCORE_RESOLUTION",
    "SECTION_OF_DERIVED_TYPE",
    "CompletenessKind",
    "ContinuityContextPack",
    "CurrencyStatus",
    "GraphLimits",
    "Omission",
    "PackEntity",
    "PackItem",
    "RetrievalContext",
    "VectorRecallCompleteness",
    "rank_key",
    "same_text_key",
    "score_step",
]

#: Version of :meth:`ContinuityContextPack.to_dict`.
PACK_FORMAT_VERSION = 1


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
    """Bounds of graph expansion around admitted candidates (DESIGN §6.3).

    Attributes:
        depth: hops from each admitted root (this version expands at most 1).
        node_budget: most nodes added by expansion per query (count).
        per_node_fanout: most neighbours followed from one node (count).
        hub_edge_cap: a node with more edges of one relation than this is a hub; its edges of that
            relation are not followed (count).
        allowed_object_types: object types expansion may add (entities included by default).
        allowed_relation_types: relations expansion may follow (``None``: all but ``supersedes``).
        context_window: observations before and after a recalled observation, in its episode,
            that are recalled with it (count; 0 turns it off). Default 2: on LoCoMo (turns and
            facts) turn recall@10 is 0.744 at 1, 0.759 at 2, 0.760 at 3.
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


#: Pack sections in display order with their default caps (DESIGN §6.7).
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

#: Which section each derived type is listed in (DESIGN §6.7 table).
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


def _query(_instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    _fields.text(_instance, attribute, value)


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
        query: the cue text (for example the user's message); must not be blank.
        object_type_defaults: object types candidate recall searches (vector scope); default
            episode, observation, derived, thread; ``()`` searches every type with vectors.
            Entities have none (``DraftValidationError`` if named here).
        candidate_limit: vector candidates fetched before graph authority (count).
        max_items: most items in the pack (count). The default 32 keeps a pack near 1,400 word
            pieces when rendered; on LoCoMo, turn recall@10 and @20 are the same at 30, 32, 36
            and 40 items (the last items are context around lower roots).
        graph_limits: bounds of expansion (:class:`GraphLimits`).
        section_limits: per-section caps, merged over :data:`DEFAULT_SECTION_LIMITS`.
        max_tokens: if set, :meth:`ContinuityContextPack.render` defaults to this budget.
        score_floor: a floor on the dense similarity (cosine) of candidate recall: memories
            less similar than this to the query are not candidates, unless the lexical cue finds
            a shared term (near-zero similarity is noise, not memory). Default 0.1; between -1
            and 1 (``DraftValidationError`` otherwise).
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
            ``WINDOW_OVERFETCH`` times ``candidate_limit`` candidates so the window still fills.
        recency: a preference for what happened lately, as a half-life (``timedelta``): a memory
            one half-life older than the reference time (``as_of``, else now) keeps 0.9 of its
            score, two half-lives 0.85, never less than 0.8: meaning still outranks age
            (``None``, the default: no preference).
        time_cues: read absolute dates in the query ("on 9 November 2022", "in March 2023",
            :func:`charmem.domain.timecues.time_cues`) as a preference for memories that
            happened then: they score ``TIME_CUE_WEIGHT`` times more, and candidate recall
            over-fetches to find them (default on; an explicit ``occurred_between`` is a filter,
            this is a preference).
    """

    query: str = attrs.field(validator=_query)
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


#: Scores closer than this rank as ties, broken canonically by :func:`rank_key`: stores that
#: compute in float32 and in float64 give one memory scores a few 1e-8 apart, and the pack's order
#: must not depend on that.
SCORE_RESOLUTION = 1e-6


def score_step(score: float) -> int:
    """``score`` in whole steps of :data:`SCORE_RESOLUTION`: scores of one step are ties.

    The one rule for comparing scores wherever an order or a cut depends on them (the pack's
    :func:`rank_key`, a vector index's candidate cut and its fusion ranks), so that float32 and
    float64 stores cut and order the same candidates.
    """
    return round(score / SCORE_RESOLUTION)


def rank_key(
    score: float, occurred_at: datetime, object_type: ObjectType, memory_id: MemoryId
) -> tuple[int, float, str, MemoryId]:
    """The sort key of a pack's items (DESIGN §6.6): score descending, newer first, type, id.

    Scores are compared in steps of :data:`SCORE_RESOLUTION`, so float noise below it never
    decides an order; what it would have decided falls to the canonical tie-breaks. Sorting
    ``pack.items`` by ``rank_key(i.score, i.occurred_at, i.object_type, i.id)`` gives their order.

    Returns:
        tuple[int, float, str, MemoryId]: ascending order is rank order.
    """
    return (-score_step(score), -occurred_at.timestamp(), object_type.value, memory_id)


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


#: Omission reason of an item whose text repeats a higher-ranked item's (:func:`same_text_key`).
DUPLICATE_TEXT = "duplicate_text"


@attrs.frozen
class Omission:
    """A memory met during recall that is not in ``items``, and why.

    Attributes:
        id: the memory left out.
        reason: ``"not_in_graph"`` (a candidate the graph does not hold), ``"superseded"`` or
            ``"suppressed"`` (not current; suppressed beats superseded), or ``"duplicate_text"``
            (its text is the text of a higher-ranked item with the same status, by
            :func:`same_text_key`: it would only repeat that line).
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


def _cost(counter: TokenCounter, text: str) -> int:
    """What ``text`` costs in a render: the counter's count, never below :func:`token_floor`.

    Lines are counted each with the line break before it, so for a counter additive over lines
    (both built-in ones are) the costs add up to the count of the rendered text.
    """
    return max(counter.count(text), token_floor(text))


def _longest_fitting(count: int, fits: Callable[[int], bool]) -> int:
    """The largest ``k`` in ``1..count`` with ``fits(k)`` found by binary search, or 0.

    About log2(count) calls, so cutting a long memory stays cheap with a real tokenizer. Only a
    ``k`` that was tried and fits is returned, so the result fits even when ``fits`` is not
    monotone in ``k``.
    """
    best, low, high = 0, 1, count
    while low <= high:
        middle = (low + high) // 2
        if fits(middle):
            best, low = middle, middle + 1
        else:
            high = middle - 1
    return best


def _cut_to_fit(separator: str, prefix: str, text: str, counter: TokenCounter, budget: int) -> str:
    """The longest ``prefix + cut + " ..."`` whose cost after ``separator`` fits ``budget``.

    ``cut`` is the longest run of whole words of ``text`` (split at spaces) that fits; when not
    even the first word fits (a 40,000-character word), that word is cut by characters.

    Returns:
        str: the cut line, or ``""`` when not one character of ``text`` fits after ``prefix``.
    """

    def fits(candidate: str) -> bool:
        return _cost(counter, f"{separator}{prefix}{candidate} ...") <= budget

    words = text.split(" ")
    kept = _longest_fitting(len(words), lambda k: fits(" ".join(words[:k])))
    if kept:
        return f"{prefix}{' '.join(words[:kept])} ..."
    first = words[0]
    chars = _longest_fitting(len(first), lambda k: fits(first[:k]))
    return f"{prefix}{first[:chars]} ..." if chars else ""


def _iso(value: datetime) -> str:
    return value.isoformat()


def _omission_dict(omission: Omission) -> dict[str, str]:
    entry = {"id": str(omission.id), "reason": omission.reason}
    if omission.duplicate_of is not None:
        entry["duplicate_of"] = str(omission.duplicate_of)
    return entry


_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x1f\x7f-\x9f]")


def _prompt_safe(text: str) -> str:
    """Text for prompt lines: control characters dropped, line breaks indented.

    Every line break ``str.splitlines`` knows (LF, CR, CR LF, VT, FF, U+001C-U+001E,
    U+0085, U+2028, U+2029) starts an indented continuation line, and the other control
    characters (C0, DEL, C1) are dropped, so a stored text can never start a line of its own
    that reads as another memory.
    """
    return "\n    ".join(_CONTROL.sub("", line).rstrip() for line in text.splitlines())


def _one_line(name: str) -> str:
    """A name on one line: every whitespace run, line breaks included, becomes one space."""
    return " ".join(name.split())


def same_text_key(text: str) -> str:
    """What makes two memory texts the same line of a rendered pack.

    The rule: texts are the same when they are equal as :meth:`ContinuityContextPack.render`
    writes them (control characters dropped, line breaks escaped) once every run of
    whitespace is one space and the ends are stripped. Case and punctuation count: ``"Us."``
    and ``"us."`` differ. Pack assembly keeps the higher-ranked of two items with the same key
    and status and lists the other as a ``"duplicate_text"`` :class:`Omission`.

    Args:
        text: an item's text.

    Returns:
        str: the comparison key.
    """
    return " ".join(_prompt_safe(text).split())


@attrs.frozen(kw_only=True)
class ContinuityContextPack:
    """The structured answer of ``retrieve`` (DESIGN §6.7).

    Attributes:
        query: the cue text.
        items: recalled memories, globally ranked by score with canonical ties (score, newer,
            object type, id), de-duplicated: one item per memory, and one per text (an item
            whose :func:`same_text_key` and status are those of a higher-ranked item is a
            ``"duplicate_text"`` omission instead).
        sections: section name -> ids of items in that section, in rank order, capped.
        entities: notions met, with current names.
        links: links among the items.
        omissions: memories met but left out, with a reason, sorted by id.
        completeness: candidate recall completeness.
        telemetry: counters: ``roots_considered`` (candidates from the vector index),
            ``roots_admitted`` and ``roots_omitted`` (by graph authority), ``nodes_expanded``,
            ``hub_notions_narrowed``, ``outside_time_window``, ``not_yet_recorded`` (``as_of``),
            ``items``, ``entities``, ``omissions`` and ``omitted_<reason>`` per omission reason.
        token_counter: the name of the counter :meth:`render` uses.
        max_tokens: default token budget of :meth:`render`.
    """

    query: str
    items: tuple[PackItem, ...] = ()
    sections: Mapping[str, tuple[MemoryId, ...]] = attrs.field(factory=dict)
    entities: tuple[PackEntity, ...] = ()
    links: tuple[MemoryLink, ...] = ()
    omissions: tuple[Omission, ...] = ()
    completeness: VectorRecallCompleteness = VectorRecallCompleteness(CompletenessKind.NOT_REQUESTED)
    telemetry: Mapping[str, int] = attrs.field(factory=dict)
    token_counter: TokenCounter | None = attrs.field(default=None, eq=False, repr=False)
    max_tokens: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the pack with ``format_version`` (stable key order).

        ``items`` is the ranked list; each item has ``id``, ``object_type``, ``text``,
        ``occurred_at``, ``score``, ``signals``, ``status``, ``provenance_ids``. Each omission
        has ``id`` and ``reason``, and ``duplicate_of`` (the kept item's id) when the reason is
        ``"duplicate_text"``.
        """
        return {
            "format_version": PACK_FORMAT_VERSION,
            "query": self.query,
            "items": [
                {
                    "id": str(item.id),
                    "object_type": item.object_type.value,
                    "text": item.text,
                    "occurred_at": _iso(item.occurred_at),
                    "score": item.score,
                    "signals": list(item.signals),
                    "status": item.status.value,
                    "provenance_ids": [str(i) for i in item.provenance_ids],
                    "derived_type": item.derived_type.value if item.derived_type else None,
                    "entity_ids": [str(i) for i in item.entity_ids],
                }
                for item in self.items
            ],
            "sections": {name: [str(i) for i in ids] for name, ids in self.sections.items()},
            "entities": [
                {"id": str(e.id), "entity_type": e.entity_type, "names": list(e.names)} for e in self.entities
            ],
            "links": [
                {
                    "id": str(link.id),
                    "from_id": str(link.from_id),
                    "relation": link.relation.value,
                    "to_id": str(link.to_id),
                }
                for link in self.links
            ],
            "omissions": [_omission_dict(o) for o in self.omissions],
            "completeness": {
                "kind": self.completeness.kind.value,
                "scanned": self.completeness.scanned,
                "fetched": self.completeness.fetched,
            },
            "telemetry": dict(sorted(self.telemetry.items())),
            "token_counter": self.token_counter.name if self.token_counter else None,
        }

    def render(self, max_tokens: int | None = None) -> str:
        """Render the pack as prompt text within a token budget.

        Items are written in rank order, one per line with type, time and text, under a header
        naming the known entities. Writing stops at the first item that would exceed the budget
        (the best item alone is cut to fit), so the most relevant memories always come first.
        The header takes at most half the budget (it is cut to fit), so a long list of names
        never crowds out the memories. A cut keeps whole words and ends in ``" ..."``; a single
        word too long for the budget is cut by characters.

        Every line is counted by the pack's counter and never below :func:`charmem.token_floor`
        (one token per 4 characters), so the text is at most ``4 * max_tokens`` characters
        whatever is stored and whatever the counter. Control characters are dropped and every
        line break ``str.splitlines`` knows inside a text starts an indented continuation line,
        so stored text can never forge a memory line of its own.

        Args:
            max_tokens: the budget in tokens of the pack's :class:`~charmem.ports.TokenCounter`
                (default: the context's ``max_tokens``; ``None`` means unbounded).

        Returns:
            str: the prompt text (empty when nothing was recalled).

        Raises:
            DraftValidationError: ``max_tokens`` is not a positive int or ``None`` (the rule of
                :attr:`RetrievalContext.max_tokens`; a zero or negative budget used to give an
                empty prompt silently).
        """
        if max_tokens is not None and (
            isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
        ):
            raise DraftValidationError(
                f"max_tokens must be a positive int (a budget in tokens) or None, not {max_tokens!r}",
                field="max_tokens",
            )

        counter = self.token_counter or WhitespaceTokenCounter()
        budget = max_tokens if max_tokens is not None else self.max_tokens
        if not self.items:
            return ""
        out: list[str] = []
        used = 0
        named = [e for e in self.entities if e.names]
        if named:
            ordered = sorted(named, key=lambda e: (e.names, e.id))
            known = "; ".join(", ".join(map(_one_line, e.names)) for e in ordered)
            prefix, text = "Known people and things: ", _prompt_safe(known)
            line = prefix + text
            if budget is not None and _cost(counter, line) > budget // 2:
                line = _cut_to_fit("", prefix, text, counter, budget // 2)
            if line:
                out.append(line)
                used = _cost(counter, line)
        for n, item in enumerate(self.items):
            when = item.occurred_at.date().isoformat()
            kind = item.derived_type.value if item.derived_type else item.object_type.value
            status = "" if item.status is CurrencyStatus.CURRENT else f" ({item.status.value})"
            prefix, text = f"- [{when}] {kind}{status}: ", _prompt_safe(item.text)
            separator = "\n" if out else ""  # each line is counted with the break before it
            cost = _cost(counter, separator + prefix + text)
            if budget is not None and used + cost > budget:
                if n == 0:  # the best memory alone is over budget: keep as much of it as fits
                    cut = _cut_to_fit(separator, prefix, text, counter, budget - used)
                    if cut:
                        out.append(cut)
                break
            out.append(prefix + text)
            used += cost
        return "\n".join(out)
