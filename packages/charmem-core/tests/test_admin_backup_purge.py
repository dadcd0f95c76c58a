"""Backup, restore and purge (charmem.admin) on the reference stack (pure Python)."""

from __future__ import annotations

from charmem import CharacterMemory
from charmem.testing import HashingEmbeddingProvider
from charmem_contract import AdminToolsContract, reference_memory


class TestReferenceAdminTools(AdminToolsContract):
    async def open_memory(self, store: str, collection: str) -> CharacterMemory:
        # Each reference memory is its own set of stores; tests open each (store, collection) once.
        return reference_memory(collection, HashingEmbeddingProvider())
