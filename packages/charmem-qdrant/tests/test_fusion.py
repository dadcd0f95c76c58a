"""The shared fusion rule (``charmem_qdrant._fusion``): pure properties, and Qdrant's own RRF.

The property tests need no Qdrant. The last tests run Qdrant Edge's own ``Fusion.Rrf`` on data
without ties and check that the client-side fusion gives the same scores and order: the rule is
Qdrant's, except that tied stage scores share a rank.
"""

from __future__ import annotations

import math
import random
import uuid
from collections.abc import Callable
from operator import itemgetter
from pathlib import Path
from typing import cast

import pytest
import qdrant_edge as qe
from hypothesis import given, settings
from hypothesis import strategies as st

from charmem.domain.retrieval import score_step
from charmem_qdrant._fusion import (
    RRF_K,
    TIE_MARGIN,
    StageRanker,
    check_weights,
    competition_ranks,
    first_fetch,
    fuse_ranked,
    rrf_contribution,
    rrf_fuse,
    stage_size,
    top_canonical,
)

Stage = list[tuple[str, float]]

_IDS = st.uuids(version=4).map(str)
# few distinct scores, so that most stages hold ties (0.5 and 0.5000001 are one score step apart
# by less than SCORE_RESOLUTION: a tie too)
_SCORES = st.sampled_from([0.0, 0.25, 0.5, 0.5000001, 0.75, 1.0, 3.5])
_WEIGHTS = st.floats(min_value=0.05, max_value=20.0, allow_nan=False, allow_infinity=False)


@st.composite
def _stages(draw: st.DrawFn) -> list[Stage]:
    """One to three stages over a shared pool of ids (a point may be in several stages)."""
    pool = draw(st.lists(_IDS, min_size=1, max_size=30, unique=True))
    stages = []
    for _ in range(draw(st.integers(1, 3))):
        members = draw(st.lists(st.sampled_from(pool), unique=True, max_size=len(pool)))
        stages.append([(point_id, draw(_SCORES)) for point_id in members])
    return stages


def _canonical(stage: Stage) -> Stage:
    return sorted(stage, key=lambda point: (-score_step(point[1]), point[0]))


def _kept(point: tuple[str, float]) -> tuple[str, float]:
    return point


# ---------------------------------------------------------------- pure properties


@settings(max_examples=300, deadline=None)
@given(stages=_stages(), weights=st.lists(_WEIGHTS, min_size=3, max_size=3), data=st.data())
def test_permuting_the_points_of_a_stage_never_changes_the_result(
    stages: list[Stage], weights: list[float], data: st.DataObject
) -> None:
    """Any input order of each stage (so any storage order of tied points): the same output."""
    used = weights[: len(stages)]
    expected = rrf_fuse(stages, weights=used)
    permuted = [data.draw(st.permutations(stage)) for stage in stages]
    assert rrf_fuse(permuted, weights=used) == expected


@settings(max_examples=300, deadline=None)
@given(stages=_stages(), limit=st.integers(0, 40))
def test_a_limit_keeps_the_first_points_of_the_full_fusion(stages: list[Stage], limit: int) -> None:
    """``limit`` cuts the canonical order, ties at the cut kept by id as in the full order."""
    assert rrf_fuse(stages, limit=limit) == rrf_fuse(stages)[:limit]
    for stage in stages:
        assert (
            top_canonical(stage, limit, itemgetter(0), itemgetter(1)) == _canonical(stage)[:limit]
        )


@settings(max_examples=300, deadline=None)
@given(stages=_stages(), data=st.data())
def test_tied_points_get_bit_identical_scores_and_come_by_id(
    stages: list[Stage], data: st.DataObject
) -> None:
    """Points with equal scores in every stage (and in the same stages) fuse to equal scores."""
    fused = rrf_fuse(stages)
    assert fused == sorted(fused, key=lambda item: (-score_step(item[1]), item[0]))
    scores = dict(fused)
    profile = {
        point_id: tuple(dict(stage).get(point_id) for stage in stages) for point_id in scores
    }
    for first in scores:
        for second in scores:
            if profile[first] == profile[second]:
                assert scores[first] == scores[second]


@settings(max_examples=200, deadline=None)
@given(stages=_stages())
def test_the_fused_score_is_the_sum_of_competition_rank_contributions(stages: list[Stage]) -> None:
    """The definition, spelled out: rank = the position of the first point of the tie group."""
    want: dict[str, float] = {}
    for stage in stages:
        ranked = _canonical(stage)
        for point_id, score in ranked:
            rank = next(
                n for n, (_, other) in enumerate(ranked) if score_step(other) == score_step(score)
            )
            want[point_id] = want.get(point_id, 0.0) + 1.0 / (RRF_K + rank)
    got = dict(rrf_fuse(stages))
    assert got.keys() == want.keys()
    for point_id, score in got.items():
        assert math.isclose(score, want[point_id], rel_tol=1e-12)


