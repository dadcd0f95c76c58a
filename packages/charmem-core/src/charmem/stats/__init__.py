"""Retrieval-statistics stores owned by core: in-memory and SQLite (stdlib)."""

from charmem.stats.memory import InMemoryRetrievalStatsStore
from charmem.stats.sqlite import SQLiteRetrievalStatsStore

__all__ = ["InMemoryRetrievalStatsStore", "SQLiteRetrievalStatsStore"]
