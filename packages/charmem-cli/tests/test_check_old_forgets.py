"""``charmem check --repair`` on the embedded stores completes episode forgets recorded before
forgetting an episode reached its observations (a real Oxigraph store and Qdrant Edge shard)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from charmem import CharacterMemory, DerivedMemoryDraft, DerivedType, MemoryId, RememberInput, Settings
from charmem.domain.graph import GraphBatch, LifecycleAction, LifecycleRecord
from charmem_cli.app import main

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)
COLLECTION = "old-forgets"
RATIONALE = "Forget that evening."


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hashing")
    return tmp_path / "store"


def _run(store: Path, *args: str) -> int:
    return main(["--store", str(store), "--collection", COLLECTION, "check", *args])


async def _remember_then_forget_the_old_way(store: Path) -> tuple[MemoryId, MemoryId]:
    """A remembered message whose episode a forget of the previous version suppressed: the
    episode's record and its claim's, not the utterance's. Returns (episode, observation)."""
    from charmem_oxigraph import OxigraphGraphStore

    settings = Settings.from_mapping({"EMBEDDING_PROVIDER": "hashing"}).with_store_root(store)
    async with CharacterMemory.open(settings, COLLECTION) as memory:
        outcome = await memory.remember(
            RememberInput("I lost my job today.", occurred_at=T0, created_at=T0).with_derived_memory(
                DerivedMemoryDraft(DerivedType.CLAIM, "Lost their job.")
            )
        )
    [episode], [observation], [claim] = outcome.episode_ids, outcome.observation_ids, outcome.derived_ids
    graph = OxigraphGraphStore.open(COLLECTION, path=store / "oxigraph")
    try:
        await graph.write_batch(
            GraphBatch(
                records=[
                    LifecycleRecord(
                        id=MemoryId.deterministic(COLLECTION, "suppress", target, episode, RATIONALE),
                        target_id=target,
                        action=LifecycleAction.SUPPRESS,
                        rationale=RATIONALE,
                        recorded_at=T0 + timedelta(hours=1),
                        related_ids=() if target == episode else (episode,),
                    )
                    for target in (episode, claim)
                ]
            )
        )
    finally:
        await graph.close()
    return episode, observation


def test_check_reports_an_old_episode_forget_and_repair_completes_it(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    episode, observation = asyncio.run(_remember_then_forget_the_old_way(store))
    assert _run(store, "--json") == 1
    report = json.loads(capsys.readouterr().out)
    [problem] = report["graph"]["problems"]
    assert (problem["kind"], problem["id"]) == ("episode_parts_not_forgotten", str(episode))
    assert problem["related_ids"] == [str(observation)]
    assert report["repairable"] is True

    assert _run(store, "--repair") == 0
    out = capsys.readouterr().out
    assert "1 suppression(s) old forgets lacked appended" in out
    assert out.split("after repair:\n")[1].startswith(f"collection {COLLECTION!r}: consistent")

    assert _run(store, "--json") == 0
    assert json.loads(capsys.readouterr().out)["consistent"] is True
