"""Retrieval stages that find memories: time cues, candidate recall, graph authority, notions.

The stages run in the order :func:`charmem.usecases.retrieval.retrieve_pack` lists, over its
:class:`~charmem.usecases.retrieval.Recall`.
"""

from __future__ import annotations

import inspect
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from charmem.domain.ids import MemoryId
from charmem.domain.model import Entity, object_type_of
from charmem.domain.names import NameAssertion, NameUse, name_use
from charmem.domain.pack import event_time
from charmem.domain.retrieval import CurrencyStatus, RetrievalContext
from charmem.domain.scoring import ScoringPolicy, candidate_score, period_lifts, rank_key
from charmem.domain.timecues import happened_in, time_cues
from charmem.log import get_logger
from charmem.ports import (
    GraphStore,
    ObjectTypeHints,
    RetrievalStatsStore,
    VectorHit,
    VectorIndex,
    VectorQuery,
    VectorSearchResult,
)

if TYPE_CHECKING:
    from charmem.usecases.retrieval import Recall

__all__ = ["admit_roots", "current_subjects", "recall_candidates", "recall_notions", "time_cue_periods"]

log = get_logger("charmem.retrieval")


def time_cue_periods(recall: Recall) -> tuple[tuple[datetime, datetime], ...]:
    """Time: the event-time periods the query's dates and relative times name (none when cues are off).

    Relative forms ("last week") are read against the retrieval's reference time
    (:func:`~charmem.domain.context.reference_time`: the scene's ``at``, else ``as_of``, else now).
    """
    context = recall.context
    periods = (
        time_cues(context.query, reference=recall.reference, policy=recall.policy)
        if context.time_cues and context.query is not None
        else ()
    )
    recall.telemetry["time_cue_periods"] = len(periods)
    return periods


async def recall_candidates(
    recall: Recall,
    vectors: VectorIndex,
    query_vector: Sequence[float],
    periods: Sequence[tuple[datetime, datetime]],
) -> VectorSearchResult:
    """Candidate recall: the memories nearest the query, loaded with their currency.

    Under an event-time window or a time cue, ``policy.window_overfetch`` times
    ``candidate_limit`` are fetched, so what happened in the period still fills the pack.
    """
    context = recall.context
    overfetch = recall.policy.window_overfetch if context.occurred_between is not None or periods else 1
    found = await vectors.search(
        VectorQuery(
            vector=query_vector,
            limit=context.candidate_limit * overfetch,
            object_types=context.object_type_defaults,
            text=context.query,
            min_score=context.score_floor,
        )
    )
    _hint_object_types(recall.graph, found.hits)
    await recall.load([hit.id for hit in found.hits])
    return found


def admit_roots(
    recall: Recall, hits: Sequence[VectorHit], periods: Sequence[tuple[datetime, datetime]] = ()
) -> list[MemoryId]:
    """Graph authority: offer each candidate in rank order; the admitted ones are the roots.

    Under time cues, the candidates that happened in a cue period are first ranked as a list of
    their own (:func:`~charmem.domain.scoring.period_lifts`): the ``j``-th of them scores at least
    what the ``j``-th candidate overall does (signal ``time_cue_rank`` where that lifts it); the
    order of the offers is that of the lifted scores, which are their recalled (road) scores.
    A negative score enters at 0 (:func:`~charmem.domain.scoring.candidate_score`).
    """
    recalled = [candidate_score(float(hit.score)) for hit in hits]
    scores = recalled
    if periods:
        objects = recall.objects
        inside = [
            (obj := objects.get(hit.id)) is not None and happened_in(event_time(obj), periods) for hit in hits
        ]
        scores = period_lifts(recalled, inside)
    roots: list[MemoryId] = []
    for position in sorted(range(len(hits)), key=lambda n: -scores[n]):  # stable: ties keep their order
        hit, score = hits[position], scores[position]
        if recall.offer(hit.id, score, "vector"):
            roots.append(hit.id)
            if score > recalled[position]:
                recall.chosen[hit.id].signals.add("time_cue_rank")
    return roots


