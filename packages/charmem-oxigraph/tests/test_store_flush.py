"""A persistent store flushes RocksDB's memtables as it is written (``SharedStore.flush_if_due``).

Left alone, Oxigraph keeps a long ingest's writes in its write buffers (128 MiB per column
family) until close: about 1 GiB of a 50,000-memory build's peak memory. Each handle flushes them
every ``flush_bytes`` of N-Triples written (``OXIGRAPH_FLUSH_MIB``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from charmem import Settings
from charmem.domain.graph import GraphBatch
from charmem.domain.model import Relation
from charmem.errors import ConfigurationError

from charmem_oxigraph import OxigraphGraphStore, PersistentOxigraphGraphStore, _registry

from oxigraph_builders import episode, link, observation


def _session(turns: int) -> GraphBatch:
    ep = episode(summary="an evening")
    said = [observation(ep.id, text=f"turn {n}: " + "word " * 30) for n in range(turns)]
    return GraphBatch(objects=[ep, *said], links=[link(ep.id, Relation.HAS_OBSERVATION, o.id) for o in said])


def _tables(path: Path) -> int:
    return len(list(path.glob("*.sst")))


async def test_a_long_run_of_writes_flushes_and_loses_nothing(tmp_path: Path) -> None:
    """Forty sessions with a 64 KiB flush budget: flushes happen while open, then close/reopen.

    An adapter author checks, when it fails: that ``_write_batch`` reports the bytes it loaded to
    ``SharedStore.wrote`` and calls ``SharedStore.flush_if_due`` before its next write, outside the
    writer lock, which calls ``Store.flush`` once the budget is spent (RocksDB then writes
    ``*.sst`` data files), and that every write is read back after a close and a reopen.
    """
    path = tmp_path / "oxigraph"
    batches = [_session(25) for _ in range(40)]
    store = await OxigraphGraphStore.open_async("c", path=path)
    store._handle().flush_bytes = 64 * 1024
    tables = _tables(path)
    try:
        for batch in batches:
            await store.write_batch(batch)
        flushes = store._handle().flushes
        assert flushes >= 5, flushes
        assert _tables(path) > tables  # flushed while open, not only at close
        statements = await store.statement_count()
    finally:
        await store.close()
    store = await OxigraphGraphStore.open_async("c", path=path)
    try:
        assert await store.statement_count() == statements
        for batch in batches:
            ids = [obj.id for obj in batch.objects]
            assert await store.get_objects(ids) == {obj.id: obj for obj in batch.objects}
            assert await store.get_links([lk.id for lk in batch.links]) == {lk.id: lk for lk in batch.links}
    finally:
        await store.close()


async def test_without_a_flush_budget_nothing_is_flushed_before_close(tmp_path: Path) -> None:
    """``OXIGRAPH_FLUSH_MIB=0`` keeps the memtables until close (RocksDB's own bounds).

    An adapter author checks, when it fails: that ``flush_bytes_from_settings`` reads 0 as "off"
    and that ``flush_if_due`` returns at once then.
    """
    settings = Settings.from_mapping(
        {"GRAPH_STORE_MODE": "persistent", "OXIGRAPH_PATH": str(tmp_path / "g"), "OXIGRAPH_FLUSH_MIB": "0"}
    )
    store = PersistentOxigraphGraphStore.from_settings(settings, "c")
    tables = _tables(tmp_path / "g")
    try:
        for _ in range(5):
            await store.write_batch(_session(25))
        assert store._handle().flushes == 0
        assert _tables(tmp_path / "g") == tables
    finally:
        await store.close()


async def test_an_in_memory_store_never_flushes() -> None:
    store = await OxigraphGraphStore.open_async("c")
    store._handle().flush_bytes = 1
    try:
        await store.write_batch(_session(5))
        assert store._handle().flushes == 0
    finally:
        await store.close()


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, _registry.DEFAULT_FLUSH_BYTES),
        ("  ", _registry.DEFAULT_FLUSH_BYTES),
        ("0", 0),
        ("0.5", 2**19),
        ("64", 2**26),
    ],
)
def test_the_flush_budget_setting(raw: str | None, expected: int) -> None:
    extra = {} if raw is None else {_registry.FLUSH_KEY: raw}
    assert _registry.flush_bytes_from_settings(extra) == expected


@pytest.mark.parametrize("raw", ["-1", "lots", "nan", "inf"])
def test_a_bad_flush_budget_names_the_key(raw: str) -> None:
    with pytest.raises(ConfigurationError, match="OXIGRAPH_FLUSH_MIB") as caught:
        _registry.flush_bytes_from_settings({_registry.FLUSH_KEY: raw})
    assert caught.value.key == "OXIGRAPH_FLUSH_MIB"


def test_the_setting_reaches_the_handle(tmp_path: Path) -> None:
    settings = Settings.from_mapping(
        {"GRAPH_STORE_MODE": "persistent", "OXIGRAPH_PATH": str(tmp_path / "g"), "OXIGRAPH_FLUSH_MIB": "2"}
    )
    store = PersistentOxigraphGraphStore.from_settings(settings, "c")
    try:
        assert store._handle().flush_bytes == 2 * 2**20
    finally:
        store._close()


class _FailingFlush:
    """A pyoxigraph store whose ``flush`` fails as a full disk would."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def flush(self) -> None:
        raise OSError("IO error: No space left on device")


async def test_a_failed_flush_does_not_fail_the_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writes are durable before the flush: a failed one is logged and the store reopened.

    An adapter author checks, when it fails: that ``flush_if_due`` catches the flush's error,
    marks the handle stale on "no space left on device" (the next use reopens it) and lets the
    write go on.
    """
    store = await OxigraphGraphStore.open_async("c", path=tmp_path / "g")
    shared = store._handle()
    shared.flush_bytes = 1
    try:
        await store.write_batch(_session(3))
        opens = len(list((tmp_path / "g").glob("LOG.old.*")))  # RocksDB starts a new LOG per open
        real = _registry.SharedStore.store
        monkeypatch.setattr(
            _registry.SharedStore, "store", property(lambda self: _FailingFlush(real.fget(self)))
        )
        batch = _session(3)
        assert (await store.write_batch(batch)).inserted_ids
        assert shared.flushes == 0
        assert len(list((tmp_path / "g").glob("LOG.old.*"))) == opens + 1  # marked stale: reopened
        monkeypatch.undo()
        ids = [obj.id for obj in batch.objects]
        store._cache().clear()
        assert await store.get_objects(ids) == {obj.id: obj for obj in batch.objects}
    finally:
        await store.close()
