"""The latency benchmark runs end to end at a tiny size, so it cannot rot (no timing asserted)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "latency.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("latency_benchmark", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_latency_benchmark_runs_at_a_tiny_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "latency.json"
    argv = [
        *("--sizes", "12,24", "--dims", "32", "--queries", "4", "--singles", "3", "--batch", "10"),
        *("--centres", "4", "--hnsw-m", "8", "--hnsw-ef", "16", "--no-gil-probe"),
        *("--concurrency-seconds", "0.4", "--store", str(tmp_path), "--json-out", str(out)),
    ]
    assert load().main(argv) == 0

    table = capsys.readouterr().out
    for label in (
        "(a) numpy exact",
        "(c) retrieve() full",
        "(d) qdrant-client",
        "HNSW m=8 ef=16",
        "1 writer",
        "(c3) retrieve() on the reopened store",
        "warm retrieve / floor",
        "cold retrieve (reopened) / floor",
    ):
        assert label in table
    document = json.loads(out.read_text(encoding="utf-8"))
    (result,) = document["results"]
    assert result["dim"] == 32
    for n in ("12", "24"):
        size = result["sizes"][n]
        assert size["vector_points"] == int(n)  # one point per remembered memory
        assert set(size["latency"]) == {
            "numpy",
            "edge_dense",
            "edge_fused",
            "retrieve",
            "retrieve_warm",
            "retrieve_cold",
            "qdrant_client",
        }
        assert size["floor"]["count"] == size["floor_one_thread"]["count"] == 200
        assert size["gc_tracked_objects"] > 0
        assert all(size["disk_closed"][store] > 0 for store in ("graph", "vectors", "stats"))
        lag = size["concurrency"]["loop_lag_made_of"]
        assert lag["late_ticks"] >= 0 and isinstance(lag["overlap_ms"], dict)
        assert all(size["disk"][store] > 0 for store in ("graph", "vectors", "stats"))
    (run,) = result["hnsw"]["runs"]
    assert run["completeness"] == ["approximate"]
    assert 0.0 <= run["recall"] <= 1.0
    assert result["concurrency"]["commits_per_second"] > 0
    assert set(document["targets"]["32x24"]) == {
        "warm retrieve / floor",
        "warm retrieve / VectorIndex.search (b+)",
        "cold retrieve (reopened) / floor",
    }
    assert list(tmp_path.iterdir()) == [out]  # the working directory was removed
