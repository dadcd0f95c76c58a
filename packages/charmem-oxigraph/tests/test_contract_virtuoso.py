"""The graph-store contract suite on SparqlServiceGraphStore against a real Virtuoso 7.

Two Virtuoso servers per module (conftest's ``virtuoso_server`` and ``virtuoso_twin``), started
when Virtuoso is installed (``apt-get install virtuoso-opensource-7-bin``); otherwise skipped, or
failed when ``REQUIRE_VIRTUOSO_TESTS=1`` (CI). Each test's collections get a suffix of their own.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator

import pytest
from charmem.ports import GraphStore
from charmem_contract import GraphStoreContract, StoreFactory, opening

from charmem_oxigraph import SparqlServiceGraphStore
from charmem_oxigraph.testing import VirtuosoServer

_names = itertools.count()


class TestVirtuosoGraphStore(GraphStoreContract):
    supports_lock = False  # a SPARQL server serves many clients; writers are serialised per process

    @pytest.fixture
    async def graph_store_factory(
        self, virtuoso_server: VirtuosoServer, virtuoso_twin: VirtuosoServer
    ) -> AsyncIterator[StoreFactory[GraphStore]]:
        """Store ``main`` is the module's first server, ``twin`` its second; the collection gets
        this test's suffix, so every test starts empty on the shared servers."""
        servers = {"main": virtuoso_server, "twin": virtuoso_twin}
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
