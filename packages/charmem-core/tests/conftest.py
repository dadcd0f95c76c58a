"""Fixtures for core tests: the reference stack (no backend library installed)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from charmem import CharacterMemory
from charmem.stats import InMemoryRetrievalStatsStore
from charmem.testing import HashingEmbeddingProvider, ReferenceGraphStore, ReferenceVectorIndex

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)


class FixedClock:
    """A clock that always says :data:`T0`."""

    def now(self) -> datetime:
        return T0


def reference_memory(collection: str = "test") -> CharacterMemory:
    embedder = HashingEmbeddingProvider()
    return CharacterMemory(
        graph=ReferenceGraphStore(collection),
        vectors=ReferenceVectorIndex(
            collection, model_id=embedder.model_id, vector_size=embedder.vector_size
        ),
        embedder=embedder,
        stats=InMemoryRetrievalStatsStore(collection),
        collection=collection,
        clock=FixedClock(),
    )


@pytest.fixture
async def memory() -> AsyncIterator[CharacterMemory]:
    mem = reference_memory()
    try:
        yield mem
    finally:
        await mem.close()
