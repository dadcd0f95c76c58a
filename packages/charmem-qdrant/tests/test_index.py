"""EdgeVectorIndex against real Qdrant Edge shards: writes, search order, filters, completeness."""

from __future__ import annotations

import asyncio
import math
import random
import uuid
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import qdrant_edge as qe

from charmem import MemoryId, ObjectType, Settings
from charmem.domain.retrieval import CompletenessKind, VectorRecallCompleteness, score_step
from charmem.errors import BackendError, ConfigurationError, DimensionMismatchError
from charmem.ports import VectorIndex, VectorPoint, VectorQuery, VectorSearchResult
from charmem_qdrant import DEFAULT_FUSION_WEIGHTS, RRF_K, EdgeVectorIndex
from charmem_qdrant._fusion import rrf_contribution, rrf_fuse, stage_size

# the embedder fingerprint of the conftest fixtures (tests run with --import-mode=importlib,
# so conftest is not importable)
MODEL = "test-model"
SIZE = 3


def point(
    vector: list[float],
    object_type: ObjectType = ObjectType.EPISODE,
    *,
    text: str = "",
    id: MemoryId | None = None,
) -> VectorPoint:
    return VectorPoint(id=id or MemoryId.new(), object_type=object_type, vector=vector, text=text)


def ids_of(result: VectorSearchResult) -> list[MemoryId]:
    return [hit.id for hit in result.hits]


async def test_canary_fixture_starts_empty(index: EdgeVectorIndex) -> None:
    assert await index.count() == 0
    assert await index.point_ids() == set()
    result = await index.search(VectorQuery(vector=[1.0, 0.0, 0.0], limit=5))
    assert result.hits == ()


async def test_search_orders_by_cosine_score(index: EdgeVectorIndex) -> None:
    near, middle, far = point([1, 0, 0]), point([1, 1, 0]), point([0, 0, 1])
    await index.upsert([far, near, middle])
    result = await index.search(VectorQuery(vector=[2.0, 0.0, 0.0], limit=10))
    assert ids_of(result) == [near.id, middle.id, far.id]
    scores = [hit.score for hit in result.hits]
    assert scores[0] == pytest.approx(1.0, abs=1e-6)
    assert scores[1] == pytest.approx(1 / math.sqrt(2), abs=1e-6)
    assert scores[2] == pytest.approx(0.0, abs=1e-6)
    assert [hit.object_type for hit in result.hits] == [ObjectType.EPISODE] * 3


async def test_search_filters_by_object_type(index: EdgeVectorIndex) -> None:
    episode = point([1, 0, 0], ObjectType.EPISODE)
    observation = point([1, 0.1, 0], ObjectType.OBSERVATION)
    derived = point([1, 0.2, 0], ObjectType.DERIVED)
    thread = point([1, 0.3, 0], ObjectType.THREAD)
    await index.upsert([episode, observation, derived, thread])
    query = [1.0, 0.0, 0.0]

    only_derived = await index.search(
        VectorQuery(vector=query, limit=10, object_types=(ObjectType.DERIVED,))
    )
    assert ids_of(only_derived) == [derived.id]
    assert only_derived.hits[0].object_type is ObjectType.DERIVED

    two = await index.search(
        VectorQuery(vector=query, limit=10, object_types=(ObjectType.THREAD, ObjectType.EPISODE))
    )
    assert ids_of(two) == [episode.id, thread.id]

    none_stored = await index.search(
        VectorQuery(vector=query, limit=10, object_types=(ObjectType.ENTITY,))
    )
    assert none_stored.hits == ()

    everything = await index.search(VectorQuery(vector=query, limit=10))
    assert ids_of(everything) == [episode.id, observation.id, derived.id, thread.id]


