"""The factories the ``charmem.stats_stores`` entry points name: ``sqlite`` and ``in_memory``."""

from __future__ import annotations

from charmem.composition import ClassFactory
from charmem.settings import Settings
from charmem.stats.memory import InMemoryRetrievalStatsStore
from charmem.stats.sqlite import SQLiteRetrievalStatsStore

__all__ = ["in_memory", "sqlite"]


class _SQLiteFactory(ClassFactory[SQLiteRetrievalStatsStore]):
    """``sqlite``: the file at ``RETRIEVAL_STATS_PATH``, which can tell whether it exists."""

    def exists(self, settings: Settings, collection: str) -> bool:
        """:meth:`SQLiteRetrievalStatsStore.exists_from_settings`."""
        return SQLiteRetrievalStatsStore.exists_from_settings(settings, collection)


#: ``RETRIEVAL_STATS_STORE_MODE=sqlite``.
sqlite = _SQLiteFactory(SQLiteRetrievalStatsStore)
#: ``RETRIEVAL_STATS_STORE_MODE=in_memory``: starts empty at each open.
in_memory = ClassFactory(InMemoryRetrievalStatsStore)
