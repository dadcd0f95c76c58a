"""The graph-store contract suite on SparqlServiceGraphStore against a real ``oxigraph serve``.

One server per session (conftest's ``sparql_server``); each test's collections get a suffix of
their own on it, so they start empty. A server has no opener lock, so ``supports_lock`` is off.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator

import pytest
from charmem.ports import GraphStore
from charmem_contract import GraphStoreContract, StoreFactory, opening

from charmem_oxigraph import SparqlServiceGraphStore
from charmem_oxigraph.testing import OxigraphServer

_names = itertools.count()


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
    async def graph_store_factory(
        self, sparql_server: OxigraphServer, twin_server: OxigraphServer
    ) -> AsyncIterator[StoreFactory[GraphStore]]:
        """Store ``main`` is the session's server, ``twin`` the module's second one; the collection
        gets this test's suffix, so every test starts empty on the shared servers."""
        servers = {"main": sparql_server, "twin": twin_server}
        suffix = next(_names)

        def open_store(collection: str, *, store: str) -> GraphStore:
            server = servers[store]
            return SparqlServiceGraphStore(
                f"{collection}-{suffix}",
                query_endpoint=server.query_endpoint,
                update_endpoint=server.update_endpoint,
            )

        async with opening(open_store) as factory:
            yield factory
