"""Backup, restore and purge (charmem.admin) on the reference stack (pure Python)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from charmem import CharacterMemory
from charmem.testing import HashingEmbeddingProvider
from charmem_contract import AdminToolsContract, MemoryFactory, memory_factory, reference_memory


class TestReferenceAdminTools(AdminToolsContract):
    @pytest.fixture
    async def memory_factory(self) -> AsyncIterator[MemoryFactory]:
        # Each reference memory is its own set of stores; tests open each (store, collection) once.
        async def open_reference(collection: str) -> CharacterMemory:
            return reference_memory(collection, HashingEmbeddingProvider())

        async with memory_factory(open_reference) as factory:
            yield factory
