"""The retrieval-statistics port: derived counts that tune ranking, never authority."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import attrs

from charmem.domain.ids import MemoryId
from charmem.domain.model import Relation

__all__ = ["RetrievalStatsStore", "StatsEntry", "StatsSummary"]


@attrs.frozen(kw_only=True)
class StatsEntry:
    """One retrieval-stats row, keyed by the id of the object or link it counts.

    Attributes:
        id: the object's or link's id (the key: writing it again never counts twice).
        kind: ``"object"`` or ``"link"``.
        key: the object type value or the relation value.
        current: whether the object is current (links: always True).
        from_id, to_id: endpoints, for links (degree counts).
    """

    id: MemoryId
    kind: str
    key: str
    current: bool = True
    from_id: MemoryId | None = None
    to_id: MemoryId | None = None


@attrs.frozen(kw_only=True)
class StatsSummary:
    """Counters: objects per type (all and current), links per relation."""

    objects: Mapping[str, int]
    current_objects: Mapping[str, int]
    links: Mapping[str, int]


class RetrievalStatsStore(Protocol):
    """Retrieval statistics for one collection: derived policy data, never authority.

    Contract: ``record`` upserts rows by id (a replay never counts twice); counts and degrees
    reflect the rows recorded; failures raise :class:`~charmem.errors.BackendError`.

    A store may instead compute every counter from the graph authority (``graph`` in
    charmem-oxigraph): it then has the optional attribute ``records_rows = False``, its
    ``record`` and ``clear`` do nothing, and its counters always equal the rows the graph implies
    (nothing to rebuild on open, no drift for ``charmem check`` to report).
    """

    async def record(self, entries: Sequence[StatsEntry]) -> None:
        """Insert or replace rows keyed by ``entry.id``."""
        ...

    async def degrees(
        self, ids: Sequence[MemoryId], *, relation: Relation | None = None
    ) -> dict[MemoryId, int]:
        """Number of links touching each id (optionally of one relation); absent ids count 0."""
        ...

    async def summary(self) -> StatsSummary:
        """The counters of the collection."""
        ...

    async def row_count(self) -> int:
        """Number of rows of the collection."""
        ...

    async def clear(self) -> None:
        """Remove every row of the collection (before ``rebuild_stats``)."""
        ...

    async def close(self) -> None:
        """Release resources."""
        ...
