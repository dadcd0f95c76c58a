"""The graph authority suite: :class:`GraphStoreContract` (the :class:`~charmem.ports.GraphStore` port)."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from charmem.domain.graph import GraphBatch
from charmem.domain.ids import MemoryId
from charmem.ports import GraphStore
from charmem_contract import data
from charmem_contract._base import ContractSuite
from charmem_contract._graph_erasure import GraphErasureTests
from charmem_contract._graph_reads import GraphReadTests
from charmem_contract._graph_scenes import GraphSceneTests
from charmem_contract._graph_world import ids_of, sample_world
from charmem_contract._graph_writes import GraphWriteTests
from charmem_contract._store_lifecycle import StoreLifecycleTests
from charmem_contract.factories import CONTRACT_COLLECTION, StoreFactory

__all__ = ["GraphStoreContract"]


class GraphStoreContract(
    GraphWriteTests,
    GraphReadTests,
    GraphErasureTests,
    GraphSceneTests,
    StoreLifecycleTests[GraphStore],
    ContractSuite,
    suite=True,
):
    """Contract suite of :class:`charmem.ports.GraphStore`.

    Subclass it as ``TestMyGraphStore`` and override the one fixture ``graph_store_factory``: it
    yields a :class:`~charmem_contract.factories.StoreFactory` whose ``open(collection, *,
    store="main")`` opens a graph store on the test's own backing stores (a directory per store
    name, a fresh in-memory store, a server), and closes what it opened at the end.
    :func:`charmem_contract.opening` does the bookkeeping. Switch off what the adapter does not
    claim::

        class TestMyGraphStore(GraphStoreContract):
            supports_lock = False

            @pytest.fixture
            async def graph_store_factory(self, tmp_path):
                def open_store(collection, *, store):
                    return MyGraphStore.open(tmp_path / store, collection)

                async with opening(open_store) as factory:
                    yield factory

    The suite opens the collection ``"contract"`` of store ``"main"`` for most tests; a reopen
    opens it again after a close, a sibling is another collection of ``"main"``, and the restore
    tests load an export into store ``"twin"``.
    """

    capabilities: ClassVar[dict[str, str]] = {
        "supports_reopen": "keeps its data across close() and a new open of the same store and collection",
        "supports_lock": (
            "refuses a second opener of the same store with StoreLockedError while it is open "
            "(the factory's open_competitor)"
        ),
        "supports_sibling_collections": (
            "holds other collections in the same backing store, isolated from this one"
        ),
        "supports_closed_errors": "raises BackendError when used after close()",
        "supports_restore": (
            "restores its own export_graph dump into an empty store of the same collection on "
            "another backing store (the factory's store 'twin')"
        ),
    }
    optional_capabilities: ClassVar[frozenset[str]] = frozenset(capabilities)
    minimum_passing: ClassVar[int] = 28

    supports_reopen: ClassVar[bool] = True
    supports_lock: ClassVar[bool] = True
    supports_sibling_collections: ClassVar[bool] = True
    supports_closed_errors: ClassVar[bool] = True

    # -- what an adapter provides ----------------------------------------------------------

    @pytest.fixture
    def graph_store_factory(self) -> StoreFactory[GraphStore]:
        """Override: yield a factory of graph stores on this test's own backing stores."""
        raise NotImplementedError(
            f"{type(self).__name__} must override the graph_store_factory fixture to yield a "
            "StoreFactory of GraphStore on the test's own backing stores (see charmem_contract.opening)"
        )

    # -- what the suite derives from it ----------------------------------------------------

    @pytest.fixture
    async def graph_store(self, graph_store_factory: StoreFactory[GraphStore]) -> GraphStore:
        """The collection ``"contract"`` of store ``"main"``, open (the factory closes it)."""
        return await graph_store_factory.open(CONTRACT_COLLECTION)

    @pytest.fixture
    def store_factory(self, graph_store_factory: StoreFactory[GraphStore]) -> StoreFactory[GraphStore]:
        """The factory under the name the store lifecycle tests use."""
        return graph_store_factory

    # -- the canary ------------------------------------------------------------------------

    async def test_fixture_starts_empty(self, graph_store: GraphStore) -> None:
        """The factory opens an empty store bound to a valid collection.

        If this fails: the ``graph_store_factory`` fixture must give every test fresh backing
        stores (a new temporary directory, a new in-memory store or a new collection), not ones
        shared with other tests; every other result of the suite is meaningless until it does.
        """
        assert isinstance(graph_store.collection, str) and graph_store.collection
        assert await graph_store.statement_count() == 0, "the graph_store_factory's store is not empty"
        assert await graph_store.object_ids() == [], "the graph_store_factory's store already holds objects"
        assert await graph_store.link_ids() == [], "the graph_store_factory's store already holds links"

    # -- the store lifecycle (reopen, lock, closed handle) for a graph store ----------------

    async def _fill(self, handle: GraphStore) -> Any:
        batch, _ = sample_world()
        await handle.write_batch(batch)
        hostile = data.observation(batch.objects[3].id, text="\n".join(data.HOSTILE_STRINGS))
        await handle.write_batch(GraphBatch(objects=[hostile]))
        return batch, hostile, await handle.statement_count()

    async def _check_reopened(self, handle: GraphStore, filled: Any) -> None:
        batch, hostile, count = filled
        assert await handle.statement_count() == count
        objects = await handle.get_objects([*ids_of(batch.objects), hostile.id])
        assert [objects.get(i) for i in ids_of(batch.objects)] == list(batch.objects)
        assert objects.get(hostile.id) == hostile
        assert await handle.link_ids() == sorted(ids_of(batch.links))
        assert await handle.get_records([batch.records[0].target_id]) == list(batch.records)
        again = await handle.write_batch(batch)
        assert list(again.inserted_ids) == []

    async def _write_one(self, handle: GraphStore) -> None:
        await handle.write_batch(GraphBatch(objects=[data.entity()]))

    async def _read_one(self, handle: GraphStore) -> None:
        await handle.get_objects([MemoryId.new()])
