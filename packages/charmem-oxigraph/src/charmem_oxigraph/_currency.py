"""What currency needs to know about ids, as the graph cache keeps it.

:class:`CurrencyFacts` are the instants that decide an id's currency under any ``as_of`` view;
:class:`LifecycleIndex` is every ``supersedes`` link and ``suppress`` instant of a collection, which
a coherent :class:`~charmem_oxigraph._cache.GraphCache` may hold whole (corrections and forgetting
are rare next to memories), so the currency of an id of known kind needs no query.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Final

import attrs
from charmem.domain.ids import MemoryId
from charmem.domain.model import MemoryLink

__all__ = ["NOT_STORED_FACTS", "STORED_FACTS", "CurrencyFacts", "LifecycleIndex"]


@attrs.frozen
class CurrencyFacts:
    """What currency (:func:`charmem.domain.rules.is_current`) needs about one id, any ``as_of``.

    Attributes:
        stored: the id is stored as a memory object (not absent, not a link or record).
        suppressed_at: ``recorded_at`` of every ``suppress`` record targeting it.
        superseded_at: ``created_at`` of every ``supersedes`` link pointing at it.
    """

    stored: bool
    suppressed_at: tuple[datetime, ...] = ()
    superseded_at: tuple[datetime, ...] = ()

    def suppressed(self, recorded_at: datetime) -> CurrencyFacts:
        """These facts and one more ``suppress`` record, recorded at ``recorded_at``."""
        return attrs.evolve(self, suppressed_at=(*self.suppressed_at, recorded_at))

    def superseded(self, created_at: datetime) -> CurrencyFacts:
        """These facts and one more ``supersedes`` link to the id, created at ``created_at``."""
        return attrs.evolve(self, superseded_at=(*self.superseded_at, created_at))


#: The facts of a stored object that nothing suppresses or supersedes (the common case).
STORED_FACTS: Final = CurrencyFacts(stored=True)
#: The facts of an id that is not a stored object.
NOT_STORED_FACTS: Final = CurrencyFacts(stored=False)


@attrs.define
class LifecycleIndex:
    """Every ``supersedes`` link of a collection and every ``suppress`` instant, by id."""

    links: dict[MemoryId, MemoryLink] = attrs.field(factory=dict)
    by_end: dict[MemoryId, list[MemoryId]] = attrs.field(factory=dict)  # endpoint -> link ids
    suppressed: dict[MemoryId, list[datetime]] = attrs.field(factory=dict)  # target -> instants

    @property
    def size(self) -> int:
        return len(self.links) + sum(len(instants) for instants in self.suppressed.values())

    def add_link(self, link: MemoryLink) -> None:
        if link.id in self.links:
            return
        self.links[link.id] = link
        for end in {link.from_id, link.to_id}:
            self.by_end.setdefault(end, []).append(link.id)

    def add_suppress(self, target: MemoryId, recorded_at: datetime) -> None:
        self.suppressed.setdefault(target, []).append(recorded_at)

    def facts(self, memory_id: MemoryId, stored: bool) -> CurrencyFacts:
        if memory_id not in self.by_end and memory_id not in self.suppressed:  # the common case
            return STORED_FACTS if stored else NOT_STORED_FACTS
        superseded = tuple(
            link.created_at
            for link_id in self.by_end.get(memory_id, ())
            if (link := self.links[link_id]).to_id == memory_id
        )
        return CurrencyFacts(stored, tuple(self.suppressed.get(memory_id, ())), superseded)

    def links_of(self, ids: Iterable[MemoryId]) -> dict[MemoryId, MemoryLink]:
        return {link_id: self.links[link_id] for i in ids for link_id in self.by_end.get(i, ())}
