"""How retrieval scores and orders memories: the scoring policy, score steps and the rank key.

Every weight and constant that tunes retrieval lives in :class:`ScoringPolicy`, each documented
where it is defined (its unit and why it has its value); how the values were measured and chosen
is the "Retrieval tuning history" of ``benchmarks/README.md``. The bounds a caller chooses per
query (``candidate_limit``, ``max_items``, :class:`~charmem.domain.retrieval.GraphLimits`) are
fields of the :class:`~charmem.domain.retrieval.RetrievalContext`, not of the policy.
"""

from __future__ import annotations

import heapq
from collections import defaultdict, deque
from collections.abc import Hashable, Iterable, Sequence
from datetime import datetime, timedelta

import attrs

from charmem.domain.ids import MemoryId
from charmem.domain.model import ObjectType, Relation
from charmem.domain.pack import AdmissionRoad

__all__ = [
    "DEFAULT_SCORING",
    "SCORE_RESOLUTION",
    "ScoringPolicy",
    "candidate_score",
    "combined_road_score",
    "context_score",
    "period_lifts",
    "rank_key",
    "score_step",
    "spread_discounts",
]


@attrs.frozen(kw_only=True)
class ScoringPolicy:
    """The weights and constants of retrieval, one frozen value (:data:`DEFAULT_SCORING`).

    Scores are the fused relevance of candidate recall (higher first); every factor below
    multiplies such a score, every count is a number of memories. How each value was measured or
    chosen: "Retrieval tuning history" in ``benchmarks/README.md``.
    """

    #: Factor on an expanded memory's score (its root's): half, so it ranks below its evidence.
    expansion_decay: float = 0.5

    #: Factor per step on a neighbouring turn (the recalled turn's), times :attr:`context_aside_factor`.
    context_decay: float = 0.95

    #: Factor on the reply to a recalled question (the question's score): the answer is what
    #: the question was recalled for (:func:`context_score`).
    reply_factor: float = 1.0

    #: Factor on every other neighbouring turn: it frames the recalled turn, and on LoCoMo it
    #: holds the evidence a few times less often than the next memory the query itself recalls.
    context_aside_factor: float = 0.8

    #: Factor on a spoken question (:func:`~charmem.domain.rules.spoken_question`):
    #: it asks, its reply tells (the reply comes with it at its full score). On LoCoMo a recalled
    #: question holds the evidence 2.6 times less often than a recalled statement.
    question_factor: float = 0.8

    #: Factor on a belief asserting names: the pack's ``entities`` show names, keep the top for episodes.
    name_belief_weight: float = 0.5

    #: Factor on a memory inside a time-cue period: LoCoMo turn recall gains little above 2.
    time_cue_weight: float = 2.0

    #: Lowest factor of the recency preference: recency reorders near-ties, never clear meaning.
    recency_floor: float = 0.8

    #: Factor on ``candidate_limit`` under a window or time cue: the period must still fill the pack.
    window_overfetch: int = 4

    #: Divisor of ``per_node_fanout`` for a hub's members (at least 1): rare ones in, routine ones out.
    hub_fanout_divisor: int = 4

    #: Count of an active thread's newest members recalled with it: where it stands, without a flood.
    thread_recent_members: int = 3

    #: Score notion members scale from when no root is admitted: top cosine, the name is the evidence.
    score_without_roots: float = 1.0

    #: Factor on a memory that came along with another (the turns around an answer, expansion),
    #: per such memory of its episode ranked before it: the third turn around one answer adds
    #: less than the answer of another conversation, so the top of the pack spans the several
    #: conversations a question may need (:func:`spread_discounts`). What the query itself
    #: recalled is never discounted.
    episode_repeat_factor: float = 0.8

    #: Factor on the lowest score of what corrected a belief, capping the score of a memory the
    #: correction left behind (a source of the old belief and of no current one): the correction
    #: and its sources come first for a question about the fact, the old source just below.
    corrected_source_factor: float = 0.9

    #: Factor on the members of a notion named by an ordinary word ("Will", "May") where the
    #: query's case does not show it means the name (a sentence's first word, a query in one
    #: case): they come, below what the question itself finds. Written in lower case inside a
    #: cased query, such a word is no name cue at all (:func:`charmem.domain.names.name_use`).
    word_name_weight: float = 0.5

    #: Relations from a notion to its members (about, involves, mentions): what membership means.
    notion_relations: tuple[Relation, ...] = (Relation.ABOUT, Relation.INVOLVES, Relation.MENTIONS)

    #: Duration a named day extends on each side (time cues): absorbs the speaker's time zone.
    time_cue_day_margin: timedelta = timedelta(days=1)

    #: Fraction of its unit a count back ("two months ago") extends on each side of the day it
    #: names: 0.5 covers what rounds to that count (1.5 to 2.5 months), no more.
    time_cue_count_margin: float = 0.5

    #: Score of the first memory a scene road brings (a similarity road: times the cosine).
    #: Who is here and what is being done matter most, then the place, an anniversary and a
    #: supplied range, then similar-looking people and places; recency only fills in.
    road_weights: tuple[tuple[AdmissionRoad, float], ...] = (
        (AdmissionRoad.PARTICIPANT, 0.8),
        (AdmissionRoad.ACTIVITY, 0.8),
        (AdmissionRoad.PLACE, 0.6),
        (AdmissionRoad.ANNIVERSARY, 0.6),
        (AdmissionRoad.RANGE, 0.6),
        (AdmissionRoad.PERSON_DESCRIPTION, 0.7),
        (AdmissionRoad.SETTING_WORDS, 0.6),
        (AdmissionRoad.RECENCY, 0.25),
    )

    #: Factor on the road weights, times the best topic score, when a query found memories too:
    #: the question leads and the scene colours (a memory the scene reaches often enough still
    #: comes up beside the answer, never above it by its roads alone).
    scene_beside_topic: float = 0.5

    #: Floor on the cosine of a described person or setting (the similarity roads): a
    #: description recalls occasions described alike, not every occasion that had a name.
    scene_words_floor: float = 0.3

    #: Factor per rank within one road's list (newest first): the next occasion counts a bit less.
    road_rank_decay: float = 0.9

    #: Bonus per extra road that reached a memory (of its best road score): met twice, more relevant.
    road_bonus: float = 0.25

    #: Score of an unsettled obligation naming a participant: above what the roads bring.
    obligation_score: float = 0.9

    #: Factor on that obligation once every road is combined: what is owed to or by someone
    #: present leads their other memories even when a query reached those too.
    obligation_lead: float = 1.5

    #: Occasions one road brings (count): a participant's, a setting's, a range's; hubs fewer.
    road_occasions: int = 6

    #: Recent occasions the recency road brings (count): where things stood lately.
    recent_occasions: int = 3

    #: Turns of an occasion recalled with it (count, in order): the occasion, not the whole session.
    occasion_turns: int = 3

    def road_weight(self, road: AdmissionRoad) -> float:
        """The weight of ``road`` (:attr:`road_weights`; 0 for the topic, which is scored by recall)."""
        return dict(self.road_weights).get(road, 0.0)

    def recency_factor(self, age_seconds: float, half_life_seconds: float) -> float:
        """Score factor of the ``recency`` preference: ``F + (1 - F) * 0.5 ** (age / half_life)``.

        ``F`` is :attr:`recency_floor`: 1 for what happens now (or later), 0.9 one half-life
        ago (with 0.8), never below ``F``.

        Args:
            age_seconds: how long before the reference time the memory happened (seconds).
            half_life_seconds: the preference's half-life (seconds, positive).

        Returns:
            float: the factor, between ``F`` and 1.
        """
        decay = float(0.5 ** (max(age_seconds, 0.0) / half_life_seconds))
        return self.recency_floor + (1.0 - self.recency_floor) * decay


