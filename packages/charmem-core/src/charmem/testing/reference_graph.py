"""The reference graph authority: dictionaries, obviously correct, the graph port's specification."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from charmem.domain.graph import GraphBatch, GraphWriteResult, LifecycleAction, LifecycleRecord
from charmem.domain.ids import MemoryId
from charmem.domain.model import DerivedMemory, MemoryLink, MemoryObject, ObjectType, Relation
from charmem.domain.retrieval import CurrencyStatus
from charmem.domain.rules import content_equal, is_current
from charmem.errors import IdConflictError
from charmem.settings import Settings, validate_collection_name

__all__ = ["ReferenceGraphStore"]

Stored = MemoryObject | MemoryLink | LifecycleRecord


def _kind(item: Stored) -> str:
    if isinstance(item, LifecycleRecord):
        return "record"
    if isinstance(item, MemoryLink):
        return "link"
    return item.object_type.value


def _same(left: Stored, right: Stored) -> bool:
    if isinstance(left, LifecycleRecord) or isinstance(right, LifecycleRecord):
        return left == right
    return type(left) is type(right) and content_equal(left, right)


class ReferenceGraphStore:
    """In-memory graph authority for one collection (``GRAPH_STORE_MODE=reference``).

    Every write is checked then applied as a whole inside one synchronous call, so it is atomic
    with respect to the event loop. Data lives as long as the instance.
    """

    def __init__(self, collection: str) -> None:
        """Args: collection: the collection name (validated)."""
        self._collection = validate_collection_name(collection)
        self._items: dict[MemoryId, Stored] = {}

    @classmethod
    def from_settings(cls, settings: Settings, collection: str) -> ReferenceGraphStore:
        """Build from settings (nothing is read)."""
        del settings
        return cls(collection)

    @property
    def collection(self) -> str:
        """The collection this store is bound to."""
        return self._collection

    async def write_batch(self, batch: GraphBatch) -> GraphWriteResult:
        """Check every item, then store the new ones; any conflict writes nothing."""
        items: list[Stored] = [*batch.objects, *batch.links, *batch.records]
        conflicts: dict[str, list[str]] = {}
        pending: dict[MemoryId, Stored] = {}
        inserted: list[MemoryId] = []
        existing: list[MemoryId] = []
        for item in items:
            stored = self._items.get(item.id) or pending.get(item.id)
            if stored is None:
                pending[item.id] = item
                inserted.append(item.id)
            elif _same(stored, item):
                if item.id not in pending:
                    existing.append(item.id)
            else:
                conflicts.setdefault(str(item.id), []).append(
                    f"id already stored as a {_kind(stored)} with different content"
                )
        if conflicts:
            raise IdConflictError(
                f"{len(conflicts)} id(s) are already stored with different content; nothing was "
                "written (use new ids, or replay the exact plan that stored them)",
                ids=sorted(conflicts),
                reasons=conflicts,
            )
        self._items.update(pending)
        return GraphWriteResult(inserted_ids=tuple(inserted), existing_ids=tuple(existing))

    async def get_objects(self, ids: Sequence[MemoryId]) -> dict[MemoryId, MemoryObject]:
        """Stored objects among ``ids``."""
        found: dict[MemoryId, MemoryObject] = {}
        for memory_id in ids:
            item = self._items.get(memory_id)
            if item is not None and not isinstance(item, (MemoryLink, LifecycleRecord)):
                found[memory_id] = item
        return found

    async def get_links(self, ids: Sequence[MemoryId]) -> dict[MemoryId, MemoryLink]:
        """Stored links among ``ids``."""
        return {i: item for i in ids if isinstance(item := self._items.get(i), MemoryLink)}

    async def get_records(self, target_ids: Sequence[MemoryId]) -> list[LifecycleRecord]:
        """Lifecycle records about ``target_ids`` by (recorded_at, id)."""
        wanted = set(target_ids)
        records = [
            item
            for item in self._items.values()
            if isinstance(item, LifecycleRecord) and item.target_id in wanted
        ]
        return sorted(records, key=lambda r: (r.recorded_at, r.id))

    async def links_of(
        self, ids: Sequence[MemoryId], *, relations: Sequence[Relation] | None = None
    ) -> list[MemoryLink]:
        """Links touching ``ids`` by link id."""
        wanted = set(ids)
        allowed = None if relations is None else set(relations)
        links = [
            item
            for item in self._items.values()
            if isinstance(item, MemoryLink)
            and (item.from_id in wanted or item.to_id in wanted)
            and (allowed is None or item.relation in allowed)
        ]
        return sorted(links, key=lambda link: link.id)

    async def currency(
        self, ids: Sequence[MemoryId], *, as_of: datetime | None = None
    ) -> dict[MemoryId, CurrencyStatus]:
        """Currency of stored objects; suppressed beats superseded."""
        objects = await self.get_objects(ids)
        suppressed: set[MemoryId] = set()
        superseded: set[MemoryId] = set()
        for item in self._items.values():
            if isinstance(item, LifecycleRecord):
                if item.action is LifecycleAction.SUPPRESS and (as_of is None or item.recorded_at <= as_of):
                    suppressed.add(item.target_id)
            elif (
                isinstance(item, MemoryLink)
                and item.relation is Relation.SUPERSEDES
                and (as_of is None or item.created_at <= as_of)
            ):
                superseded.add(item.to_id)
        result: dict[MemoryId, CurrencyStatus] = {}
        for memory_id in objects:
            is_suppressed = memory_id in suppressed
            is_superseded = memory_id in superseded
            if is_current(suppressed=is_suppressed, superseded=is_superseded):
                result[memory_id] = CurrencyStatus.CURRENT
            elif is_suppressed:
                result[memory_id] = CurrencyStatus.SUPPRESSED
            else:
                result[memory_id] = CurrencyStatus.SUPERSEDED
        return result

    async def statement_count(self) -> int:
        """Number of stored items (objects, links and records)."""
        return len(self._items)

    async def name_assertions(self) -> list[tuple[MemoryId, MemoryId, str]]:
        """Every ``KnownAs`` assertion as (belief id, subject id, name), sorted."""
        found = [
            (item.id, assertion.subject, assertion.predicate.name)
            for item in self._items.values()
            if isinstance(item, DerivedMemory)
            for assertion in item.assertions
        ]
        return sorted(found)

    async def object_ids(self, object_types: Sequence[ObjectType] | None = None) -> list[MemoryId]:
        """Ids of stored objects (optionally of some types), sorted."""
        allowed = None if object_types is None else {ObjectType(t) for t in object_types}
        return sorted(
            memory_id
            for memory_id, item in self._items.items()
            if not isinstance(item, (MemoryLink, LifecycleRecord))
            and (allowed is None or item.object_type in allowed)
        )

    async def link_ids(self) -> list[MemoryId]:
        """Ids of stored links, sorted."""
        return sorted(i for i, item in self._items.items() if isinstance(item, MemoryLink))

    async def close(self) -> None:
        """Nothing to release."""
