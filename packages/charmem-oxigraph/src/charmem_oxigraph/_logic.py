"""What both graph stores do with query rows, free of I/O (embedded pyoxigraph and SPARQL service).

The embedded store (:mod:`charmem_oxigraph._store`) and the SPARQL 1.1 service store
(:mod:`charmem_oxigraph._service`) run the same SPARQL text (:mod:`charmem_oxigraph._queries`) and
get the same rows back (pyoxigraph ``QuerySolution`` values: the service store parses the
protocol's JSON results with :func:`pyoxigraph.parse_query_results`). Everything between a query
and the port's answer lives here once: grouping rows into nodes, decoding, currency, and the
check half of a check-then-write.
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import attrs
from charmem.domain.currency import currency_status
from charmem.domain.graph import GraphBatch, GraphErasure, LifecycleRecord, Tombstone
from charmem.domain.ids import ID_ORDER, MemoryId
from charmem.domain.model import MemoryLink, MemoryObject, ObjectType, Relation
from charmem.domain.retrieval import CurrencyStatus
from charmem.domain.rules import content_equal
from charmem.errors import BackupFormatError, IdConflictError, PurgedMemoryError
from charmem.ports import EpisodeTurn
from pyoxigraph import Literal, NamedNode, Quad

from charmem_oxigraph import _queries as q
from charmem_oxigraph import _vocab as v
from charmem_oxigraph._cache import PURGED, CurrencyFacts
from charmem_oxigraph._codec import (
    ENDPOINT_KINDS,
    CorruptNodeError,
    NodeTriples,
    StoredItem,
    decode_item,
    encode_item,
    kind_of_node,
    normalise_for_comparison,
    record_canonical,
    reference_kinds,
    referenced_ids,
)

__all__ = [
    "BY_LINK_ID",
    "STORED_KINDS",
    "PreparedBatch",
    "census_from_rows",
    "check_as_of",
    "check_dump",
    "check_media_type",
    "class_iris",
    "count_from_rows",
    "currency_from_facts",
    "currency_iris",
    "decode_nodes",
    "early_from_rows",
    "endpoint_iris",
    "episode_turn_iris",
    "erase_update",
    "facts_from_rows",
    "group_rows",
    "ids_from_rows",
    "iris",
    "kind_hints",
    "lifecycle_size",
    "links_and_hints",
    "links_from_rows",
    "links_only",
    "names_from_rows",
    "node_iris",
    "nodes_from_rows",
    "objects_only",
    "plan_write",
    "prepare_batch",
    "read_lookup",
    "records_from_rows",
    "relation_iris",
    "retry_iris",
    "suppress_from_rows",
    "tombstones_from_rows",
    "turns_from_rows",
    "unique",
]

#: A query row: a pyoxigraph ``QuerySolution`` (indexable by position and by variable name).
Row = Any

#: Kinds an id of a batch item may already be stored as (ids are unique across all of them).
STORED_KINDS: Final = (*v.OBJECT_KINDS, "link", "record")
_OBJECT_CLASSES: Final = frozenset(iri for iri, kind in v.ITEM_CLASSES.items() if kind in v.OBJECT_KINDS)


#: Sort key ordering links by id (a MemoryId orders as its UUID's integer), compared in C.
BY_LINK_ID: Final = operator.attrgetter("id.value.int")


def unique(ids: Iterable[MemoryId]) -> list[MemoryId]:
    """``ids`` without repeats, first occurrence order."""
    return list(dict.fromkeys(ids))


def iris(ids: Iterable[MemoryId], kinds: Sequence[str]) -> list[str]:
    """Every IRI ``urn:charmem:<kind>:<id>`` an id may be stored or referenced under."""
    return [v.node_iri(kind, memory_id) for memory_id in ids for kind in kinds]


def node_iris(ids: Iterable[MemoryId], known: Mapping[MemoryId, str], kinds: Sequence[str]) -> list[str]:
    """The IRIs a stored node of each id may have: its own when its kind is known, else every kind.

    A stored node's subject IRI always carries its stored kind, so one IRI per known id suffices.

    Args:
        ids: ids to look up.
        known: stored kinds already known (:meth:`GraphCache.kinds`).
        kinds: the kinds an id of unknown kind may be stored as.
    """
    return [
        v.node_iri(kind, memory_id)
        for memory_id in ids
        for kind in ((known[memory_id],) if memory_id in known else kinds)
    ]


def kind_hints(types: Mapping[MemoryId, ObjectType]) -> dict[MemoryId, str]:
    """The stored kinds ``types`` suggest (:class:`charmem.ports.ObjectTypeHints`).

    An object type's value is the ``<kind>`` segment of its node IRI, so a read of such an id
    binds one IRI; a wrong hint is retried under every other kind (:func:`retry_iris`).

    Raises:
        ValueError: a value is not an :class:`~charmem.domain.model.ObjectType`.
    """
    return {memory_id: ObjectType(object_type).value for memory_id, object_type in types.items()}


def retry_iris(missed: Iterable[MemoryId], hinted: Mapping[MemoryId, str], kinds: Sequence[str]) -> list[str]:
    """The IRIs left to try for ids not found under their hinted kind: every other kind.

    Args:
        missed: ids read under ``hinted[id]`` and not found.
        hinted: the kind each was read under (:meth:`GraphCache.hints`).
        kinds: the kinds an id of unknown kind may be stored as.
    """
    return [
        v.node_iri(kind, memory_id) for memory_id in missed for kind in kinds if kind != hinted[memory_id]
    ]


#: Kinds a reference declares for an endpoint (relation table) or a field; an id referenced before
#: it was stored carries one of these, or ``object`` when nothing declares its kind.
_DECLARED_ENDPOINT_KINDS: Final[dict[Relation, tuple[str, ...]]] = {
    relation: tuple(dict.fromkeys(kind for kind in ENDPOINT_KINDS.get(relation, ()) if kind is not None))
    for relation in Relation
}


def currency_iris(ids: Iterable[MemoryId], known: Mapping[MemoryId, str]) -> list[str]:
    """The IRIs under which currency facts about each id may be stored.

    The ``rdf:type`` sits on the node's own IRI; a ``suppress`` record's target and a
    ``supersedes`` link's ``to`` declare no kind, so a reference written before the id was stored
    carries ``object``. An id of known kind therefore needs two IRIs; an unknown one every object
    kind plus ``object`` (links and records have no currency).
    """
    return [
        v.node_iri(kind, memory_id)
        for memory_id in ids
        for kind in ((known[memory_id], "object") if memory_id in known else (*v.OBJECT_KINDS, "object"))
    ]


def endpoint_iris(
    ids: Iterable[MemoryId], known: Mapping[MemoryId, str], relations: Sequence[Relation] | None
) -> list[str]:
    """The IRIs a link of ``relations`` (``None``: any) may use for each endpoint id.

    A link refers to an endpoint by the endpoint's stored kind when it was known at write time,
    else by the kind its relation declares for that side, else ``object``; an id of unknown kind
    may be any node kind.
    """
    declared: dict[str, None] = {}
    for relation in Relation if relations is None else relations:
        declared.update(dict.fromkeys(_DECLARED_ENDPOINT_KINDS[Relation(relation)]))
    return [
        v.node_iri(kind, memory_id)
        for memory_id in ids
        for kind in (
            tuple(dict.fromkeys((known[memory_id], "object", *declared)))
            if memory_id in known
            else v.NODE_KINDS
        )
    ]


def episode_turn_iris(ids: Iterable[MemoryId], known: Mapping[MemoryId, str]) -> list[str]:
    """The IRIs the ``vocab:from`` of a ``has_observation`` link from each episode id may carry.

    The same as :func:`endpoint_iris` for that relation (:func:`charmem_oxigraph._queries.episode_turns`).
    """
    return endpoint_iris(ids, known, (Relation.HAS_OBSERVATION,))


def turns_from_rows(rows: Iterable[Row]) -> dict[MemoryId, list[EpisodeTurn]]:
    """Turns by episode from :func:`charmem_oxigraph._queries.episode_turns` rows.

    A row counts when the link's ``from`` and the observation's ``episode`` carry the same id
    (the contract of :meth:`charmem.ports.EpisodeTurnReader.episode_turns`).

    Raises:
        CorruptNodeError: an IRI or an instant is not valid.
    """
    turns: dict[MemoryId, list[EpisodeTurn]] = {}
    try:
        for episode_term, _link, observation, own_episode, observed_at, created_at in rows:
            episode_id = v.memory_id_of(episode_term.value)
            if v.memory_id_of(own_episode.value) != episode_id:
                continue
            turns.setdefault(episode_id, []).append(
                EpisodeTurn(
                    observation_id=v.memory_id_of(observation.value),
                    observed_at=datetime.fromisoformat(observed_at.value),
                    created_at=datetime.fromisoformat(created_at.value),
                )
            )
    except ValueError as exc:
        raise CorruptNodeError(f"a stored turn is not valid: {exc}") from exc
    return turns


def relation_iris(relations: Sequence[Relation] | None) -> list[str] | None:
    """The property IRIs of ``relations`` (``None`` stays ``None``: every relation)."""
    if relations is None:
        return None
    return [v.relation_iri(Relation(relation)) for relation in dict.fromkeys(relations)]


def class_iris(object_types: Sequence[ObjectType] | None) -> list[str]:
    """The RDF classes of ``object_types`` (``None``: every object class)."""
    kinds = v.OBJECT_KINDS if object_types is None else [ObjectType(t).value for t in object_types]
    return [v.VOCAB + v.CLASS_OF_KIND[kind] for kind in kinds]


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


def nodes_from_rows(rows: Iterable[Row]) -> dict[MemoryId, NodeTriples]:
    """Group the rows of :func:`charmem_oxigraph._queries.nodes` into stored nodes by id.

    Args:
        rows: ``(?root, ?a, ?p, ?o)`` rows.

    Returns:
        dict[MemoryId, NodeTriples]: the nodes that are stored items (a node with only edge
        triples, from an id referenced before it was stored, and a tombstone are left out).

    Raises:
        CorruptNodeError: an id is stored under two kinds.
    """
    return read_lookup(rows)[0]


def read_lookup(rows: Iterable[Row]) -> tuple[dict[MemoryId, NodeTriples], set[MemoryId]]:
    """:func:`nodes_from_rows`, plus the ids among the rows' nodes that are tombstones (purged).

    Raises:
        CorruptNodeError: an id is stored under two kinds.
    """
    by_iri: dict[str, NodeTriples] = {}
    # Rows are (?root, ?a, ?p, ?o); positional access is several times faster than by name.
    for root_term, assertion, predicate, obj in rows:
        root = root_term.value
        node = by_iri.get(root)
        if node is None:
            node = by_iri[root] = NodeTriples(root)
        if assertion is None:
            node.add(predicate.value, obj)
        else:
            node.add_assertion(assertion.value, predicate.value, obj)
    found: dict[MemoryId, NodeTriples] = {}
    purged: set[MemoryId] = set()
    for iri, node in by_iri.items():
        if kind_of_node(node) is None:  # edge triples of a not-yet-stored id, or a tombstone
            if any(t.value == v.TOMBSTONE_CLASS for t in node.props.get(v.RDF_TYPE, ())):
                purged.add(v.memory_id_of(iri))
            continue
        memory_id = v.memory_id_of(iri)
        if memory_id in found:
            raise CorruptNodeError(f"id {memory_id} is stored under two kinds")
        found[memory_id] = node
    return found, purged


def _uuid_int(iri: str) -> int:
    match = v.NODE_IRI.fullmatch(iri)
    if match is None:
        raise CorruptNodeError(f"{iri!r} is not a charmem node IRI")
    return uuid.UUID(match.group(2)).int


def census_from_rows(rows: Iterable[Row]) -> dict[int, str]:
    """The census from :func:`charmem_oxigraph._queries.census` rows.

    Returns:
        dict[int, str]: UUID integer -> stored kind, or :data:`charmem_oxigraph._cache.PURGED`
        for a tombstone (the query lets only item classes and the tombstone class through).

    Raises:
        CorruptNodeError: an IRI is not a node IRI, or an id is typed as two kinds.
    """
    census: dict[int, str] = {}
    for node, cls in rows:
        kind = v.ITEM_CLASSES.get(cls.value, PURGED)
        key = _uuid_int(node.value)
        if census.setdefault(key, kind) != kind:
            raise CorruptNodeError(f"id {uuid.UUID(int=key)} is stored under two kinds")
    return census


def early_from_rows(rows: Iterable[Row]) -> set[int]:
    """The UUID integers of :func:`charmem_oxigraph._queries.early_references` rows.

    Raises:
        CorruptNodeError: an IRI is not a node IRI.
    """
    return {_uuid_int(row[0].value) for row in rows}


def group_rows(rows: Iterable[Row]) -> list[NodeTriples]:
    """Group ``(?subject, ?p, ?o)`` rows into one node per subject, first occurrence order."""
    nodes: dict[str, NodeTriples] = {}
    for subject_term, predicate, obj in rows:
        iri = subject_term.value
        node = nodes.get(iri)
        if node is None:
            node = nodes[iri] = NodeTriples(iri)
        node.add(predicate.value, obj)
    return list(nodes.values())


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
        stored: the stored items among the batch's ids (decoded, :func:`decode_nodes`).
        stored_kinds: the stored kind of every id of ``prepared.lookup`` that is stored (ids
            the batch references resolve to their stored node's IRI).
        purged: the tombstoned ids among ``prepared.lookup`` (:func:`read_lookup`).

    Returns:
        tuple: (inserted ids, ids already stored with equal content, N-Triples lines to write
        into the collection's graph, :func:`charmem_oxigraph._codec.encode_item`), ids in batch
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
                f"id {memory_id} is already stored as a {_kind(old)}, not a {_kind(item)}; "
                "ids are unique across objects, links and records"
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
    return inserted, existing, lines


def decode_nodes(nodes: Mapping[MemoryId, NodeTriples]) -> dict[MemoryId, StoredItem]:
    """Decode stored nodes (:func:`nodes_from_rows`) into objects, links and records.

    Raises:
        CorruptNodeError: a node does not decode.
    """
    return {memory_id: decode_item(node) for memory_id, node in nodes.items()}


def objects_only(
    wanted: Sequence[MemoryId], items: Mapping[MemoryId, StoredItem]
) -> dict[MemoryId, MemoryObject]:
    """The memory objects among ``items``, in ``wanted`` order (links and records left out)."""
    found: dict[MemoryId, MemoryObject] = {}
    for memory_id in wanted:
        item = items.get(memory_id)
        if item is not None and not isinstance(item, (MemoryLink, LifecycleRecord)):
            found[memory_id] = item
    return found


def links_only(
    wanted: Sequence[MemoryId], items: Mapping[MemoryId, StoredItem]
) -> dict[MemoryId, MemoryLink]:
    """The links among ``items``, in ``wanted`` order."""
    found: dict[MemoryId, MemoryLink] = {}
    for memory_id in wanted:
        item = items.get(memory_id)
        if isinstance(item, MemoryLink):
            found[memory_id] = item
    return found


def records_from_rows(rows: Iterable[Row]) -> list[LifecycleRecord]:
    """Lifecycle records from :func:`charmem_oxigraph._queries.records_about` rows.

    Returns:
        list[LifecycleRecord]: ordered by (``recorded_at``, ``id``).

    Raises:
        CorruptNodeError: a record does not decode.
    """
    items = [decode_item(node) for node in group_rows(rows)]
    records = [item for item in items if isinstance(item, LifecycleRecord)]
    return sorted(records, key=lambda record: (record.recorded_at, record.id))


def links_from_rows(rows: Iterable[Row]) -> list[MemoryLink]:
    """Links from :func:`charmem_oxigraph._queries.links_of` rows, ordered by link id.

    Raises:
        CorruptNodeError: a link does not decode.
    """
    return links_and_hints(rows)[0]


def links_and_hints(rows: Iterable[Row]) -> tuple[list[MemoryLink], dict[MemoryId, str]]:
    """:func:`links_from_rows`, plus the kinds the links' endpoint IRIs carry (kind hints).

    Raises:
        CorruptNodeError: a link does not decode.
    """
    nodes = group_rows(rows)
    links = [item for item in (decode_item(node) for node in nodes) if isinstance(item, MemoryLink)]
    return sorted(links, key=BY_LINK_ID), reference_kinds(nodes)


def facts_from_rows(wanted: Sequence[MemoryId], rows: Iterable[Row]) -> dict[MemoryId, CurrencyFacts]:
    """Currency facts of every id of ``wanted`` from :func:`charmem_oxigraph._queries.currency` rows.

    Args:
        wanted: the ids asked about (each gets facts, ``stored=False`` when it is no object).
        rows: rows binding ``?x`` and one of ``?c``, ``?rt``, ``?lt``.

    Raises:
        ValueError: a stored instant is not a valid ``xsd:dateTime``.
    """
    stored: set[MemoryId] = set()
    suppressed: dict[MemoryId, list[datetime]] = {}
    superseded: dict[MemoryId, list[datetime]] = {}
    for row in rows:
        memory_id = v.memory_id_of(row["x"].value)
        cls, recorded, created = row["c"], row["rt"], row["lt"]
        if cls is not None:
            if cls.value in _OBJECT_CLASSES:
                stored.add(memory_id)
        elif recorded is not None:
            suppressed.setdefault(memory_id, []).append(datetime.fromisoformat(recorded.value))
        elif created is not None:
            superseded.setdefault(memory_id, []).append(datetime.fromisoformat(created.value))
    return {
        memory_id: CurrencyFacts(
            memory_id in stored,
            tuple(suppressed.get(memory_id, ())),
            tuple(superseded.get(memory_id, ())),
        )
        for memory_id in wanted
    }


def currency_from_facts(
    wanted: Sequence[MemoryId], facts: Mapping[MemoryId, CurrencyFacts], as_of: datetime | None
) -> dict[MemoryId, CurrencyStatus]:
    """Currency of the stored objects among ``wanted``, as of a record time.

    The rule is :func:`charmem.domain.currency.currency_status`; this only picks the facts.

    Args:
        wanted: the ids asked about, in request order.
        facts: their currency facts (:func:`facts_from_rows`).
        as_of: record time of the view, or ``None``: every record and link counts.

    Returns:
        dict[MemoryId, CurrencyStatus]: one status per stored object among ``wanted``;
        suppressed beats superseded.
    """
    statuses: dict[MemoryId, CurrencyStatus] = {}
    for memory_id in wanted:
        found = facts.get(memory_id)
        if found is not None and found.stored:
            statuses[memory_id] = currency_status(
                suppressed_at=found.suppressed_at, superseded_at=found.superseded_at, as_of=as_of
            )
    return statuses


def suppress_from_rows(rows: Iterable[Row]) -> list[tuple[MemoryId, datetime]]:
    """(target id, ``recordedAt``) of :func:`charmem_oxigraph._queries.suppress_instants` rows.

    Raises:
        ValueError: a target is not a node IRI, or an instant not a valid ``xsd:dateTime``.
    """
    return [(v.memory_id_of(target.value), datetime.fromisoformat(at.value)) for target, at in rows]


def lifecycle_size(rows: Sequence[Row]) -> int:
    """``?links`` + ``?records`` of :func:`charmem_oxigraph._queries.lifecycle_count` (0 without a row)."""
    return int(rows[0]["links"].value) + int(rows[0]["records"].value) if rows else 0


def count_from_rows(rows: Sequence[Row]) -> int:
    """The ``?n`` of :func:`charmem_oxigraph._queries.statement_count` (0 without a row)."""
    return int(rows[0]["n"].value) if rows else 0


def ids_from_rows(rows: Iterable[Row]) -> list[MemoryId]:
    """The sorted ids of the ``?x`` nodes of :func:`charmem_oxigraph._queries.typed_nodes` rows."""
    return sorted({v.memory_id_of(row["x"].value) for row in rows})


def names_from_rows(rows: Iterable[Row]) -> list[tuple[MemoryId, MemoryId, str]]:
    """Sorted ``(belief_id, subject_id, name)`` from :func:`charmem_oxigraph._queries.name_assertions`."""
    return sorted(
        (v.memory_id_of(row["d"].value), v.memory_id_of(row["s"].value), str(row["name"].value))
        for row in rows
    )


def check_as_of(as_of: datetime | None) -> None:
    """Refuse a naive ``as_of``.

    Raises:
        ValueError: ``as_of`` has no UTC offset.
    """
    if as_of is not None and as_of.utcoffset() is None:
        raise ValueError("as_of must be a timezone-aware datetime")


def tombstones_from_rows(rows: Iterable[Row]) -> dict[MemoryId, Tombstone]:
    """Tombstones from :func:`charmem_oxigraph._queries.tombstones` rows (``?x``, ``?t``), by id.

    Raises:
        CorruptNodeError: a tombstone's IRI or instant is not valid.
    """
    found: dict[MemoryId, Tombstone] = {}
    for row in rows:
        iri = row["x"].value
        try:
            tombstone = Tombstone(
                id=v.memory_id_of(iri),
                object_type=ObjectType(v.kind_of_iri(iri)),
                purged_at=datetime.fromisoformat(row["t"].value),
            )
        except ValueError as exc:  # DraftValidationError is a ValueError
            raise CorruptNodeError(f"tombstone {iri} is not valid: {exc}") from exc
        found[tombstone.id] = tombstone
    return dict(sorted(found.items()))


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
        BackupFormatError: a quad belongs to another graph (a dump of another collection).
    """
    for quad in quads:
        if quad.graph_name != graph:
            raise BackupFormatError(
                f"the dump holds statements of graph {quad.graph_name}, not of this collection's graph "
                f"{graph.value}; restore a backup into the collection it was made from"
            )
        yield quad
