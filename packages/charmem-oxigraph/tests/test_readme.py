"""The README's Python examples run, so the documentation cannot drift from the code."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from charmem.domain.graph import GraphBatch

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_readme_has_examples() -> None:
    assert BLOCKS


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{n}" for n in range(len(BLOCKS))])
def test_readme_example_runs(code: str, tmp_path: Path) -> None:
    # A fresh interpreter: the example calls asyncio.run, which needs no running loop.
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr


SPARQL = re.findall(r"```sparql\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.DOTALL)


async def test_readme_sparql_examples_run_on_a_real_store() -> None:
    """Each SPARQL example runs on the layout-1 fixture imported (so migrated) into a real store."""
    import io
    import json
    from datetime import datetime

    from pyoxigraph import QuerySolutions

    from charmem_oxigraph import OxigraphGraphStore

    assert len(SPARQL) == 5
    store = OxigraphGraphStore.open("fixture")
    try:
        fixture = Path(__file__).parent / "fixtures" / "layout1.nq"
        await store.import_graph(io.BytesIO(fixture.read_bytes()), "application/n-quads")
        await store.write_batch(GraphBatch(objects=_chess_episodes()))
        assert store._shared is not None
        answers: list[list[dict[str, str]]] = []
        for query in SPARQL:
            text = query.replace("my-assistant-memory", "fixture")
            solutions = store._shared.store.query(text)
            assert isinstance(solutions, QuerySolutions)
            names = [variable.value for variable in solutions.variables]
            answers.append([{n: row[n].value for n in names if row[n] is not None} for row in solutions])
    finally:
        await store.close()
    beliefs, episodes, superseded, turns, chess = answers
    # "the user likes tomatoes" is about Alice too, but superseded: only the naming note is current
    assert [json.loads(row["record"])["text"] for row in beliefs] == ["the user is called Alice"]
    assert len(episodes) == 2
    instants = [datetime.fromisoformat(row["at"]) for row in episodes]
    assert instants == sorted(instants)  # ORDER BY compares instants, whatever their offsets
    assert len(superseded) == 1
    assert superseded[0]["corrected_at"].startswith("2024-03-01T12:20:00")
    assert len(turns) == 6  # the purged observation's link went with it
    assert all(json.loads(row["record"])["observed_at"] for row in turns)
    assert [(row["index"], json.loads(row["record"])["summary"]) for row in chess] == [("1", "chess")]


def _chess_episodes() -> list[Any]:
    """Episodes for the README's scene query: only the first matches (kitchen, the notion, chess)."""
    from charmem.domain.ids import MemoryId
    from charmem.domain.scene import Scene, SceneParticipant, SceneSetting

    from oxigraph_builders import INDIA, at, episode

    notion = MemoryId("3f6c1e2a-9b4d-4e57-8a1f-0c2d3e4f5a6b")
    when = at(10 * 24 * 60, INDIA)  # ten days after the fixture's episodes (outside their query's day)

    def scene(key: str, activity: str) -> Scene:
        return Scene(
            at=when,
            participants=[SceneParticipant(name="Ben"), SceneParticipant(entity_id=notion)],
            setting=SceneSetting(key=key),
            custom_values={"activity": activity},
        )

    return [
        episode(summary=summary, occurred_at=when, scene=scene(key, activity))
        for summary, key, activity in (
            ("chess", "kitchen", "chess"),
            ("cards", "kitchen", "cards"),
            ("park", "park", "chess"),
        )
    ]
