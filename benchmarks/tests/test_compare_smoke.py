"""The side-by-side benchmark runs end to end at a tiny size, so it cannot rot (no timing asserted)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "compare.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("compare_benchmark", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_compare_runs_each_system_in_its_own_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "compare.json"
    argv = [
        *("--sizes", "40", "--dim", "16", "--queries", "3", "--centres", "4", "--batch", "20"),
        *("--chromadb-python", sys.executable, "--footprint"),
        *("--store", str(tmp_path), "--json-out", str(out)),
    ]
    assert load().main(argv) == 0

    table = capsys.readouterr().out
    assert "charmem: retrieve cold (reopened)" in table
    assert "qdrant: warm" in table
    document = json.loads(out.read_text(encoding="utf-8"))
    size = document["sizes"]["40 x 16"]
    assert size["floor_ms"] > 0
    charmem, qdrant = size["systems"]["charmem"], size["systems"]["qdrant"]
    for result in (charmem, qdrant):
        assert result["points"] == 40
        assert result["disk_bytes"] > 0 and result["peak_rss_mb"] > 0
        assert result["latency"]  # cold and warm passes (and charmem's index alone)
    assert set(charmem["latency"]) >= {"retrieve cold (reopened)", "retrieve warm"}
    chromadb = size["systems"]["chromadb"]
    assert "skipped" in chromadb or chromadb["points"] == 40  # skipped when not importable here
    footprint = document["footprint"]
    assert any(part.startswith("oxigraph") for part in footprint["disk_parts"])
    assert footprint["tracemalloc_mb"] and footprint["smaps_mb"]
    assert list(tmp_path.iterdir()) == [out]  # the working directory was removed
