"""The companion scenario suite runs in CI: every shipped scenario meets every expectation.

It runs on the CLI's embedded stores with the local embedding model (the default a user gets),
so the similarity roads are checked with real embeddings. The scorer itself is checked too: a
scenario whose expectations are wrong must fail.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "situated.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("situated_benchmark", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_scenario_meets_every_expectation(capsys: pytest.CaptureFixture[str]) -> None:
    code = asyncio.run(load().main(["--embedder", "local"]))
    table = capsys.readouterr().out
    assert code == 0, table
    rows = [line for line in table.splitlines()[1:-1] if line.strip()]
    assert len(rows) >= 15 and all(line.endswith("yes") for line in rows), table


def test_a_wrong_expectation_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = json.loads((SCRIPT.parent / "scenarios" / "promises.json").read_text(encoding="utf-8"))
    scenario["probes"] = scenario["probes"][:1]
    scenario["probes"][0]["expect"]["direction"] = {"pump": "owed_by_character"}  # Ann owes the pump
    (tmp_path / "wrong.json").write_text(json.dumps(scenario), encoding="utf-8")

    code = asyncio.run(load().main(["--embedder", "hashing", "--scenarios", str(tmp_path)]))

    assert code == 1
    assert capsys.readouterr().out.splitlines()[1].endswith("NO")
