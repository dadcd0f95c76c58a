"""Opening memories for the memory suites: :func:`memory_factory` and the reference stack.

The memory suites (facade, lifecycle, recall signals, admin tools) need more than one memory per
test (two collections to compare insertion orders, one fresh memory per state-machine example, a
reopen, a restore into other stores), so their one fixture, ``memory_factory``, yields a
:class:`~charmem_contract.factories.MemoryFactory`: ``await factory.open(collection)`` opens a
memory of that collection on the test's own, isolated stores, ``store="b"`` on other stores of the
test. Opening a collection again after closing it reaches the same stored data (when the stack
supports reopening). :func:`memory_factory` turns any opener into such a factory that closes
whatever is still open at the end.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime

from charmem import CharacterMemory
from charmem.ports import Clock, EmbeddingProvider
from charmem.stats import InMemoryRetrievalStatsStore
from charmem.testing import ReferenceGraphStore, ReferenceVectorIndex
from charmem_contract.data import T0
from charmem_contract.factories import MemoryFactory, Opening

__all__ = ["FixedClock", "MemoryFactory", "memory_factory", "reference_memory"]


class FixedClock:
    """A :class:`~charmem.ports.Clock` that always answers the same instant (default :data:`T0`)."""

    def __init__(self, instant: datetime = T0) -> None:
        self.instant = instant

    def now(self) -> datetime:
        """The fixed instant."""
        return self.instant


@contextlib.asynccontextmanager
async def memory_factory(opener: Callable[..., Awaitable[CharacterMemory]]) -> AsyncIterator[MemoryFactory]:
    """A :class:`~charmem_contract.factories.MemoryFactory` over ``opener`` that closes every memory
    it opened on exit.

    Example (the embedded stores under a temporary directory)::

        @pytest.fixture
        async def memory_factory(self, tmp_path):
            settings = Settings.from_mapping({"OXIGRAPH_PATH": str(tmp_path / "graph"), ...})
            embedder = HashingEmbeddingProvider()
            async with memory_factory(
                lambda name: CharacterMemory.open(settings, name, embedding_provider=embedder)
            ) as factory:
                yield factory

    Args:
        opener: opens the memory of a collection (a coroutine function): ``opener(collection)``,
            or ``opener(collection, store=name)`` when it takes a ``store`` parameter (each store
            name its own stores, as the admin suite needs).

    Yields:
        MemoryFactory: the factory.
    """
    factory: Opening[CharacterMemory] = Opening(opener)
    try:
        yield factory
    finally:
        await factory.close_all()


def reference_memory(
    collection: str, embedder: EmbeddingProvider, *, clock: Clock | None = None
) -> CharacterMemory:
    """A memory over core's reference adapters (graph, vectors, in-memory stats).

    Args:
        collection: the collection name.
        embedder: the embedding provider (share the one of the stack it is compared with).
        clock: the clock (default: a :class:`FixedClock` at :data:`T0`).

    Returns:
        CharacterMemory: an empty memory that lives as long as the object.
    """
    return CharacterMemory(
        graph=ReferenceGraphStore(collection),
        vectors=ReferenceVectorIndex(
            collection, model_id=embedder.model_id, vector_size=embedder.vector_size
        ),
        embedder=embedder,
        stats=InMemoryRetrievalStatsStore(collection),
        collection=collection,
        clock=clock or FixedClock(),
    )