async def test_type_scope_holds_once_a_point_of_another_type_arrives(
    lexical_index: EdgeVectorIndex,
) -> None:
    # While every point is of a scoped type the scan runs unfiltered; a later point of another
    # type (here an entity) must bring the filter back, lexical stage included.
    index = lexical_index
    scope = (ObjectType.EPISODE, ObjectType.OBSERVATION)
    episode = point([1, 0.2, 0], ObjectType.EPISODE, text="violin lesson")
    observation = point([1, 0.1, 0], ObjectType.OBSERVATION, text="a quiet walk")
    await index.upsert([episode, observation])
    query = VectorQuery(vector=[1.0, 0.0, 0.0], limit=10, object_types=scope, text="violin")
    before = await index.search(query)
    assert set(ids_of(before)) == {episode.id, observation.id}
    assert before.completeness.scanned == 2

    entity = point([1, 0, 0], ObjectType.ENTITY, text="violin violin")
    await index.upsert([entity])
    after = await index.search(query)
    assert set(ids_of(after)) == {episode.id, observation.id}
    assert after.completeness.scanned == 2
    everything = await index.search(VectorQuery(vector=[1.0, 0.0, 0.0], limit=10, text="violin"))
    assert ids_of(everything)[0] == entity.id


async def test_completeness_is_exhaustive_with_filtered_scan_count(
    index: EdgeVectorIndex,
) -> None:
    await index.upsert([point([1, i, 0], ObjectType.EPISODE) for i in range(7)])
    await index.upsert([point([0, 1, i], ObjectType.DERIVED) for i in range(5)])

    all_types = await index.search(VectorQuery(vector=[1.0, 0.0, 0.0], limit=3))
    assert all_types.completeness == VectorRecallCompleteness(
        CompletenessKind.EXHAUSTIVE, scanned=12, fetched=3
    )

    derived = await index.search(
        VectorQuery(vector=[1.0, 0.0, 0.0], limit=50, object_types=(ObjectType.DERIVED,))
    )
    assert derived.completeness == VectorRecallCompleteness(
        CompletenessKind.EXHAUSTIVE, scanned=5, fetched=5
    )

    nothing = await index.search(VectorQuery(vector=[1.0, 0.0, 0.0], limit=0))
    assert nothing.hits == ()
    assert nothing.completeness == VectorRecallCompleteness(
        CompletenessKind.EXHAUSTIVE, scanned=12, fetched=0
    )


async def _tied_ids(root: Path, name: str, ids: list[MemoryId], limit: int) -> list[MemoryId]:
    index = EdgeVectorIndex(root, name, model_id=MODEL, vector_size=SIZE)
    try:
        # two batches, so the points also land in the shard in two separate updates
        half = len(ids) // 2
        await index.upsert([point([0.3, 0.3, 0.3], id=i) for i in ids[:half]])
        await index.upsert([point([0.3, 0.3, 0.3], id=i) for i in ids[half:]])
        return ids_of(await index.search(VectorQuery(vector=[1.0, 1.0, 1.0], limit=limit)))
    finally:
        index._close_blocking()


