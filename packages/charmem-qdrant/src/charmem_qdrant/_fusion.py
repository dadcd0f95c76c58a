"""Canonical stage ranking and reciprocal rank fusion, shared by both vector indexes.

With the lexical cue on, a search runs two stages in Qdrant (the exact dense cosine search and the
BM25 sparse search) and fuses them here, in the client, rather than with Qdrant's own
``Fusion.Rrf`` / ``RrfQuery``. Measured on Qdrant Edge 0.9 and qdrant-client 1.20's local mode:
Qdrant ranks the points of a stage by position, and it orders points with *equal* stage scores by
where they are stored (an order set by the insertion order, though neither insertion nor id order
as such), so identical points get different ranks, hence different fused scores, and the hits
depend on the order the points were inserted in. charmem requires identical stores and queries
to give byte-identical context packs whatever the insertion order, so the fusion is
computed here with one change to Qdrant's definition: points with equal stage scores share the
rank of the first of their tie group (competition ranking, "1224"). Scores in one step of
``SCORE_RESOLUTION`` are equal here (``charmem.domain.retrieval.score_step``): Qdrant computes
in float32, core's reference index in float64, and noise below the step must not decide which
candidate a cut keeps.

Nothing here talks to Qdrant: :func:`rrf_fuse` is a pure function over ``(id, score)`` lists, and
:class:`StageRanker` only plans how many points each stage must fetch.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Sequence
from operator import itemgetter
from typing import Final, Generic, TypeVar

from charmem.domain.retrieval import score_step

__all__ = [
    "DEFAULT_FUSION_WEIGHTS",
    "MIN_STAGE",
    "RRF_K",
    "TIE_MARGIN",
    "StageRanker",
    "check_weights",
    "competition_ranks",
    "first_fetch",
    "fuse_ranked",
    "rrf_contribution",
    "rrf_fuse",
    "stage_size",
    "top_canonical",
]

A = TypeVar("A")
P = TypeVar("P")
T = TypeVar("T")
#: A point id as a driver keeps it: the canonical UUID string, or the UUID's integer (the same
#: order: fixed-width lowercase hex), which Qdrant Edge's ids give without formatting a string.
Key = TypeVar("Key", str, int)

#: The ``k`` of reciprocal rank fusion: a point at 0-based rank ``r`` of a stage gets ``1/(k+r)``.
#: A small ``k`` lets the first ranks of a stage count for more than the long tail: what both cues
#: put on top wins. On LoCoMo (1,033 questions, context window 2) turn recall@10 on turns and facts
#: is 0.766 at the textbook 60, 0.774 at 20, 0.783 at 10, 0.789 at 5, 0.779 at 3 and 0.772 at 2; on
#: turns alone 0.708 at 60, 0.699 at 10 and 0.702 at 5 (benchmarks/locomo.py).
RRF_K: Final = 5
#: The stage weights (dense, lexical) unless configured otherwise. The dense stage weighs 1.5:
#: with utterances indexed with their speaker's name, dense recall carries more of the meaning;
#: on LoCoMo (turns and facts, 1,033 questions) turn recall@10 goes from 0.759 at (1.0, 1.0) to
#: 0.762 at (1.5, 1.0) and 0.761 at (2.0, 1.0), context window 2, k 60 (benchmarks/locomo.py); at
#: k 5: 0.783, 0.789 and 0.792, with 0.784 at (1.2, 1.0).
DEFAULT_FUSION_WEIGHTS: Final[tuple[float, float]] = (1.5, 1.0)
#: The fewest points fetched beyond the wanted count, to see whether the boundary is tied; a
#: stage's first fetch is ``want + max(TIE_MARGIN, want)`` (:func:`first_fetch`).
TIE_MARGIN: Final = 8
#: The smallest number of points each stage of a fused search contributes.
MIN_STAGE: Final = 64


_ID: Final = itemgetter(0)
_SCORE: Final = itemgetter(1)


def _canonical(
    points: Iterable[P], id_of: Callable[[P], Key], score_of: Callable[[P], float]
) -> list[P]:
    """``points`` by score step descending (:func:`score_step`), then id ascending.

    Two stable sorts; the id sort's key runs in C when ``id_of`` is an ``operator`` getter.
    """
    ordered = sorted(points, key=id_of)
    # stable: ties keep the id order
    ordered.sort(key=lambda point: score_step(score_of(point)), reverse=True)
    return ordered


def _tied_prefix(scores: Sequence[float], count: int) -> int:
    """How many of ``scores`` (descending) can be among the ``count`` best in canonical order.

    Every score whose :func:`score_step` is at least that of the ``count``-th: the ones above
    it, and all of its tie group, whose ids decide the cut. Steps grow with scores, so only
    the steps around the ``count``-th are computed.
    """
    if count >= len(scores):
        return len(scores)
    boundary = score_step(scores[count - 1])
    end = count
    while end < len(scores) and score_step(scores[end]) >= boundary:
        end += 1
    return end


def top_canonical(
    points: Iterable[P], count: int, id_of: Callable[[P], Key], score_of: Callable[[P], float]
) -> list[P]:
    """The first ``count`` of ``points`` in canonical order (``_canonical(points)[:count]``).

    Sorted by raw score first (in C), so :func:`score_step` runs only on the points that can
    make the cut rather than on all of them.
    """
    by_score = sorted(points, key=score_of, reverse=True)
    if count <= 0:
        return []
    scores = [score_of(point) for point in by_score]
    candidates = by_score[: _tied_prefix(scores, count)]
    return _canonical(candidates, id_of, score_of)[:count]


def first_fetch(want: int, ties_likely: bool = False) -> int:
    """Points a stage asks for first: ``want + TIE_MARGIN``, or twice ``want`` if ties are likely.

    A lexical stage's BM25 scores are often tied far past its cut (texts with the same matched
    words and length score the same), and a second round costs more than reading the scores of
    the extra points (their ids are read only when needed: :class:`StageRanker`). On the latency
    benchmark's texts a margin of 8 left the BM25 cut of three searches in four to a second
    round. Dense cosines rarely tie, and an exact scan's extra points cost about 0.6 µs each
    (measured), so the dense stage keeps the small margin.
    """
    return want + (max(TIE_MARGIN, want) if ties_likely else TIE_MARGIN)


def stage_size(limit: int) -> int:
    """Points each stage of a fused search contributes for ``limit`` hits: max(4 * limit, 64)."""
    return max(4 * limit, MIN_STAGE)


def check_weights(weights: Sequence[float], count: int) -> tuple[float, ...]:
    """``weights`` as floats, one per stage, each finite and > 0.

    Raises:
        ValueError: another number of weights than ``count``, or a weight that is not a finite
            number > 0 (Qdrant refuses those too; turn the lexical cue off instead of weighting it
            zero).
    """
    values = tuple(weights)
    if len(values) != count:
        raise ValueError(f"expected {count} fusion weights, got {len(values)}: {values!r}")
    checked: list[float] = []
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"fusion weights must be numbers, not {value!r}")
        number = float(value)
        if not math.isfinite(number) or number <= 0:
            raise ValueError(f"fusion weights must be finite and > 0, not {value!r}")
        checked.append(number)
    return tuple(checked)


def competition_ranks(scores: Sequence[float]) -> list[int]:
    """0-based competition ranks of ``scores`` sorted descending: a tie shares its first rank.

    ``[0.9, 0.5, 0.5, 0.2]`` ranks ``[0, 1, 1, 3]``; scores of one :func:`score_step` tie.
    """
    return _step_ranks([score_step(score) for score in scores])


def _step_ranks(steps: Sequence[int]) -> list[int]:
    """Competition ranks of score ``steps`` sorted descending (:func:`competition_ranks`)."""
    ranks: list[int] = []
    for position, step in enumerate(steps):
        ranks.append(ranks[-1] if position and step == steps[position - 1] else position)
    return ranks


def rrf_contribution(rank: int, weight: float = 1.0, k: int = RRF_K) -> float:
    """What a point at 0-based ``rank`` of a stage of ``weight`` adds to its fused score.

    Qdrant's definition (Qdrant Edge 0.9, qdrant-client 1.20): ``1 / ((rank + 1) / weight + k -
    1)``, which is the textbook ``1 / (k + rank)`` at weight 1.0. The weight divides the 1-based
    rank: a stage of weight 2 treats its 4th point as the 2nd of an unweighted one.
    """
    return 1.0 / ((rank + 1) / weight + k - 1)


def rrf_fuse(
    stages: Sequence[Iterable[tuple[Key, float]]],
    *,
    k: int = RRF_K,
    weights: Sequence[float] | None = None,
    limit: int | None = None,
) -> list[tuple[Key, float]]:
    """Fuse ranked stages by reciprocal rank fusion with competition ranks; canonical order.

    Each stage is ranked by (score descending, id ascending); a point's rank is the 0-based
    position of the first point of its tie group (points with equal scores share it). A point
    scores the sum, over the stages holding it, of :func:`rrf_contribution` ``(rank, weight, k)``;
    the stages are summed in the order given, so equal inputs give bit-identical sums. The result
    does not depend on the order of the points inside any stage.

    Args:
        stages: per stage, its ``(id, score)`` points in any order; ids are unique per stage.
        k: the RRF constant (>= 1), :data:`RRF_K` by default.
        weights: one weight (finite, > 0) per stage; 1.0 each when omitted.
        limit: keep only the first ``limit`` points of that order (None: every point).

    Returns:
        Every point of any stage (or the first ``limit``) as ``(id, fused score)``, by fused
        score descending, then id ascending.

    Raises:
        ValueError: a duplicate id within a stage, ``k`` < 1, or bad weights.
    """
    ranked = []
    for stage in stages:
        # (-step, id) tuples sort in C into canonical order; each step is computed once
        keyed = sorted((-score_step(score), point_id) for point_id, score in stage)
        ranks = _step_ranks([-negated for negated, _ in keyed])
        ranked.append(([point_id for _, point_id in keyed], ranks))
    return fuse_ranked(ranked, k=k, weights=weights, limit=limit)


def fuse_ranked(
    stages: Sequence[tuple[Sequence[Key], Sequence[int]]],
    *,
    k: int = RRF_K,
    weights: Sequence[float] | None = None,
    limit: int | None = None,
) -> list[tuple[Key, float]]:
    """:func:`rrf_fuse` of stages already ranked: each its ids and their competition ranks.

    For a caller that ranked its stages canonically already (:meth:`StageRanker.ranks`): the
    fused scores are the same sums, in the same order, as :func:`rrf_fuse` computes.

    Args:
        stages: per stage, ``(ids, ranks)``: its ids and each id's 0-based competition rank
            (:func:`competition_ranks` of the stage's scores in canonical order); ids are unique
            per stage.
        k: the RRF constant (>= 1), :data:`RRF_K` by default.
        weights: one weight (finite, > 0) per stage; 1.0 each when omitted.
        limit: keep only the first ``limit`` points (None: every point).

    Returns:
        See :func:`rrf_fuse`.

    Raises:
        ValueError: a duplicate id within a stage, ids and ranks of unequal lengths, ``k`` < 1,
            or bad weights.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"the RRF k must be an int >= 1, not {k!r}")
    checked = check_weights([1.0] * len(stages) if weights is None else weights, len(stages))
    fused: dict[Key, float] = {}
    for (ids, ranks), weight in zip(stages, checked, strict=True):
        if len(ids) != len(ranks):
            raise ValueError(f"a stage has {len(ids)} ids but {len(ranks)} ranks")
        if len(set(ids)) != len(ids):
            raise ValueError(f"a point appears twice in one stage: {_duplicate(ids)}")
        contribution = _contributions(len(ids), weight, k)
        get = fused.get
        for point_id, rank in zip(ids, ranks, strict=True):
            fused[point_id] = get(point_id, 0.0) + contribution[rank]
    if limit is None:
        return _canonical(fused.items(), _ID, _SCORE)
    return top_canonical(fused.items(), limit, _ID, _SCORE)


