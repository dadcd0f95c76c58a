"""The store lifecycle suite: reopen, lock and closed handle, once for every store port.

The graph store, the vector index and the retrieval-stats store suites mix in
:class:`StoreLifecycleTests` and say, for their port, how to open a handle, fill it with a sample,
check that sample after a reopen, and make one write and one read. The three tests are the same
for every port; each needs its capability flag (``supports_reopen``, ``supports_lock``,
``supports_closed_errors``), which every store suite declares.
"""

from __future__ import annotations

import asyncio
from typing import Any, Generic, Protocol, TypeVar

import pytest

from charmem.errors import BackendError, StoreLockedError
from charmem_contract._base import requires
from charmem_contract.factories import CONTRACT_COLLECTION, StoreFactory

__all__ = ["StoreLifecycleTests"]


class Closable(Protocol):
    """What every store port has: ``close()``."""

    async def close(self) -> None:
        """Release the store (idempotent)."""
        ...


H = TypeVar("H", bound=Closable)

#: The longest a refused opener may take to raise StoreLockedError, in seconds.
LOCK_ERROR_WITHIN = 30


class StoreLifecycleTests(Generic[H]):
    """Reopen, lock and closed handle for a store port ``H`` (mixed into its suite).

    A suite implements the five hooks below for its port and provides the fixture
    ``store_factory`` (its own factory fixture under a name this mixin knows).
    """

    # -- what a store suite provides for its port -------------------------------------------

    async def _open_store(self, factory: StoreFactory[H], *, store: str = "main") -> H:
        """Open the contract collection of ``store`` (override to pass the port's options)."""
        return await factory.open(CONTRACT_COLLECTION, store=store)

    async def _open_competitor(self, factory: StoreFactory[H]) -> None:
        """Open the contract collection as an independent opener (override to pass options)."""
        await factory.open_competitor(CONTRACT_COLLECTION)

    async def _fill(self, handle: H) -> Any:
        """Write a sample (hostile text included where the port keeps text); return what a check needs."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _fill()")

    async def _check_reopened(self, handle: H, filled: Any) -> None:
        """Assert that ``handle``, opened again after a close, holds the sample ``filled``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _check_reopened()")

    async def _write_one(self, handle: H) -> None:
        """One small write (it must raise BackendError on a closed handle)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _write_one()")

    async def _read_one(self, handle: H) -> None:
        """One small read (it must raise BackendError on a closed handle)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _read_one()")

    # -- the tests -------------------------------------------------------------------------

    @requires("supports_reopen")
    async def test_reopen_after_close_keeps_everything(self, store_factory: StoreFactory[H]) -> None:
        """After ``close()``, a new opener of the same collection reads everything back.

        If this fails: check that writes are durable when acknowledged (flush, fsync, WAL, a
        committed transaction), that close releases the store, and that the factory's ``open``
        reaches the same backing store and collection again.
        """
        first = await self._open_store(store_factory)
        filled = await self._fill(first)
        await first.close()
        reopened = await self._open_store(store_factory)
        await self._check_reopened(reopened, filled)

    @requires("supports_lock")
    async def test_second_opener_gets_store_locked_error(self, store_factory: StoreFactory[H]) -> None:
        """While the store is open, another opener gets StoreLockedError (quickly); after close it opens.

        If this fails: translate the driver's lock error into
        :class:`~charmem.errors.StoreLockedError` (with a bounded retry, seconds not minutes), and
        release the lock in ``close()``.
        """
        held = await self._open_store(store_factory)
        await self._write_one(held)
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(StoreLockedError):
            await self._open_competitor(store_factory)
        assert loop.time() - started < LOCK_ERROR_WITHIN, "the lock error took more than 30 s"
        await held.close()
        await self._open_competitor(store_factory)

    @requires("supports_closed_errors")
    async def test_use_after_close_raises_backend_error(self, store_factory: StoreFactory[H]) -> None:
        """After ``close()``, reads and writes raise BackendError, not a driver error; close is idempotent.

        If this fails: check for a closed handle (connection, shard) before each call and raise
        :class:`~charmem.errors.BackendError` saying it is closed.
        """
        handle = await self._open_store(store_factory)
        await handle.close()
        await handle.close()
        with pytest.raises(BackendError):
            await self._write_one(handle)
        with pytest.raises(BackendError):
            await self._read_one(handle)
