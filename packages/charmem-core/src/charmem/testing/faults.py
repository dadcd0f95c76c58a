"""Fault-injecting wrappers around real adapters (DESIGN §9), and a fuzzing embedding provider.

Each wrapper forwards every call to the adapter it wraps, except that a method can be armed to
raise :class:`FaultInjected` on its N-th call (1-based) or on every call. Example::

    vectors = FaultyVectorIndex(real_index)
    vectors.fail("delete", on_call=1)   # the next delete fails, later ones pass
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from typing import Any

from charmem.errors import BackendError
from charmem.ports import EmbeddingProvider

__all__ = [
    "EmbeddingFault",
    "FaultInjected",
    "FaultyEmbeddingProvider",
    "FaultyGraphStore",
    "FaultyStatsStore",
    "FaultyVectorIndex",
]


class FaultInjected(BackendError):
    """The failure a fault-injecting wrapper raises."""


class _Faulty:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self._armed: dict[str, int | None] = {}
        self.calls: dict[str, int] = {}

    def fail(self, method: str, *, on_call: int | None = 1, always: bool = False) -> None:
        """Arm ``method`` to fail on its ``on_call``-th call from now (or on every call).

        Args:
            method: the port method name (``"upsert"``, ``"delete"``, ``"write_batch"``...).
            on_call: which later call fails (1 = the next one).
            always: fail every call until :meth:`heal`.
        """
        self.calls[method] = 0
        self._armed[method] = None if always else on_call

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
            when = self._armed.get(name)
            if name in self._armed and (when is None or self.calls[name] == when):
                raise FaultInjected(f"injected failure in {name} (call {self.calls[name]})")
            return await target(*args, **kwargs)

        return wrapped


class FaultyGraphStore(_Faulty):
    """Wraps a graph store; arm ``write_batch``, ``currency``... to fail."""


class FaultyVectorIndex(_Faulty):
    """Wraps a vector index; arm ``upsert``, ``delete``, ``search``... to fail."""


class FaultyStatsStore(_Faulty):
    """Wraps a retrieval-stats store; arm ``record``... to fail."""


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
