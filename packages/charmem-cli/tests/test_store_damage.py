"""Damaged or missing store files on the real embedded stores: a typed error naming the way back,
or a documented recovery; never a raw RuntimeError, a panic or a collection that silently
answers with nothing.

* graph (Oxigraph/RocksDB): lost ``CURRENT``, garbage ``CURRENT``, truncated or garbage
  ``MANIFEST``, deleted ``MANIFEST``, garbage or truncated tables -> ``StoreCorruptedError``, on
  every open, with the data files left in place;
* vector shard (Qdrant Edge): garbage files, a lost ``segments/`` -> ``StoreCorruptedError``,
  repaired by ``charmem rebuild-vectors --drop``; a lost shard is rebuilt by the open itself
  (or refused with ``VECTOR_REBUILD_ON_OPEN=false``);
* stats (SQLite, derived): a garbage file is moved aside and rebuilt from the graph, by the open
  and by ``charmem check --repair``;
* a missing graph beside existing vectors is refused, and ``check --repair`` never empties the
  vectors of a collection whose graph holds nothing.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from charmem import (
    CharacterMemory,
    RememberInput,
    Settings,
    StoreCorruptedError,
)
from charmem.admin import check_settings
from charmem.testing import HashingEmbeddingProvider
from charmem_cli.app import main, rebuild_vectors
from charmem_qdrant import EdgeVectorIndex

TEXTS = (
    "My sister Ana is visiting from Porto next week.",
    "The violin lessons moved to Thursday evenings.",
    "Our dog is called Biscuit and hates thunder.",
)
COLLECTION = "damage"


@pytest.fixture(autouse=True)
def _hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hashing")
    monkeypatch.delenv("CHARMEM_COLLECTION", raising=False)
    monkeypatch.delenv("VECTOR_REBUILD_ON_OPEN", raising=False)


def _settings(store: Path, **extra: str) -> Settings:
    return Settings.from_mapping(
        {
            "OXIGRAPH_PATH": str(store / "oxigraph"),
            "VECTOR_STORE_PATH": str(store / "vectors"),
            "RETRIEVAL_STATS_PATH": str(store / "retrieval-stats.sqlite3"),
            "EMBEDDING_PROVIDER": "hashing",
            **extra,
        }
    )


async def _populate(store: Path) -> None:
    async with CharacterMemory.open(_settings(store), COLLECTION) as memory:
        for text in TEXTS:
            await memory.remember(RememberInput(text))


async def _recalled(settings: Settings) -> set[str]:
    async with CharacterMemory.open(settings, COLLECTION) as memory:
        found: set[str] = set()
        for text in TEXTS:
            found |= {item.text for item in (await memory.retrieve(text)).items}
        return found


def _garbage(path: Path, size: int = 4096) -> None:
    length = path.stat().st_size
    with path.open("r+b") as handle:
        handle.write(os.urandom(min(length, size)) if length else b"")


# -- item 6: no silent amnesia ------------------------------------------------------------------


async def test_a_lost_shard_is_rebuilt_from_the_graph_by_the_open(tmp_path: Path) -> None:
    await _populate(tmp_path)
    shutil.rmtree(tmp_path / "vectors" / COLLECTION)
    progress: list[tuple[int, int]] = []
    async with CharacterMemory.open(
        _settings(tmp_path), COLLECTION, rebuild_progress=lambda done, total: progress.append((done, total))
    ) as memory:
        for text in TEXTS:
            assert text in {item.text for item in (await memory.retrieve(text)).items}
    assert progress[0] == (0, progress[-1][1]) and progress[-1][0] == progress[-1][1] >= len(TEXTS)


def test_charmem_recall_rebuilds_a_lost_shard_as_the_library_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(_populate(tmp_path))
    shutil.rmtree(tmp_path / "vectors" / COLLECTION)
    assert main(["--store", str(tmp_path), "--collection", COLLECTION, "recall", "violin lessons"]) == 0
    assert "violin lessons moved to Thursday" in capsys.readouterr().out
    assert (tmp_path / "vectors" / COLLECTION).is_dir()


async def test_a_lost_shard_is_refused_when_rebuild_on_open_is_off(tmp_path: Path) -> None:
    await _populate(tmp_path)
    shard = tmp_path / "vectors" / COLLECTION
    shutil.rmtree(shard)
    settings = _settings(tmp_path, VECTOR_REBUILD_ON_OPEN="false")
    with pytest.raises(StoreCorruptedError, match=r"charmem rebuild-vectors.*rebuild_vectors=True"):
        await CharacterMemory.open(settings, COLLECTION)
    assert not shard.exists()  # nothing was created
    async with CharacterMemory.open(settings, COLLECTION, rebuild_vectors=True) as memory:
        assert TEXTS[0] in {item.text for item in (await memory.retrieve(TEXTS[0])).items}


async def test_a_missing_graph_beside_vectors_is_refused_not_created_empty(tmp_path: Path) -> None:
    await _populate(tmp_path)
    shutil.rmtree(tmp_path / "oxigraph")
    with pytest.raises(StoreCorruptedError, match="charmem import") as raised:
        await CharacterMemory.open(_settings(tmp_path), COLLECTION)
    assert raised.value.path == str(tmp_path / "oxigraph")
    assert not (tmp_path / "oxigraph").exists()
    assert EdgeVectorIndex.exists_from_settings(_settings(tmp_path), COLLECTION)  # vectors kept


def test_check_repair_refuses_to_wipe_vectors_when_the_graph_holds_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    for text in TEXTS:
        assert main(["--store", str(store), "--collection", COLLECTION, "remember", text]) == 0
    # another (valid) graph store, holding only another collection, takes the place of this one
    other = tmp_path / "other"
    assert main(["--store", str(other), "--collection", "someone-else", "remember", "unrelated"]) == 0
    shutil.rmtree(store / "oxigraph")
    shutil.copytree(other / "oxigraph", store / "oxigraph")
    capsys.readouterr()
    assert main(["--store", str(store), "--collection", COLLECTION, "check", "--repair"]) == 2
    err = capsys.readouterr().err
    assert "StoreCorruptedError" in err and "charmem import" in err
    embedder = HashingEmbeddingProvider()
    index = EdgeVectorIndex.from_settings(
        _settings(store), COLLECTION, model_id=embedder.model_id, vector_size=embedder.vector_size
    )
    try:
        assert asyncio.run(index.count()) == len(TEXTS)  # still all there
    finally:
        asyncio.run(index.close())


# -- item 7: damaged stores ---------------------------------------------------------------------


def _one(path: Path, pattern: str) -> Path:
    return sorted(path.glob(pattern))[0]


GRAPH_DAMAGE: dict[str, Callable[[Path], None]] = {
    "current-deleted": lambda p: (p / "CURRENT").unlink(),
    "current-garbage": lambda p: (p / "CURRENT").write_text("garbage\n"),
    "manifest-truncated": lambda p: os.truncate(_one(p, "MANIFEST-*"), 10),
    "manifest-garbage": lambda p: _one(p, "MANIFEST-*").write_bytes(os.urandom(300)),
    "manifest-deleted": lambda p: _one(p, "MANIFEST-*").unlink(),
    "sst-garbage": lambda p: [_garbage(sst, 1 << 20) for sst in p.glob("*.sst")] and None,
    "sst-truncated": lambda p: [os.truncate(sst, 5) for sst in p.glob("*.sst")] and None,
}


@pytest.mark.parametrize("damage", sorted(GRAPH_DAMAGE))
async def test_a_damaged_graph_store_is_refused_on_every_open_and_keeps_its_files(
    tmp_path: Path, damage: str
) -> None:
    await _populate(tmp_path)
    graph = tmp_path / "oxigraph"
    GRAPH_DAMAGE[damage](graph)
    tables = sorted(p.name for p in graph.glob("*.sst"))
    for _ in range(2):  # the second open used to create an empty store over the old tables
        with pytest.raises(StoreCorruptedError, match="charmem import") as raised:
            await CharacterMemory.open(_settings(tmp_path), COLLECTION)
        assert raised.value.path == str(graph.resolve())
    assert sorted(p.name for p in graph.glob("*.sst")) == tables  # nothing was deleted


def test_the_cli_names_the_damaged_graph_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    assert main(["--store", str(store), "--collection", COLLECTION, "remember", TEXTS[0]]) == 0
    (store / "oxigraph" / "CURRENT").unlink()
    capsys.readouterr()
    for command in (["recall", "Ana"], ["check", "--repair"]):
        assert main(["--store", str(store), "--collection", COLLECTION, *command]) == 2
        err = capsys.readouterr().err
        assert "StoreCorruptedError" in err and str(store / "oxigraph") in err, err


SHARD_DAMAGE: dict[str, Callable[[Path], None]] = {
    "all-files-garbage": lambda p: (
        [_garbage(f) for f in p.rglob("*") if f.is_file() and f.name != "charmem-shard.json"] and None
    ),
    "wal-garbage": lambda p: [_garbage(f) for f in (p / "wal").iterdir()] and None,
    "config-garbage": lambda p: (p / "edge_config.json").write_text("garbage"),
    "segments-deleted": lambda p: shutil.rmtree(p / "segments"),
}


@pytest.mark.parametrize("damage", sorted(SHARD_DAMAGE))
async def test_a_damaged_shard_is_refused_and_rebuild_vectors_drop_repairs_it(
    tmp_path: Path, damage: str
) -> None:
    await _populate(tmp_path)
    SHARD_DAMAGE[damage](tmp_path / "vectors" / COLLECTION)
    with pytest.raises(StoreCorruptedError, match="rebuild-vectors --drop"):
        await CharacterMemory.open(_settings(tmp_path), COLLECTION)
    # `charmem rebuild-vectors --drop`: the drop never loads the damaged shard
    report = await rebuild_vectors(_settings(tmp_path), COLLECTION, drop=True, batch_size=64, progress=False)
    assert report["indexed"] >= len(TEXTS)
    assert set(TEXTS) <= await _recalled(_settings(tmp_path))


@pytest.mark.parametrize(
    "data_file", ["vector_storage-dense/vectors/chunk_0.mmap", "payload_storage/page_0.dat"]
)
def test_check_names_a_shard_that_holds_points_but_cannot_be_searched(
    tmp_path: Path, data_file: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The shard opens (its structure is intact) but the data a search reads is cut short."""
    asyncio.run(_populate(tmp_path))
    damaged = list((tmp_path / "vectors" / COLLECTION / "segments").glob(f"*/{data_file}"))
    assert damaged, f"no {data_file} in the shard: the layout of Qdrant Edge changed"
    for path in damaged:
        path.write_bytes(os.urandom(100))  # replaced by 100 random bytes
    settings = _settings(tmp_path)
    with pytest.raises(StoreCorruptedError, match="cannot be searched") as info:
        asyncio.run(check_settings(settings, COLLECTION, embedding_provider=HashingEmbeddingProvider()))
    assert "charmem rebuild-vectors --drop" in str(info.value)
    assert main(["--store", str(tmp_path), "--collection", COLLECTION, "check"]) == 2
    assert "rebuild-vectors --drop" in capsys.readouterr().err
    asyncio.run(rebuild_vectors(settings, COLLECTION, drop=True, batch_size=64, progress=False))
    assert set(TEXTS) <= asyncio.run(_recalled(settings))


