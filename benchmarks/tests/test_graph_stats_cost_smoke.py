"""The graph statistics benchmark runs end to end at a tiny size, so it cannot rot (no timing asserted)."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "graph_stats_cost.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("graph_stats_cost_benchmark", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_graph_stats_cost_measures_each_mode(capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(load().main(objects=100, repeat=1))
    table = capsys.readouterr().out
    assert " objects, " in table
    for mode in ("sqlite", "graph (oxigraph serve)", "graph (persistent)"):
        assert mode in table
