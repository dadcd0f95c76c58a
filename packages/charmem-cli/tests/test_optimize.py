"""``charmem optimize``: the HNSW index of the embedded vectors, built from the command line, and
what a retrieve reports afterwards (``approximate`` recall, same best memory)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from charmem import (
    CharacterMemory,
    CompletenessKind,
    EpisodeDraft,
    MemoryId,
    ObservationDraft,
    RememberDrafts,
    Settings,
)
from charmem_cli.app import main

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)
TOPICS = ("violin", "harbour", "coffee", "garden", "train", "letters", "bakery", "chess")


def set_env(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)


async def _remember(settings: Settings, count: int) -> MemoryId:
    """``count`` memories in one commit; returns the observation id of the one about chess 7."""
    episodes, observations = [], []
    for i in range(count):
        episode = MemoryId.deterministic("optimize-test", "episode", str(i))
        episodes.append(EpisodeDraft(id=episode, occurred_at=T0 + timedelta(minutes=i)))
        topic = TOPICS[i % len(TOPICS)]
        observations.append(
            ObservationDraft(
                id=MemoryId.deterministic("optimize-test", "observation", str(i)),
                text=f"we talked about {topic} number {i} on a quiet afternoon",
                episode_id=episode,
            )
        )
    async with CharacterMemory.open(settings, "optimize") as memory:
        outcome = await memory.commit(
            await memory.prepare(RememberDrafts(episodes=episodes, observations=observations))
        )
        assert not outcome.repair_markers
    return MemoryId.deterministic("optimize-test", "observation", "103")  # "chess number 103"


async def test_optimize_builds_the_graph_and_retrieve_reports_approximate_recall(
    store_root: Path,
    env_for: Callable[[Path], dict[str, str]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    env = env_for(store_root)
    target = await _remember(Settings.from_mapping(env), 160)
    hnsw = {"VECTOR_HNSW_THRESHOLD": "100", "VECTOR_HNSW_BACKGROUND": "false"}
    set_env(monkeypatch, {**env, **hnsw})

    assert main(["--collection", "optimize", "optimize"]) == 0

    out = capsys.readouterr().out
    assert "built the HNSW index of 'optimize': 160 of 160 points in a graph" in out
    async with CharacterMemory.open(Settings.from_mapping({**env, **hnsw}), "optimize") as memory:
        pack = await memory.retrieve("we talked about chess number 103 on a quiet afternoon")
    assert pack.completeness.kind is CompletenessKind.APPROXIMATE
    assert pack.items[0].id == target

    assert main(["--collection", "optimize", "optimize"]) == 0  # nothing new to build
    assert "nothing to build for 'optimize'" in capsys.readouterr().out


def test_optimize_without_a_threshold_says_which_key_to_set(
    store_root: Path,
    env_for: Callable[[Path], dict[str, str]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    set_env(monkeypatch, env_for(store_root))
    monkeypatch.delenv("VECTOR_HNSW_THRESHOLD", raising=False)
    assert main(["--collection", "optimize", "optimize"]) == 2
    assert "VECTOR_HNSW_THRESHOLD" in capsys.readouterr().err


def test_optimize_refuses_a_collection_without_vectors(
    store_root: Path,
    env_for: Callable[[Path], dict[str, str]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    set_env(monkeypatch, {**env_for(store_root), "VECTOR_HNSW_THRESHOLD": "10"})
    assert main(["--collection", "nothing-here", "optimize"]) == 2
    assert "has no vector shard" in capsys.readouterr().err


def test_optimize_is_for_the_embedded_store_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VECTOR_STORE_MODE", "in_memory")
    monkeypatch.setenv("VECTOR_HNSW_THRESHOLD", "10")
    assert main(["optimize"]) == 2
    assert "VECTOR_STORE_MODE=in_memory always scans exactly" in capsys.readouterr().err
