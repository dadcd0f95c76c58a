"""The situated-recall contract with candidate recall on the Qdrant service adapter (local mode).

qdrant-client's in-process implementation of the server API stands in for a Qdrant server (a
real one is the opt-in parity tests' business); the scene surfaces are searched through the
service adapter's payload filters, in the shared layout, lexical cue on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from charmem_contract import FixedClock, MemoryFactory, SituatedRecallContract, memory_factory
from qdrant_client import AsyncQdrantClient

from charmem import CharacterMemory
from charmem.stats import InMemoryRetrievalStatsStore
from charmem.testing import HashingEmbeddingProvider, ReferenceGraphStore
from charmem_qdrant import QdrantServiceVectorIndex


class TestQdrantServiceSituatedRecall(SituatedRecallContract):
    """Reference graph, QdrantServiceVectorIndex on local mode (shared layout), hashing embedder."""

    @pytest.fixture
    async def memory_factory(self) -> AsyncIterator[MemoryFactory]:
        """One in-process Qdrant per test; each collection a tenant of it."""
        client = AsyncQdrantClient(location=":memory:")
        embedder = HashingEmbeddingProvider()

        async def open_memory(collection: str) -> CharacterMemory:
            vectors = await QdrantServiceVectorIndex.open(
                client,
                collection,
                model_id=embedder.model_id,
                vector_size=embedder.vector_size,
                lexical=True,
                layout="shared",
            )
            return CharacterMemory(
                graph=ReferenceGraphStore(collection),
                vectors=vectors,
                embedder=embedder,
                stats=InMemoryRetrievalStatsStore(collection),
                collection=collection,
                clock=FixedClock(),
            )

        try:
            async with memory_factory(open_memory) as factory:
                yield factory
        finally:
            await client.close()
