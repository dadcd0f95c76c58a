"""Optional graph capability: find occasions (episodes) by who, where and when."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from charmem.domain.occasions import Occasion, OccasionQuery

__all__ = ["OccasionReader"]


@runtime_checkable
class OccasionReader(Protocol):
    """Optional :class:`~charmem.ports.GraphStore` capability: episodes matching an occasion query.

    Scene recall (``RetrievalContext(scene=...)``) asks for the occasions a participant was at,
    those in a setting, inside a time range, on an anniversary or lately. A graph store that
    implements this answers with one query; other stores are read through ``links_of``,
    ``object_ids`` and ``get_objects`` (``charmem.usecases.occasions``), with the same answer.
    """

    async def occasions(self, query: OccasionQuery) -> list[Occasion]:
        """The stored episodes meeting every condition of ``query``, newest first.

        Contract: the same answer as keeping, of every stored episode, those for which
        :func:`charmem.domain.occasions.occasion_matches` holds (``involves``: an ``involves``
        link from the episode to ``query.participant`` is stored), ordered by
        :func:`charmem.domain.occasions.occasion_order`, the first ``query.limit``. Currency is
        not considered (suppressed and superseded episodes are occasions too; callers judge).

        Raises:
            BackendError: the store failed.
        """
        ...
