"""The lifecycle contract on the reference stack (pure Python, no backend installed)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from charmem import CharacterMemory
from charmem.stats import InMemoryRetrievalStatsStore
from charmem.testing import HashingEmbeddingProvider, ReferenceGraphStore, ReferenceVectorIndex
from charmem_contract.lifecycle import LifecycleContract


class TestReferenceLifecycle(LifecycleContract):
    async def make_memory(self, collection: str) -> AsyncIterator[CharacterMemory]:
        embedder = HashingEmbeddingProvider()
        memory = CharacterMemory(
            graph=ReferenceGraphStore(collection),
            vectors=ReferenceVectorIndex(
                collection, model_id=embedder.model_id, vector_size=embedder.vector_size
            ),
            embedder=embedder,
            stats=InMemoryRetrievalStatsStore(collection),
            collection=collection,
        )
        try:
            yield memory
        finally:
            await memory.close()
