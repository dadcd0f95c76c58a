"""Values exchanged with the graph authority port: batches, lifecycle records, write results."""

from __future__ import annotations

from datetime import datetime

import attrs

from charmem.domain import _fields
from charmem.domain._fields import ChoiceEnum, as_tuple, id_set, text_set
from charmem.domain.ids import MemoryId, as_memory_id
from charmem.domain.model import MemoryLink, MemoryObject, ObjectType

__all__ = [
    "GraphBatch",
    "GraphErasure",
    "GraphExport",
    "GraphWriteResult",
    "LifecycleAction",
    "LifecycleRecord",
    "Tombstone",
]


class LifecycleAction(ChoiceEnum):
    """An append-only state change: nothing is ever rewritten."""

    SUPPRESS = "suppress"
    """The target is suppressed from this record's time on (forget)."""

    FORGET_NOTED = "forget_noted"
    """A forget of a thread was recorded; the thread's status and vector are unchanged."""

    CORRECT = "correct"
    """The target was corrected; ``related_ids`` names the replacements (which supersede it)."""


@attrs.frozen(kw_only=True)
class LifecycleRecord:
    """One timestamped lifecycle record about ``target_id``.

    Attributes:
        id: the record's own id (deterministic ids make replays idempotent).
        target_id: the memory the record is about.
        action: what happened.
        rationale: why (never blank for forget and correct).
        recorded_at: record time; ``as_of`` views compare against it.
        related_ids: other memories the change concerns (a correction's replacements), sorted.
        external_refs: opaque caller references to evidence outside the memory (e.g.
            ``"application:name-change"``), sorted.
    """

    id: MemoryId = attrs.field(converter=as_memory_id)
    target_id: MemoryId = attrs.field(converter=as_memory_id)
    action: LifecycleAction = attrs.field(converter=LifecycleAction)
    rationale: str = attrs.field(validator=_fields.plain)
    recorded_at: datetime = attrs.field(validator=_fields.aware)
    related_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set)
    external_refs: tuple[str, ...] = attrs.field(default=(), converter=text_set)


@attrs.frozen(kw_only=True)
class GraphBatch:
    """Everything one commit or lifecycle operation writes to the graph, atomically.

    Attributes:
        objects: stored objects; an id already stored with equal content is skipped.
        links: caller and derived links, same rule.
        records: lifecycle records, same rule.
    """

    objects: tuple[MemoryObject, ...] = attrs.field(default=(), converter=as_tuple)
    links: tuple[MemoryLink, ...] = attrs.field(default=(), converter=as_tuple)
    records: tuple[LifecycleRecord, ...] = attrs.field(default=(), converter=as_tuple)

    def __len__(self) -> int:
        return len(self.objects) + len(self.links) + len(self.records)


@attrs.frozen(kw_only=True)
class GraphWriteResult:
    """What :meth:`GraphStore.write_batch` did.

    Attributes:
        inserted_ids: ids of objects, links and records that were new, in batch order.
        existing_ids: ids already stored with equal content (skipped), in batch order.
    """

    inserted_ids: tuple[MemoryId, ...] = ()
    existing_ids: tuple[MemoryId, ...] = ()


@attrs.frozen(kw_only=True)
class Tombstone:
    """What stays of a purged memory object: the fact that something was there, without content.

    Written by :meth:`charmem.ports.GraphStore.erase` (``charmem.admin.purge``). References to the
    id in other memories (a derived memory's sources, a record's ``related_ids``, the ``from`` of
    a kept ``supersedes`` link) then resolve to the tombstone; the id can never be written again.

    Attributes:
        id: the purged object's id.
        object_type: what kind of object it was (no field of it is kept).
        purged_at: when it was purged (timezone-aware).
    """

    id: MemoryId = attrs.field(converter=as_memory_id)
    object_type: ObjectType = attrs.field(converter=ObjectType)
    purged_at: datetime = attrs.field(validator=_fields.aware)


@attrs.frozen(kw_only=True)
class GraphErasure:
    """What one :meth:`charmem.ports.GraphStore.erase` removes, atomically (``charmem.admin.purge``).

    Attributes:
        tombstones: one per object to remove: the object's statements go, the tombstone stays.
        link_ids: links to remove (with, in an RDF store, their direct edges).
        record_ids: lifecycle records to remove.
    """

    tombstones: tuple[Tombstone, ...] = attrs.field(default=(), converter=as_tuple)
    link_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set)
    record_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set)

    def __len__(self) -> int:
        return len(self.tombstones) + len(self.link_ids) + len(self.record_ids)


@attrs.frozen(kw_only=True)
class GraphExport:
    """What :meth:`charmem.ports.GraphStore.export_graph` wrote.

    Attributes:
        media_type: the format of the bytes, e.g. ``"application/n-quads"``; give it back to
            :meth:`~charmem.ports.GraphStore.import_graph`.
        statements: how many statements (triples, or items for a non-RDF store) were written; the
            same number :meth:`~charmem.ports.GraphStore.statement_count` reported then.
    """

    media_type: str
    statements: int
