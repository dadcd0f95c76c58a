"""The ids links name by another IRI than their stored one: the ``vocab:unstoredEndpoint`` marks.

A link names each endpoint by the endpoint's stored kind, unless the endpoint was not stored when
the link was written: then by the kind the relation declares for that side, else ``object``
(:func:`charmem_oxigraph._writing.plan_write`), and the link carries
``vocab:unstoredEndpoint <that IRI>`` (:func:`charmem_oxigraph._writing.unstored_endpoints`).
Knowing every mark of a collection, a read of the links of an id of known kind binds its one
stored IRI plus the IRIs marks name it by (almost always none), instead of one IRI per kind any
relation may declare (:func:`charmem_oxigraph._iris.endpoint_iris`).

:class:`UnstoredEndpoints` is that knowledge for one collection, held by its
:class:`~charmem_oxigraph._cache.GraphCache` (coherent caches only: every write of the
collection goes through the cache's writer, which adds the marks it writes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from charmem.domain.ids import MemoryId

from charmem_oxigraph import _vocab as v

__all__ = ["UnstoredEndpoints"]


class UnstoredEndpoints:
    """Every ``vocab:unstoredEndpoint`` mark of a collection, once read (not thread-safe).

    States: not read yet (:attr:`wanted`), held (:meth:`kinds` answers), or refused (the
    collection holds more than ``max_entries`` marks: reads keep binding every kind). The
    caller serialises access (the cache's lock).

    Args:
        max_entries: the most marks held.
    """

    def __init__(self, max_entries: int) -> None:
        self._max_entries = max_entries
        self._kinds: dict[int, tuple[str, ...]] | None = None  # UUID integer -> marked kinds
        self._refused = False

    @property
    def wanted(self) -> bool:
        """Whether the marks should be read (neither held nor refused)."""
        return self._kinds is None and not self._refused

    def read(self, iris: Iterable[str], *, current: bool) -> None:
        """Hold the marks read from the store (``iris``: every marked endpoint IRI).

        Args:
            iris: the IRIs :func:`charmem_oxigraph._queries.unstored_endpoints` returned (at most
                ``max_entries + 1``).
            current: no write happened since the read began (else nothing is held).
        """
        kinds: dict[int, tuple[str, ...]] = {}
        count = 0
        for iri in iris:
            count += 1
            _add(kinds, iri)
        if count > self._max_entries:
            self._refused = True
        elif current:
            self._kinds = kinds

    def add(self, iris: Iterable[str]) -> None:
        """Add marks a write stored (the endpoint IRIs); past ``max_entries`` ids, refuse."""
        if self._kinds is None:
            return
        for iri in iris:
            _add(self._kinds, iri)
        if len(self._kinds) > self._max_entries:
            self._kinds, self._refused = None, True

    def kinds(self, ids: Iterable[MemoryId]) -> Mapping[MemoryId, tuple[str, ...]] | None:
        """The kinds marks name each of ``ids`` by (ids without marks left out; ``None``: not held)."""
        held = self._kinds
        if held is None:
            return None
        return {memory_id: kinds for memory_id in ids if (kinds := held.get(memory_id.value.int))}


def _add(kinds: dict[int, tuple[str, ...]], iri: str) -> None:
    key = v.memory_id_of(iri).value.int
    kind = v.kind_of_iri(iri)
    present = kinds.get(key, ())
    if kind not in present:
        kinds[key] = (*present, kind)
