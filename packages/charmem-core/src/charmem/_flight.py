"""Operations in flight of one memory, and its close: what close waits for, cancels and says."""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, Concatenate, Final, ParamSpec, Protocol, TypeVar

from charmem.errors import CharmemError
from charmem.log import get_logger

__all__ = ["CANCEL_GRACE_S", "DEFAULT_CLOSE_TIMEOUT_S", "InFlight", "operation"]

log = get_logger("charmem.memory")

#: Seconds :meth:`CharacterMemory.close` waits for operations in flight before cancelling them:
#: long enough for a commit whose embedding batches each take up to a few seconds.
DEFAULT_CLOSE_TIMEOUT_S: Final = 30.0
#: Seconds close then gives the operations it cancelled to unwind before closing the stores.
CANCEL_GRACE_S: Final = 5.0
#: Facade operations that never write: one cancelled by close wrote nothing.
_READ_OPERATIONS: Final = frozenset({"prepare", "validate_plan", "retrieve"})


class InFlight:
    """The operations in flight of one memory's facade, and the close that waits for them.

    An operation is one facade call run by an asyncio task; one nested in another of the same
    task (``remember`` runs ``prepare`` and ``commit``) is part of it. Once close has started
    new operations are refused; those running are awaited, then cancelled.

    Args:
        collection: the memory's collection, for messages and logs.
        close_waited_s: what messages say close waited before it was called.
    """

    def __init__(self, collection: str, close_waited_s: float) -> None:
        self.collection = collection
        self.closed = False
        # task -> nesting depth (remember runs prepare and commit)
        self._running: dict[asyncio.Task[Any], int] = {}
        self._running_changed = asyncio.Event()
        self._cancelled_by_close: set[asyncio.Task[Any]] = set()
        self._close_waited_s = close_waited_s
        self._closing: asyncio.Task[None] | None = None

    def closed_error(self) -> CharmemError:
        """The error an operation refused after close gets."""
        return CharmemError(f"memory {self.collection!r} is closed; open it again")

    def refuse_if_closed(self) -> None:
        """Raise :meth:`closed_error` once close has started, unless inside an operation."""
        if self.closed and asyncio.current_task() not in self._running:
            raise self.closed_error()

    def _cancelled_error(self, name: str) -> CharmemError:
        """What an operation cancelled by close raises instead of ``CancelledError``."""
        if name in _READ_OPERATIONS:
            consequence = "nothing was written"
        else:
            consequence = (
                "its graph write may be stored without vectors or stats: open the memory "
                "again and run charmem.admin.check(memory) and repair(memory, report), or "
                "commit the same plan again (a new remember of the same RememberInput "
                "makes new ids)"
            )
        return CharmemError(
            f"memory {self.collection!r} was closed while this {name} ran (close waited "
            f"{self._close_waited_s:g} s for it); {consequence}"
        )

    @contextlib.asynccontextmanager
    async def operation(self, name: str) -> AsyncIterator[None]:
        """Run an operation that :meth:`close` waits for; refused once close has started.

        An operation nested in one in flight is part of it and never refused. One that close
        cancels raises ``CharmemError`` instead of ``CancelledError``, since the caller's task
        was not cancelled.
        """
        task = asyncio.current_task()
        if task is None:  # not run by an asyncio task; nothing to wait for
            yield
            return
        if self.closed and task not in self._running:
            raise self.closed_error()
        self._running[task] = self._running.get(task, 0) + 1
        try:
            yield
        except asyncio.CancelledError:
            if self._running[task] == 1 and task in self._cancelled_by_close:
                self._cancelled_by_close.discard(task)
                task.uncancel()
                raise self._cancelled_error(name) from None
            raise
        finally:
            depth = self._running.pop(task) - 1
            if depth:
                self._running[task] = depth
            else:
                self._cancelled_by_close.discard(task)
            self._running_changed.set()

    async def close(self, wait_s: float, release: Callable[[], Awaitable[None]]) -> None:
        """Refuse new operations, wait for those running, then ``release`` the stores (once).

        Concurrent and repeated calls wait for the same close; a ``release`` error is raised to
        the first caller only. Called inside an operation, close does not wait for that one.

        Args:
            wait_s: seconds to wait for operations in flight before cancelling them.
            release: closes the stores, after the operations ended or were cancelled.
        """
        first = self._closing is None
        if self._closing is None:
            self.closed = True
            self._closing = asyncio.ensure_future(self._close(wait_s, asyncio.current_task(), release))
        try:
            await asyncio.shield(self._closing)
        except Exception:
            if first:  # a store's close error is the first caller's; later calls find it closed
                raise

    async def _wait_for_others(
        self, timeout_s: float, me: asyncio.Task[Any] | None
    ) -> list[asyncio.Task[Any]]:
        """Wait until no operation but ``me``'s runs, at most ``timeout_s``; the ones left."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while others := [task for task in self._running if task is not me]:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return others
            self._running_changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._running_changed.wait()
        return []

    async def _close(
        self, timeout_s: float, me: asyncio.Task[Any] | None, release: Callable[[], Awaitable[None]]
    ) -> None:
        self._close_waited_s = timeout_s
        left = await self._wait_for_others(timeout_s, me)
        if left:
            log.warning("close_cancels_operations", collection=self.collection, operations=len(left))
            self._cancelled_by_close.update(left)
            for task in left:
                task.cancel()
            await self._wait_for_others(CANCEL_GRACE_S, me)
        await release()


class _Tracked(Protocol):
    """A facade whose operations an :class:`InFlight` tracks."""

    _flight: InFlight


TrackedT = TypeVar("TrackedT", bound=_Tracked)
T = TypeVar("T")
P = ParamSpec("P")


def operation(
    method: Callable[Concatenate[TrackedT, P], Awaitable[T]],
) -> Callable[Concatenate[TrackedT, P], Coroutine[Any, Any, T]]:
    """Count a facade method as an operation in flight, which the facade's close awaits."""

    @functools.wraps(method)
    async def run(self: TrackedT, /, *args: P.args, **kwargs: P.kwargs) -> T:
        async with self._flight.operation(method.__name__):
            return await method(self, *args, **kwargs)

    return run
