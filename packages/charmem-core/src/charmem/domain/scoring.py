"""How retrieval scores and orders memories: the scoring policy, score steps and the rank key.

Every weight and constant that tunes retrieval lives in :class:`ScoringPolicy`, each documented
where it is defined (its unit and why it has its value); how the values were measured and chosen
is the "Retrieval tuning history" of ``benchmarks/README.md``. The bounds a caller chooses per
query (``candidate_limit``, ``max_items``, :class:`~charmem.domain.retrieval.GraphLimits`) are
fields of the :class:`~charmem.domain.retrieval.RetrievalContext`, not of the policy.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import attrs

from charmem.domain.ids import MemoryId
from charmem.domain.model import ObjectType, Relation

__all__ = [
    "DEFAULT_SCORING",
    "SCORE_RESOLUTION",
    "ScoringPolicy",
    "rank_key",
    "score_step",
]


@attrs.frozen(kw_only=True)
class ScoringPolicy:
    """The weights and constants of retrieval, one frozen value (:data:`DEFAULT_SCORING`).

    Scores are the fused relevance of candidate recall (higher first); every factor below
    multiplies such a score, and every count is a number of memories.
    """

    #: Score of an expanded memory relative to the memory it was reached from (factor): half, so
    #: a neighbour never outranks the evidence that led to it, yet beats weak candidates.
    expansion_decay: float = 0.5

    #: Score of a neighbouring turn per step from the recalled observation (factor per turn):
    #: close to 1, since the answer to a question is usually the next turn.
    context_decay: float = 0.95

    #: Score factor of a belief that asserts names: the pack's ``entities`` already show names,
    #: so identity knowledge should not push episodic memories out of the top ranks.
    name_belief_weight: float = 0.5

    #: Score factor of a memory that happened in a period an absolute date of the query names:
    #: 2 measured best on LoCoMo turn recall (``benchmarks/README.md``).
    time_cue_weight: float = 2.0

    #: The lowest factor the ``recency`` preference applies, however old a memory is: recency
    #: reorders near-ties in meaning, never lets a recent distractor beat a clearly better memory.
    recency_floor: float = 0.8

    #: Candidate recall fetches this many times ``candidate_limit`` under an event-time window or
    #: a time cue (factor): enough for what happened in the period to still fill the pack.
    window_overfetch: int = 4

    #: A hub notion admits ``per_node_fanout // hub_fanout_divisor`` members, at least one
    #: (divisor): a quarter keeps a rare relevant member while routine ones stay out.
    hub_fanout_divisor: int = 4

    #: Newest members of an active thread recalled with it, at most ``per_node_fanout`` (count):
    #: three show where a storyline stands without flooding the pack.
    thread_recent_members: int = 3

    #: The best root score notion members are scaled from when candidate recall admitted none
    #: (score): the top of the cosine scale, so a named notion alone still recalls its members.
    score_without_roots: float = 1.0

    #: The relations that lead from a notion to its members (what is about, involves or
    #: mentions it); ``known_as`` and the rest are not membership.
    notion_relations: tuple[Relation, ...] = (Relation.ABOUT, Relation.INVOLVES, Relation.MENTIONS)

    #: Margin around a day a query names (time cues): the day before and the day after count
    #: too, absorbing the time zone of the speaker (duration).
    time_cue_day_margin: timedelta = timedelta(days=1)

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
