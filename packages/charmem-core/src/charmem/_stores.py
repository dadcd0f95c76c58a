"""The stores behind one open memory (:class:`MemoryStores`), for tools and tests."""

from __future__ import annotations

import attrs

from charmem.ports import GraphStore, RetrievalStatsStore, VectorIndex

__all__ = ["MemoryStores"]


@attrs.frozen
class MemoryStores:
    """The stores behind one open memory, for operational tools and tests.

    Not part of the memory API: the facade offers no enumeration or lookup of its own (only
    ``retrieve``). :mod:`charmem.admin` reaches the stores through the memory it is given, and
    tests through :func:`charmem.testing.stores_of`.
    """

    graph: GraphStore
    vectors: VectorIndex
    stats: RetrievalStatsStore

    async def close(self) -> None:
        """Close vectors, stats and graph; the first error is raised once all were tried.

        Raises:
            BackendError: a store failed to close (the others are closed first).
        """
        errors: list[BaseException] = []
        for adapter in (self.vectors, self.stats, self.graph):
            try:
                await adapter.close()
            except Exception as exc:  # noqa: BLE001 - close the others first
                errors.append(exc)
        if errors:
            raise errors[0]