@settings(max_examples=200, deadline=None)
@given(
    scores=st.lists(st.floats(-5, 5), min_size=1, max_size=40, unique_by=score_step),
    weights=st.lists(_WEIGHTS, min_size=2, max_size=2),
)
def test_without_ties_it_is_plain_weighted_rrf_over_positions(
    scores: list[float], weights: list[float]
) -> None:
    """No ties: exactly RRF over 0-based positions, with Qdrant's weighting."""
    ids = [str(uuid.UUID(int=n + 1)) for n in range(len(scores))]
    dense = list(zip(ids, scores, strict=True))
    lexical = list(zip(ids[::2], [-s for s in scores[::2]], strict=True))
    got = dict(rrf_fuse([dense, lexical], weights=weights))
    want: dict[str, float] = {}
    for stage, weight in zip((dense, lexical), weights, strict=True):
        for position, (point_id, _) in enumerate(_canonical(stage)):
            want[point_id] = want.get(point_id, 0.0) + 1.0 / ((position + 1) / weight + RRF_K - 1)
    assert got == pytest.approx(want, rel=1e-12)


def test_worked_example() -> None:
    """Dense: a 0.9, b = c 0.5, d 0.1; lexical: c = d 7, e 2; k = RRF_K."""
    a, b, c, d, e = (str(uuid.UUID(int=n)) for n in range(1, 6))
    fused = rrf_fuse([[(d, 0.1), (c, 0.5), (a, 0.9), (b, 0.5)], [(e, 2.0), (d, 7.0), (c, 7.0)]])
    assert fused == [
        (
            c,
            1 / (RRF_K + 1) + 1 / RRF_K,
        ),  # dense rank 1 (tied with b), lexical rank 0 (tied with d)
        (d, 1 / (RRF_K + 3) + 1 / RRF_K),  # dense rank 3, lexical rank 0
        (a, 1 / RRF_K),
        (b, 1 / (RRF_K + 1)),  # shares c's dense rank
        (e, 1 / (RRF_K + 2)),  # lexical rank 2: after a tie of two
    ]


def test_competition_ranks() -> None:
    assert competition_ranks([]) == []
    assert competition_ranks([0.9, 0.5, 0.5, 0.2, 0.2, 0.2, 0.1]) == [0, 1, 1, 3, 3, 3, 6]
    assert competition_ranks([1.0, 1.0, 1.0]) == [0, 0, 0]


def test_contribution_is_qdrants_formula() -> None:
    assert rrf_contribution(0) == 1 / RRF_K
    assert rrf_contribution(2) == 1 / (RRF_K + 2)
    assert rrf_contribution(3, 2.0) == rrf_contribution(1)  # the 1-based rank is divided
    assert rrf_contribution(5, 2.0) == pytest.approx(1 / (6 / 2 + RRF_K - 1))


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        rrf_fuse([[("a", 1.0), ("a", 0.5)]])
    with pytest.raises(ValueError, match="k"):
        rrf_fuse([[("a", 1.0)]], k=0)
    for weights in ([1.0], [1.0, 0.0], [1.0, -1.0], [1.0, math.inf], [1.0, math.nan]):
        with pytest.raises(ValueError, match="weight"):
            rrf_fuse([[("a", 1.0)], [("a", 1.0)]], weights=weights)
    with pytest.raises(ValueError, match="numbers"):
        check_weights([True, 1.0], 2)
    assert rrf_fuse([]) == []
    assert rrf_fuse([[], []]) == []


def test_stage_size() -> None:
    assert [stage_size(n) for n in (1, 16, 17, 100)] == [64, 64, 68, 400]


# ---------------------------------------------------------------- the stage ranker


def _fake_qdrant(points: Stage, seed: int) -> Callable[[int], Stage]:
    """A stand-in for Qdrant: the best ``n`` by score, equal scores in a shuffled storage order."""
    storage = random.Random(seed).sample(points, len(points))

    def top(n: int) -> Stage:
        return sorted(storage, key=lambda point: -point[1])[:n]

    return top


