"""In-memory retrieval statistics (``RETRIEVAL_STATS_STORE_MODE=in_memory``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from charmem.domain.ids import MemoryId
from charmem.domain.model import Relation
from charmem.ports import StatsEntry, StatsSummary
from charmem.settings import Settings, validate_collection_name

__all__ = ["InMemoryRetrievalStatsStore", "summarise"]


def summarise(rows: Sequence[StatsEntry]) -> StatsSummary:
    """Aggregate rows into a :class:`StatsSummary` (shared by every stats store)."""
    objects: Counter[str] = Counter()
    current: Counter[str] = Counter()
    links: Counter[str] = Counter()
    for row in rows:
        if row.kind == "object":
            objects[row.key] += 1
            if row.current:
                current[row.key] += 1
        else:
            links[row.key] += 1
    return StatsSummary(
        objects=dict(sorted(objects.items())),
        current_objects=dict(sorted(current.items())),
        links=dict(sorted(links.items())),
    )


class InMemoryRetrievalStatsStore:
    """Rows in a dict keyed by id; gone when the process ends. A real adapter, not a stub."""

    def __init__(self, collection: str) -> None:
        """Args: collection: the collection name (validated)."""
        self.collection = validate_collection_name(collection)
        self._rows: dict[MemoryId, StatsEntry] = {}

    @classmethod
    def from_settings(cls, settings: Settings, collection: str) -> InMemoryRetrievalStatsStore:
        """Build from settings (nothing is read: no path, no file)."""
        del settings
        return cls(collection)

    async def record(self, entries: Sequence[StatsEntry]) -> None:
        """Insert or replace rows keyed by id."""
        for entry in entries:
            self._rows[entry.id] = entry

    async def degrees(
        self, ids: Sequence[MemoryId], *, relation: Relation | None = None
    ) -> dict[MemoryId, int]:
        """Links touching each id (optionally of one relation)."""
        wanted = set(ids)
        counts = dict.fromkeys(ids, 0)
        for row in self._rows.values():
            if row.kind != "link" or (relation is not None and row.key != relation.value):
                continue
            for end in {row.from_id, row.to_id}:
                if end in wanted:
                    counts[end] += 1
        return counts

    async def summary(self) -> StatsSummary:
        """Counters of the collection."""
        return summarise(list(self._rows.values()))

    async def row_count(self) -> int:
        """Number of rows."""
        return len(self._rows)

    async def clear(self) -> None:
        """Remove every row."""
        self._rows.clear()

    async def close(self) -> None:
        """Nothing to release."""
