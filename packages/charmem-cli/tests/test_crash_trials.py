"""A small run of benchmarks/crash_trials.py: a child process writing to the embedded stores is
killed with SIGKILL at each named crash point (and once at a random moment); nothing acknowledged
is lost, no graph batch is partial, the checker sees what each crash leaves and replaying the
journal repairs it. The full run (200+ trials) is ``nox -s crash``."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest

from charmem.testing import CrashPoint

BENCHMARKS = Path(__file__).resolve().parents[3] / "benchmarks"

#: before the graph batch, after it and before the vector write, between vectors and stats,
#: after everything but before the acknowledgement, and inside two lifecycle operations
POINTS = (
    ("remember", CrashPoint.BEFORE_GRAPH_BATCH),
    ("remember", CrashPoint.AFTER_GRAPH_BATCH),
    ("remember", CrashPoint.BEFORE_VECTOR_UPSERT),
    ("remember", CrashPoint.BEFORE_STATS_RECORD),
    ("remember", CrashPoint.AFTER_STATS_RECORD),
    ("correct", CrashPoint.AFTER_GRAPH_BATCH),
    ("forget", CrashPoint.BEFORE_VECTOR_DELETE),
)


@pytest.fixture
def trials(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # the forkserver children import it by name
    return importlib.import_module("crash_trials")


def test_sigkill_at_every_named_point_loses_nothing_and_a_replay_repairs(
    trials: ModuleType, tmp_path: Path
) -> None:
    specs = [
        trials.TrialSpec(index=i, seed=i, kind=kind, point=point, arm_at=2)
        for i, (kind, point) in enumerate(POINTS)
    ]
    specs.append(trials.TrialSpec(index=len(specs), seed=99, delay=0.4))  # a random moment
    results = trials.run_trials(specs, tmp_path, per_store=len(specs))
    total = trials.summarise(results)
    assert total["killed"] == len(specs)
    assert total["lost"] == 0
    assert total["partial"] == 0
    assert total["missed"] == 0  # the checker saw every crash that leaves vectors or stats behind
    assert total["rebuilt"] == 0  # replaying the journal alone made every trial consistent
    assert all(r.acked >= 2 for r in results[: len(POINTS)])  # two remembers before the point
    assert [r.needed for r in results[: len(POINTS)]] == [
        point not in (CrashPoint.BEFORE_GRAPH_BATCH, CrashPoint.AFTER_STATS_RECORD) for _, point in POINTS
    ]
    assert total["repaired"] == total["needed"]
    assert all(r.replayed == 1 for r in results[: len(POINTS)])  # the one unacknowledged operation