@settings(max_examples=200, deadline=None)
@given(
    points=st.lists(st.tuples(_IDS, _SCORES), max_size=120, unique_by=lambda p: p[0]),
    wants=st.lists(st.integers(1, 70), min_size=1, max_size=2),
    seeds=st.tuples(st.integers(0, 1000), st.integers(0, 1000)),
)
def test_stage_ranker_cuts_ties_by_id_whatever_the_storage_order(
    points: Stage, wants: list[int], seeds: tuple[int, int]
) -> None:
    available = max(1, len(points))
    results = []
    for seed in seeds:
        tops = [_fake_qdrant(points, seed + n) for n in range(len(wants))]
        ranker: StageRanker[tuple[str, float], tuple[str, float]] = StageRanker(
            wants, available, itemgetter(0), itemgetter(1), _kept
        )
        rounds = 0
        while ranker.pending:
            ranker.accept([tops[stage](n) for stage, n in ranker.pending])
            rounds += 1
            assert rounds < 20
        results.append(ranker.ranked())
    expected = [_canonical(points)[:want] for want in wants]
    assert results == [expected, expected]


def test_stage_ranker_fetches_a_margin_then_doubles_while_the_cut_is_tied() -> None:
    points = [(str(uuid.UUID(int=n + 1)), 1.0) for n in range(100)]
    ranker: StageRanker[tuple[str, float], tuple[str, float]] = StageRanker(
        [10], 100, itemgetter(0), itemgetter(1), _kept
    )
    asked = []
    while ranker.pending:
        ((_, n),) = ranker.pending
        asked.append(n)
        ranker.accept([points[::-1][:n]])
    assert asked == [10 + TIE_MARGIN, 36, 72, 100]
    assert first_fetch(10, ties_likely=True) == 20
    likely = StageRanker([10, 10], 100, itemgetter(0), itemgetter(1), _kept, [False, True])
    assert likely.pending == [(0, 10 + TIE_MARGIN), (1, 20)]
    assert ranker.ranked() == [points[:10]]
    with pytest.raises(ValueError, match="answers"):
        StageRanker([1], 1, itemgetter(0), itemgetter(1), _kept).accept([])
    with pytest.raises(RuntimeError):
        StageRanker([1], 1, itemgetter(0), itemgetter(1), _kept).ranked()
    with pytest.raises(ValueError, match="want"):
        StageRanker([0], 1, itemgetter(0), itemgetter(1), _kept)


def test_stage_ranker_converts_only_the_points_that_can_make_the_cut() -> None:
    """Ids are read for the points above the cut and its tie group, not for the margin."""
    points = [(f"id-{n:03}", float(100 - n)) for n in range(30)]
    points[10] = (points[10][0], points[9][1])  # the 10th and 11th tie at the cut of 10
    converted: list[str] = []

    def convert(point: tuple[str, float]) -> tuple[str, float]:
        converted.append(point[0])
        return point

    ranker = StageRanker([10], 30, itemgetter(0), itemgetter(1), convert)
    while ranker.pending:
        ((_, n),) = ranker.pending
        ranker.accept([points[:n]])
    assert ranker.ranked() == [points[:10]]
    assert sorted(converted) == [point_id for point_id, _ in points[:11]]


@settings(max_examples=200, deadline=None)
@given(
    stages=_stages(),
    wants=st.lists(st.integers(1, 12), min_size=3, max_size=3),
    weights=st.lists(_WEIGHTS, min_size=3, max_size=3),
    limit=st.integers(1, 40),
    seed=st.integers(0, 1000),
    shuffled=st.booleans(),
)
def test_the_rankers_ranks_fuse_as_rrf_fuse_fuses_its_points(
    stages: list[Stage],
    wants: list[int],
    weights: list[float],
    limit: int,
    seed: int,
    shuffled: bool,
) -> None:
    """``fuse_ranked`` of the ranker's ids and ranks is ``rrf_fuse`` of its kept points.

    Whatever the cut (ties across the first fetch, which is only ``want + TIE_MARGIN``, and
    across the cut itself) and whether Qdrant's answer comes in score order or not.
    """
    stages = [stage for stage in stages if stage] or [[("a", 1.0)]]
    used = wants[: len(stages)]
    tops = [_fake_qdrant(stage, seed + n) for n, stage in enumerate(stages)]
    ranker: StageRanker[tuple[str, float], tuple[str, float]] = StageRanker(
        used, max(map(len, stages)), itemgetter(0), itemgetter(1), _kept
    )
    while ranker.pending:
        answers = [tops[stage](n) for stage, n in ranker.pending]
        if shuffled:
            answers = [random.Random(seed).sample(answer, len(answer)) for answer in answers]
        ranker.accept(answers)
    kept = ranker.ranked()
    assert kept == [_canonical(stage)[:want] for stage, want in zip(stages, used, strict=True)]
    assert ranker.ranks() == [competition_ranks([score for _, score in stage]) for stage in kept]
    ranked = [
        ([point_id for point_id, _ in stage], ranks)
        for stage, ranks in zip(kept, ranker.ranks(), strict=True)
    ]
    used_weights = weights[: len(stages)]
    assert fuse_ranked(ranked, weights=used_weights, limit=limit) == rrf_fuse(
        kept, weights=used_weights, limit=limit
    )


