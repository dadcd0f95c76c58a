"""The facade contract suite on the embedded default stores: persistent Oxigraph + Qdrant Edge +
SQLite stats under one temporary directory per test, opened through ``CharacterMemory.open`` and
the entry points exactly as a user does. The hashing embedder keeps it fast; the lexical cue is
off because the suite compares exact orders with the reference stack."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from charmem import CharacterMemory, Settings
from charmem.testing import HashingEmbeddingProvider
from charmem_contract import CharacterMemoryContract, MemoryFactory, memory_factory


class TestEmbeddedStack(CharacterMemoryContract):
    @pytest.fixture
    async def memory_factory(self, tmp_path: Path) -> AsyncIterator[MemoryFactory]:
        root = tmp_path / "store"
        settings = Settings.from_mapping(
            {
                "GRAPH_STORE_MODE": "persistent",
                "OXIGRAPH_PATH": str(root / "oxigraph"),
                "VECTOR_STORE_MODE": "embedded",
                "VECTOR_STORE_PATH": str(root / "vectors"),
                "VECTOR_LEXICAL_CUE": "false",
                "RETRIEVAL_STATS_STORE_MODE": "sqlite",
                "RETRIEVAL_STATS_PATH": str(root / "retrieval-stats.sqlite3"),
            }
        )
        embedder = HashingEmbeddingProvider()

        async def open_embedded(collection: str) -> CharacterMemory:
            return await CharacterMemory.open(settings, collection, embedding_provider=embedder)

        async with memory_factory(open_embedded) as factory:
            yield factory
