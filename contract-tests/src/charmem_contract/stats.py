"""The retrieval-stats suite: :class:`RetrievalStatsStoreContract`, for ``RetrievalStatsStore``."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from charmem.domain.ids import MemoryId
from charmem.domain.model import Relation
from charmem.ports import RetrievalStatsStore, StatsEntry, StatsSummary
from charmem_contract import data
from charmem_contract._base import ContractSuite, requires
from charmem_contract._store_lifecycle import StoreLifecycleTests
from charmem_contract.factories import CONTRACT_COLLECTION, StoreFactory

__all__ = ["RetrievalStatsStoreContract"]


def _obj(memory_id: MemoryId, key: str, *, current: bool = True) -> StatsEntry:
    return StatsEntry(id=memory_id, kind="object", key=key, current=current)


def _link(memory_id: MemoryId, relation: Relation, from_id: MemoryId, to_id: MemoryId) -> StatsEntry:
    return StatsEntry(id=memory_id, kind="link", key=relation.value, from_id=from_id, to_id=to_id)


def _plain(summary: StatsSummary) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    return dict(summary.objects), dict(summary.current_objects), dict(summary.links)


class RetrievalStatsStoreContract(StoreLifecycleTests[RetrievalStatsStore], ContractSuite, suite=True):
    """Contract suite of :class:`charmem.ports.RetrievalStatsStore`.

    Subclass it as ``TestMyStatsStore`` and override the one fixture ``stats_store_factory``: it
    yields a :class:`~charmem_contract.factories.StoreFactory` whose ``open(collection, *,
    store="main")`` opens a stats store on the test's own backing stores, and closes what it
    opened at the end (:func:`charmem_contract.opening`).
    """

    capabilities: ClassVar[dict[str, str]] = {
        "supports_reopen": "keeps its rows across close() and a new open of the same store and collection",
        "supports_lock": (
            "refuses a second opener of the same store with StoreLockedError while it is open "
            "(the factory's open_competitor)"
        ),
        "supports_sibling_collections": (
            "holds other collections' rows in the same backing store, isolated from this one"
        ),
        "supports_closed_errors": "raises BackendError when used after close()",
    }
    optional_capabilities: ClassVar[frozenset[str]] = frozenset(capabilities)
    minimum_passing: ClassVar[int] = 6

    supports_reopen: ClassVar[bool] = True
    supports_lock: ClassVar[bool] = True
    supports_sibling_collections: ClassVar[bool] = True
    supports_closed_errors: ClassVar[bool] = True

    @pytest.fixture
    def stats_store_factory(self) -> StoreFactory[RetrievalStatsStore]:
        """Override: yield a factory of stats stores on this test's own backing stores."""
        raise NotImplementedError(
            f"{type(self).__name__} must override the stats_store_factory fixture to yield a "
            "StoreFactory of RetrievalStatsStore on the test's own backing stores "
            "(see charmem_contract.opening)"
        )

    @pytest.fixture
    async def stats_store(
        self, stats_store_factory: StoreFactory[RetrievalStatsStore]
    ) -> RetrievalStatsStore:
        """The collection ``"contract"`` of store ``"main"``, open (the factory closes it)."""
        return await stats_store_factory.open(CONTRACT_COLLECTION)

    @pytest.fixture
    def store_factory(
        self, stats_store_factory: StoreFactory[RetrievalStatsStore]
    ) -> StoreFactory[RetrievalStatsStore]:
        """The factory under the name the store lifecycle tests use."""
        return stats_store_factory

    def _rows(self) -> tuple[list[StatsEntry], dict[str, MemoryId]]:
        e, o, d1, d2, n, t = data.ids("stats-objects", 6)
        links = data.ids("stats-links", 5)
        rows = [
            _obj(e, "episode"),
            _obj(o, "observation"),
            _obj(d1, "derived"),
            _obj(d2, "derived", current=False),
            _obj(n, "entity"),
            _obj(t, "thread"),
            _link(links[0], Relation.HAS_OBSERVATION, e, o),
            _link(links[1], Relation.INVOLVES, e, n),
            _link(links[2], Relation.ABOUT, d1, n),
            _link(links[3], Relation.ABOUT, d2, n),
            _link(links[4], Relation.SUPERSEDES, d1, d2),
        ]
        return rows, {"episode": e, "observation": o, "d1": d1, "d2": d2, "entity": n, "thread": t}

    async def test_fixture_starts_empty(self, stats_store: RetrievalStatsStore) -> None:
        """The fixture yields a store with no rows.

        If this fails: the ``stats_store_factory`` fixture must give every test fresh backing stores
        (a new file or a new collection name).
        """
        assert await stats_store.row_count() == 0, "the stats_store_factory's store is not empty"
        assert _plain(await stats_store.summary()) == ({}, {}, {})

    async def test_summary_counts_objects_current_objects_and_links(
        self, stats_store: RetrievalStatsStore
    ) -> None:
        """``summary`` counts objects per type (all and current) and links per relation.

        If this fails: group object rows by ``key`` (and by ``current``) and link rows by ``key``;
        types with no current object are absent from ``current_objects``.
        """
        rows, _ = self._rows()
        await stats_store.record(rows)
        assert await stats_store.row_count() == len(rows)
        assert _plain(await stats_store.summary()) == (
            {"derived": 2, "entity": 1, "episode": 1, "observation": 1, "thread": 1},
            {"derived": 1, "entity": 1, "episode": 1, "observation": 1, "thread": 1},
            {"about": 2, "has_observation": 1, "involves": 1, "supersedes": 1},
        )

    async def test_rows_are_keyed_by_id_so_replays_never_count_twice(
        self, stats_store: RetrievalStatsStore
    ) -> None:
        """Recording the same rows again changes nothing; a row recorded again with new values replaces it.

        If this fails: upsert by the row id (``INSERT OR REPLACE``, a dict keyed by id), never
        append.
        """
        rows, named = self._rows()
        await stats_store.record(rows)
        before = _plain(await stats_store.summary())
        await stats_store.record(rows)
        await stats_store.record(rows[:3])
        assert await stats_store.row_count() == len(rows), "a replay added rows"
        assert _plain(await stats_store.summary()) == before, "a replay changed the counters"
        degrees = await stats_store.degrees([named["entity"]])
        assert degrees[named["entity"]] == 3, "a replay changed the degrees"
        await stats_store.record([_obj(named["d1"], "derived", current=False)])
        assert (await stats_store.summary()).current_objects.get("derived", 0) == 0
        assert await stats_store.row_count() == len(rows)

    async def test_degrees_count_links_touching_each_id(self, stats_store: RetrievalStatsStore) -> None:
        """``degrees`` counts links touching each id (optionally of one relation); absent ids count 0.

        If this fails: count link rows whose ``from_id`` or ``to_id`` is the id, filter by the
        relation's value, and return an entry for every requested id.
        """
        rows, n = self._rows()
        await stats_store.record(rows)
        absent = MemoryId.new()
        got = await stats_store.degrees([n["entity"], n["d1"], n["episode"], n["thread"], absent])
        assert got == {n["entity"]: 3, n["d1"]: 2, n["episode"]: 2, n["thread"]: 0, absent: 0}
        about = await stats_store.degrees([n["entity"], n["d1"], n["episode"]], relation=Relation.ABOUT)
        assert about == {n["entity"]: 2, n["d1"]: 1, n["episode"]: 0}
        assert await stats_store.degrees([]) == {}

    async def test_empty_record_and_clear(self, stats_store: RetrievalStatsStore) -> None:
        """Recording no rows is a no-op; ``clear`` removes every row of the collection.

        If this fails: accept an empty sequence, and delete only this collection's rows in clear.
        """
        await stats_store.record([])
        assert await stats_store.row_count() == 0
        rows, named = self._rows()
        await stats_store.record(rows)
        await stats_store.clear()
        assert await stats_store.row_count() == 0
        assert _plain(await stats_store.summary()) == ({}, {}, {})
        assert (await stats_store.degrees([named["entity"]]))[named["entity"]] == 0

    async def test_many_rows_in_one_call(self, stats_store: RetrievalStatsStore) -> None:
        """One ``record`` call with thousands of rows stores them all.

        If this fails: batch the write (one transaction, ``executemany``), without a parameter
        limit that silently truncates.
        """
        hub = MemoryId.new()
        entries = [
            _link(memory_id, Relation.MENTIONS, MemoryId.new(), hub)
            for memory_id in data.ids("many-links", 3000)
        ]
        await stats_store.record(entries)
        assert await stats_store.row_count() == 3000
        assert (await stats_store.degrees([hub], relation=Relation.MENTIONS))[hub] == 3000

    @requires("supports_sibling_collections")
    async def test_collections_are_isolated(
        self, stats_store: RetrievalStatsStore, stats_store_factory: StoreFactory[RetrievalStatsStore]
    ) -> None:
        """Another collection on the same backing store has its own rows; clearing one keeps the other.

        If this fails: key every row by (collection, id) and scope every query and ``clear`` to the
        collection.
        """
        rows, named = self._rows()
        await stats_store.record(rows)
        sibling = await stats_store_factory.open("contract-stats-sibling")
        assert await sibling.row_count() == 0
        assert (await sibling.degrees([named["entity"]]))[named["entity"]] == 0
        await sibling.record(rows[:2])
        await sibling.clear()
        assert await stats_store.row_count() == len(rows)
        await sibling.record(rows[:2])
        await stats_store.clear()
        assert await sibling.row_count() == 2

    # -- the store lifecycle (reopen, lock, closed handle) for a stats store ----------------

    async def _fill(self, handle: RetrievalStatsStore) -> Any:
        rows, named = self._rows()
        await handle.record(rows)
        return rows, named, _plain(await handle.summary())

    async def _check_reopened(self, handle: RetrievalStatsStore, filled: Any) -> None:
        rows, named, summary = filled
        assert await handle.row_count() == len(rows)
        assert _plain(await handle.summary()) == summary
        assert (await handle.degrees([named["entity"]]))[named["entity"]] == 3

    async def _write_one(self, handle: RetrievalStatsStore) -> None:
        await handle.record([_obj(MemoryId.new(), "episode")])

    async def _read_one(self, handle: RetrievalStatsStore) -> None:
        await handle.row_count()