@functools.lru_cache(maxsize=64)
def _contributions(count: int, weight: float, k: int) -> tuple[float, ...]:
    """:func:`rrf_contribution` of the ranks ``0 .. count - 1`` of a stage of ``weight``."""
    return tuple(rrf_contribution(rank, weight, k) for rank in range(count))


def _duplicate(ids: Sequence[Key]) -> Key | None:
    """The first id of ``ids`` that appears twice."""
    seen: set[Key] = set()
    for point_id in ids:
        if point_id in seen:
            return point_id
        seen.add(point_id)
    return None


class StageRanker(Generic[A, P]):
    """Plans the fetches that give each stage its best points in canonical order.

    Qdrant returns a query's best ``n`` points by score but orders, and cuts, equal scores in its
    own order (storage order). So each stage first fetches :func:`first_fetch` points and, while
    the last fetched point still ties with the ``want``-th, fetches twice as many, until every
    point tied at the boundary is in hand; then it sorts by (score descending, id ascending) and
    keeps ``want``. A cut through a tie therefore always keeps the smallest ids.

    Whether a round settles a stage is decided on the answer's scores alone; only the points that
    can be among the ``want`` best (those at or above the boundary's score step) are converted
    to kept points with ``convert``, so a driver reads ids only for them (reading a Qdrant Edge
    point id builds a ``uuid.UUID``: about 1 µs, measured).

    The caller runs the rounds, all pending stages of a round in one batch request::

        ranker = StageRanker(wants, available, id_of, score_of, convert)
        while ranker.pending:
            ranker.accept(run_batch(ranker.pending))  # one answer per (stage, n), in order
        stages = ranker.ranked()
        fused = fuse_ranked([(list(map(id_of, kept)), ranks)
                             for kept, ranks in zip(stages, ranker.ranks())])

    Args:
        wants: per stage, the points it must contribute (count, >= 1).
        available: an upper bound on the points any stage can return (count, >= 1): the points
            matching the query's filter.
        id_of: a kept point's id (an ``operator.itemgetter`` / ``attrgetter`` keeps sorting in C).
        score_of: an answer point's stage score (likewise).
        convert: an answer point as the caller keeps it; it keeps the point's score (the same
            ``score_of`` reads it, so a kept point is an answer point too when ``convert`` is the
            identity).
        ties_likely: per stage, whether its scores often tie (:func:`first_fetch`); none by
            default.
    """

    def __init__(
        self,
        wants: Sequence[int],
        available: int,
        id_of: Callable[[P], str] | Callable[[P], int],
        score_of: Callable[[A], float],
        convert: Callable[[A], P],
        ties_likely: Sequence[bool] = (),
    ) -> None:
        if available < 1 or any(want < 1 for want in wants):
            raise ValueError("every stage must want >= 1 point, from >= 1 available")
        self._wants = list(wants)
        self._available = available
        self._id_of = id_of
        self._score_of = score_of
        self._convert = convert
        likely = list(ties_likely) + [False] * (len(self._wants) - len(ties_likely))
        self._fetch = [
            max(1, min(first_fetch(want, tied), available))
            for want, tied in zip(self._wants, likely, strict=True)
        ]
        self._ranked: list[list[P] | None] = [None] * len(self._wants)
        self._ranks: list[list[int] | None] = [None] * len(self._wants)

    @property
    def pending(self) -> list[tuple[int, int]]:
        """``(stage index, points to fetch)`` of every stage not settled yet, in stage order."""
        return [(s, self._fetch[s]) for s, done in enumerate(self._ranked) if done is None]

    def accept(self, answers: Sequence[Sequence[A]]) -> None:
        """Take Qdrant's answers to :attr:`pending` (same order) and settle what they settle."""
        wanted = self.pending
        if len(answers) != len(wanted):
            raise ValueError(f"expected {len(wanted)} answers, got {len(answers)}")
        for (stage, fetched), answer in zip(wanted, answers, strict=True):
            points, scores = _by_score(answer, self._score_of)
            want = self._wants[stage]
            settled = (
                len(points) < fetched
                or fetched >= self._available
                or len(points) <= want
                or score_step(scores[-1]) < score_step(scores[want - 1])
            )
            if settled:
                self._ranked[stage], self._ranks[stage] = self._keep(points, scores, want)
            else:
                self._fetch[stage] = min(fetched * 2, self._available)

    def _keep(self, points: list[A], scores: list[float], want: int) -> tuple[list[P], list[int]]:
        """The ``want`` best of ``points`` (score descending) in canonical order, converted.

        Returns:
            The kept points and their competition ranks (:func:`competition_ranks`).
        """
        end = _tied_prefix(scores, want)
        candidates = list(map(self._convert, points[:end]))
        steps = list(map(score_step, scores[:end]))
        if len(set(steps)) == end:  # no two tie: the score order is the canonical one
            return candidates[:want], list(range(min(want, end)))
        # (-step, id, position) tuples sort in C into canonical order
        order = sorted(
            zip([-step for step in steps], map(self._id_of, candidates), range(end), strict=True)
        )
        kept = order[:want]
        return [candidates[at] for _, _, at in kept], _step_ranks([-neg for neg, _, _ in kept])

    def ranked(self) -> list[list[P]]:
        """Each stage's best points by (score descending, id ascending), once none is pending.

        Raises:
            RuntimeError: some stage is still pending.
        """
        return _settled(self._ranked)

    def ranks(self) -> list[list[int]]:
        """The competition ranks of each stage's :meth:`ranked` points, once none is pending.

        What :func:`fuse_ranked` takes with the points' ids: the ranks :func:`rrf_fuse` would give
        the same points, from the score steps the cut computed already.

        Raises:
            RuntimeError: some stage is still pending.
        """
        return _settled(self._ranks)


def _settled(stages: Sequence[T | None]) -> list[T]:
    """Every stage's value, once all are settled (none is None).

    Raises:
        RuntimeError: some stage is still pending.
    """
    done = [stage for stage in stages if stage is not None]
    if len(done) != len(stages):
        raise RuntimeError("some stages are still pending")
    return done


def _by_score(answer: Sequence[A], score_of: Callable[[A], float]) -> tuple[list[A], list[float]]:
    """``answer`` by score descending, and its scores (each read once when already in order).

    Qdrant answers in that order; the stable sort only runs for an answer that is not.
    """
    scores = list(map(score_of, answer))
    if scores == sorted(scores, reverse=True):
        return list(answer), scores
    points = sorted(answer, key=score_of, reverse=True)
    return points, list(map(score_of, points))
