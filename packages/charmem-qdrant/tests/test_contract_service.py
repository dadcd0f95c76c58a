"""The vector-index contract suite on QdrantServiceVectorIndex over qdrant-client's local mode.

``AsyncQdrantClient(location=":memory:")`` is qdrant-client's in-process implementation of the
server API, so the adapter's whole code path runs without a server (a real server is exercised by
the ``service_and_embedded_*`` parity tests in test_service.py). The lexical cue is on, as
``from_settings`` opens the index by default. A server has no opener lock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from charmem_contract import VectorIndexContract
from qdrant_client import AsyncQdrantClient

from charmem.ports import VectorIndex
from charmem_qdrant import QdrantServiceVectorIndex


class TestQdrantServiceLocalMode(VectorIndexContract):
    """``QdrantServiceVectorIndex`` on local mode, lexical cue on; no opener lock on a server."""

    supports_lock = False

    @pytest.fixture
    async def vector_index(self) -> AsyncIterator[VectorIndex]:
        """A new in-process Qdrant per test, closed afterwards."""
        self.client = AsyncQdrantClient(location=":memory:")
        index = await QdrantServiceVectorIndex.open(
            self.client,
            "contract",
            model_id=self.contract_model_id,
            vector_size=self.contract_vector_size,
            lexical=True,
        )
        try:
            yield index
        finally:
            await index.close()
            await self.client.close()

    async def reopen(self, index: VectorIndex, *, model_id: str, vector_size: int) -> VectorIndex:
        """The same collection on the same client, opened with the given fingerprint."""
        return await QdrantServiceVectorIndex.open(
            self.client, "contract", model_id=model_id, vector_size=vector_size, lexical=True
        )