def test_fuse_ranked_refuses_a_duplicate_and_ranks_that_do_not_match_the_ids() -> None:
    with pytest.raises(ValueError, match="twice"):
        fuse_ranked([(["a", "a"], [0, 1])])
    with pytest.raises(ValueError, match="ranks"):
        fuse_ranked([(["a", "b"], [0])])
    with pytest.raises(RuntimeError):
        StageRanker([1], 1, itemgetter(0), itemgetter(1), _kept).ranks()


# ---------------------------------------------------------------- against Qdrant's own RRF

_WORDS = ["tea", "coffee", "walk", "sister", "greyhound", "biscuit", "violin", "rain", "garden"]


@pytest.mark.parametrize("weights", [(1.0, 1.0), (1.0, 2.0), (0.5, 3.0)])
def test_without_ties_the_fusion_equals_qdrants_fusion_rrf(
    tmp_path: Path, weights: tuple[float, float]
) -> None:
    """On a shard without tied scores, Qdrant Edge's ``Fusion.Rrf`` and ``rrf_fuse`` agree."""
    rng = random.Random(5)
    config = qe.EdgeConfig(
        vectors={"dense": qe.EdgeVectorParams(size=3, distance=qe.Distance.Cosine)},
        sparse_vectors={"lexical": qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        optimizers=qe.EdgeOptimizersConfig(indexing_threshold=0),
    )
    shard = qe.EdgeShard.create(str(tmp_path / "shard"), config)
    bm25 = qe.Bm25()
    try:
        points = []
        for n in range(50):
            text = " ".join(rng.choice(_WORDS) for _ in range(2 + n))  # distinct lengths
            vectors: dict[str, qe.NamedVector] = {
                "dense": [rng.uniform(-1, 1) for _ in range(3)],
                "lexical": bm25.embed_document(text),
            }
            points.append(qe.Point(str(uuid.UUID(int=rng.getrandbits(128), version=4)), vectors))
        shard.update(qe.UpdateOperation.upsert_points(points))
        exact = qe.SearchParams(exact=True)
        for word in ("garden", "tea", "violin"):
            dense = qe.Query.Nearest([0.3, -0.2, 0.9], using="dense")
            lexical = qe.Query.Nearest(bm25.embed_query(word), using="lexical")
            stages = shard.query_batch(
                qe.QueryBatchRequest(
                    [
                        qe.QueryRequest(limit=64, query=dense, params=exact),
                        qe.QueryRequest(limit=64, query=lexical),
                    ]
                )
            )
            assert stages[1], f"no point holds {word!r}"
            for stage in stages:
                scores = [p.score for p in stage]
                assert len(set(scores)) == len(scores), "the data must hold no ties"
            theirs = shard.query(
                qe.QueryRequest(
                    limit=100,
                    query=cast("qe.Fusion", qe.Fusion.Rrf(k=RRF_K, weights=list(weights))),
                    prefetches=[
                        qe.Prefetch(limit=64, query=dense, params=exact),
                        qe.Prefetch(limit=64, query=lexical),
                    ],
                )
            )
            ours = rrf_fuse(
                [[(str(p.id), p.score) for p in stage] for stage in stages], weights=weights
            )
            # the same points and scores (Qdrant sums in float32; it orders equal fused scores
            # in its own order, the client by id)
            assert dict(ours) == pytest.approx({str(p.id): p.score for p in theirs}, rel=1e-6)
            assert len(ours) == len(theirs)
    finally:
        shard.close()


def test_scores_within_one_resolution_step_share_a_rank_and_a_cut_keeps_the_smaller_id() -> None:
    """Float noise below SCORE_RESOLUTION (float32 vs float64) never decides a rank or a cut."""
    assert competition_ranks([0.5 + 3e-8, 0.5, 0.25]) == [0, 0, 2]
    noisy = [("b", 0.5 + 3e-8), ("a", 0.5), ("c", 0.25)]
    assert [point_id for point_id, _ in rrf_fuse([noisy])][:2] == ["a", "b"]
    ranker = StageRanker([1], 3, itemgetter(0), itemgetter(1), _kept)
    ranker.accept([noisy])
    assert ranker.ranked() == [[("a", 0.5)]]