@pytest.mark.parametrize("limit", [1, 10, 37, 60, 100])
async def test_ties_are_ordered_by_id_whatever_the_insertion_order(root: Path, limit: int) -> None:
    rng = random.Random(limit)
    ids = [MemoryId(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(60)]
    forward = list(ids)
    rng.shuffle(forward)
    backward = list(reversed(forward))

    first = await _tied_ids(root, "ties-a", forward, limit)
    second = await _tied_ids(root, "ties-b", backward, limit)

    expected = sorted(ids, key=str)[:limit]
    assert first == expected
    assert second == expected


async def test_ties_below_better_points_are_ordered_by_id(index: EdgeVectorIndex) -> None:
    best = point([1, 0, 0])
    tied = [point([0, 1, 0]) for _ in range(30)]
    worst = point([0, 0, 1])
    await index.upsert([worst, *reversed(tied), best])
    result = await index.search(VectorQuery(vector=[1.0, 1.0, 0.0], limit=12))
    # best and tied points have the same cosine to (1, 1, 0): all 31 tie
    everyone = sorted([best.id, *(p.id for p in tied)], key=str)
    assert ids_of(result) == everyone[:12]
    assert len({hit.score for hit in result.hits}) == 1


async def test_upsert_replaces_a_point_with_the_same_id(index: EdgeVectorIndex) -> None:
    first = point([1, 0, 0], ObjectType.EPISODE)
    await index.upsert([first])
    await index.upsert([point([0, 0, 1], ObjectType.DERIVED, id=first.id)])
    assert await index.count() == 1
    result = await index.search(VectorQuery(vector=[0.0, 0.0, 1.0], limit=1))
    assert result.hits[0].id == first.id
    assert result.hits[0].object_type is ObjectType.DERIVED
    assert result.hits[0].score == pytest.approx(1.0, abs=1e-6)


async def test_delete_then_reupsert(index: EdgeVectorIndex) -> None:
    kept, removed = point([1, 0, 0]), point([0, 1, 0])
    await index.upsert([kept, removed])
    await index.delete([removed.id, MemoryId.new()])  # an absent id is ignored
    assert await index.point_ids() == {kept.id}
    assert await index.count() == 1
    result = await index.search(VectorQuery(vector=[0.0, 1.0, 0.0], limit=5))
    assert ids_of(result) == [kept.id]

    await index.upsert([removed])
    assert await index.point_ids() == {kept.id, removed.id}
    result = await index.search(VectorQuery(vector=[0.0, 1.0, 0.0], limit=5))
    assert ids_of(result) == [removed.id, kept.id]


async def test_empty_batches_are_no_ops(index: EdgeVectorIndex) -> None:
    await index.upsert([])
    await index.delete([])
    assert await index.count() == 0


async def test_point_ids_pages_through_every_point(index: EdgeVectorIndex) -> None:
    points = [point([1, i, 0]) for i in range(1100)]
    await index.upsert(points)
    assert await index.point_ids() == {p.id for p in points}
    assert await index.count() == 1100


async def test_reopen_after_close_keeps_points(root: Path) -> None:
    first = EdgeVectorIndex(root, "durable", model_id=MODEL, vector_size=SIZE, lexical=True)
    stored = [
        point([1, 0, 0], text="a walk along the harbour"),
        point([0, 1, 0], ObjectType.DERIVED, text="prefers green tea"),
    ]
    await first.upsert(stored)
    await first.close()
    await first.close()  # idempotent
    assert first.closed

    again = EdgeVectorIndex(root, "durable", model_id=MODEL, vector_size=SIZE, lexical=True)
    try:
        assert await again.point_ids() == {p.id for p in stored}
        result = await again.search(VectorQuery(vector=[1.0, 0.0, 0.0], limit=5))
        assert ids_of(result) == [stored[0].id, stored[1].id]
        lexical = await again.search(VectorQuery(vector=[1.0, 0.0, 0.0], limit=5, text="green tea"))
        assert ids_of(lexical)[0] == stored[1].id  # the sparse vectors survived too
    finally:
        await again.close()


async def test_closed_index_refuses_work(index: EdgeVectorIndex) -> None:
    await index.close()
    with pytest.raises(BackendError, match="closed"):
        await index.count()
    with pytest.raises(BackendError, match="closed"):
        await index.upsert([point([1, 0, 0])])


@pytest.mark.parametrize("text", [None, "tea"])  # dense only; dense and BM25, fused
async def test_a_hit_written_without_a_type_is_refused(
    lexical_index: EdgeVectorIndex, text: str | None
) -> None:
    """A point another writer left without ``object_type`` fails the search that finds it."""
    ours, foreign = point([1, 0, 0], text="tea"), str(uuid.uuid4())
    await lexical_index.upsert([ours])
    shard = lexical_index._shard
    assert shard is not None
    shard.update(qe.UpdateOperation.upsert_points([qe.Point(foreign, {"dense": [1.0, 0.1, 0.0]})]))
    with pytest.raises(BackendError, match="object_type"):
        await lexical_index.search(VectorQuery(vector=[1.0, 0.0, 0.0], limit=5, text=text))
    result = await lexical_index.search(VectorQuery(vector=[1.0, 0.0, 0.0], limit=1, text=text))
    assert ids_of(result) == [ours.id]  # the hits alone are typed


async def test_a_search_while_a_write_holds_the_index_waits_off_the_loop(
    index: EdgeVectorIndex,
) -> None:
    """A free index searches in the calling thread; a held one in a worker, the loop running."""
    stored = point([1, 0, 0])
    await index.upsert([stored])
    query = VectorQuery(vector=[1.0, 0.0, 0.0], limit=1)
    index._lock.acquire()  # what a write (update + flush) holds
    try:
        waiting = asyncio.create_task(index.search(query))
        await asyncio.sleep(0.05)
        assert not waiting.done()
    finally:
        index._lock.release()
    assert ids_of(await waiting) == [stored.id]
    assert ids_of(await index.search(query)) == [stored.id]


async def test_wrong_dimension_is_refused_and_nothing_is_written(
    index: EdgeVectorIndex,
) -> None:
    with pytest.raises(DimensionMismatchError) as caught:
        await index.upsert([point([1, 0, 0]), point([1, 0])])
    assert (caught.value.expected, caught.value.actual) == (3, 2)
    assert await index.count() == 0

    with pytest.raises(DimensionMismatchError) as caught:
        await index.search(VectorQuery(vector=[1.0, 0.0, 0.0, 0.0], limit=1))
    assert (caught.value.expected, caught.value.actual) == (3, 4)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
async def test_non_finite_vectors_are_refused(index: EdgeVectorIndex, bad: float) -> None:
    with pytest.raises(BackendError, match="NaN or infinite"):
        await index.upsert([point([1, 0, 0]), point([bad, 0, 0])])
    assert await index.count() == 0
    with pytest.raises(BackendError, match="NaN or infinite"):
        await index.search(VectorQuery(vector=[bad, 0.0, 0.0], limit=1))


async def test_vectors_of_any_number_type_score_as_their_floats(index: EdgeVectorIndex) -> None:
    """Ints, bools, numpy scalars and other sequences store the same vector as plain floats.

    Lists pass unscanned when their sum is finite (the driver converts the numbers).
    """
    import numpy as np

    same = [
        point([0.6, 0.8, 0.0]),
        point([np.float32(0.6), np.float64(0.8), 0]),  # type: ignore[list-item]
        point(np.array([0.6, 0.8, 0.0], dtype=np.float32)),  # type: ignore[arg-type]
        point((0.6, 0.8, False)),  # type: ignore[arg-type]
    ]
    axis = point([3, 0, 0])
    await index.upsert([*same, axis])
    result = await index.search(VectorQuery(vector=[6, 8, 0], limit=5))
    assert result.hits[-1].id == axis.id
    scores = [hit.score for hit in result.hits[:4]]
    assert {hit.id for hit in result.hits[:4]} == {p.id for p in same}
    assert max(scores) - min(scores) < 1e-6
    assert result.hits[-1].score == pytest.approx(0.6, abs=1e-6)


@pytest.mark.parametrize("bad", ["0.5x", None, object()])
async def test_a_vector_element_that_is_no_number_writes_nothing(
    index: EdgeVectorIndex, bad: object
) -> None:
    with pytest.raises((TypeError, ValueError)):
        await index.upsert([point([1, 0, 0]), point([bad, 0.0, 0.0])])  # type: ignore[list-item]
    assert await index.count() == 0


async def test_lexical_cue_puts_the_exact_word_match_first(
    lexical_index: EdgeVectorIndex,
) -> None:
    weather = point([1, 0, 0], text="we talked about the weather on a sunny afternoon")
    train = point([0.8, 0.6, 0], text="the train was late again this morning")
    biscuit = point(
        [0.6, 0.8, 0], ObjectType.OBSERVATION, text="my sister adopted a greyhound named Biscuit"
    )
    await lexical_index.upsert([weather, train, biscuit])
    vector = [1.0, 0.0, 0.0]

    dense = await lexical_index.search(VectorQuery(vector=vector, limit=3))
    assert ids_of(dense) == [weather.id, train.id, biscuit.id]

    fused = await lexical_index.search(VectorQuery(vector=vector, limit=3, text="Biscuit?"))
    assert ids_of(fused) == [biscuit.id, weather.id, train.id]
    # RRF with k=60 and 0-based ranks, dense weighted: biscuit is 3rd by dense and 1st by BM25
    dense_weight = DEFAULT_FUSION_WEIGHTS[0]
    biscuit_score = rrf_contribution(2, dense_weight) + 1 / RRF_K
    assert fused.hits[0].score == pytest.approx(biscuit_score, rel=1e-5)
    assert fused.hits[1].score == pytest.approx(rrf_contribution(0, dense_weight), rel=1e-5)
    assert fused.completeness == VectorRecallCompleteness(
        CompletenessKind.EXHAUSTIVE, scanned=3, fetched=3
    )

    # both stages are filtered: the lexical match cannot leak past the object-type scope
    scoped = await lexical_index.search(
        VectorQuery(vector=vector, limit=3, text="Biscuit", object_types=(ObjectType.EPISODE,))
    )
    assert ids_of(scoped) == [weather.id, train.id]

    # a cue of stop words only has no BM25 terms: plain dense search
    stopwords = await lexical_index.search(VectorQuery(vector=vector, limit=3, text="the of a"))
    assert ids_of(stopwords) == ids_of(dense)
    assert stopwords.hits[0].score == pytest.approx(1.0, abs=1e-6)


async def _fused_ties(
    root: Path, collection: str, order: list[MemoryId], limit: int
) -> tuple[list[tuple[MemoryId, float]], VectorRecallCompleteness]:
    index = EdgeVectorIndex(root, collection, model_id=MODEL, vector_size=SIZE, lexical=True)
    try:
        best = point([1, 0, 0], text="a garden party", id=MemoryId(uuid.UUID(int=1, version=4)))
        tied = [point([0.6, 0.8, 0], text="hello garden world", id=i) for i in order]
        await index.upsert([*tied[:20], best, *tied[20:]])
        result = await index.search(VectorQuery(vector=[1.0, 0.0, 0.0], limit=limit, text="garden"))
        return [(hit.id, hit.score) for hit in result.hits], result.completeness
    finally:
        index._close_blocking()


@pytest.mark.parametrize("limit", [1, 5, 30, 100])
async def test_fused_ties_do_not_depend_on_the_insertion_order(root: Path, limit: int) -> None:
    """Tied in both stages (70 points, more than a stage's 64): one fused score, cut by id."""
    rng = random.Random(limit)
    ids = [MemoryId(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(70)]
    forward = list(ids)
    rng.shuffle(forward)
    first = await _fused_ties(root, "fused-a", forward, limit)
    second = await _fused_ties(root, "fused-b", list(reversed(forward)), limit)
    assert first == second
    hits, completeness = first
    assert completeness == VectorRecallCompleteness(
        CompletenessKind.EXHAUSTIVE, scanned=71, fetched=min(limit, 71)
    )
    best = MemoryId(uuid.UUID(int=1, version=4))
    # best: dense rank 0, and lexical rank 0 (BM25 scores its shorter text above the tied ones)
    assert hits[0][0] == best
    kept = min(limit, 71) - 1
    assert [hit_id for hit_id, _ in hits[1:]] == sorted(ids, key=str)[:kept]
    assert len({score for _, score in hits[1:]}) <= 1, "tied points got different fused scores"


async def test_fusion_weights_weigh_the_lexical_stage(root: Path) -> None:
    weather = point([1, 0, 0], text="we talked about the weather on a sunny afternoon")
    biscuit = point([0.6, 0.8, 0], text="my sister adopted a greyhound named Biscuit")
    index = EdgeVectorIndex(
        root, "weighted", model_id=MODEL, vector_size=SIZE, lexical=True, fusion_weights=(1, 3)
    )
    try:
        assert index.fusion_weights == (1.0, 3.0)
        assert "fusion_weights=(1.0, 3.0)" in repr(index)
        await index.upsert([weather, biscuit])
        fused = await index.search(VectorQuery(vector=[1.0, 0.0, 0.0], limit=2, text="biscuit"))
        # biscuit: dense rank 1, lexical rank 0 of weight 3 -> 1/(k+1) + 1/(1/3 + k-1)
        assert ids_of(fused) == [biscuit.id, weather.id]
        assert fused.hits[0].score == pytest.approx(
            1 / (RRF_K + 1) + 1 / (1 / 3 + RRF_K - 1), rel=1e-12
        )
        assert fused.hits[1].score == pytest.approx(1 / RRF_K, rel=1e-12)
    finally:
        index._close_blocking()
    for bad in ((1.0, 0.0), (1.0, -2.0), (math.inf, 1.0), (1.0,), "ab"):
        with pytest.raises(ConfigurationError) as caught:
            EdgeVectorIndex(
                root,
                "bad",
                model_id=MODEL,
                vector_size=SIZE,
                fusion_weights=bad,  # type: ignore[arg-type]
            )
        assert caught.value.key == "fusion_weights"
    assert not (root / "bad").exists()


@pytest.mark.parametrize(("raw", "expected"), [(None, 1.0), ("2.5", 2.5), (" 0.5 ", 0.5)])
def test_from_settings_reads_the_lexical_weight(
    root: Path, raw: str | None, expected: float
) -> None:
    extra = {} if raw is None else {"VECTOR_LEXICAL_WEIGHT": raw}
    index = EdgeVectorIndex.from_settings(
        _settings(root, **extra), "weight", model_id=MODEL, vector_size=SIZE
    )
    try:
        assert index.fusion_weights == (DEFAULT_FUSION_WEIGHTS[0], expected)
    finally:
        index._close_blocking()


@pytest.mark.parametrize("raw", ["0", "-1", "nan", "inf", "heavy"])
def test_from_settings_rejects_a_malformed_lexical_weight(root: Path, raw: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        EdgeVectorIndex.from_settings(
            _settings(root, VECTOR_LEXICAL_WEIGHT=raw), "c", model_id=MODEL, vector_size=SIZE
        )
    assert caught.value.key == "VECTOR_LEXICAL_WEIGHT"
    assert not root.exists()


async def test_lexical_cue_is_off_by_default(index: EdgeVectorIndex) -> None:
    weather = point([1, 0, 0], text="weather")
    biscuit = point([0.6, 0.8, 0], text="Biscuit the greyhound")
    await index.upsert([weather, biscuit])
    result = await index.search(VectorQuery(vector=[1.0, 0.0, 0.0], limit=2, text="Biscuit"))
    assert ids_of(result) == [weather.id, biscuit.id]
    assert result.hits[0].score == pytest.approx(1.0, abs=1e-6)


def _settings(root: Path, **extra: str) -> Settings:
    return Settings.from_mapping({"VECTOR_STORE_PATH": str(root), **extra})


@pytest.mark.parametrize(
    ("raw", "expected"), [(None, True), ("true", True), ("FALSE", False), (" True ", True)]
)
def test_from_settings_reads_path_and_lexical_cue(
    root: Path, raw: str | None, expected: bool
) -> None:
    extra = {} if raw is None else {"VECTOR_LEXICAL_CUE": raw}
    index = EdgeVectorIndex.from_settings(
        _settings(root, **extra), "from-settings", model_id=MODEL, vector_size=SIZE
    )
    try:
        assert index.lexical is expected
        assert index.path == (root / "from-settings").resolve()
        assert (index.path / "charmem-shard.json").is_file()
        assert (index.model_id, index.vector_size, index.collection) == (
            MODEL,
            SIZE,
            "from-settings",
        )
    finally:
        index._close_blocking()


def test_from_settings_rejects_a_malformed_lexical_cue(root: Path) -> None:
    with pytest.raises(ConfigurationError) as caught:
        EdgeVectorIndex.from_settings(
            _settings(root, VECTOR_LEXICAL_CUE="maybe"), "c", model_id=MODEL, vector_size=SIZE
        )
    assert caught.value.key == "VECTOR_LEXICAL_CUE"
    assert not root.exists()


def test_entry_point_names_the_embedded_index() -> None:
    found = {ep.name: ep for ep in entry_points(group="charmem.vector_indexes")}
    assert found["embedded"].load().adapter is EdgeVectorIndex


async def test_index_satisfies_the_port(index: EdgeVectorIndex) -> None:
    port: VectorIndex = index  # checked by mypy over the tests
    assert (port.model_id, port.vector_size) == (MODEL, SIZE)
    assert await port.count() == 0


def _tie_groups_across_the_fetches(rng: random.Random) -> list[VectorPoint]:
    """Points whose dense and BM25 tie groups straddle both the cut and each stage's first fetch.

    For ``limit`` <= 16 a stage keeps 64 points; the dense stage first fetches 72, the BM25 stage
    128. Dense (cosine to (1, 0, 0)): 55 distinct, then 40 tied at ranks 55-94, then 100 below.
    BM25 (``garden``): 40 distinct lengths, then 100 tied at ranks 40-139, then 55 longer.
    """
    cosines = [0.99 - n * 0.005 for n in range(55)] + [0.7] * 40
    cosines += [0.6 - n * 0.003 for n in range(100)]
    lengths = list(range(40)) + [50] * 100 + [60 + n for n in range(55)]
    rng.shuffle(lengths)  # the two stages rank the points differently
    types = [ObjectType.EPISODE, ObjectType.OBSERVATION]
    return [
        point(
            [cosine, math.sqrt(1 - cosine * cosine), 0.0],
            types[n % 2],
            text=" ".join(["garden", *(f"w{n}x{m}" for m in range(length))]),
            id=MemoryId(uuid.UUID(int=rng.getrandbits(128), version=4)),
        )
        for n, (cosine, length) in enumerate(zip(cosines, lengths, strict=True))
    ]


def _reference_fusion(
    shard: qe.EdgeShard, vector: list[float], sparse: qe.SparseVector, limit: int
) -> list[tuple[str, float]]:
    """``rrf_fuse`` of each stage's canonical best ``stage_size(limit)``, every point fetched."""
    everything = [
        qe.QueryRequest(
            limit=1000,
            query=qe.Query.Nearest(vector, using="dense"),
            params=qe.SearchParams(exact=True),
        ),
        qe.QueryRequest(limit=1000, query=qe.Query.Nearest(sparse, using="lexical")),
    ]
    stages = []
    for answer in shard.query_batch(qe.QueryBatchRequest(everything)):
        ranked = sorted(((str(p.id), p.score) for p in answer), key=_canonical_key)
        stages.append(ranked[: stage_size(limit)])
    return rrf_fuse(stages, k=RRF_K, weights=DEFAULT_FUSION_WEIGHTS, limit=limit)


def _canonical_key(point: tuple[str, float]) -> tuple[int, str]:
    return -score_step(point[1]), point[0]


@pytest.mark.parametrize("limit", [1, 5, 16, 60])
async def test_a_fused_search_equals_the_fusion_of_every_point_across_tied_fetch_boundaries(
    root: Path, limit: int
) -> None:
    """Tie groups across each stage's cut and first fetch: the hits of fusing every point."""
    rng = random.Random(limit)
    points = _tie_groups_across_the_fetches(rng)
    results = []
    for name, order in (("ahead", points), ("behind", points[::-1])):
        index = EdgeVectorIndex(root, name, model_id=MODEL, vector_size=SIZE, lexical=True)
        try:
            await index.upsert(order)
            query = VectorQuery(vector=[1.0, 0.0, 0.0], limit=limit, text="garden")
            result = await index.search(query)
            sparse = qe.Bm25().embed_query("garden")
            assert index._shard is not None
            expected = _reference_fusion(index._shard, [1.0, 0.0, 0.0], sparse, limit)
        finally:
            index._close_blocking()
        assert [(str(hit.id), hit.score) for hit in result.hits] == expected
        kinds = {p.id: p.object_type for p in points}
        assert all(hit.object_type == kinds[hit.id] for hit in result.hits)
        results.append(result)
    assert results[0] == results[1]
