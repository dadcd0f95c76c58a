"""One opener per shard (StoreLockedError, bounded wait) and crash durability, for real."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from charmem import MemoryId, ObjectType
from charmem.errors import StoreLockedError
from charmem.ports import VectorPoint, VectorQuery
from charmem_qdrant import EdgeVectorIndex, _disk

# the embedder fingerprint of the conftest fixtures (tests run with --import-mode=importlib,
# so conftest is not importable)
MODEL = "test-model"
SIZE = 3

# a generous bound: the retry gives up after ~1 s; CI machines can be slow
MAX_WAIT_SECONDS = 5.0


def _child(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_line(proc: subprocess.Popen[str], wanted: str) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:  # structlog also prints to stdout: skip its lines
        if line.strip() == wanted:
            return
    raise AssertionError(f"child exited before {wanted!r}: {proc.wait()} {proc.stderr}")


def test_second_opener_in_the_same_process_is_refused(root: Path) -> None:
    first = EdgeVectorIndex(root, "locked", model_id=MODEL, vector_size=SIZE)
    try:
        started = time.monotonic()
        with pytest.raises(StoreLockedError, match="held by another opener") as caught:
            EdgeVectorIndex(root, "locked", model_id=MODEL, vector_size=SIZE)
        elapsed = time.monotonic() - started
        assert 0.5 <= elapsed < MAX_WAIT_SECONDS  # retried about a second, never hung
        assert "WouldBlock" in str(caught.value.__cause__)
    finally:
        first._close_blocking()
    # released on close: the next opener gets it at once
    second = EdgeVectorIndex(root, "locked", model_id=MODEL, vector_size=SIZE)
    second._close_blocking()


async def test_a_refused_opener_leaves_the_holder_writing(root: Path) -> None:
    """A refused opener changes nothing of the shard its holder keeps writing.

    Qdrant Edge's load touched the held shard's files before finding it locked, and every later
    upsert of the holder failed to flush.
    """
    holder = EdgeVectorIndex(root, "held", model_id=MODEL, vector_size=SIZE, lock_timeout=0.2)
    try:
        first = MemoryId.new()
        await holder.upsert(
            [
                VectorPoint(
                    id=first, object_type=ObjectType.OBSERVATION, vector=[1.0, 0.0, 0.0], text="tea"
                )
            ]
        )
        for _ in range(2):
            with pytest.raises(StoreLockedError):
                EdgeVectorIndex(root, "held", model_id=MODEL, vector_size=SIZE, lock_timeout=0.2)
        later = [MemoryId.new() for _ in range(3)]
        for n, memory_id in enumerate(later):
            point = VectorPoint(
                id=memory_id,
                object_type=ObjectType.OBSERVATION,
                vector=[0.0, 1.0, n],
                text="garden tea",
            )
            await holder.upsert([point])  # raised BackendError "Failed to flush ..." before
        assert await holder.point_ids() == {first, *later}
    finally:
        holder._close_blocking()
    reopened = EdgeVectorIndex(root, "held", model_id=MODEL, vector_size=SIZE)
    try:
        assert await reopened.count() == 4
    finally:
        reopened._close_blocking()


def test_lock_timeout_is_configurable(root: Path) -> None:
    first = EdgeVectorIndex(root, "locked", model_id=MODEL, vector_size=SIZE)
    try:
        started = time.monotonic()
        with pytest.raises(StoreLockedError):
            EdgeVectorIndex(root, "locked", model_id=MODEL, vector_size=SIZE, lock_timeout=0.1)
        assert time.monotonic() - started < 1.0
    finally:
        first._close_blocking()


def test_other_collections_are_not_locked(root: Path) -> None:
    first = EdgeVectorIndex(root, "one", model_id=MODEL, vector_size=SIZE)
    second = EdgeVectorIndex(root, "two", model_id=MODEL, vector_size=SIZE)
    first._close_blocking()
    second._close_blocking()


def test_shard_held_by_another_process_is_refused(root: Path) -> None:
    holder = _child(
        """
        import sys
        from charmem_qdrant import EdgeVectorIndex
        index = EdgeVectorIndex(sys.argv[1], "shared", model_id=sys.argv[2], vector_size=3)
        print("ready", flush=True)
        sys.stdin.readline()
        index._close_blocking()
        """,
        str(root),
        MODEL,
    )
    try:
        _wait_for_line(holder, "ready")
        started = time.monotonic()
        with pytest.raises(StoreLockedError):
            EdgeVectorIndex(root, "shared", model_id=MODEL, vector_size=SIZE)
        assert time.monotonic() - started < MAX_WAIT_SECONDS
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.wait(timeout=30) == 0
    # the holder closed: the shard opens here now
    index = EdgeVectorIndex(root, "shared", model_id=MODEL, vector_size=SIZE)
    index._close_blocking()


def test_another_process_is_refused_while_this_one_holds_the_shard(root: Path) -> None:
    index = EdgeVectorIndex(root, "shared", model_id=MODEL, vector_size=SIZE)
    try:
        opener = _child(
            """
            import sys, time
            from charmem_qdrant import EdgeVectorIndex
            started = time.monotonic()
            try:
                EdgeVectorIndex(sys.argv[1], "shared", model_id=sys.argv[2], vector_size=3)
            except Exception as exc:
                print(type(exc).__name__, round(time.monotonic() - started, 3), flush=True)
            else:
                print("opened", flush=True)
            """,
            str(root),
            MODEL,
        )
        out, err = opener.communicate(timeout=60)
        name, seconds = out.strip().splitlines()[-1].split()
        assert name == "StoreLockedError", err
        assert float(seconds) < MAX_WAIT_SECONDS
    finally:
        index._close_blocking()


async def test_acknowledged_writes_survive_kill_9(root: Path) -> None:
    ids = [MemoryId.new() for _ in range(3)]
    writer = _child(
        """
        import asyncio, os, signal, sys
        from charmem import MemoryId, ObjectType
        from charmem.ports import VectorPoint
        from charmem_qdrant import EdgeVectorIndex
        index = EdgeVectorIndex(sys.argv[1], "crash", model_id=sys.argv[2], vector_size=3)
        points = [
            VectorPoint(id=MemoryId(raw), object_type=ObjectType.DERIVED, vector=[1.0, n, 0.0],
                        text="remembered before the crash")
            for n, raw in enumerate(sys.argv[3:])
        ]
        asyncio.run(index.upsert(points))
        asyncio.run(index.delete([points[0].id]))
        print("acknowledged", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """,
        str(root),
        MODEL,
        *(str(i) for i in ids),
    )
    _wait_for_line(writer, "acknowledged")
    assert writer.wait(timeout=30) == -signal.SIGKILL

    index = EdgeVectorIndex(root, "crash", model_id=MODEL, vector_size=SIZE)
    try:
        assert await index.point_ids() == set(ids[1:])
        result = await index.search(
            VectorQuery(vector=[1.0, 1.0, 0.0], limit=5, object_types=(ObjectType.DERIVED,))
        )
        assert [hit.id for hit in result.hits] == [ids[1], ids[2]]
        await index.upsert(
            [VectorPoint(id=ids[0], object_type=ObjectType.DERIVED, vector=[1.0, 0.0, 0.0])]
        )
        assert await index.count() == 3
    finally:
        await index.close()


async def test_writes_past_segment_flushes_survive_kill_9(root: Path) -> None:
    """Single-point upserts across several segment-flush bounds, then SIGKILL: none is lost."""
    ids = [MemoryId.new() for _ in range(2 * _disk.SEGMENT_FLUSH.operations + 7)]
    writer = _child(
        """
        import asyncio, os, signal, sys
        from charmem import MemoryId, ObjectType
        from charmem.ports import VectorPoint
        from charmem_qdrant import EdgeVectorIndex
        index = EdgeVectorIndex(sys.argv[1], "many", model_id=sys.argv[2], vector_size=3)

        async def write() -> None:
            for n, raw in enumerate(sys.argv[3:]):
                point = VectorPoint(id=MemoryId(raw), object_type=ObjectType.DERIVED,
                                    vector=[1.0, float(n), 0.0], text=f"note {n}")
                await index.upsert([point])

        asyncio.run(write())
        print("acknowledged", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """,
        str(root),
        MODEL,
        *(str(i) for i in ids),
    )
    _wait_for_line(writer, "acknowledged")
    assert writer.wait(timeout=60) == -signal.SIGKILL

    index = EdgeVectorIndex(root, "many", model_id=MODEL, vector_size=SIZE)
    try:
        assert await index.point_ids() == set(ids)
    finally:
        await index.close()


class _FlushCounter:
    """A shard stand-in that counts ``flush`` calls and forwards everything."""

    def __init__(self, shard: Any) -> None:
        self.shard, self.flushes = shard, 0

    def flush(self) -> None:
        self.flushes += 1
        self.shard.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.shard, name)


async def test_writes_sync_the_wal_and_flush_segments_only_when_due(
    index: EdgeVectorIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each write fsyncs the WAL; the segment flush (which holds the GIL) waits for the bound."""
    synced: list[str] = []
    real_fsync = _disk._fsync
    monkeypatch.setattr(_disk, "_fsync", lambda path: (synced.append(path), real_fsync(path)))
    counter = _FlushCounter(index._shard)
    index._shard = counter  # type: ignore[assignment]
    ids = [MemoryId.new() for _ in range(_disk.SEGMENT_FLUSH.operations - 1)]
    for n, point_id in enumerate(ids):
        await index.upsert(
            [VectorPoint(id=point_id, object_type=ObjectType.DERIVED, vector=[1.0, n, 0.0])]
        )
    assert counter.flushes == 0
    assert str(index.path / "wal") in synced
    await index.delete(ids[:1])  # a delete counts as a write too
    assert counter.flushes == 1
    index._shard = counter.shard


def test_segment_flush_rule() -> None:
    rule = _disk.SegmentFlush(operations=3, points=10)
    assert not rule.due(2, 9)
    assert rule.due(3, 1)
    assert rule.due(1, 10)
