"""The contract suites on core's own adapters: the reference graph and vector index, the hashing
embedder, the in-memory and SQLite stats stores, and the facade over the reference stack.

These run first: the reference adapters are the executable specification of their ports, so a
suite test that fails here is a bug in the suite (or in the reference), not in an adapter.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from charmem import CharacterMemory
from charmem.ports import EmbeddingProvider, GraphStore, RetrievalStatsStore, VectorIndex
from charmem.stats import InMemoryRetrievalStatsStore, SQLiteRetrievalStatsStore
from charmem.testing import HashingEmbeddingProvider, ReferenceGraphStore, ReferenceVectorIndex
from charmem_contract import (
    CharacterMemoryContract,
    EmbeddingProviderContract,
    Factory,
    GraphStoreContract,
    MemoryFactory,
    RetrievalStatsStoreContract,
    StoreFactory,
    VectorIndexContract,
    memory_factory,
    opening,
    reference_memory,
)


class TestReferenceGraphStore(GraphStoreContract):
    # The reference graph lives in one Python object: nothing to reopen, lock or share, and
    # close() releases nothing, so later calls still work.
    supports_reopen = False
    supports_lock = False
    supports_sibling_collections = False
    supports_closed_errors = False

    @pytest.fixture
    async def graph_store_factory(self) -> AsyncIterator[StoreFactory[GraphStore]]:
        async with opening(ReferenceGraphStore) as factory:  # a new graph per open
            yield factory


class TestReferenceVectorIndex(VectorIndexContract):
    # Exact cosine over a dict: no lexical cue, no files, nothing to lock or release.
    supports_reopen = False
    supports_lock = False
    supports_lexical = False
    supports_closed_errors = False

    @pytest.fixture
    async def vector_index_factory(self) -> AsyncIterator[StoreFactory[VectorIndex]]:
        async with opening(ReferenceVectorIndex) as factory:
            yield factory


class TestHashingEmbeddingProvider(EmbeddingProviderContract):
    @pytest.fixture
    async def embedding_provider_factory(self) -> AsyncIterator[Factory[EmbeddingProvider]]:
        async with opening(lambda collection: HashingEmbeddingProvider()) as factory:
            yield factory


class TestInMemoryStatsStore(RetrievalStatsStoreContract):
    # Rows live in one Python object.
    supports_reopen = False
    supports_lock = False
    supports_sibling_collections = False
    supports_closed_errors = False

    @pytest.fixture
    async def stats_store_factory(self) -> AsyncIterator[StoreFactory[RetrievalStatsStore]]:
        async with opening(InMemoryRetrievalStatsStore) as factory:
            yield factory


class TestSQLiteStatsStore(RetrievalStatsStoreContract):
    # SQLite admits several connections to one file: there is no opener lock.
    supports_lock = False

    @pytest.fixture
    async def stats_store_factory(self, tmp_path: Path) -> AsyncIterator[StoreFactory[RetrievalStatsStore]]:
        def open_stats(collection: str, *, store: str) -> SQLiteRetrievalStatsStore:
            return SQLiteRetrievalStatsStore(tmp_path / store / "retrieval-stats.sqlite3", collection)

        async with opening(open_stats) as factory:
            yield factory


class TestReferenceStack(CharacterMemoryContract):
    # Each reference memory lives in its own Python objects: a closed collection cannot be
    # opened again.
    supports_reopen = False

    @pytest.fixture
    async def memory_factory(self) -> AsyncIterator[MemoryFactory]:
        embedder = HashingEmbeddingProvider()

        async def open_reference(collection: str) -> CharacterMemory:
            return reference_memory(collection, embedder)

        async with memory_factory(open_reference) as factory:
            yield factory
