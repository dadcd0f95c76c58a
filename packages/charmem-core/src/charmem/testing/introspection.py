"""Reach the stores behind a memory facade, for tests and benchmarks only."""

from __future__ import annotations

from typing import TYPE_CHECKING

from charmem.memory import MemoryStores, SyncCharacterMemory

if TYPE_CHECKING:
    from charmem.memory import CharacterMemory

__all__ = ["stores_of"]


def stores_of(memory: CharacterMemory | SyncCharacterMemory) -> MemoryStores:
    """The graph, vector and stats stores behind ``memory``.

    The facade keeps its stores private (it answers through ``retrieve``, never by enumeration);
    tests that must look at what a store holds use this, and operators use :mod:`charmem.admin`.

    Args:
        memory: an open async or blocking facade (or a wrapper forwarding to one).

    Returns:
        MemoryStores: ``graph``, ``vectors`` and ``stats`` (the async adapters; with a
        :class:`SyncCharacterMemory`, call them on its loop or through the async facade).

    Raises:
        TypeError: ``memory`` is not a charmem facade.
    """
    if isinstance(memory, SyncCharacterMemory):
        memory = memory.memory
    # Wrappers that forward attributes to a facade (test doubles) are accepted too.
    stores = getattr(memory, "_stores", None)
    if not isinstance(stores, MemoryStores):
        raise TypeError(
            f"stores_of takes a CharacterMemory or SyncCharacterMemory, not {type(memory).__name__}"
        )
    return stores