#: The scoring policy retrieval uses.
DEFAULT_SCORING = ScoringPolicy()


#: Scores closer than this rank as ties, broken canonically by :func:`rank_key`: stores that
#: compute in float32 and in float64 give one memory scores a few 1e-8 apart, and the pack's order
#: must not depend on that.
SCORE_RESOLUTION = 1e-6


def combined_road_score(scores: Iterable[float], bonus: float) -> float:
    """One memory's score from the best score of each road that reached it.

    The best, plus ``bonus`` times the best for every further road: ``best * (1 + bonus * (n -
    1))``. A memory reached by one road keeps that road's score, so a pack of one road (a query
    alone) is scored as before roads existed.
    """
    ordered = sorted(scores, reverse=True)
    if not ordered:
        return 0.0
    return ordered[0] * (1.0 + bonus * (len(ordered) - 1))


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
    """The sort key of a pack's items: score descending, newer first, object type, id.

    Scores are compared in steps of :data:`SCORE_RESOLUTION`, so float noise below it never
    decides an order; what it would have decided falls to the canonical tie-breaks, so identical
    stores and queries give identical packs whatever the insertion order. Sorting ``pack.items``
    by ``rank_key(i.score, i.occurred_at, i.object_type, i.id)`` gives their order.

    Returns:
        tuple[int, float, str, MemoryId]: ascending order is rank order.
    """
    return (-score_step(score), -occurred_at.timestamp(), object_type.value, memory_id)


