"""The reference graph authority: dictionaries, obviously correct, the graph port's specification."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, BinaryIO, Final

import cattrs

from charmem.domain.currency import currency_status
from charmem.domain.graph import (
    GraphBatch,
    GraphErasure,
    GraphExport,
    GraphWriteResult,
    LifecycleAction,
    LifecycleRecord,
    Tombstone,
)
from charmem.domain.ids import MemoryId, as_memory_id
from charmem.domain.model import DerivedMemory, MemoryLink, MemoryObject, ObjectType, Relation, known_names
from charmem.domain.names import NameIndex
from charmem.domain.retrieval import CurrencyStatus
from charmem.domain.rules import content_equal
from charmem.domain.serde import converter, structure_item, unstructure_item
from charmem.errors import (
    BackendError,
    BackupFormatError,
    CollectionNotEmptyError,
    IdConflictError,
    PurgedMemoryError,
    with_article,
)
from charmem.settings import Settings, validate_collection_name

__all__ = ["REFERENCE_DUMP_MEDIA_TYPE", "ReferenceGraphStore"]

#: The reference graph's dump format: JSON lines, a header line ``{"kind": "collection", "name":
#: ...}`` then one item per line (cattrs-unstructured, tagged with ``"kind"``), sorted by id.
REFERENCE_DUMP_MEDIA_TYPE: Final = "application/vnd.charmem.reference+jsonl"

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
        self._tombstones: dict[MemoryId, Tombstone] = {}
        self._character: MemoryId | None = None

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
        """Check every item, then store the new ones; any conflict or purged id writes nothing."""
        items: list[Stored] = [*batch.objects, *batch.links, *batch.records]
        purged = sorted({str(item.id) for item in items if item.id in self._tombstones})
        if purged:
            raise PurgedMemoryError(
                f"{len(purged)} id(s) of the batch were purged and cannot be written again, e.g. "
                f"{purged[0]}; nothing was written",
                ids=purged,
            )
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
                    f"id already stored as {with_article(_kind(stored))} with different content"
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
        """Currency of stored objects (:func:`charmem.domain.currency.currency_status`)."""
        objects = await self.get_objects(ids)
        suppressed_at: dict[MemoryId, list[datetime]] = {}
        superseded_at: dict[MemoryId, list[datetime]] = {}
        for item in self._items.values():
            if isinstance(item, LifecycleRecord) and item.action is LifecycleAction.SUPPRESS:
                suppressed_at.setdefault(item.target_id, []).append(item.recorded_at)
            elif isinstance(item, MemoryLink) and item.relation is Relation.SUPERSEDES:
                superseded_at.setdefault(item.to_id, []).append(item.created_at)
        return {
            memory_id: currency_status(
                suppressed_at=suppressed_at.get(memory_id, ()),
                superseded_at=superseded_at.get(memory_id, ()),
                as_of=as_of,
            )
            for memory_id in objects
        }

    async def statement_count(self) -> int:
        """Number of stored items (objects, links, records and tombstones)."""
        return len(self._items) + len(self._tombstones)

    async def name_assertions(self) -> list[tuple[MemoryId, MemoryId, str]]:
        """Every ``KnownAs`` assertion as (belief id, subject id, name), sorted."""
        found = [
            (item.id, subject, name)
            for item in self._items.values()
            if isinstance(item, DerivedMemory)
            for subject, name in known_names(item.assertions)
        ]
        return sorted(found)

    async def name_index(self) -> NameIndex:
        """The index of :meth:`name_assertions`, built on each call (a reference, not a cache)."""
        return NameIndex.of(await self.name_assertions())

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

    async def tombstones(self, ids: Sequence[MemoryId] | None = None) -> dict[MemoryId, Tombstone]:
        """Tombstones among ``ids`` (``None``: all), in request order (all: by id)."""
        if ids is None:
            return {i: self._tombstones[i] for i in sorted(self._tombstones)}
        return {i: t for i in ids if (t := self._tombstones.get(i)) is not None}

    async def erase(self, erasure: GraphErasure) -> None:
        """Drop the listed objects, links and records and keep the tombstones (one step)."""
        for tombstone in erasure.tombstones:
            if tombstone.id in self._tombstones:
                continue
            item = self._items.get(tombstone.id)
            if isinstance(item, (MemoryLink, LifecycleRecord)):
                raise BackendError(
                    f"{tombstone.id} is {with_article(_kind(item))}, not a memory object to erase"
                )
        for tombstone in erasure.tombstones:
            if tombstone.id not in self._tombstones:
                self._items.pop(tombstone.id, None)
                self._tombstones[tombstone.id] = tombstone
        for memory_id in (*erasure.link_ids, *erasure.record_ids):
            if isinstance(self._items.get(memory_id), (MemoryLink, LifecycleRecord)):
                del self._items[memory_id]

    async def export_graph(self, out: BinaryIO) -> GraphExport:
        """Write the header and every item and tombstone as JSON lines, sorted by id."""
        lines = [{"kind": "collection", "name": self._collection}]
        for memory_id in sorted({*self._items, *self._tombstones}):
            lines.append(_dump_item(self._items.get(memory_id) or self._tombstones[memory_id]))
        for line in lines:
            out.write(json.dumps(line, ensure_ascii=False, sort_keys=True).encode("utf-8") + b"\n")
        return GraphExport(media_type=REFERENCE_DUMP_MEDIA_TYPE, statements=len(lines) - 1)

    async def import_graph(self, source: BinaryIO, media_type: str) -> int:
        """Load an :meth:`export_graph` dump of this collection into this empty store."""
        if media_type != REFERENCE_DUMP_MEDIA_TYPE:
            raise BackupFormatError(
                f"the reference graph reads {REFERENCE_DUMP_MEDIA_TYPE!r} dumps, not {media_type!r}; "
                "restore the backup into the kind of graph store that made it"
            )
        if self._items or self._tombstones:
            raise CollectionNotEmptyError(
                f"collection {self._collection!r} already holds {await self.statement_count()} "
                "statements; restore into an empty collection",
                collection=self._collection,
                counts={"graph statements": await self.statement_count()},
            )
        items: dict[MemoryId, Stored] = {}
        tombstones: dict[MemoryId, Tombstone] = {}
        try:
            # split on b"\n" only: str.splitlines would also split inside text at U+2028 and kin
            lines = [json.loads(line) for line in source.read().split(b"\n") if line.strip()]
            header = lines[0] if lines else {}
            if header != {"kind": "collection", "name": self._collection}:
                raise BackupFormatError(
                    f"the dump is not of collection {self._collection!r} (header {header!r})"
                )
            for line in lines[1:]:
                loaded = _load_item(line)
                if isinstance(loaded, Tombstone):
                    tombstones[loaded.id] = loaded
                else:
                    items[loaded.id] = loaded
        except BackupFormatError:
            raise
        except (ValueError, KeyError, TypeError, cattrs.BaseValidationError) as exc:
            raise BackupFormatError(f"the reference dump does not parse: {exc}") from exc
        self._items, self._tombstones = items, tombstones
        return len(items) + len(tombstones)

    async def character_id(self) -> MemoryId | None:
        """See :meth:`charmem.ports.CharacterRecord.character_id`."""
        return self._character

    async def record_character_id(self, character_id: MemoryId) -> MemoryId:
        """See :meth:`charmem.ports.CharacterRecord.record_character_id` (one synchronous step)."""
        if self._character is None:
            self._character = as_memory_id(character_id)
        return self._character

    async def close(self) -> None:
        """Nothing to release."""


def _dump_item(item: Stored | Tombstone) -> dict[str, Any]:
    if isinstance(item, LifecycleRecord | Tombstone):
        data: dict[str, Any] = converter.unstructure(item)
        data["kind"] = "record" if isinstance(item, LifecycleRecord) else "tombstone"
        return data
    return unstructure_item(item)


def _load_item(data: dict[str, Any]) -> Stored | Tombstone:
    kind = data.get("kind")
    body = {key: value for key, value in data.items() if key != "kind"}
    if kind == "record":
        return converter.structure(body, LifecycleRecord)
    if kind == "tombstone":
        return converter.structure(body, Tombstone)
    return structure_item(data)
