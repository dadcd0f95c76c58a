"""A map bounded by its number of entries, forgetting the oldest first (the graph cache's maps)."""

from __future__ import annotations

from typing import Generic, TypeVar

__all__ = ["BoundedMap"]

K = TypeVar("K")
V = TypeVar("V")


class BoundedMap(Generic[K, V]):
    """A map that forgets its oldest entry beyond ``capacity`` (callers hold the cache lock).

    First in, first out: a hit does not reorder entries, which keeps hits at one dictionary
    lookup (the hot path does thousands per retrieval); a forgotten entry is just read again.
    """

    def __init__(self, capacity: int) -> None:
        self._data: dict[K, V] = {}
        self._capacity = capacity

    def get(self, key: K) -> V | None:
        return self._data.get(key)

    def put(self, key: K, value: V) -> None:
        self._data[key] = value
        if len(self._data) > self._capacity:
            del self._data[next(iter(self._data))]

    def pop(self, key: K) -> None:
        self._data.pop(key, None)

    def clear(self) -> None:
        self._data.clear()

    def __len__(self) -> int:
        return len(self._data)
