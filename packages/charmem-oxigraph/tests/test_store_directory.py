"""The store directory is judged before pyoxigraph opens it (``charmem_oxigraph._disk``).

Deleting a store's ``CURRENT`` used to give a raw ``RuntimeError`` on the first open and an empty
store (its tables deleted by RocksDB) on the second; a directory of someone else's files was
turned into a store. What an interrupted first open leaves is still opened.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from charmem import StoreCorruptedError

from charmem_oxigraph import OxigraphGraphStore


def _make_store(path: Path) -> None:
    store = OxigraphGraphStore.open("c", path=path)
    asyncio.run(store.close())


def test_an_interrupted_first_open_is_created_over(tmp_path: Path) -> None:
    path = tmp_path / "oxigraph"
    path.mkdir()
    for name, text in (("IDENTITY", "id\n"), ("LOCK", ""), ("LOG", "log\n"), ("000004.log", "")):
        (path / name).write_text(text)
    store = OxigraphGraphStore.open("c", path=path)
    try:
        assert asyncio.run(store.statement_count()) == 0
    finally:
        asyncio.run(store.close())


def test_a_directory_of_other_files_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "notes"
    path.mkdir()
    (path / "diary.txt").write_text("mine")
    with pytest.raises(StoreCorruptedError, match="not an Oxigraph store") as raised:
        OxigraphGraphStore.open("c", path=path)
    assert raised.value.path == str(path.resolve())
    assert sorted(p.name for p in path.iterdir()) == ["diary.txt"]


def test_a_lost_current_is_refused_on_every_open(tmp_path: Path) -> None:
    path = tmp_path / "oxigraph"
    _make_store(path)
    (path / "CURRENT").unlink()
    before = sorted(p.name for p in path.iterdir())
    for _ in range(2):
        with pytest.raises(StoreCorruptedError, match="charmem import"):
            OxigraphGraphStore.open("c", path=path)
    assert sorted(p.name for p in path.iterdir()) == before
