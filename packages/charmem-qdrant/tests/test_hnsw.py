"""HNSW on the embedded shard: settings, the off-process build, its swap, crash recovery.

Every test runs real Qdrant Edge shards and a real build child process; the data are small
clustered vectors (a few centres on the sphere, points near them) and the threshold tiny, so a
graph is built in about a second.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from charmem import ConfigurationError, MemoryId, ObjectType, Settings
from charmem.domain.retrieval import CompletenessKind
from charmem.errors import BackendError
from charmem.ports import VectorPoint, VectorQuery
from charmem_qdrant import (
    HNSW_BACKGROUND_KEY,
    HNSW_EF_CONSTRUCT_KEY,
    HNSW_EF_KEY,
    HNSW_M_KEY,
    HNSW_THRESHOLD_KEY,
    EdgeVectorIndex,
    HnswSettings,
    _edge_build,
    hnsw_from_settings,
)

SIZE = 16
POINTS = 400


def clustered(count: int, seed: int = 7) -> np.ndarray:
    """``count`` unit vectors around 12 random centres (a Gaussian mixture on the sphere)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((12, SIZE))
    points = centres[rng.integers(0, 12, count)] + 0.15 * rng.standard_normal((count, SIZE))
    return points / np.linalg.norm(points, axis=1, keepdims=True)


def make_points(vectors: np.ndarray, start: int = 0) -> list[VectorPoint]:
    types = (ObjectType.OBSERVATION, ObjectType.EPISODE, ObjectType.DERIVED)
    return [
        VectorPoint(
            id=MemoryId.deterministic("hnsw-test", str(start + i)),
            object_type=types[(start + i) % 3],
            vector=[float(x) for x in vector],
            text=f"memory {start + i} about topic {(start + i) % 9}",
        )
        for i, vector in enumerate(vectors)
    ]


def open_index(root: Path, **hnsw: Any) -> EdgeVectorIndex:
    settings = HnswSettings(**{"threshold": 100, "background": False, **hnsw})
    return EdgeVectorIndex(root, "scale", model_id="m", vector_size=SIZE, hnsw=settings)


@pytest.fixture
def vectors() -> np.ndarray:
    return clustered(POINTS)


def child_runs(monkeypatch: pytest.MonkeyPatch, code: str) -> None:
    """Replace the build child with ``python -c code``."""
    command = [sys.executable, "-c", code]
    monkeypatch.setattr(_edge_build, "child_command", lambda *_args: command)


def only_the_shard_is_left(root: Path) -> bool:
    """No build copy, swap record or tombstone beside the shard (the lock file stays)."""
    return sorted(p.name for p in root.iterdir()) == [".scale.lock", "scale"]


def settings_with(**extra: str) -> Settings:
    return Settings.from_mapping({"VECTOR_STORE_PATH": "unused", **extra})


# ---------------------------------------------------------------------------- settings


def test_hnsw_is_off_unless_a_threshold_is_set() -> None:
    assert hnsw_from_settings(settings_with()) is None
    assert hnsw_from_settings(settings_with(**{HNSW_THRESHOLD_KEY: "0"})) is None
    assert hnsw_from_settings(settings_with(**{HNSW_THRESHOLD_KEY: " "})) is None


def test_hnsw_settings_are_read_with_defaults() -> None:
    hnsw = hnsw_from_settings(settings_with(**{HNSW_THRESHOLD_KEY: "20000", HNSW_EF_KEY: "64"}))
    assert hnsw == HnswSettings(threshold=20000, m=16, ef_construct=100, ef=64, background=True)
    hnsw = hnsw_from_settings(
        settings_with(
            **{
                HNSW_THRESHOLD_KEY: "5",
                HNSW_M_KEY: "32",
                HNSW_EF_CONSTRUCT_KEY: "200",
                HNSW_BACKGROUND_KEY: "false",
            }
        )
    )
    assert hnsw == HnswSettings(threshold=5, m=32, ef_construct=200, ef=512, background=False)