def context_score(root_score: float, steps: int, *, reply: bool, policy: ScoringPolicy) -> float:
    """The score of a turn ``steps`` turns from a recalled observation in its episode (came along).

    The reply to a recalled question (:func:`~charmem.domain.rules.replies_to`) scores
    ``policy.reply_factor`` times the question: when a question is what matched, its answer is
    what was looked for. Any other neighbouring turn scores ``policy.context_decay ** steps *
    policy.context_aside_factor`` times it: it frames the recalled turn, so it ranks below the
    next memories the query itself recalled.

    Args:
        root_score: the recalled observation's score.
        steps: how many turns away (1 for the turn just before or after).
        reply: whether the turn is the reply to the recalled observation, a question.
        policy: the factors.

    Returns:
        float: the turn's score.
    """
    if reply:
        return root_score * policy.reply_factor
    return root_score * policy.context_decay**steps * policy.context_aside_factor


def candidate_score(similarity: float) -> float:
    """What a candidate's recalled score counts for in ranking: itself, or 0 when negative.

    Ranking multiplies scores by factors (a question's 0.8, a time cue's 2.0, the spread's
    discounts), which lower or raise a score only when it is not negative. A candidate less
    similar to the query than one with nothing in common (a negative cosine, admitted under a
    negative ``score_floor``) ranks as one with nothing in common: at 0, below every positive
    score, ordered among its ties by the canonical tie-breaks (:func:`rank_key`).

    Args:
        similarity: the vector index's score for the candidate (a fused rank score, or a cosine).

    Returns:
        float: ``similarity`` if at least 0, else 0.0.
    """
    return max(similarity, 0.0)


def period_lifts(scores: Sequence[float], inside: Sequence[bool]) -> list[float]:
    """Candidates' scores with those inside a time-cue period ranked as a list of their own.

    A date or a relative time in a query is a ranking of its own, fused with the query's: the
    candidates that happened in the period it names, in their order, from the top. The ``j``-th
    of them (from 0) scores at least what the ``j``-th candidate overall scores, so the best
    memory of the named day competes with the best memory of all, however far down the meaning
    alone ranked it. Scale-free: it compares ranks, whatever a vector index's scores are.

    Args:
        scores: the candidates' scores in rank order (descending).
        inside: whether each happened in a period the query names, same order.

    Returns:
        list[float]: the lifted scores, same order (no longer sorted).
    """
    lifted = list(scores)
    place = 0
    for position, is_inside in enumerate(inside):
        if is_inside:
            lifted[position] = max(scores[position], scores[place])
            place += 1
    return lifted


def spread_discounts(groups: Sequence[Hashable], scores: Sequence[float], factor: float) -> list[float]:
    """The discount of each ranked memory for the memories of its group ranked before it.

    A greedy spread (maximal marginal relevance with "same group" as the similarity): walk the
    memories, each time taking the one whose score times ``factor ** n`` is highest, where ``n``
    counts the memories of its group already taken. The memory's discount is that ``factor **
    n``; the first of each group keeps its score. Taken in that order the discounted scores never
    rise, so ranking by them (:func:`rank_key`) is the spread.

    Args:
        groups: each memory's group (an episode; a memory of its own is a group of one), in rank
            order (scores descending; ties in their canonical order).
        scores: their scores, same order, descending.
        factor: in (0, 1]; 1 discounts nothing.

    Returns:
        list[float]: one discount per memory, same order.
    """
    members: dict[Hashable, deque[int]] = defaultdict(deque)
    for position, group in enumerate(groups):
        members[group].append(position)
    heap = [(-scores[queue[0]], queue[0], group) for group, queue in members.items()]
    heapq.heapify(heap)
    taken: dict[Hashable, int] = defaultdict(int)
    discounts = [1.0] * len(scores)
    while heap:
        _negated, position, group = heapq.heappop(heap)
        queue = members[group]
        queue.popleft()
        discounts[position] = factor ** taken[group]
        taken[group] += 1
        if queue:
            following = queue[0]
            heapq.heappush(heap, (-scores[following] * factor ** taken[group], following, group))
    return discounts
