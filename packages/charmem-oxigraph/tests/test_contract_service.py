"""The graph-store contract suite on SparqlServiceGraphStore against a real ``oxigraph serve``.

One server per session (conftest's ``sparql_server``); each test gets a new collection on it, so
it starts empty. A server has no opener lock, so ``supports_lock`` is off.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator

import pytest
from charmem.ports import GraphStore
from charmem_contract import GraphStoreContract

from charmem_oxigraph import SparqlServiceGraphStore
from charmem_oxigraph.testing import OxigraphServer

_names = itertools.count()


def _as_service(store: GraphStore) -> SparqlServiceGraphStore:
    assert isinstance(store, SparqlServiceGraphStore)
    return store


@pytest.fixture(scope="module")
def twin_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OxigraphServer]:
    """A second ``oxigraph serve``: where the restore tests load a collection's export."""
    server = OxigraphServer(tmp_path_factory.mktemp("oxigraph-twin"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


class TestSparqlServiceGraphStore(GraphStoreContract):
    supports_lock = False  # a SPARQL server serves many clients; writers are serialised per process

    @pytest.fixture
    async def graph_store(
        self, sparql_server: OxigraphServer, twin_server: OxigraphServer
    ) -> AsyncIterator[GraphStore]:
        self.server = sparql_server
        self.twin = twin_server
        store = SparqlServiceGraphStore(
            f"contract-{next(_names)}",
            query_endpoint=sparql_server.query_endpoint,
            update_endpoint=sparql_server.update_endpoint,
        )
        try:
            yield store
        finally:
            await store.close()

    async def reopen(self, store: GraphStore) -> GraphStore:
        return SparqlServiceGraphStore(
            store.collection,
            query_endpoint=self.server.query_endpoint,
            update_endpoint=self.server.update_endpoint,
        )

    async def open_sibling(self, store: GraphStore, collection: str) -> GraphStore:
        return _as_service(store).for_collection(collection)

    async def open_twin(self, store: GraphStore, collection: str) -> GraphStore:
        return SparqlServiceGraphStore(
            collection, query_endpoint=self.twin.query_endpoint, update_endpoint=self.twin.update_endpoint
        )
