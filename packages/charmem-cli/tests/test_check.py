"""``charmem check`` on the embedded stores: never creates a store, finds a lost shard, a deleted
stats file and an object missing a required triple; ``--repair`` rebuilds what can be rebuilt."""

from __future__ import annotations

import asyncio
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from charmem import CharacterMemory, DerivedMemoryDraft, DerivedType, MemoryId, RememberInput, Settings
from charmem.admin import GraphProblemKind
from charmem.admin._check import check_stores
from charmem_cli.app import main

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)
COLLECTION = "checked"


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hashing")
    return tmp_path / "store"


def _run(store: Path, *args: str) -> int:
    return main(["--store", str(store), "--collection", COLLECTION, "check", *args])


async def _remember_some(store: Path) -> list[str]:
    settings = Settings.from_mapping({"EMBEDDING_PROVIDER": "hashing"}).with_store_root(store)
    ids: list[str] = []
    async with CharacterMemory.open(settings, COLLECTION) as memory:
        for text in ("Ines started violin lessons.", "Tomas flew to Oslo."):
            outcome = await memory.remember(
                RememberInput(text, occurred_at=T0).with_derived_memory(
                    DerivedMemoryDraft(DerivedType.CLAIM, f"Believed: {text}")
                )
            )
            ids += [str(i) for i in outcome.object_ids]
    return ids


def _populate(store: Path) -> list[str]:
    return asyncio.run(_remember_some(store))


def test_a_missing_store_is_an_error_and_nothing_is_created(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(store) == 2
    assert "no graph store" in capsys.readouterr().err
    assert not store.exists()


def test_a_mistyped_collection_is_an_error_and_creates_no_shard(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _populate(store)
    assert main(["--store", str(store), "--collection", "chekced", "check"]) == 2
    assert "holds nothing" in capsys.readouterr().err
    assert not (store / "vectors" / "chekced").exists()


def test_a_consistent_collection_exits_0_with_a_json_report(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _populate(store)
    assert _run(store) == 0
    assert capsys.readouterr().out.startswith(f"collection {COLLECTION!r}: consistent")
    assert _run(store, "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["consistent"] is True
    assert report["objects"] == 6
    assert report["vectors"]["points"] == report["vectors"]["expected"] == 4  # observations, claims
    assert "repair" not in report


def test_a_lost_shard_and_stats_file_are_reported_then_repaired(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _populate(store)
    shutil.rmtree(store / "vectors" / COLLECTION)
    stats_file = store / "retrieval-stats.sqlite3"
    for path in store.glob("retrieval-stats.sqlite3*"):
        path.unlink()

    assert _run(store, "--json") == 1
    report = json.loads(capsys.readouterr().out)
    assert report["consistent"] is False
    assert report["vectors"]["index_missing"] is True
    assert len(report["vectors"]["missing"]) == 4
    assert report["stats"]["store_missing"] is True
    assert report["stats"]["drift"][0]["counter"] == "rows"
    assert report["graph"]["consistent"] is True
    assert not (store / "vectors" / COLLECTION).exists()  # checking created nothing
    assert not stats_file.exists()

    assert _run(store, "--repair", "--json") == 0
    repaired = json.loads(capsys.readouterr().out)
    assert repaired["consistent"] is True
    assert repaired["repair"]["vectors_indexed"] == 4
    assert repaired["repair"]["stats_rows"] == repaired["stats"]["rows"] > 0
    assert repaired["repair"]["before"]["vectors"]["index_missing"] is True
    assert _run(store) == 0
    capsys.readouterr()


def _remove_record_triple(graph: Any, observation: str) -> None:
    """Delete the observation's record literal (its content) behind the adapter's back (no
    reference kept, so closing the graph store really closes the pyoxigraph store)."""
    from pyoxigraph import NamedNode

    from charmem_oxigraph import VOCAB, node_iri

    store = graph._shared.store
    node = NamedNode(node_iri("observation", MemoryId(observation)))
    [quad] = store.quads_for_pattern(node, NamedNode(VOCAB + "record"), None)
    store.remove(quad)


def test_an_object_missing_a_required_triple_is_unreadable_and_not_repaired(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from charmem_oxigraph import OxigraphGraphStore

    ids = _populate(store)
    episode, observation = ids[0], ids[1]
    graph = OxigraphGraphStore.open(COLLECTION, path=store / "oxigraph")
    try:
        _remove_record_triple(graph, observation)
        report = asyncio.run(check_stores(graph, None, None))
    finally:
        asyncio.run(graph.close())
    unreadable = [p for p in report.graph_problems if p.kind is GraphProblemKind.UNREADABLE]
    assert [str(p.id) for p in unreadable] == [observation]
    assert "not a valid charmem graph" in unreadable[0].detail
    # the objects next to it are still read and checked (the batch was split to find it)
    assert not any(str(p.id) == episode for p in report.graph_problems)

    assert _run(store, "--repair") == 1
    out = capsys.readouterr().out
    assert f"graph unreadable {observation}" in out
    assert "replay the plan" in out


def test_another_embedder_is_an_error_with_the_way_out(
    store: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from charmem.testing import HashingEmbeddingProvider

    _populate(store)
    monkeypatch.setattr(
        HashingEmbeddingProvider, "from_settings", classmethod(lambda cls, s: cls(vector_size=16))
    )
    assert _run(store) == 2
    err = capsys.readouterr().err
    assert "DimensionMismatchError" in err
    assert "rebuild-vectors --drop" in err
