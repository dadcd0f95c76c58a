"""The facade's black-box contract suite against RemoteCharacterMemory over a real server.

Every test gets a fresh ``charmem serve`` application (uvicorn on 127.0.0.1, an ephemeral port)
over embedded Oxigraph, Qdrant Edge and SQLite; the memories are HTTP clients of it. Reopening a
collection is a new client of the same server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from charmem.testing import HashingEmbeddingProvider
from charmem_contract import CharacterMemoryBlackBoxContract, MemoryFactory, memory_factory
from charmem_server import RemoteCharacterMemory


class TestRemoteCharacterMemory(CharacterMemoryBlackBoxContract):
    @pytest.fixture
    async def memory_factory(self, serve: Callable[..., Any]) -> AsyncIterator[MemoryFactory]:
        running = serve()

        async def open_remote(collection: str) -> Any:
            return RemoteCharacterMemory(running.url, collection)

        async with memory_factory(open_remote) as factory:
            yield factory

    @pytest.fixture
    def reference_embedder(self) -> HashingEmbeddingProvider:
        return HashingEmbeddingProvider()
