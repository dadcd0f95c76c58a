"""The situated-recall contract on the reference stack (hashing embedder, no lexical cue)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from charmem import CharacterMemory
from charmem.testing import HashingEmbeddingProvider
from charmem_contract import MemoryFactory, SituatedRecallContract, memory_factory, reference_memory


class TestReferenceSituatedRecall(SituatedRecallContract):
    @pytest.fixture
    async def memory_factory(self) -> AsyncIterator[MemoryFactory]:
        async def open_reference(collection: str) -> CharacterMemory:
            return reference_memory(collection, HashingEmbeddingProvider())

        async with memory_factory(open_reference) as factory:
            yield factory
