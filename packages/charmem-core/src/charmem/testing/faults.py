"""Fault-injecting wrappers around real adapters (DESIGN §9).

Each wrapper forwards every call to the adapter it wraps, except that a method can be armed to
raise :class:`FaultInjected` on its N-th call (1-based) or on every call. Example::

    vectors = FaultyVectorIndex(real_index)
    vectors.fail("delete", on_call=1)   # the next delete fails, later ones pass
"""

from __future__ import annotations

from typing import Any

from charmem.errors import BackendError

__all__ = ["FaultInjected", "FaultyGraphStore", "FaultyStatsStore", "FaultyVectorIndex"]


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
