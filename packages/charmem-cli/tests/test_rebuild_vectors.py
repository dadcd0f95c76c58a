"""rebuild_vector_index on the embedded stores: a deleted shard comes back from the graph with the
same packs, and another embedder of another size takes over through the documented path.

With and without the lexical cue the packs are byte-identical: the fusion ranks tied points
canonically (see the charmem-qdrant README), so the rebuild's insertion order does not matter.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from charmem import (
    CharacterMemory,
    CorrectionTarget,
    CorrectMemoryDraft,
    DerivedMemoryDraft,
    DerivedType,
    DimensionMismatchError,
    EmbedderMismatchError,
    ForgetMemoryDraft,
    MemoryId,
    RememberInput,
    ReplacementDerivedMemoryDraft,
    Settings,
    SyncCharacterMemory,
)
from charmem.testing import HashingEmbeddingProvider, stores_of

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)
QUESTIONS = ("violin lessons", "where does Ines live", "the dog's name", "coffee or tea")


class FixedClock:
    def now(self) -> datetime:
        return T0


def _settings(root: Path, *, lexical: bool = True) -> Settings:
    return Settings.from_mapping(
        {
            "VECTOR_LEXICAL_CUE": "true" if lexical else "false",
            "GRAPH_STORE_MODE": "persistent",
            "OXIGRAPH_PATH": str(root / "oxigraph"),
            "VECTOR_STORE_MODE": "embedded",
            "VECTOR_STORE_PATH": str(root / "vectors"),
            "RETRIEVAL_STATS_STORE_MODE": "sqlite",
            "RETRIEVAL_STATS_PATH": str(root / "stats.sqlite3"),
            "EMBEDDING_PROVIDER": "hashing",
        }
    )


async def populate(memory: CharacterMemory) -> dict[str, MemoryId]:
    """Memories, one corrected (superseded) and one forgotten (suppressed); returns named ids."""
    texts = [
        ("Ines started violin lessons on Tuesdays.", "Ines is learning the violin."),
        ("Ines moved to Lisbon last spring.", "Ines lives in Lisbon."),
        ("We want to name the dog Biscuit.", "The dog will be called Biscuit."),
        ("I drink coffee every morning at nine.", "Drinks coffee at nine."),
        ("Tomas travelled to Oslo for work.", "Tomas was in Oslo for work."),
    ]
    ids: dict[str, MemoryId] = {}
    for n, (text, belief) in enumerate(texts):
        outcome = await memory.remember(
            RememberInput(
                text,
                occurred_at=T0 + timedelta(days=n),
                summary=f"session {n}: {belief}" if n == 4 else None,  # an episode vector of its own
                created_at=T0,
            ).with_derived_memory(DerivedMemoryDraft(DerivedType.CLAIM, belief, created_at=T0))
        )
        ids[f"claim{n}"] = outcome.object_ids[-1]
    corrected = await memory.correct(
        CorrectMemoryDraft(
            CorrectionTarget.derived_memory(ids["claim1"]), "Porto, not Lisbon.", recorded_at=T0
        ).with_replacement(ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "Ines lives in Porto."))
    )
    ids["replacement"] = corrected.replacement_ids[0]
    await memory.forget(ForgetMemoryDraft.suppress(ids["claim3"], "Asked to forget it.", recorded_at=T0))
    return ids


async def packs(memory: CharacterMemory) -> list[dict[str, Any]]:
    return [(await memory.retrieve(question)).to_dict() for question in QUESTIONS]


def _ranked(pack: Mapping[str, Any]) -> list[tuple[str, str, float]]:
    return [(item["id"], item["status"], round(item["score"], 6)) for item in pack["items"]]


def _recalled(pack: Mapping[str, Any]) -> set[tuple[str, str]]:
    return {(item["id"], item["status"]) for item in pack["items"]}


@pytest.mark.parametrize("lexical", [False, True], ids=["dense", "lexical-cue"])
async def test_rebuild_after_deleting_the_shard_gives_the_same_packs(tmp_path: Path, lexical: bool) -> None:
    settings = _settings(tmp_path, lexical=lexical)
    async with CharacterMemory.open(settings, "rebuild", clock=FixedClock()) as memory:
        ids = await populate(memory)
        before = await packs(memory)
        points_before = await stores_of(memory).vectors.point_ids()
    assert all(pack["items"] for pack in before)
    gone = {ids["claim1"], ids["claim3"]}  # superseded, suppressed
    assert not gone & points_before

    shutil.rmtree(tmp_path / "vectors" / "rebuild")
    progress: list[tuple[int, int]] = []
    async with CharacterMemory.open(
        settings, "rebuild", clock=FixedClock(), rebuild_progress=lambda d, t: progress.append((d, t))
    ) as memory:  # the lost shard is rebuilt from the graph by the open itself
        assert await stores_of(memory).vectors.point_ids() == points_before
        report = await memory.rebuild_vector_index(batch_size=3)  # and again: nothing changes
        assert await stores_of(memory).vectors.point_ids() == points_before
        after = await packs(memory)

    assert report.indexed == len(points_before)
    assert report.not_current == 2
    assert report.removed == 0
    assert progress[0] == (0, report.indexed)
    assert progress[-1] == (report.indexed, report.indexed)
    assert [d for d, _t in progress] == sorted(d for d, _t in progress)
    assert [_recalled(p) for p in after] == [_recalled(p) for p in before]
    assert [[o["id"] for o in p["omissions"]] for p in after] == [
        [o["id"] for o in p["omissions"]] for p in before
    ]
    assert [_ranked(p) for p in after] == [_ranked(p) for p in before]
    assert after == before
    for pack in after:
        current = {item["id"] for item in pack["items"] if item["status"] == "current"}
        assert not {str(i) for i in gone} & current


async def test_rebuild_removes_stale_points_and_is_repeatable(tmp_path: Path) -> None:
    async with CharacterMemory.open(_settings(tmp_path), "stale", clock=FixedClock()) as memory:
        ids = await populate(memory)
        points = await stores_of(memory).vectors.point_ids()
        # a point left behind by a failed delete: the superseded claim
        from charmem import ObjectType
        from charmem.ports import VectorPoint

        vector = await memory.embedder.embed_query("Ines lives in Lisbon.")
        await stores_of(memory).vectors.upsert(
            [VectorPoint(id=ids["claim1"], object_type=ObjectType.DERIVED, vector=vector, text="x")]
        )
        report = await memory.rebuild_vector_index()
        assert report.removed == 1
        assert await stores_of(memory).vectors.point_ids() == points
        again = await memory.rebuild_vector_index()
        assert (again.indexed, again.removed) == (report.indexed, 0)


@pytest.mark.parametrize(
    ("new", "error"),
    [
        (HashingEmbeddingProvider(vector_size=32, model_id="hashing-32"), DimensionMismatchError),
        (HashingEmbeddingProvider(model_id="hashing-renamed"), EmbedderMismatchError),
    ],
    ids=["another-size", "another-model"],
)
async def test_another_embedder_takes_over_through_rebuild_vectors(
    tmp_path: Path, new: HashingEmbeddingProvider, error: type[Exception]
) -> None:
    settings = _settings(tmp_path)
    async with CharacterMemory.open(settings, "switch", clock=FixedClock()) as memory:
        ids = await populate(memory)
        points = await stores_of(memory).vectors.point_ids()

    # the message names the fix that works on a refused open (the next statement runs it)
    with pytest.raises(error, match=r"rebuild_vectors=True\).*charmem rebuild-vectors --drop"):
        await CharacterMemory.open(settings, "switch", embedding_provider=new)

    progress: list[tuple[int, int]] = []
    async with CharacterMemory.open(
        settings,
        "switch",
        embedding_provider=new,
        clock=FixedClock(),
        rebuild_vectors=True,
        rebuild_progress=lambda d, t: progress.append((d, t)),
    ) as memory:
        assert (stores_of(memory).vectors.model_id, stores_of(memory).vectors.vector_size) == (
            new.model_id,
            new.vector_size,
        )
        assert await stores_of(memory).vectors.point_ids() == points
        assert progress[-1] == (len(points), len(points))
        after = await packs(memory)
    assert all(pack["items"] for pack in after)
    gone = {str(ids["claim1"]), str(ids["claim3"])}
    for pack in after:
        assert not gone & {item["id"] for item in pack["items"] if item["status"] == "current"}

    # the new fingerprint sticks: a plain open with the new provider works, the old one is refused
    async with CharacterMemory.open(settings, "switch", embedding_provider=new) as memory:
        assert await stores_of(memory).vectors.count() == len(points)
    with pytest.raises((DimensionMismatchError, EmbedderMismatchError)):
        await CharacterMemory.open(settings, "switch")


def test_sync_facade_rebuilds_too(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    with SyncCharacterMemory.open(settings, "sync-rebuild") as memory:
        memory.remember(RememberInput("The harbour walk at dusk.", occurred_at=T0))
        count = stores_of(memory).vectors
        report = memory.rebuild_vector_index()
        assert report.indexed == 1
        assert report.objects == 2  # the episode echoes its observation: no vector of its own
        assert count is stores_of(memory).vectors
    shutil.rmtree(tmp_path / "vectors" / "sync-rebuild")
    with SyncCharacterMemory.open(settings, "sync-rebuild", rebuild_vectors=True) as memory:
        assert len(memory.retrieve("harbour walk").items) >= 1


def test_cli_rebuild_vectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from charmem_cli.app import main

    store = tmp_path / "store"
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hashing")
    assert main(["--store", str(store), "--collection", "cli", "remember", "A walk along the harbour."]) == 0
    shutil.rmtree(store / "vectors" / "cli")
    assert main(["--store", str(store), "--collection", "cli", "rebuild-vectors", "--quiet"]) == 0
    assert "1 indexed from 2 objects" in capsys.readouterr().out

    # another embedder: refused with a hint, then --drop re-embeds
    monkeypatch.setattr(
        HashingEmbeddingProvider, "from_settings", classmethod(lambda cls, s: cls(vector_size=16))
    )
    assert main(["--store", str(store), "--collection", "cli", "rebuild-vectors", "--quiet"]) == 2
    assert "rebuild-vectors --drop" in capsys.readouterr().err
    assert main(["--store", str(store), "--collection", "cli", "rebuild-vectors", "--drop"]) == 0
    captured = capsys.readouterr()
    assert "1 indexed" in captured.out
    assert "rebuild-vectors" in captured.err  # the progress bar
