"""The situated-recall contract on the embedded default stores: persistent Oxigraph + Qdrant Edge
(dense plus the BM25 lexical cue) + SQLite stats, hashing embedder."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from charmem import CharacterMemory, Settings
from charmem_contract import MemoryFactory, SituatedRecallContract, memory_factory


class TestEmbeddedSituatedRecall(SituatedRecallContract):
    @pytest.fixture
    async def memory_factory(
        self, tmp_path: Path, env_for: Callable[[Path], dict[str, str]]
    ) -> AsyncIterator[MemoryFactory]:
        settings = Settings.from_mapping(env_for(tmp_path / "store"))

        async def open_embedded(collection: str) -> CharacterMemory:
            return await CharacterMemory.open(settings, collection)

        async with memory_factory(open_embedded) as factory:
            yield factory
