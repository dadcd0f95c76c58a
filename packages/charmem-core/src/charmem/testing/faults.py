"""Fault-injecting wrappers around real adapters, crash points, a fuzzing embedder.

Each wrapper forwards every call to the adapter it wraps, except that a method can be armed to
raise :class:`FaultInjected` on its N-th call (1-based) or on every call, or to run an action
(by default: kill this process with ``SIGKILL``) just before or just after its N-th call::

    vectors = FaultyVectorIndex(real_index)
    vectors.fail("delete", on_call=1)   # the next delete fails, later ones pass
    graph = FaultyGraphStore(real_graph)
    graph.crash("write_batch", after=True)  # the process dies once the next batch is stored

:class:`CrashPoints` names the points of the write path (graph batch, then vectors, then
stats) where a crash leaves different states behind, so crash trials need no test hook in
production code: the facade's use cases call the wrapped ports and the process dies between two
of those calls.

:class:`FaultyEmbeddingProvider` answers NaN, infinite, wrong-length, missing or extra rows on
demand (:class:`EmbeddingFault`), for fuzzing what core accepts from a provider.
"""

from __future__ import annotations

import enum
import math
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import attrs

from charmem.errors import BackendError
from charmem.memory import CharacterMemory
from charmem.ports import EmbeddingProvider

__all__ = [
    "CRASH_SITES",
    "CrashPoint",
    "CrashPoints",
    "EmbeddingFault",
    "FaultInjected",
    "FaultyEmbeddingProvider",
    "FaultyGraphStore",
    "FaultyStatsStore",
    "FaultyVectorIndex",
    "kill_this_process",
]

#: ``action(method)``: what an armed crash does (it may return, e.g. in a test of the wrapper).
CrashAction = Callable[[str], None]


class FaultInjected(BackendError):
    """The failure a fault-injecting wrapper raises."""


def kill_this_process(method: str) -> None:
    """Kill the current process with ``SIGKILL`` (no cleanup, no flush, no ``finally``).

    Args:
        method: the port method at which the crash happens (unused; for other actions' sake).
    """
    del method
    os.kill(os.getpid(), signal.SIGKILL)


@attrs.frozen
class _Arm:
    on_call: int | None  # None: every call
    after: bool
    action: CrashAction


