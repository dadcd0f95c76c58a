"""The recall-signal contract on the embedded default stores: persistent Oxigraph + Qdrant Edge
(dense plus the BM25 lexical cue) + SQLite stats, hashing embedder."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from charmem import CharacterMemory, Settings
from charmem_contract import RecallSignalsContract


class TestEmbeddedRecallSignals(RecallSignalsContract):
    @pytest.fixture(autouse=True)
    def _root(self, tmp_path: Path, env_for: Callable[[Path], dict[str, str]]) -> None:
        self.env = env_for(tmp_path / "store")

    async def make_memory(self, collection: str) -> AsyncIterator[CharacterMemory]:
        async with CharacterMemory.open(Settings.from_mapping(self.env), collection) as memory:
            yield memory