async def recall_notions(
    recall: Recall,
    vectors: VectorIndex,
    stats: RetrievalStatsStore,
    query_vector: Sequence[float],
    roots: Sequence[MemoryId],
) -> None:
    """Notions: the memories about focus entities and notions named in the query.

    Each notion's members enter at ``policy.expansion_decay`` times the best root's score (a
    hub's fewer, at a lower score: :func:`_notion_reach`): the current ones the vector index
    ranks nearest the query, and as many no longer current ones, newest first.
    """
    top = max((recall.chosen[i].score for i in roots), default=recall.policy.score_without_roots)
    seeds = await _notion_seeds(recall)
    if seeds is None:
        return
    links = await recall.graph.links_of(sorted(seeds), relations=recall.policy.notion_relations)
    members: dict[MemoryId, set[MemoryId]] = defaultdict(set)
    for link in links:
        if link.to_id in seeds:
            members[link.to_id].add(link.from_id)
    degrees = await stats.degrees(sorted(seeds))
    for seed in sorted(seeds):
        around = members.get(seed, set())
        signal, weight = seeds[seed]
        fanout, score = _notion_reach(recall, max(degrees.get(seed, 0), len(around)), top)
        score *= weight
        chosen = await _most_relevant(recall.graph, vectors, query_vector, recall.context, around, fanout)
        await recall.load(chosen)
        for memory_id in chosen:
            recall.offer(memory_id, score, signal)
        for memory_id in await _not_current_members(recall, around, fanout):
            recall.offer(memory_id, score, signal)


async def _notion_seeds(recall: Recall) -> Mapping[MemoryId, tuple[str, float]] | None:
    """The notions to recall around -> (signal, weight): ``focus_entity`` or ``named_notion``.

    Focus entities first (weight 1), then notions named in the query (their weight:
    :func:`_named_notions`); only ids the graph holds as entities. They are listed in the pack's
    ``entities``. ``None`` when none is in focus or named (no notion stage at all).
    """
    seeds = dict.fromkeys(recall.context.focus_entity_ids, ("focus_entity", 1.0))
    named = await _named_notions(recall.graph, recall.context, recall.policy)
    for subject, weight in sorted(named.items()):
        seeds.setdefault(subject, ("named_notion", weight))
    if not seeds:
        return None
    entities = await recall.graph.get_objects(sorted(seeds))
    seeds = {i: seed for i, seed in seeds.items() if isinstance(entities.get(i), Entity)}
    recall.entity_ids.update(seeds)
    return seeds


