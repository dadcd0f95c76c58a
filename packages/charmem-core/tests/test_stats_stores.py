"""The stats stores owned by core: SQLite and in-memory behave alike."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from charmem import MemoryId, Relation
from charmem.ports import RetrievalStatsStore, StatsEntry
from charmem.stats import InMemoryRetrievalStatsStore, SQLiteRetrievalStatsStore
from charmem.stats.sqlite import degrees_sql


@pytest.fixture(params=["sqlite", "in_memory"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RetrievalStatsStore]:
    s: RetrievalStatsStore = (
        SQLiteRetrievalStatsStore(tmp_path / "stats.sqlite3", "c")
        if request.param == "sqlite"
        else InMemoryRetrievalStatsStore("c")
    )
    try:
        yield s
    finally:
        await s.close()


async def test_rows_are_keyed_by_id_so_replays_never_count_twice(store: RetrievalStatsStore) -> None:
    a, b, link = MemoryId.new(), MemoryId.new(), MemoryId.new()
    rows = [
        StatsEntry(id=a, kind="object", key="episode"),
        StatsEntry(id=b, kind="object", key="entity"),
        StatsEntry(id=link, kind="link", key="involves", from_id=a, to_id=b),
    ]
    await store.record(rows)
    await store.record(rows)
    assert await store.row_count() == 3
    summary = await store.summary()
    assert summary.objects == {"entity": 1, "episode": 1}
    assert summary.links == {"involves": 1}
    absent = MemoryId.new()
    assert await store.degrees([a, b, absent]) == {a: 1, b: 1, absent: 0}
    degrees = await store.degrees([b], relation=Relation.INVOLVES)
    assert degrees == {b: 1}
    assert (await store.degrees([b], relation=Relation.MENTIONS)) == {b: 0}
    await store.record([StatsEntry(id=a, kind="object", key="episode", current=False)])
    assert (await store.summary()).current_objects == {"entity": 1}
    await store.clear()
    assert await store.row_count() == 0


async def test_sqlite_rows_survive_reopen_and_collections_are_separate(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    one = SQLiteRetrievalStatsStore(path, "one")
    await one.record([StatsEntry(id=MemoryId.new(), kind="object", key="episode")])
    await one.close()
    again = SQLiteRetrievalStatsStore(path, "one")
    other = SQLiteRetrievalStatsStore(path, "two")
    assert await again.row_count() == 1
    assert await other.row_count() == 0
    await again.close()
    await other.close()


@pytest.mark.parametrize("by_relation", [False, True])
async def test_sqlite_degrees_search_the_endpoint_indexes_not_the_collection(
    tmp_path: Path, by_relation: bool
) -> None:
    """A degrees call reads the links at its ids, not every row of the collection."""
    store = SQLiteRetrievalStatsStore(tmp_path / "s.sqlite3", "c")
    try:
        sql = degrees_sql(2, by_relation=by_relation)
        params = ["c", b"a" * 16, b"b" * 16, *(["involves"] if by_relation else [])] * 2
        plan = [row[3] for row in store._run("EXPLAIN QUERY PLAN " + sql, params)]
        searches = [step for step in plan if step.startswith(("SEARCH", "SCAN retrieval_stats"))]
        assert len(searches) == 2, plan
        assert all("USING INDEX retrieval_stats_" in step for step in searches), plan
    finally:
        await store.close()
