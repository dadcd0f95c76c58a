"""Retrieval's last stages: ranking the chosen memories and assembling the pack.

The stages run in the order :func:`charmem.usecases.retrieval.retrieve_pack` lists, over its
:class:`~charmem.usecases.retrieval.Recall`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Final

from charmem.domain.ids import ID_ORDER, MemoryId
from charmem.domain.model import (
    DerivedMemory,
    Entity,
    MemoryLink,
    MemoryObject,
    Observation,
    known_names,
    object_type_of,
)
from charmem.domain.obligations import RESOLVING_RELATIONS, is_obligation, obligation_direction, settled_by
from charmem.domain.pack import (
    AdmissionRoad,
    entities_of,
    event_time,
    item_text,
    provenance_of,
    seconds_since_support,
    section_of,
    support_time,
)
from charmem.domain.retrieval import (
    DUPLICATE_TEXT,
    ContinuityContextPack,
    CurrencyStatus,
    ItemTrace,
    Omission,
    PackEntity,
    PackItem,
    VectorRecallCompleteness,
    rank_key,
    same_text_key,
)
from charmem.domain.rules import spoken_question
from charmem.domain.scoring import ScoringPolicy, combined_road_score, spread_discounts
from charmem.domain.timecues import happened_in
from charmem.ports import TokenCounter
from charmem.usecases.names import current_names

if TYPE_CHECKING:
    from charmem.usecases.retrieval import Candidate, Recall

__all__ = ["OWED_BY_SOMEONE_PRESENT", "assemble", "rank"]

#: The signal of an unsettled obligation naming a scene participant (the scene stage's).
OWED_BY_SOMEONE_PRESENT = "scene:obligation"

#: The admission roads in their declared order: an item lists its roads so. ``sorted(roads,
#: key=_ROADS.index)`` finds them in C; iterating the enum and hashing its members are
#: Python-level calls (about 600 per retrieve, measured).
_ROADS: Final = tuple(AdmissionRoad)


def rank(
    recall: Recall, *, reference: datetime, periods: Sequence[tuple[datetime, datetime]] = ()
) -> list[Candidate]:
    """Ranking: adjust every chosen memory's score once all are known, then sort them.

    Beliefs that assert names score ``policy.name_belief_weight`` times theirs; an unsettled
    obligation naming a scene participant ``policy.obligation_lead`` times; an observation that
    is a spoken question (:func:`~charmem.domain.rules.spoken_question`) ``policy.question_factor``
    times (its reply tells: :func:`~charmem.domain.scoring.context_score`); a memory that
    happened in a time-cue period ``policy.time_cue_weight`` times more; under a ``recency``
    half-life, :meth:`~charmem.domain.scoring.ScoringPolicy.recency_factor` of its age before
    ``reference``. Then a memory that came along with another (not recalled by the query
    itself) scores ``policy.episode_repeat_factor`` times less per such memory of its episode
    ranked before it (:func:`~charmem.domain.scoring.spread_discounts`, :func:`_spread_group`),
    so the turns around one answer do not crowd out the answers of other episodes. Last, a
    memory a correction left behind (``recall.corrected``) scores at most
    ``policy.corrected_source_factor`` times the lowest final score of what corrected it, and is
    signalled ``corrected_source``. The order is :func:`~charmem.domain.scoring.rank_key`'s.
    """
    policy = recall.policy
    half_life = recall.context.recency
    for candidate in recall.chosen.values():
        _weigh(candidate, policy, periods)
        if half_life is not None:
            age = (reference - event_time(candidate.obj)).total_seconds()
            _apply(candidate, "recency", policy.recency_factor(age, half_life.total_seconds()))
            candidate.signals.add("recency")
    ranked = sorted(recall.chosen.values(), key=_rank_key)
    groups = [_spread_group(candidate) for candidate in ranked]
    discounts = spread_discounts(groups, [c.score for c in ranked], policy.episode_repeat_factor)
    for candidate, discount in zip(ranked, discounts, strict=True):
        if discount < 1.0:
            _apply(candidate, "episode_repeat", discount)
    for memory_id, by in sorted(recall.corrected.items()):
        candidate = recall.chosen[memory_id]
        ceiling = min(recall.chosen[i].score for i in by) * policy.corrected_source_factor
        if candidate.score > ceiling:
            _apply(candidate, "corrected_source", ceiling / candidate.score)
        candidate.signals.add("corrected_source")
    return sorted(ranked, key=_rank_key)


def _weigh(candidate: Candidate, policy: ScoringPolicy, periods: Sequence[tuple[datetime, datetime]]) -> None:
    """Apply the factors of what a memory is (:func:`rank`).

    A name belief, an obligation owed by someone present, a question, something that happened in
    a time-cue period.
    """
    obj = candidate.obj
    if isinstance(obj, DerivedMemory) and known_names(obj.assertions):
        _apply(candidate, "name_belief", policy.name_belief_weight)
    if OWED_BY_SOMEONE_PRESENT in candidate.signals:
        _apply(candidate, "obligation", policy.obligation_lead)
    if isinstance(obj, Observation) and spoken_question(obj):
        _apply(candidate, "question", policy.question_factor)
    if happened_in(event_time(obj), periods):
        _apply(candidate, "time_cue", policy.time_cue_weight)
        candidate.signals.add("time_cue")


def _spread_group(candidate: Candidate) -> MemoryId:
    """What a memory is spread from (:func:`~charmem.domain.scoring.spread_discounts`).

    A memory the query itself recalled (candidate recall's ``vector`` signal) stands on its own
    relevance: its own group. One that came along (the turns around it, expansion, a notion)
    shares its episode's group: an observation's episode, an episode itself; any other memory is
    its own group.
    """
    obj = candidate.obj
    if "vector" in candidate.signals:
        return obj.id
    return obj.episode_id if isinstance(obj, Observation) else obj.id


def _apply(candidate: Candidate, name: str, factor: float) -> None:
    candidate.score *= factor
    candidate.factors.append((name, factor))


async def assemble(
    recall: Recall,
    ranked: Sequence[Candidate],
    completeness: VectorRecallCompleteness,
    token_counter: TokenCounter,
    *,
    reference: datetime,
    roots_considered: int,
    roots_admitted: int,
) -> ContinuityContextPack:
    """Assembly: the first ``max_items`` ranked memories, one per text, into the pack.

    Items, sections, links and entities are built from the kept memories only; the left-out
    repeats are ``duplicate_text`` omissions (:func:`_distinct_texts`). The kept obligations'
    settlements are read here (:func:`_settlements`); each item's ``seconds_since_support`` is
    measured to ``reference``.
    """
    context = recall.context
    kept, duplicates = _distinct_texts(ranked, context.max_items)
    for duplicate in duplicates:
        recall.omissions[duplicate] = DUPLICATE_TEXT
    for candidate in kept:
        recall.entity_ids.update(entities_of(candidate.obj))
    settled = await _settlements(recall, kept)
    entity_objects = await recall.graph.get_objects(sorted(recall.entity_ids))
    names = await current_names(recall.graph, entity_objects, context.as_of)
    support = _SupportReader(recall, reference)
    bonus = recall.policy.road_bonus if context.trace else None
    items = tuple(
        _pack_item(c, support, settled.get(c.obj.id, ()), recall.character_id, trace_bonus=bonus)
        for c in kept
    )
    entities = _pack_entities(entity_objects, names)
    return ContinuityContextPack(
        query=context.query,
        items=items,
        sections=_sections(kept, context.section_limits, settled),
        entities=entities,
        links=_pack_links(recall.links.values(), {item.id for item in items}),
        omissions=tuple(
            Omission(i, r, duplicate_of=duplicates.get(i)) for i, r in sorted(recall.omissions.items())
        ),
        completeness=completeness,
        telemetry=_telemetry(
            recall,
            roots_considered=roots_considered,
            roots_admitted=roots_admitted,
            items=items,
            entities=entities,
        ),
        token_counter=token_counter,
        max_tokens=context.max_tokens,
    )


def _rank_key(candidate: Candidate) -> tuple[int, float, str, MemoryId]:
    obj = candidate.obj
    return rank_key(candidate.score, event_time(obj), object_type_of(obj), obj.id)


def _distinct_texts(
    ranked: Sequence[Candidate], limit: int
) -> tuple[list[Candidate], dict[MemoryId, MemoryId]]:
    """The first ``limit`` candidates in rank order that do not repeat a kept one's text.

    A candidate with the :func:`~charmem.domain.retrieval.same_text_key` and status of a kept,
    higher-ranked candidate (an utterance and the derived memory that restates it) would only
    repeat its line: it is left out. Candidates after the ``limit``-th kept one are not looked
    at (they were never in the pack).

    Returns:
        tuple[list[Candidate], dict[MemoryId, MemoryId]]: the kept candidates in rank order, and
        each left-out candidate's id -> the id of the kept one it repeats.
    """
    kept: list[Candidate] = []
    first: dict[tuple[str, CurrencyStatus], MemoryId] = {}
    duplicates: dict[MemoryId, MemoryId] = {}
    for candidate in ranked:
        if len(kept) >= limit:
            break
        key = (same_text_key(item_text(candidate.obj)), candidate.status)
        if key in first:
            duplicates[candidate.obj.id] = first[key]
            continue
        first[key] = candidate.obj.id
        kept.append(candidate)
    return kept, duplicates


async def _settlements(recall: Recall, kept: Sequence[Candidate]) -> dict[MemoryId, tuple[MemoryId, ...]]:
    """The kept obligations that are settled -> their resolvers (:func:`settled_by`).

    One read of the resolving links of the kept obligations, none when there is none (a
    query-only pack without obligations costs nothing more). A store that keeps what it read
    answers for the roots from their expansion read, which followed every relation.
    """
    matters = {c.obj.id: c.obj for c in kept if is_obligation(c.obj)}
    if not matters:
        return {}
    links = await recall.graph.links_of(sorted(matters, key=ID_ORDER), relations=RESOLVING_RELATIONS)
    by_matter: dict[MemoryId, list[MemoryLink]] = {matter: [] for matter in matters}
    for link in links:
        if link.to_id in by_matter:
            by_matter[link.to_id].append(link)
    later = await recall.after_reference_ids([link.from_id for link in links])
    as_of = recall.context.as_of
    settled = {m: settled_by(obj, by_matter[m], as_of, later) for m, obj in matters.items()}
    return {matter: resolvers for matter, resolvers in settled.items() if resolvers}


class _SupportReader:
    """``seconds_since_support`` of the items, from what recall read (:func:`support_time`).

    Only memories recall may show count as support: recorded by ``as_of`` and not forgotten.
    """

    def __init__(self, recall: Recall, reference: datetime) -> None:
        self.recall = recall
        self.reference = reference

    def seconds(self, obj: MemoryObject) -> int | None:
        recall = self.recall
        members = recall.members.get(obj.id, ())
        wanted = obj.source_ids if isinstance(obj, DerivedMemory) else members
        read = {i: event_time(o) for i in wanted if (o := recall.objects.get(i)) and self._shows(o)}
        return seconds_since_support(support_time(obj, read, members), self.reference)

    def _shows(self, obj: MemoryObject) -> bool:
        status = self.recall.currency.get(obj.id, CurrencyStatus.CURRENT)
        return self.recall.visible(obj) and status is not CurrencyStatus.SUPPRESSED


def _pack_item(
    candidate: Candidate,
    support: _SupportReader,
    resolved_by: tuple[MemoryId, ...],
    character_id: MemoryId | None,
    *,
    trace_bonus: float | None = None,
) -> PackItem:
    obj = candidate.obj
    return PackItem(
        id=obj.id,
        object_type=object_type_of(obj),
        text=item_text(obj),
        occurred_at=event_time(obj),
        score=candidate.score,
        signals=tuple(sorted(candidate.signals)),
        status=candidate.status,
        provenance_ids=provenance_of(obj),
        derived_type=obj.derived_type if isinstance(obj, DerivedMemory) else None,
        entity_ids=entities_of(obj),
        admitted_by=tuple(sorted(candidate.roads, key=_ROADS.index)),
        seconds_since_support=support.seconds(obj),
        direction=obligation_direction(obj, character_id),
        resolved_by=resolved_by,
        trace=None if trace_bonus is None else _trace(candidate, trace_bonus),
    )


def _trace(candidate: Candidate, bonus: float) -> ItemTrace:
    """The components of ``candidate``'s score (``RetrievalContext(trace=True)``)."""
    road_scores = tuple((road, candidate.roads[road]) for road in sorted(candidate.roads, key=_ROADS.index))
    return ItemTrace(
        road_scores=road_scores,
        combined=combined_road_score(candidate.roads.values(), bonus),
        factors=tuple(candidate.factors),
        cues=tuple(sorted(candidate.signals)),
    )


def _sections(
    kept: Sequence[Candidate], limits: Mapping[str, int], settled: Mapping[MemoryId, tuple[MemoryId, ...]]
) -> dict[str, tuple[MemoryId, ...]]:
    """Section name -> the ids of its items in rank order, at most the section's limit."""
    sections: dict[str, list[MemoryId]] = {name: [] for name in limits}
    for candidate in kept:
        section = section_of(candidate.obj, settled=candidate.obj.id in settled)
        if section is not None and len(sections[section]) < limits[section]:
            sections[section].append(candidate.obj.id)
    return {name: tuple(ids) for name, ids in sections.items()}


def _pack_links(links: Iterable[MemoryLink], in_pack: set[MemoryId]) -> tuple[MemoryLink, ...]:
    """The links met whose two ends are items, by id."""
    return tuple(
        sorted((lk for lk in links if lk.from_id in in_pack and lk.to_id in in_pack), key=lambda lk: lk.id)
    )


def _pack_entities(
    entity_objects: Mapping[MemoryId, MemoryObject], names: Mapping[MemoryId, tuple[str, ...]]
) -> tuple[PackEntity, ...]:
    """The notions met, by id, with their current names."""
    return tuple(
        PackEntity(id=e.id, entity_type=e.entity_type, names=names.get(e.id, ()))
        for e in sorted(entity_objects.values(), key=lambda e: e.id)
        if isinstance(e, Entity)
    )


def _telemetry(
    recall: Recall,
    *,
    roots_considered: int,
    roots_admitted: int,
    items: Sequence[PackItem],
    entities: Sequence[PackEntity],
) -> dict[str, int]:
    """The pack's counters (listed on :class:`~charmem.domain.retrieval.ContinuityContextPack`)."""
    telemetry = {
        **recall.telemetry,
        "roots_considered": roots_considered,
        "roots_admitted": roots_admitted,
        "roots_omitted": roots_considered - roots_admitted,
        "nodes_expanded": recall.telemetry.get("nodes_expanded", 0),
        "items": len(items),
        "entities": len(entities),
        "omissions": len(recall.omissions),
    }
    for reason in sorted(set(recall.omissions.values())):
        telemetry[f"omitted_{reason}"] = sum(1 for r in recall.omissions.values() if r == reason)
    return telemetry
