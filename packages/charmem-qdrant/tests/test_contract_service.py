"""The vector-index contract suite on QdrantServiceVectorIndex over qdrant-client's local mode.

``AsyncQdrantClient(location=":memory:")`` is qdrant-client's in-process implementation of the
server API, so the adapter's whole code path runs without a server (a real server is exercised by
the ``service_and_embedded_*`` parity tests in test_service.py). The lexical cue is on, as
``from_settings`` opens the index by default. A server has no opener lock. The suite runs in
both layouts: shared (every collection a tenant of one Qdrant collection per fingerprint) and
one Qdrant collection per charmem collection.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from charmem_contract import StoreFactory, VectorIndexContract, opening
from qdrant_client import AsyncQdrantClient

from charmem.ports import VectorIndex
from charmem_qdrant import QdrantServiceVectorIndex


class TestQdrantServiceLocalMode(VectorIndexContract):
    """``QdrantServiceVectorIndex`` on local mode, shared layout, lexical cue on; no lock."""

    supports_lock = False
    layout = "shared"

    @pytest.fixture
    async def vector_index_factory(self) -> AsyncIterator[StoreFactory[VectorIndex]]:
        """A new in-process Qdrant per store name and test, closed afterwards."""
        clients: dict[str, AsyncQdrantClient] = {}

        async def open_index(
            collection: str, *, model_id: str, vector_size: int, store: str
        ) -> VectorIndex:
            client = clients.setdefault(store, AsyncQdrantClient(location=":memory:"))
            return await QdrantServiceVectorIndex.open(
                client,
                collection,
                model_id=model_id,
                vector_size=vector_size,
                lexical=True,
                layout=self.layout,
            )

        try:
            async with opening(open_index) as factory:
                yield factory
        finally:
            for client in clients.values():
                await client.close()


class TestQdrantServicePerCollectionLocalMode(TestQdrantServiceLocalMode):
    """The same, one Qdrant collection per charmem collection (``VECTOR_SERVICE_LAYOUT``)."""

    layout = "per_collection"