@pytest.mark.parametrize(
    ("key", "raw"),
    [
        (HNSW_THRESHOLD_KEY, "-1"),
        (HNSW_THRESHOLD_KEY, "many"),
        (HNSW_M_KEY, "2"),
        (HNSW_M_KEY, "16.5"),
        (HNSW_EF_CONSTRUCT_KEY, "0"),
        (HNSW_EF_KEY, "100000"),
        (HNSW_BACKGROUND_KEY, "sometimes"),
    ],
)
def test_malformed_hnsw_settings_name_their_key(key: str, raw: str) -> None:
    extra = {HNSW_THRESHOLD_KEY: "1000", key: raw}
    with pytest.raises(ConfigurationError) as caught:
        hnsw_from_settings(settings_with(**extra))
    assert caught.value.key == key
    assert key in str(caught.value)


def test_a_typo_in_an_hnsw_key_is_caught_while_hnsw_is_off() -> None:
    with pytest.raises(ConfigurationError) as caught:
        hnsw_from_settings(settings_with(**{HNSW_EF_KEY: "lots"}))
    assert caught.value.key == HNSW_EF_KEY


def test_from_settings_refuses_a_malformed_hnsw_key_before_touching_disk(tmp_path: Path) -> None:
    root = tmp_path / "vectors"
    settings = Settings.from_mapping({"VECTOR_STORE_PATH": str(root), HNSW_M_KEY: "1"})
    with pytest.raises(ConfigurationError) as caught:
        EdgeVectorIndex.from_settings(settings, "scale", model_id="m", vector_size=SIZE)
    assert caught.value.key == HNSW_M_KEY
    assert not root.exists()


def test_from_settings_builds_with_hnsw(tmp_path: Path) -> None:
    settings = Settings.from_mapping(
        {"VECTOR_STORE_PATH": str(tmp_path / "v"), HNSW_THRESHOLD_KEY: "50", HNSW_EF_KEY: "32"}
    )
    index = EdgeVectorIndex.from_settings(settings, "scale", model_id="m", vector_size=SIZE)
    try:
        assert index.hnsw == HnswSettings(threshold=50, ef=32)
    finally:
        index._close_blocking()


async def test_optimize_without_hnsw_names_the_threshold_key(tmp_path: Path) -> None:
    index = EdgeVectorIndex(tmp_path / "v", "plain", model_id="m", vector_size=SIZE)
    try:
        with pytest.raises(ConfigurationError) as caught:
            await index.optimize()
        assert caught.value.key == HNSW_THRESHOLD_KEY
    finally:
        await index.close()


# ---------------------------------------------------------------------------- search


