"""The server load benchmark runs end to end in a short run (CI's load run; no timing asserted)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "server_load.py"


def test_a_short_load_run_finds_every_acknowledged_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = importlib.util.spec_from_file_location("server_load", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "load.json"
    argv = [
        "--clients",
        "8",
        "--seconds",
        "4",
        "--embedder",
        "hashing",
        "--store",
        str(tmp_path / "s"),
        "--json-out",
        str(out),
    ]
    assert module.main(argv) == 0, capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["acknowledged_writes"] > 0 and report["missing_writes"] == 0
    assert report["check_consistent"] is True
    assert set(report["operations"]) == {"remember", "retrieve"}
