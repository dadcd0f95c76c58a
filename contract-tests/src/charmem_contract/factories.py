"""The one fixture shape of every suite: a factory of handles on the test's own backing stores.

Every suite has exactly one abstract fixture, named after the handle it opens plus ``_factory``
(``graph_store_factory``, ``vector_index_factory``, ``stats_store_factory``,
``embedding_provider_factory``, ``memory_factory``). It yields a *factory*: an object whose
coroutine ``open(collection, *, store="main", **options)`` opens a handle (a port, or a whole
memory) and which closes everything it opened when the fixture ends.

* ``collection`` is the collection the suite asks for. A factory may give it another actual name
  (a suffix that keeps tests apart on a shared server), as long as one requested name gets one
  actual name on every store within one test.
* ``store`` names a backing store of the test: each distinct name is a separate backing store
  that starts empty (a temporary directory, an in-memory store, another server); the same name
  reaches the same one, so opening a closed collection again reaches its data (reopen), and
  another collection on the same store is a sibling.
* ``options`` are what the port needs to open (a vector index: ``model_id`` and ``vector_size``).

:func:`opening` builds such a factory from a plain *opener* function, and
:func:`~charmem_contract.memory_factory` is the same for memories. Store ports add
``open_competitor``: open the collection as an independent opener would (by default a second
``open`` in this process; for a lock held per process, open it from a child process) and close it.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any, Generic, Protocol, TypeVar, cast

from charmem import CharacterMemory

__all__ = ["CONTRACT_COLLECTION", "Factory", "MemoryFactory", "Opening", "StoreFactory", "opening"]

H = TypeVar("H")
H_co = TypeVar("H_co", covariant=True)

#: The backing store a suite means when it names none.
MAIN = "main"
#: The collection a suite asks its factory for when one is enough.
CONTRACT_COLLECTION = "contract"

#: Opens a handle: ``opener(collection, **options)``, given ``store=`` too when it takes it; it
#: may return the handle or an awaitable of it.
Opener = Callable[..., Any]


class Factory(Protocol[H_co]):
    """Opens handles on one test's isolated backing stores (the one fixture shape)."""

    async def open(self, collection: str, *, store: str = MAIN, **options: Any) -> H_co:
        """Open ``collection`` on the backing store named ``store`` (empty the first time)."""
        ...


class StoreFactory(Factory[H_co], Protocol[H_co]):
    """A :class:`Factory` of store ports, which can also play an independent opener."""

    async def open_competitor(self, collection: str, *, store: str = MAIN, **options: Any) -> None:
        """Open ``collection`` as an independent opener would, then close it; raise what it raises."""
        ...


class MemoryFactory(Protocol):
    """Opens memories on one test's isolated stores (the :class:`Factory` of the memory suites)."""

    async def open(self, collection: str, *, store: str = MAIN) -> CharacterMemory:
        """Open ``collection`` (empty the first time; the same data when opened again after close)."""
        ...


class Opening(Generic[H]):
    """The factory :func:`opening` yields: it calls the opener and remembers what it opened."""

    def __init__(self, opener: Opener, competitor: Opener | None = None) -> None:
        self._opener = opener
        self._competitor = competitor
        self.opened: list[H] = []

    async def open(self, collection: str, *, store: str = MAIN, **options: Any) -> H:
        """Open ``collection`` on ``store`` through the opener (closed by :meth:`close_all`)."""
        handle = cast(H, await _call(self._opener, collection, store, options))
        self.opened.append(handle)
        return handle

    async def open_competitor(self, collection: str, *, store: str = MAIN, **options: Any) -> None:
        """The competitor hook if one was given, else a second :meth:`open`, closed at once."""
        if self._competitor is not None:
            await _call(self._competitor, collection, store, options)
            return
        await _close(await self.open(collection, store=store, **options))

    async def close_all(self) -> None:
        """Close every handle opened, newest first (closing twice is harmless); raise the first error."""
        errors: list[BaseException] = []
        for handle in reversed(self.opened):
            try:
                await _close(handle)
            except Exception as exc:  # noqa: BLE001 - close the others first
                errors.append(exc)
        self.opened.clear()
        if errors:
            raise errors[0]


async def _call(opener: Opener, collection: str, store: str, options: dict[str, Any]) -> Any:
    """``opener(collection, **options)`` (with ``store=`` when it takes it), awaited if need be."""
    parameters = inspect.signature(opener).parameters.values()
    if any(p.name == "store" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        options = {**options, "store": store}
    result = opener(collection, **options)
    return await result if inspect.isawaitable(result) else result


async def _close(handle: object) -> None:
    close = getattr(handle, "close", None)
    if close is not None:
        result = close()
        if inspect.isawaitable(result):
            await result


@contextlib.asynccontextmanager
async def opening(opener: Opener, *, competitor: Opener | None = None) -> AsyncIterator[Opening[Any]]:
    """A factory over ``opener`` that closes every handle it opened on exit.

    Example (a store port under a temporary directory, one directory per store name)::

        @pytest.fixture
        async def graph_store_factory(self, tmp_path):
            def open_store(collection, *, store):
                return MyGraphStore.open(tmp_path / store, collection)

            async with opening(open_store) as factory:
                yield factory

    Args:
        opener: opens a handle: called as ``opener(collection, **options)``, with ``store=`` too
            when it takes a ``store`` parameter (an opener without one opens the same kind of
            stores for every name); it may return the handle or an awaitable of it.
        competitor: plays an independent opener for the lock test (same call as ``opener``;
            returns nothing). Without it, a second ``open`` in this process is the competitor.

    Yields:
        Opening: the factory.
    """
    factory: Opening[Any] = Opening(opener, competitor)
    try:
        yield factory
    finally:
        await factory.close_all()