async def test_exhaustive_until_built_then_approximate_and_still_finds_the_nearest(
    tmp_path: Path, vectors: np.ndarray
) -> None:
    """One build (they take seconds), then: nearest points, filter and cue, reopen, HNSW off."""
    root = tmp_path / "v"
    hnsw = HnswSettings(threshold=100, background=False)
    index = EdgeVectorIndex(root, "scale", model_id="m", vector_size=SIZE, lexical=True, hnsw=hnsw)
    points = make_points(vectors)
    try:
        await index.upsert(points)
        before = await index.search(VectorQuery(vector=points[0].vector, limit=10))
        assert before.completeness.kind is CompletenessKind.EXHAUSTIVE
        assert index.hnsw_indexed == 0

        report = await index.optimize()

        assert report.built
        assert report.points == POINTS
        assert report.indexed == POINTS == index.hnsw_indexed
        rng = np.random.default_rng(3)
        for target in rng.choice(POINTS, 25, replace=False):
            query = vectors[target] + 0.01 * rng.standard_normal(SIZE)
            exact = int(np.argmax(vectors @ query))
            result = await index.search(VectorQuery(vector=[float(x) for x in query], limit=10))
            assert result.completeness.kind is CompletenessKind.APPROXIMATE
            assert result.completeness.scanned == POINTS
            assert result.hits[0].id == points[exact].id
        # the type filter and the lexical cue still apply
        result = await index.search(
            VectorQuery(
                vector=points[4].vector,
                limit=8,
                object_types=(ObjectType.EPISODE,),
                text="memory 4",
            )
        )
        assert result.completeness.kind is CompletenessKind.APPROXIMATE
        assert {hit.object_type for hit in result.hits} == {ObjectType.EPISODE}
        assert result.hits[0].id == points[4].id  # first by both the vector and the words
    finally:
        await index.close()

    reopened = open_index(root)
    try:
        assert reopened.hnsw_indexed == POINTS
        assert await reopened.count() == POINTS
        result = await reopened.search(VectorQuery(vector=points[9].vector, limit=5))
        assert result.completeness.kind is CompletenessKind.APPROXIMATE
        assert result.hits[0].id == points[9].id
    finally:
        await reopened.close()

    plain = EdgeVectorIndex(root, "scale", model_id="m", vector_size=SIZE)  # HNSW off
    try:
        result = await plain.search(VectorQuery(vector=points[9].vector, limit=5))
        assert result.completeness.kind is CompletenessKind.EXHAUSTIVE
        assert result.hits[0].id == points[9].id
    finally:
        await plain.close()
    assert only_the_shard_is_left(root)


async def test_nothing_is_built_below_the_threshold(tmp_path: Path, vectors: np.ndarray) -> None:
    index = open_index(tmp_path / "v", threshold=1000)
    try:
        await index.upsert(make_points(vectors))
        report = await index.optimize()
        assert not report.built
        assert report.indexed == 0
        result = await index.search(VectorQuery(vector=[1.0] * SIZE, limit=3))
        assert result.completeness.kind is CompletenessKind.EXHAUSTIVE
    finally:
        await index.close()


# ---------------------------------------------------------------------------- building


async def test_background_build_starts_after_the_write_that_passes_the_threshold(
    tmp_path: Path, vectors: np.ndarray
) -> None:
    index = open_index(tmp_path / "v", background=True)
    try:
        points = make_points(vectors)
        await index.upsert(points[:60])
        assert not index.building
        await index.upsert(points[60:])
        assert index.building
        for _ in range(600):
            if not index.building:
                break
            await asyncio.sleep(0.05)
        assert not index.building
        assert index.hnsw_indexed == POINTS
        result = await index.search(VectorQuery(vector=points[1].vector, limit=3))
        assert result.completeness.kind is CompletenessKind.APPROXIMATE
    finally:
        await index.close()


