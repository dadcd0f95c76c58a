"""The write side both graph stores share, free of I/O: checks of batches, erasures, dumps.

Also the settlement of writes that raced (:func:`settle_raced`), which only the SPARQL service
store can hold.

A write is check-then-write under the collection's writer lock: :func:`prepare_batch` before the
store is read, :func:`plan_write` once the stored items, kinds and tombstones among the batch's
ids are known (:meth:`charmem_oxigraph._reads.GraphReader.check_write` reads them), then the
transport stores the N-Triples lines in one transaction.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import attrs
from charmem.domain.graph import GraphBatch, GraphErasure, LifecycleRecord
from charmem.domain.ids import ID_ORDER, MemoryId
from charmem.domain.model import MemoryLink
from charmem.domain.rules import content_equal
from charmem.errors import BackupFormatError, IdConflictError, PurgedMemoryError, with_article
from pyoxigraph import Literal, NamedNode, Quad

from charmem_oxigraph import _queries as q
from charmem_oxigraph import _vocab as v
from charmem_oxigraph._codec import (
    ENDPOINT_KINDS,
    RECORD,
    CorruptNodeError,
    NodeTriples,
    StoredItem,
    decode_item,
    encode_item,
    normalise_for_comparison,
    record_canonical,
    referenced_ids,
)
from charmem_oxigraph._layout import check_dump_layout

__all__ = [
    "PreparedBatch",
    "Settlement",
    "check_dump",
    "check_media_type",
    "erase_update",
    "plan_write",
    "prepare_batch",
    "settle_raced",
    "unstored_endpoints",
    "winning_record",
]


def _same_content(stored: StoredItem, new: StoredItem) -> bool:
    if type(stored) is not type(new):
        return False
    if isinstance(stored, LifecycleRecord) or isinstance(new, LifecycleRecord):
        return (
            isinstance(stored, LifecycleRecord)
            and isinstance(new, LifecycleRecord)
            and record_canonical(stored) == record_canonical(new)
        )
    return content_equal(normalise_for_comparison(stored), normalise_for_comparison(new))


def _kind(item: StoredItem) -> str:
    return v.KIND_OF_CLASS[type(item)]


@attrs.frozen
class PreparedBatch:
    """The check half of ``write_batch`` before the store is read.

    Attributes:
        items: each id of the batch once, with its first item, in batch order.
        reasons: conflicts found inside the batch itself (id -> reasons).
        lookup: every id to look up in the store: the batch's ids, then the ids they reference.
    """

    items: dict[MemoryId, StoredItem]
    reasons: dict[str, list[str]]
    lookup: list[MemoryId]


def prepare_batch(batch: GraphBatch) -> PreparedBatch:
    """Deduplicate a batch and list the ids whose stored nodes the write must see.

    Args:
        batch: objects, links and lifecycle records.

    Returns:
        PreparedBatch: the unique items, in-batch conflicts and the ids to look up.
    """
    reasons: dict[str, list[str]] = {}
    items: dict[MemoryId, StoredItem] = {}
    for item in (*batch.objects, *batch.links, *batch.records):
        first = items.setdefault(item.id, item)
        if first is not item and not _same_content(first, item):
            reasons.setdefault(str(item.id), []).append(
                "the batch holds this id twice with different content"
            )
    references = {ref for item in items.values() for ref in referenced_ids(item)} - items.keys()
    return PreparedBatch(items, reasons, [*items, *sorted(references, key=ID_ORDER)])


def plan_write(
    prepared: PreparedBatch,
    stored: Mapping[MemoryId, StoredItem],
    stored_kinds: Mapping[MemoryId, str],
    purged: set[MemoryId] | None = None,
) -> tuple[list[MemoryId], list[MemoryId], list[str]]:
    """Compare a prepared batch with what is stored and build the triples of the new items.

    Args:
        prepared: from :func:`prepare_batch`.
        stored: the stored items among the batch's ids (decoded:
            :func:`charmem_oxigraph._logic.decode_nodes`).
        stored_kinds: the stored kind of every id of ``prepared.lookup`` that is stored (ids
            the batch references resolve to their stored node's IRI).
        purged: the tombstoned ids among ``prepared.lookup`` (:func:`charmem_oxigraph._logic.read_lookup`).

    Returns:
        tuple: (inserted ids, ids already stored with equal content, N-Triples lines to write
        into the collection's graph: :func:`charmem_oxigraph._codec.encode_item` of each inserted
        item, then a ``vocab:unstoredEndpoint`` mark per :func:`unstored_endpoints`), ids in batch
        order.

    Raises:
        PurgedMemoryError: an id of the batch was purged; nothing may be written.
        IdConflictError: an id is stored (as any kind) or repeated in the batch with different
            content; nothing may be written.
    """
    refused = sorted(str(memory_id) for memory_id in prepared.items if memory_id in (purged or ()))
    if refused:
        raise PurgedMemoryError(
            f"{len(refused)} id(s) of the batch were purged and cannot be written again, e.g. "
            f"{refused[0]}; nothing was written",
            ids=refused,
        )
    reasons = {key: list(value) for key, value in prepared.reasons.items()}
    inserted: list[MemoryId] = []
    existing: list[MemoryId] = []
    for memory_id, item in prepared.items.items():
        old = stored.get(memory_id)
        if old is None:
            inserted.append(memory_id)
        elif _same_content(old, item):
            existing.append(memory_id)
        elif _kind(old) != _kind(item):
            reasons.setdefault(str(memory_id), []).append(
                f"id {memory_id} is already stored as {with_article(_kind(old))}, "
                f"not {with_article(_kind(item))}; ids are unique across objects, links and records"
            )
        else:
            reasons.setdefault(str(memory_id), []).append(
                f"{_kind(item)} {memory_id} is already stored with different content"
            )
    if reasons:
        raise IdConflictError(
            f"{len(reasons)} id(s) of the batch are already stored with different content; "
            "nothing was written. Use new ids, or replay exactly the stored content",
            ids=sorted(reasons),
            reasons=reasons,
        )
    known = {memory_id: _kind(item) for memory_id, item in prepared.items.items()}
    resolved: dict[tuple[MemoryId, str | None], str] = {}

    def resolve(memory_id: MemoryId, declared: str | None) -> str:
        term = resolved.get((memory_id, declared))
        if term is None:
            kind = known.get(memory_id) or stored_kinds.get(memory_id) or declared or "object"
            term = resolved[memory_id, declared] = f"<{v.node_iri(kind, memory_id)}>"
        return term

    lines = [line for memory_id in inserted for line in encode_item(prepared.items[memory_id], resolve)]
    mark = f"<{v.VOCAB}{v.UNSTORED_ENDPOINT}>"
    lines += [
        f"<{v.node_iri('link', link)}> {mark} <{iri}> ."
        for link, iri in unstored_endpoints(prepared, inserted, stored_kinds)
    ]
    return inserted, existing, lines


def unstored_endpoints(
    prepared: PreparedBatch, inserted: Sequence[MemoryId], stored_kinds: Mapping[MemoryId, str]
) -> list[tuple[MemoryId, str]]:
    """The endpoints the inserted links name before they are stored, as (link id, endpoint IRI).

    An endpoint neither in the batch nor stored is named by the kind the link's relation declares
    for that side, else ``object`` (:func:`plan_write`), which may not be the kind it is stored as
    later; the link then carries ``<link> vocab:unstoredEndpoint <that IRI>``, so a read knows
    that every other link names each endpoint by its stored kind
    (:func:`charmem_oxigraph._iris.endpoint_iris`).

    Args:
        prepared: from :func:`prepare_batch`.
        inserted: the ids :func:`plan_write` inserts.
        stored_kinds: as :func:`plan_write` takes it (every stored id the batch references).

    Returns:
        list[tuple[MemoryId, str]]: in batch order, from before to.
    """
    found: list[tuple[MemoryId, str]] = []
    for memory_id in inserted:
        link = prepared.items[memory_id]
        if not isinstance(link, MemoryLink):
            continue
        declared = ENDPOINT_KINDS.get(link.relation, (None, None))
        for end, kind in zip((link.from_id, link.to_id), declared, strict=True):
            if end not in prepared.items and end not in stored_kinds:
                found.append((memory_id, v.node_iri(kind or "object", end)))
    return found


def erase_update(graph: NamedNode, erasure: GraphErasure, already: set[MemoryId]) -> str | None:
    """The SPARQL update applying ``erasure`` (``None``: nothing to do).

    Args:
        graph: the collection's named graph.
        erasure: tombstones, link ids and record ids.
        already: ids that are tombstones already (skipped: an erasure can be applied again).

    Returns:
        str | None: one update request (:func:`charmem_oxigraph._queries.erase`).
    """
    tombstones = [t for t in erasure.tombstones if t.id not in already]
    if not (tombstones or erasure.link_ids or erasure.record_ids):
        return None
    objects = [v.node_iri(t.object_type.value, t.id) for t in tombstones]
    tombstone_class, purged_at = f"<{v.TOMBSTONE_CLASS}>", f"<{v.VOCAB}{v.PURGED_AT}>"
    datetime_type = NamedNode(v.XSD + "dateTime")
    lines = [
        line
        for t, iri in zip(tombstones, objects, strict=True)
        for line in (
            f"<{iri}> <{v.RDF_TYPE}> {tombstone_class} .",
            f"<{iri}> {purged_at} {Literal(t.purged_at.isoformat(), datatype=datetime_type)} .",
        )
    ]
    return q.erase(
        graph.value,
        objects,
        [v.node_iri("link", i) for i in erasure.link_ids],
        [v.node_iri("record", i) for i in erasure.record_ids],
        lines,
    )


def check_media_type(media_type: str) -> None:
    """Refuse a dump format the Oxigraph graph stores do not read.

    Raises:
        BackupFormatError: ``media_type`` is not :data:`charmem_oxigraph._vocab.DUMP_MEDIA_TYPE`.
    """
    if media_type != v.DUMP_MEDIA_TYPE:
        raise BackupFormatError(
            f"Oxigraph graph stores read {v.DUMP_MEDIA_TYPE!r} dumps, not {media_type!r}; restore the "
            "backup into the kind of graph store that made it"
        )


def check_dump(quads: Iterable[Quad], graph: NamedNode) -> Iterator[Quad]:
    """Pass ``quads`` through, refusing any outside the collection's named graph.

    Raises:
        BackupFormatError: a quad belongs to another graph (a dump of another collection), or the
            dump records a layout version this charmem does not read
            (:func:`charmem_oxigraph._layout.check_dump_layout`).
    """
    version = NamedNode(v.VOCAB + v.LAYOUT_VERSION)
    for quad in quads:
        if quad.predicate == version:
            check_dump_layout(quad.object)
        if quad.graph_name != graph:
            raise BackupFormatError(
                f"the dump holds statements of graph {quad.graph_name}, not of this collection's graph "
                f"{graph.value}; restore a backup into the collection it was made from"
            )
        yield quad


@attrs.frozen
class Settlement:
    """How one id stored with several records (writers that raced) is settled.

    Attributes:
        id: the id.
        kept: the record literal kept (:func:`winning_record`); ``None`` when none decodes.
        delete: N-Triples lines to delete: every triple a losing record's item produces that the
            kept one does not (RDF graphs are sets: a triple both produce stays).
    """

    id: MemoryId
    kept: str | None
    delete: tuple[str, ...]


def winning_record(records: Sequence[str]) -> str:
    """The record literal that wins among an id's records: the lowest SHA-256 of its text.

    A rule every process computes alike from what is stored, whatever order it reads it in.

    Args:
        records: the record literals' texts (at least one).

    Returns:
        str: the winner.
    """
    return min(records, key=lambda text: (hashlib.sha256(text.encode("utf-8")).digest(), text))


def settle_raced(node: NodeTriples) -> Settlement:
    """Settle a node holding several record literals: keep the winner, list the losers' triples.

    Each record is decoded on its own (the compact layout derives every triple of an item from
    its record), re-encoded with the IRIs the node's own references use, and the losers' lines
    the winner does not produce are the ones to delete. A record that does not decode loses.

    Args:
        node: every triple of the node (:func:`charmem_oxigraph._logic.group_rows`).

    Returns:
        Settlement: what to keep and delete.
    """
    records = {term.value: term for term in node.props.get(v.VOCAB + RECORD, ())}
    items = _decode_each(node, records)
    kept = winning_record(list(items)) if items else None
    resolve = _resolver(node)
    winner = set(encode_item(items[kept], resolve)) if kept is not None else set()
    losing = {line for text, item in items.items() if text != kept for line in encode_item(item, resolve)}
    undecodable = [
        f"<{node.iri}> <{v.VOCAB}{RECORD}> {records[text]} ." for text in records if text not in items
    ]
    return Settlement(v.memory_id_of(node.iri), kept, (*sorted(losing - winner), *undecodable))


def _decode_each(node: NodeTriples, records: Mapping[str, object]) -> dict[str, StoredItem]:
    """Each record literal of ``node`` decoded alone (by its text; one that does not decode is left out)."""
    items: dict[str, StoredItem] = {}
    for text, term in records.items():
        one = NodeTriples(node.iri)
        for cls in node.props.get(v.RDF_TYPE, ()):
            one.add(v.RDF_TYPE, cls)
        one.add(v.VOCAB + RECORD, term)
        try:
            items[text] = decode_item(one)
        except CorruptNodeError:
            continue
    return items


def _resolver(node: NodeTriples) -> Callable[[MemoryId, str | None], str]:
    """Map a referenced id to the IRI term ``node``'s own triples use for it (else its declared kind's)."""
    references = {
        term.value[-36:]: term.value
        for terms in node.props.values()
        for term in terms
        if isinstance(term, NamedNode) and v.NODE_IRI.fullmatch(term.value)
    }

    def resolve(memory_id: MemoryId, declared: str | None) -> str:
        return f"<{references.get(str(memory_id)) or v.node_iri(declared or 'object', memory_id)}>"

    return resolve
