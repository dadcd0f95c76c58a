"""Store writes that a cancellation cannot cut short.

A store adapter runs its blocking write in a worker thread (``asyncio.to_thread``). Cancelling
the task that awaits it stops the waiting, not the thread: the write may still land after the
caller has released the facade's writer lock, and a rival writer would then validate against a
graph that is about to change (two successors of one memory, a vector upserted after its memory
was superseded). Every write of the write path is therefore awaited through :func:`finish_write`:
a cancellation that arrives while the write runs waits for it to end, then propagates.

Writers in other processes (a graph on a SPARQL server) are held off by the store itself: each
check-then-write runs inside :func:`exclusive_writes`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

from charmem.log import get_logger
from charmem.ports import WriterExclusion

__all__ = ["exclusive_writes", "finish_write", "wait_until_done"]

log = get_logger("charmem.commit")
T = TypeVar("T")


async def finish_write(write: Coroutine[Any, Any, T]) -> T:
    """Run one store write to its end, even if the calling task is cancelled meanwhile.

    Once the write has started, a cancellation of the caller waits for it to finish (or fail),
    then ``CancelledError`` propagates; the caller therefore never holds a lock past a write
    it did not see end, and never releases one before. When no write runs, nothing waits.

    Args:
        write: the store call, not yet awaited (``graph.write_batch(batch)``).

    Returns:
        T: what the write returned.

    Raises:
        asyncio.CancelledError: the caller was cancelled; the write has ended (stored or not:
            what the stores hold says which, and ``charmem.admin.check`` reports it).
        Exception: whatever the write raised, when the caller was not cancelled.
    """
    task = asyncio.ensure_future(write)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await wait_until_done(task)
        failure = None if task.cancelled() else task.exception()
        if failure is not None:
            log.warning("write_failed_after_cancel", error=type(failure).__name__)
        raise


async def wait_until_done(task: asyncio.Future[Any]) -> None:
    """Wait for ``task`` to end, whatever cancellations the calling task gets meanwhile.

    For a caller already cancelled that must not go on (release a lock) while ``task`` still
    writes; the caller re-raises its ``CancelledError`` afterwards. ``task`` is not cancelled.
    """
    while not task.done():
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError:
            continue  # cancelled again: the write still runs, so keep waiting


def exclusive_writes(graph: object) -> AbstractAsyncContextManager[None]:
    """Hold the graph's writers in every process off while a check-then-write runs.

    The graph's :meth:`~charmem.ports.WriterExclusion.exclusive_writes` when it offers one (a store
    several processes write to); otherwise nothing (one process writes: the facade's writer lock
    already serialises its writes).

    Args:
        graph: the graph store the block reads and writes.

    Returns:
        AbstractAsyncContextManager[None]: enter it around the reads the write depends on and the
        write itself.
    """
    if isinstance(graph, WriterExclusion):
        return graph.exclusive_writes()
    return contextlib.nullcontext()
