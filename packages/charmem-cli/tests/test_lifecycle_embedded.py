"""The lifecycle contract on the embedded default stores: persistent Oxigraph + Qdrant Edge +
SQLite stats (hashing embedder for speed), all collections in the same stores."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from charmem import CharacterMemory, Settings
from charmem_contract.lifecycle import LifecycleContract


class TestEmbeddedLifecycle(LifecycleContract):
    shares_stores = True

    @pytest.fixture(autouse=True)
    def _root(self, tmp_path: Path) -> None:
        self.root = tmp_path / "store"

    async def make_memory(self, collection: str) -> AsyncIterator[CharacterMemory]:
        settings = Settings.from_mapping(
            {
                "GRAPH_STORE_MODE": "persistent",
                "OXIGRAPH_PATH": str(self.root / "oxigraph"),
                "VECTOR_STORE_MODE": "embedded",
                "VECTOR_STORE_PATH": str(self.root / "vectors"),
                "RETRIEVAL_STATS_STORE_MODE": "sqlite",
                "RETRIEVAL_STATS_PATH": str(self.root / "retrieval-stats.sqlite3"),
                "EMBEDDING_PROVIDER": "hashing",
            }
        )
        async with CharacterMemory.open(settings, collection) as memory:
            yield memory
