"""``charmem remember`` and ``charmem recall`` with scene options, through ``main`` on embedded stores."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from charmem import (
    CharacterMemory,
    EntityDraft,
    MemoryId,
    RememberDrafts,
    RememberInput,
    RetrievalContext,
    Scene,
    SceneParticipant,
    Settings,
)
from charmem.testing import HashingEmbeddingProvider
from charmem_cli.app import main

MET = "2025-06-01T18:30:00+02:00"
LATER = "2025-06-04T10:00:00+02:00"
SCENE = [
    "--participant",
    "name:Ana",
    "--participant",
    "desc:a man with a deep voice",
    "--setting-key",
    "kitchen",
    "--setting-words",
    "a warm kitchen",
    "--custom",
    "activity=baking",
]


@pytest.fixture(autouse=True)
def _hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hashing")
    monkeypatch.delenv("CHARMEM_COLLECTION", raising=False)
    monkeypatch.delenv("CHARMEM_SERVER_URL", raising=False)


def run(store_root: Path, capsys: pytest.CaptureFixture[str], *args: str, code: int = 0) -> tuple[str, str]:
    assert main(["--store", str(store_root), "--collection", "home", *args]) == code
    captured = capsys.readouterr()
    return captured.out, captured.err


def test_remember_in_a_scene_then_recall_from_the_scene_alone(
    store_root: Path, embedded_settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = run(store_root, capsys, "remember", "Ana and I baked bread.", *SCENE, "--at", MET)
    stored = json.loads(out)
    assert len(stored["episode_ids"]) == 1 and stored["warnings"] == []
    run(store_root, capsys, "remember", "The trip is planned.", "--occurred-at", "2025-06-09T09:00:00+02:00")
    shown, _ = run(store_root, capsys, "recall", "--participant", "Ana", "--at", LATER)
    assert shown.startswith("Recall for the scene\n")
    assert "Ana and I baked bread.  (participant, recency)" in shown and "The trip is planned." not in shown
    assert "  participant 1: unknown\n" in shown
    printed, _ = run(store_root, capsys, "recall", "--json", "--participant", "Ana", "--at", LATER)
    scene = Scene(at=datetime.fromisoformat(LATER), participants=[SceneParticipant(name="Ana")])
    async_pack = _retrieve(embedded_settings, RetrievalContext(scene=scene, max_items=20))
    assert json.loads(printed) == json.loads(json.dumps(async_pack))  # the JSON is pack.to_dict()


def _retrieve(settings: Settings, context: RetrievalContext) -> dict[str, object]:
    import asyncio

    async def go() -> dict[str, object]:
        async with CharacterMemory.open(settings, "home", embedding_provider=HashingEmbeddingProvider()) as m:
            return (await m.retrieve(context)).to_dict()

    return asyncio.run(go())


def test_recall_prints_when_a_participant_was_last_met(
    store_root: Path, embedded_settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    ana, ben = MemoryId.new(), MemoryId.new()

    async def meet() -> None:
        async with CharacterMemory.open(
            embedded_settings, "home", embedding_provider=HashingEmbeddingProvider()
        ) as memory:
            people = [EntityDraft(id=ana, entity_type="person"), EntityDraft(id=ben, entity_type="person")]
            await memory.remember(RememberDrafts(entities=people))
            met = datetime.fromisoformat(MET)
            await memory.remember(
                RememberInput("Ana and I baked bread.", occurred_at=met, participant_entity_ids=[ana])
            )

    asyncio.run(meet())
    shown, _ = run(
        store_root, capsys, "recall", "bread", "--participant", f"id:{ana}", "--participant", f"id:{ben}"
    )
    assert shown.startswith("Recall for: bread\n")
    assert f"  last met: {str(ana)[:8]} 2025-06-01 18:30 (" in shown
    assert f"  last met: {str(ben)[:8]} never\n" in shown
    assert f"  participant 1: resolved -> {str(ana)[:8]}\n" in shown
    dated, _ = run(store_root, capsys, "recall", "--participant", f"id:{ana}", "--at", LATER)
    assert "(2 days before the scene)" in dated


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["recall"], "give a question, or a scene to recall from"),
        (["recall", "--participant", "id:nope"], "--participant 'id:nope': give id:UUID"),
        (["recall", "--participant", "desc: "], "--participant 'desc: '"),
        (["recall", "--custom", "baking"], "--custom 'baking': give KEY=VALUE"),
        (["recall", "--at", "2025-06-04T10:00:00"], "--at '2025-06-04T10:00:00' has no UTC offset"),
        (["recall", "--setting-words", " "], "the scene options are refused"),
        (
            ["remember", "x", "--at", MET, "--occurred-at", LATER],
            "the scene's time is the episode's; give one of them",
        ),
    ],
)
def test_bad_scene_options_exit_2_saying_what_to_give(
    store_root: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    _, err = run(store_root, capsys, *args, code=2)
    assert says in err, err


def test_remember_refuses_an_at_and_occurred_at_in_different_offsets(
    store_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _out, err = run(
        store_root,
        capsys,
        "remember",
        "Ben came by.",
        "--participant",
        "Ben",
        "--at",
        "2025-06-03T09:00:00-09:30",
        "--occurred-at",
        "2025-06-03T18:30:00+00:00",
        code=2,
    )
    assert "--occurred-at" in err and "differ" in err
