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
    GraphStoreContract,
    MemoryFactory,
    RetrievalStatsStoreContract,
    VectorIndexContract,
    memory_factory,
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
    async def graph_store(self) -> AsyncIterator[GraphStore]:
        store = ReferenceGraphStore("contract")
        try:
            yield store
        finally:
            await store.close()

    async def open_twin(self, store: GraphStore, collection: str) -> GraphStore:
        return ReferenceGraphStore(collection)


class TestReferenceVectorIndex(VectorIndexContract):
    # Exact cosine over a dict: no lexical cue, no files, nothing to lock or release.
    supports_reopen = False
    supports_lock = False
    supports_lexical = False
    supports_closed_errors = False

    @pytest.fixture
    async def vector_index(self) -> AsyncIterator[VectorIndex]:
        index = ReferenceVectorIndex(
            "contract", model_id=self.contract_model_id, vector_size=self.contract_vector_size
        )
        try:
            yield index
        finally:
            await index.close()


class TestHashingEmbeddingProvider(EmbeddingProviderContract):
    @pytest.fixture
    def embedding_provider(self) -> EmbeddingProvider:
        return HashingEmbeddingProvider()


class TestInMemoryStatsStore(RetrievalStatsStoreContract):
    # Rows live in one Python object.
    supports_reopen = False
    supports_sibling_collections = False
    supports_closed_errors = False

    @pytest.fixture
    async def stats_store(self) -> AsyncIterator[RetrievalStatsStore]:
        store = InMemoryRetrievalStatsStore("contract")
        try:
            yield store
        finally:
            await store.close()


class TestSQLiteStatsStore(RetrievalStatsStoreContract):
    @pytest.fixture
    def stats_path(self, tmp_path: Path) -> Path:
        return tmp_path / "stats" / "retrieval-stats.sqlite3"

    @pytest.fixture
    async def stats_store(self, stats_path: Path) -> AsyncIterator[RetrievalStatsStore]:
        store = SQLiteRetrievalStatsStore(stats_path, "contract")
        try:
            yield store
        finally:
            await store.close()  # idempotent: some tests close it themselves

    async def reopen(self, store: RetrievalStatsStore) -> RetrievalStatsStore:
        assert isinstance(store, SQLiteRetrievalStatsStore)
        return SQLiteRetrievalStatsStore(store.path, store.collection)

    async def open_sibling(self, store: RetrievalStatsStore, collection: str) -> RetrievalStatsStore:
        assert isinstance(store, SQLiteRetrievalStatsStore)
        return SQLiteRetrievalStatsStore(store.path, collection)


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