class _Faulty:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._armed: dict[str, _Arm] = {}
        self.calls: dict[str, int] = {}

    def fail(self, method: str, *, on_call: int | None = 1, always: bool = False) -> None:
        """Arm ``method`` to fail on its ``on_call``-th call from now (or on every call).

        Args:
            method: the port method name (``"upsert"``, ``"delete"``, ``"write_batch"``...).
            on_call: which later call fails (1 = the next one).
            always: fail every call until :meth:`heal`.
        """

        def raise_fault(name: str) -> None:
            raise FaultInjected(f"injected failure in {name} (call {self.calls[name]})")

        self.calls[method] = 0
        self._armed[method] = _Arm(None if always else on_call, False, raise_fault)

    def crash(
        self,
        method: str,
        *,
        after: bool = False,
        on_call: int = 1,
        action: CrashAction = kill_this_process,
    ) -> None:
        """Arm ``method`` to crash the process just before (or after) its ``on_call``-th call.

        Args:
            method: the port method name.
            after: crash once the call has returned (its write is done) instead of before it.
            on_call: which later call crashes (1 = the next one).
            action: what the crash does, ``action(method)``; :func:`kill_this_process` by default.
        """
        self.calls[method] = 0
        self._armed[method] = _Arm(on_call, after, action)

    def heal(self, method: str | None = None) -> None:
        """Disarm one method, or all."""
        if method is None:
            self._armed.clear()
        else:
            self._armed.pop(method, None)

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.inner, name)
        if name not in self._armed or not callable(target):
            return target

        async def wrapped(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            arm = self._armed.get(name)
            fires = arm is not None and arm.on_call in (None, self.calls[name])
            if arm is not None and fires and not arm.after:
                arm.action(name)
            result = await target(*args, **kwargs)
            if arm is not None and fires and arm.after:
                arm.action(name)
            return result

        return wrapped


class FaultyGraphStore(_Faulty):
    """Wraps a graph store; arm ``write_batch``, ``currency``... to fail or crash."""


class FaultyVectorIndex(_Faulty):
    """Wraps a vector index; arm ``upsert``, ``delete``, ``search``... to fail or crash."""


class FaultyStatsStore(_Faulty):
    """Wraps a retrieval-stats store; arm ``record``... to fail or crash."""


class CrashPoint(enum.Enum):
    """A named moment of a commit or lifecycle operation (the write path).

    Every operation writes its graph batch, then vectors (upserts, then deletes), then stats.
    """

    BEFORE_GRAPH_BATCH = "before_graph_batch"
    """Nothing of the operation is written."""

    AFTER_GRAPH_BATCH = "after_graph_batch"
    """The graph batch is stored; vectors and stats are not."""

    BEFORE_VECTOR_UPSERT = "before_vector_upsert"
    """The batch is stored and the texts embedded; no point written."""

    BEFORE_VECTOR_DELETE = "before_vector_delete"
    """Upserts done; points of memories that stopped being current are still there."""

    BEFORE_STATS_RECORD = "before_stats_record"
    """Graph and vectors done; the stats rows are not written."""

    AFTER_STATS_RECORD = "after_stats_record"
    """Everything is written, but the caller never saw the call return (no acknowledgement)."""


#: Where each crash point sits: (port: ``"graph"``, ``"vectors"`` or ``"stats"``, method, after).
CRASH_SITES: Final[Mapping[CrashPoint, tuple[str, str, bool]]] = {
    CrashPoint.BEFORE_GRAPH_BATCH: ("graph", "write_batch", False),
    CrashPoint.AFTER_GRAPH_BATCH: ("graph", "write_batch", True),
    CrashPoint.BEFORE_VECTOR_UPSERT: ("vectors", "upsert", False),
    CrashPoint.BEFORE_VECTOR_DELETE: ("vectors", "delete", False),
    CrashPoint.BEFORE_STATS_RECORD: ("stats", "record", False),
    CrashPoint.AFTER_STATS_RECORD: ("stats", "record", True),
}


class CrashPoints:
    """A memory whose ports can kill the process at a named :class:`CrashPoint`.

    Wraps the real adapters of ``memory`` in :class:`FaultyGraphStore`, :class:`FaultyVectorIndex`
    and :class:`FaultyStatsStore` and builds :attr:`memory`, a :class:`CharacterMemory` on them
    (same embedder, clock, token counter and collection). Use that one (and close only it: it
    closes the real adapters); production code paths are untouched::

        points = CrashPoints(await CharacterMemory.open(settings, "trial"))
        points.arm(CrashPoint.AFTER_GRAPH_BATCH)
        await points.memory.remember(...)   # SIGKILL once the graph batch is stored

    Args:
        memory: an open memory (its adapters are taken over).
        action: what a crash does, ``action(method)``; :func:`kill_this_process` by default.
    """

    def __init__(self, memory: CharacterMemory, *, action: CrashAction = kill_this_process) -> None:
        stores = memory._stores
        self.graph = FaultyGraphStore(stores.graph)
        self.vectors = FaultyVectorIndex(stores.vectors)
        self.stats = FaultyStatsStore(stores.stats)
        self.action = action
        self.memory = CharacterMemory(
            graph=self.graph,  # forwards every port method (__getattr__)
            vectors=self.vectors,
            embedder=memory.embedder,
            stats=self.stats,
            collection=memory.collection,
            clock=memory.clock,
            token_counter=memory.token_counter,
        )

    def arm(self, point: CrashPoint, *, on_call: int = 1) -> None:
        """Crash at ``point`` on the ``on_call``-th time it is reached from now (1 = next).

        Args:
            point: the crash point.
            on_call: which later call of the point's port method crashes.
        """
        port, method, after = CRASH_SITES[CrashPoint(point)]
        wrapper: _Faulty = getattr(self, port)
        wrapper.crash(method, after=after, on_call=on_call, action=self.action)

    def disarm(self) -> None:
        """Disarm every crash point."""
        for wrapper in (self.graph, self.vectors, self.stats):
            wrapper.heal()


class EmbeddingFault(enum.Enum):
    """How :class:`FaultyEmbeddingProvider` breaks its answers (each breaks the provider contract)."""

    NAN = "nan"  #: the first value of the first row is NaN
    INFINITY = "infinity"  #: the first value of the first row is +inf, the last of the last -inf
    SHORT_VECTOR = "short_vector"  #: the first row lacks its last dimension
    LONG_VECTOR = "long_vector"  #: the first row has one dimension too many
    EMPTY_VECTOR = "empty_vector"  #: the first row is ``[]``
    MISSING_ROW = "missing_row"  #: one row fewer than texts
    EXTRA_ROW = "extra_row"  #: one row more than texts
    NOT_A_NUMBER = "not_a_number"  #: the first value of the first row is the string ``"0.5"``
    NOT_A_ROW = "not_a_row"  #: the first row is ``None``
    RAISES = "raises"  #: the call raises a plain :class:`RuntimeError` (not a ``CharmemError``)


class FaultyEmbeddingProvider:
    """Wraps an embedding provider and breaks its answers on purpose (a fuzzing provider).

    Forwards ``model_id`` and ``vector_size``; when armed, ``embed_documents`` and ``embed_query``
    return NaN, infinite, wrong-length or missing rows, non-numbers, or raise a non-charmem
    exception (:class:`EmbeddingFault`), so tests can check that charmem turns every one of them
    into a typed error or a repair marker and stores nothing broken. Example::

        embedder = FaultyEmbeddingProvider(HashingEmbeddingProvider())
        embedder.fail(EmbeddingFault.NAN)          # every call from now on
        embedder.fail(EmbeddingFault.RAISES, on_call=2)  # only the second call from now
        embedder.heal()

    Args:
        inner: the provider whose answers are broken.
    """

    def __init__(self, inner: EmbeddingProvider) -> None:
        self.inner = inner
        self.fault: EmbeddingFault | None = None
        self._on_call: int | None = None
        self.calls = 0

    @property
    def model_id(self) -> str:
        """The wrapped provider's model id."""
        return self.inner.model_id

    @property
    def vector_size(self) -> int:
        """The wrapped provider's declared dimensions (what broken rows fail to match)."""
        return self.inner.vector_size

    def fail(self, fault: EmbeddingFault, *, on_call: int | None = None) -> None:
        """Break every later call with ``fault`` (or only the ``on_call``-th, 1 = the next one)."""
        self.fault = EmbeddingFault(fault)
        self._on_call = on_call
        self.calls = 0

    def heal(self) -> None:
        """Answer correctly again."""
        self.fault = None
        self._on_call = None

    def _armed(self) -> EmbeddingFault | None:
        self.calls += 1
        if self.fault is None or (self._on_call is not None and self.calls != self._on_call):
            return None
        return self.fault

    @staticmethod
    def _break(fault: EmbeddingFault, rows: list[list[Any]]) -> list[Any]:
        broken: list[Any] = [list(row) for row in rows]
        if fault is EmbeddingFault.MISSING_ROW:
            return broken[:-1]
        if fault is EmbeddingFault.EXTRA_ROW:
            return [*broken, broken[-1] if broken else [0.0]]
        if not broken:
            return broken
        first = broken[0]
        if fault is EmbeddingFault.NAN:
            first[0] = math.nan
        elif fault is EmbeddingFault.INFINITY:
            first[0] = math.inf
            broken[-1][-1] = -math.inf
        elif fault is EmbeddingFault.SHORT_VECTOR:
            broken[0] = first[:-1]
        elif fault is EmbeddingFault.LONG_VECTOR:
            broken[0] = [*first, 0.0]
        elif fault is EmbeddingFault.EMPTY_VECTOR:
            broken[0] = []
        elif fault is EmbeddingFault.NOT_A_NUMBER:
            first[0] = "0.5"
        elif fault is EmbeddingFault.NOT_A_ROW:
            broken[0] = None
        return broken

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """The wrapped rows, broken when armed."""
        fault = self._armed()
        if fault is EmbeddingFault.RAISES:
            raise RuntimeError(f"injected embedding failure (call {self.calls})")
        rows = await self.inner.embed_documents(texts)
        return rows if fault is None else self._break(fault, rows)

    async def embed_query(self, text: str) -> list[float]:
        """The wrapped row, broken when armed (row-count faults give ``[]`` or the row twice)."""
        fault = self._armed()
        if fault is EmbeddingFault.RAISES:
            raise RuntimeError(f"injected embedding failure (call {self.calls})")
        row = await self.inner.embed_query(text)
        if fault is None:
            return row
        if fault is EmbeddingFault.MISSING_ROW:
            return []
        if fault is EmbeddingFault.EXTRA_ROW:
            return [*row, *row]
        broken: list[Any] = self._break(fault, [row])[0]
        return broken