async def test_a_garbage_stats_file_is_moved_aside_and_rebuilt_by_the_open(tmp_path: Path) -> None:
    await _populate(tmp_path)
    stats = tmp_path / "retrieval-stats.sqlite3"
    for suffix in ("-wal", "-shm"):
        stats.with_name(stats.name + suffix).unlink(missing_ok=True)
    stats.write_bytes(os.urandom(8192))
    assert set(TEXTS) <= await _recalled(_settings(tmp_path))
    assert list(tmp_path.glob("retrieval-stats.sqlite3.corrupt-*"))  # kept for inspection
    report = await check_settings(
        _settings(tmp_path), COLLECTION, embedding_provider=HashingEmbeddingProvider()
    )
    assert report.consistent, report.describe()  # rows rebuilt from the graph


async def test_a_stats_file_of_an_earlier_release_is_upgraded_in_place(tmp_path: Path) -> None:
    """The old ``stats_rows`` table (text ids, a rowid table) is moved into the current one.

    ``check`` before any open finds the collection consistent (nothing to rebuild), a row whose id
    does not parse is left out, and the old table is gone.
    """
    await _populate(tmp_path)
    stats = tmp_path / "retrieval-stats.sqlite3"
    with sqlite3.connect(stats) as db:
        current = db.execute("SELECT * FROM retrieval_stats ORDER BY id").fetchall()
        db.execute("DROP TABLE retrieval_stats")
        db.execute(
            "CREATE TABLE stats_rows (collection TEXT NOT NULL, id TEXT NOT NULL, kind TEXT NOT NULL,"
            " key TEXT NOT NULL, current INTEGER NOT NULL, from_id TEXT, to_id TEXT,"
            " PRIMARY KEY (collection, id))"
        )

        def text(value: bytes | None) -> str | None:
            return None if value is None else str(uuid.UUID(bytes=value))

        db.executemany(
            "INSERT INTO stats_rows VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(c, text(i), k, key, cur, text(f), text(t)) for c, i, k, key, cur, f, t in current],
        )
        db.execute("INSERT INTO stats_rows VALUES ('x', 'not-an-id', 'object', 'episode', 1, NULL, NULL)")
    assert current
    report = await check_settings(
        _settings(tmp_path), COLLECTION, embedding_provider=HashingEmbeddingProvider()
    )
    assert report.consistent, report.describe()
    with sqlite3.connect(stats) as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert db.execute("SELECT * FROM retrieval_stats ORDER BY id").fetchall() == current
    assert "stats_rows" not in tables
    assert set(TEXTS) <= await _recalled(_settings(tmp_path))


def test_check_repair_rebuilds_a_garbage_stats_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    for text in TEXTS:
        assert main(["--store", str(store), "--collection", COLLECTION, "remember", text]) == 0
    stats = store / "retrieval-stats.sqlite3"
    for suffix in ("-wal", "-shm"):
        stats.with_name(stats.name + suffix).unlink(missing_ok=True)
    stats.write_bytes(b"not a database" * 1000)
    capsys.readouterr()
    assert main(["--store", str(store), "--collection", COLLECTION, "check", "--repair"]) == 0, (
        capsys.readouterr().err
    )
    assert "stats rebuilt" in capsys.readouterr().out
    assert main(["--store", str(store), "--collection", COLLECTION, "check"]) == 0
