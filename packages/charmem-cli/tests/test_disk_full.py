"""A few runs of benchmarks/disk_full_trials.py: the embedded stores on a nearly full tmpfs.

Each trial runs in a child process on a fresh 8 MiB tmpfs, so a ``SIGBUS`` (what Qdrant Edge's
memory maps did with 1-3 MB free) fails the test instead of killing pytest. Mounting needs root,
as in CI; elsewhere the test skips. The full run is ``nox -s disk-full`` (20 trials).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"


@pytest.fixture
def trials(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    module = importlib.import_module("disk_full_trials")
    if not module.can_mount():
        pytest.skip("needs root on Linux to mount a tmpfs (mount -t tmpfs -o size=8m tmpfs DIR), as in CI")
    return module


def test_a_nearly_full_disk_gives_typed_errors_and_the_same_process_recovers(
    trials: ModuleType, tmp_path: Path
) -> None:
    """Open with 1-3 MB free, write with 1-3 MB free, write with nothing free: no crash, a typed
    error (or a repair marker caused by one), and after the filler is deleted the same process
    (the same open memory for the writes) stores and recalls everything."""
    results = [trials.run_trial(i, phase, free, tmp_path) for i, phase, free in trials.plan(3, seed=14)]
    assert [r.phase for r in results] == ["open", "write", "full"]
    assert [r.outcome for r in results if r.crashed] == [], [r.detail for r in results]
    assert all(r.recovered for r in results), [(r.outcome, r.detail) for r in results]
    assert results[0].outcome == "InsufficientStorageError"  # the shard is never created short
    assert results[2].outcome == "InsufficientStorageError"  # the graph's ENOSPC, typed
    assert results[1].outcome in ("ok", "repair:InsufficientStorageError")