async def test_writes_made_during_a_build_are_replayed_on_the_new_shard(
    tmp_path: Path, vectors: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child is held until the writes are done, so they surely fall inside the build."""
    release = threading.Event()
    child_started = threading.Event()
    run_child = EdgeVectorIndex._run_child

    def held(self: EdgeVectorIndex, *args: Any) -> Any:
        child_started.set()
        release.wait(30)
        return run_child(self, *args)

    monkeypatch.setattr(EdgeVectorIndex, "_run_child", held)
    index = open_index(tmp_path / "v")
    try:
        points = make_points(vectors)
        await index.upsert(points[:300])
        optimizing = asyncio.ensure_future(index.optimize())
        assert await asyncio.to_thread(child_started.wait, 30)
        await index.upsert(points[300:])  # served by the old shard meanwhile
        await index.delete([points[0].id, points[301].id])
        during = await index.search(VectorQuery(vector=points[350].vector, limit=1))
        assert during.hits[0].id == points[350].id
        release.set()
        report = await optimizing

        assert report.replayed == 2
        # the graph holds what the copy held (the deleted point stays counted until Qdrant
        # vacuums it); the points written meanwhile are scanned exactly until the next build
        assert report.indexed == 300 == index.hnsw_indexed
        assert await index.count() == POINTS - 2
        assert await index.point_ids() == {p.id for p in points} - {points[0].id, points[301].id}
        after = await index.search(VectorQuery(vector=points[350].vector, limit=1))
        assert after.completeness.kind is CompletenessKind.APPROXIMATE
        assert after.hits[0].id == points[350].id  # a replayed point, scanned exactly
    finally:
        release.set()
        await index.close()


async def test_close_during_a_build_stops_it_and_leaves_no_copy(
    tmp_path: Path, vectors: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    child_runs(monkeypatch, "import time; time.sleep(60)")
    root = tmp_path / "v"
    index = open_index(root, background=True)
    await index.upsert(make_points(vectors))
    assert index.building
    for _ in range(200):  # until the copy exists and the child runs
        build = index._build
        if build is not None and build.process is not None:
            break
        await asyncio.sleep(0.02)
    await index.close()
    assert not index.building
    assert only_the_shard_is_left(root)
    reopened = open_index(root)
    try:
        assert await reopened.count() == POINTS
        assert reopened.hnsw_indexed == 0
    finally:
        await reopened.close()


async def test_a_failed_build_leaves_the_shard_as_it_was(
    tmp_path: Path, vectors: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    child_runs(monkeypatch, "import sys; sys.exit('optimizer exploded')")
    root = tmp_path / "v"
    index = open_index(root)
    try:
        points = make_points(vectors)
        await index.upsert(points)
        with pytest.raises(BackendError, match="optimizer exploded"):
            await index.optimize()
        assert await index.count() == POINTS
        result = await index.search(VectorQuery(vector=points[2].vector, limit=1))
        assert result.completeness.kind is CompletenessKind.EXHAUSTIVE
        assert result.hits[0].id == points[2].id
    finally:
        await index.close()
    assert only_the_shard_is_left(root)


# ---------------------------------------------------------------------------- crash recovery


async def _shard_with_points(root: Path, vectors: np.ndarray) -> list[VectorPoint]:
    index = open_index(root)
    points = make_points(vectors)
    await index.upsert(points)
    await index.close()
    return points


@pytest.mark.parametrize("state", ["old shard moved away", "new shard moved in"])
async def test_an_interrupted_swap_is_rolled_back_at_open(
    tmp_path: Path, vectors: np.ndarray, state: str
) -> None:
    """A crash inside the swap leaves the swap record; the next open restores the old shard."""
    root = tmp_path / "v"
    points = await _shard_with_points(root, vectors)
    tomb = root / ".scale.pre-hnsw-crashed"
    (root / "scale").rename(tomb)
    if state == "new shard moved in":  # an incomplete new shard: only a few points
        partial = open_index(tmp_path / "elsewhere")
        await partial.upsert(points[:5])
        await partial.close()
        shutil.move(str(tmp_path / "elsewhere" / "scale"), str(root / "scale"))
    (root / ".scale.hnsw-swap.json").write_text(json.dumps({"tomb": tomb.name}), "utf-8")
    (root / ".scale.hnsw-leftover").mkdir()  # a build copy left by the crash

    index = open_index(root)
    try:
        assert await index.count() == POINTS
        assert await index.point_ids() == {p.id for p in points}
    finally:
        await index.close()
    assert only_the_shard_is_left(root)


async def test_drop_rolls_back_an_interrupted_swap_first(
    tmp_path: Path, vectors: np.ndarray
) -> None:
    root = tmp_path / "v"
    await _shard_with_points(root, vectors)
    tomb = root / ".scale.pre-hnsw-crashed"
    (root / "scale").rename(tomb)
    (root / ".scale.hnsw-swap.json").write_text(json.dumps({"tomb": tomb.name}), "utf-8")
    assert EdgeVectorIndex.drop(root, "scale") is True
    assert [p.name for p in root.iterdir()] == [".scale.lock"]
