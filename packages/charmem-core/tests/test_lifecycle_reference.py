"""The lifecycle contract on the reference stack (pure Python, no backend installed)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from charmem import CharacterMemory
from charmem.stats import InMemoryRetrievalStatsStore
from charmem.testing import HashingEmbeddingProvider, ReferenceGraphStore, ReferenceVectorIndex
from charmem_contract import MemoryFactory, memory_factory
from charmem_contract.lifecycle import LifecycleContract


class TestReferenceLifecycle(LifecycleContract):
    @pytest.fixture
    async def memory_factory(self) -> AsyncIterator[MemoryFactory]:
        async def open_reference(collection: str) -> CharacterMemory:
            embedder = HashingEmbeddingProvider()
            return CharacterMemory(
                graph=ReferenceGraphStore(collection),
                vectors=ReferenceVectorIndex(
                    collection, model_id=embedder.model_id, vector_size=embedder.vector_size
                ),
                embedder=embedder,
                stats=InMemoryRetrievalStatsStore(collection),
                collection=collection,
            )

        async with memory_factory(open_reference) as factory:
            yield factory