def _notion_reach(recall: Recall, degree: int, top: float) -> tuple[int, float]:
    """How many members of a notion of ``degree`` links enter, and at what score.

    A hub (more than ``hub_edge_cap`` links) admits ``per_node_fanout //
    policy.hub_fanout_divisor`` members (at least one), scaled by ``hub_edge_cap / degree``.
    """
    limits, policy = recall.context.graph_limits, recall.policy
    hub = degree > limits.hub_edge_cap
    recall.telemetry["hub_notions_narrowed"] += int(hub)
    fanout = max(1, limits.per_node_fanout // policy.hub_fanout_divisor) if hub else limits.per_node_fanout
    score = top * policy.expansion_decay * (limits.hub_edge_cap / degree if hub else 1.0)
    return fanout, score


async def _named_notions(
    graph: GraphStore, context: RetrievalContext, policy: ScoringPolicy
) -> dict[MemoryId, float]:
    """Notions whose current ``KnownAs`` name the query uses as a name -> the weight of the cue.

    A name occurs when :func:`~charmem.domain.rules.name_occurs_in` says so, which the store's
    :class:`~charmem.domain.names.NameIndex` answers in work that does not grow with the number
    of names; the belief asserting it must be current and recorded as of the context. How the
    query uses it (:func:`~charmem.domain.names.name_use`) weighs the cue: 1 as a name,
    ``policy.word_name_weight`` for an ordinary word whose case tells nothing, none for the
    ordinary word. A notion named twice takes its strongest cue.
    """
    if context.query is None:
        return {}
    query = context.query
    index = await graph.name_index()
    weights = {NameUse.NAME: 1.0, NameUse.UNMARKED: policy.word_name_weight, NameUse.WORD: 0.0}
    occurring = index.occurring_in(query)
    uses = {name: name_use(name, query) for _belief, _subject, name in occurring}
    cues = {
        assertion: weights[use]
        for assertion in occurring
        if (use := uses[assertion[2]]) is not None and weights[use] > 0
    }
    named: dict[MemoryId, float] = {}
    for assertion in await current_assertions(graph, sorted(cues), context.as_of):
        named[assertion[1]] = max(named.get(assertion[1], 0.0), cues[assertion])
    return named


async def current_subjects(
    graph: GraphStore, assertions: Sequence[NameAssertion], as_of: datetime | None
) -> set[MemoryId]:
    """The subjects of the name ``assertions`` whose belief is current and recorded by ``as_of``."""
    return {subject for _belief, subject, _name in await current_assertions(graph, assertions, as_of)}


async def current_assertions(
    graph: GraphStore, assertions: Sequence[NameAssertion], as_of: datetime | None
) -> list[NameAssertion]:
    """The name ``assertions`` whose belief is current and recorded by ``as_of`` (same order)."""
    if not assertions:
        return []
    beliefs = sorted({belief for belief, _subject, _name in assertions})
    currency = await graph.currency(beliefs, as_of=as_of)
    if as_of is not None:
        stored = await graph.get_objects(beliefs)
        recorded = {i for i, o in stored.items() if o.created_at <= as_of}
    else:
        recorded = set(beliefs)
    return [a for a in assertions if a[0] in recorded and currency.get(a[0]) is CurrencyStatus.CURRENT]


async def _most_relevant(
    graph: GraphStore,
    vectors: VectorIndex,
    query_vector: Sequence[float],
    context: RetrievalContext,
    members: set[MemoryId],
    limit: int,
) -> list[MemoryId]:
    """The ``limit`` members of a notion nearest to the query, ranked by the vector index itself.

    A notion may have many members (a hub has more links than ``hub_edge_cap``) and a rare
    relevant memory may be reachable only through it: the index ranks the members against the
    query, restricted to them (``VectorQuery.within``), so the relevant ones come first. No
    score floor: the notion itself (named in the query, or in focus) is the evidence.
    """
    if not members:
        return []
    found = await vectors.search(
        VectorQuery(
            vector=query_vector,
            limit=limit,
            object_types=context.object_type_defaults,
            text=context.query,
            within=tuple(sorted(members)),
        )
    )
    _hint_object_types(graph, found.hits)
    return [hit.id for hit in found.hits]


async def _not_current_members(recall: Recall, members: set[MemoryId], limit: int) -> list[MemoryId]:
    """The ``limit`` newest members of a notion that left candidate recall (not current now).

    Superseded and suppressed memories leave the vector index, so it cannot rank them: the graph
    reaches them. They are what the character believed or noticed about the notion before; met
    like every memory, they are judged by their currency as of the context: omissions by default
    (or items with ``include_superseded`` / ``include_suppressed``), and items under an ``as_of``
    from before they stopped being current. Only the types of the vector scope count
    (``object_type_defaults``), as for the current members, and only what was recorded by
    ``as_of``; newest first (event time, then id). Loads what it returns.
    """
    if not members:
        return []
    currency = await recall.graph.currency(sorted(members))
    stale = [i for i, status in currency.items() if status is not CurrencyStatus.CURRENT]
    if not stale:
        return []
    await recall.load(stale)
    scope = set(recall.context.object_type_defaults)
    found = [
        obj
        for i in stale
        if (obj := recall.objects.get(i)) is not None and object_type_of(obj) in scope and recall.visible(obj)
    ]
    newest = sorted(found, key=lambda obj: rank_key(0.0, event_time(obj), object_type_of(obj), obj.id))
    return [obj.id for obj in newest[:limit]]


def _hint_object_types(graph: GraphStore, hits: Sequence[VectorHit]) -> None:
    """Pass the types candidate recall reported to a graph store that takes them.

    Advisory (:class:`~charmem.ports.ObjectTypeHints`): a hint that raises, or a coroutine
    function where a plain method is expected, is logged and otherwise ignored, so a faulty hint
    can never fail a retrieval.
    """
    if not hits or not isinstance(graph, ObjectTypeHints):
        return
    try:
        hint: Callable[..., object] = graph.hint_object_types  # an adapter's may wrongly return
        returned = hint({hit.id: hit.object_type for hit in hits})
    except Exception as exc:  # noqa: BLE001 - advisory by contract: recall goes on without it
        log.warning("object_type_hints_failed", store=type(graph).__name__, error=type(exc).__name__)
        return
    if inspect.iscoroutine(returned):  # an ``async def``: never awaited, so it did nothing
        returned.close()
        log.warning("object_type_hints_not_synchronous", store=type(graph).__name__)
