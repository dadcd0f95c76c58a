"""What both graph stores do with query rows, free of I/O (embedded pyoxigraph and SPARQL service).

The embedded store (:mod:`charmem_oxigraph._store`) and the SPARQL 1.1 service store
(:mod:`charmem_oxigraph._service`) run the same SPARQL text (:mod:`charmem_oxigraph._queries`) and
get the same rows back (pyoxigraph ``QuerySolution`` values: the service store parses the
protocol's JSON results with :func:`pyoxigraph.parse_query_results`). Turning rows into the port's
answers lives here once: grouping rows into nodes, decoding, currency facts and currency. Which
IRIs a query binds is :mod:`charmem_oxigraph._iris`; the write side is
:mod:`charmem_oxigraph._writing`; the cached read algorithm is :mod:`charmem_oxigraph._reads`.
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from charmem.domain.currency import currency_status
from charmem.domain.graph import LifecycleRecord, Tombstone
from charmem.domain.ids import MemoryId
from charmem.domain.model import MemoryLink, MemoryObject, ObjectType, Relation
from charmem.domain.retrieval import CurrencyStatus
from charmem.ports import EpisodeTurn

from charmem_oxigraph import _vocab as v
from charmem_oxigraph._cache import PURGED, CurrencyFacts
from charmem_oxigraph._codec import (
    RECORD,
    CorruptNodeError,
    NodeTriples,
    StoredItem,
    decode_item,
    kind_of_node,
    parse_record,
)
from charmem_oxigraph._hints import reference_kinds

__all__ = [
    "BY_LINK_ID",
    "Row",
    "census_from_rows",
    "check_as_of",
    "count_from_rows",
    "currency_from_facts",
    "decode_nodes",
    "early_from_rows",
    "facts_from_rows",
    "group_rows",
    "ids_from_rows",
    "lifecycle_size",
    "link_nodes",
    "links_and_hints",
    "links_only",
    "names_from_rows",
    "node_links_and_hints",
    "nodes_from_rows",
    "objects_only",
    "of_relations",
    "read_lookup",
    "records_from_rows",
    "suppress_from_rows",
    "tombstones_from_rows",
    "turns_from_rows",
]

#: A query row: a pyoxigraph ``QuerySolution`` (indexable by position and by variable name).
Row = Any

_OBJECT_CLASSES: Final = frozenset(iri for iri, kind in v.ITEM_CLASSES.items() if kind in v.OBJECT_KINDS)


#: Characters of a UUID's canonical text, the end of every node IRI.
_UUID_TEXT: Final = 36

#: Sort key ordering links by id (a MemoryId orders as its UUID's integer), compared in C.
BY_LINK_ID: Final = operator.attrgetter("id.value.int")


def turns_from_rows(rows: Iterable[Row]) -> dict[MemoryId, list[EpisodeTurn]]:
    """Turns by episode from :func:`charmem_oxigraph._queries.episode_turns` rows.

    A row counts when the link's ``from`` and the observation's ``episode_id`` carry the same id
    (the contract of :meth:`charmem.ports.EpisodeTurnReader.episode_turns`).

    Raises:
        CorruptNodeError: an IRI, a record or an instant is not valid.
    """
    turns: dict[MemoryId, list[EpisodeTurn]] = {}
    try:
        for episode_term, _link, observation, record in rows:
            episode_iri = episode_term.value
            episode_id = v.memory_id_of(episode_iri)
            data = parse_record(observation.value, record.value)
            # The record holds the id as the writer's canonical text, as the IRI does: equal text
            # is the same id; other text is compared as an id (and fails if it is none).
            stored = data["episode_id"]
            if stored != episode_iri[-_UUID_TEXT:] and MemoryId(stored) != episode_id:
                continue
            turns.setdefault(episode_id, []).append(
                EpisodeTurn(
                    observation_id=v.memory_id_of(observation.value),
                    observed_at=datetime.fromisoformat(data["observed_at"]),
                    created_at=datetime.fromisoformat(data["created_at"]),
                )
            )
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptNodeError(f"a stored turn is not valid: {exc}") from exc
    return turns


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
    return _stored_nodes(by_iri)


def record_lookup(rows: Iterable[Row]) -> tuple[dict[MemoryId, NodeTriples], set[MemoryId]]:
    """:func:`read_lookup` from :func:`charmem_oxigraph._queries.node_records` rows.

    Each node holds its ``rdf:type`` and record literal, all decoding reads; tombstones and
    nodes without both are not in the rows (the caller reads what it missed whole).

    Raises:
        CorruptNodeError: an id is stored under two kinds.
    """
    return _stored_nodes({node.iri: node for node in column_nodes(rows, _RECORD_COLUMNS)})


def _stored_nodes(by_iri: Mapping[str, NodeTriples]) -> tuple[dict[MemoryId, NodeTriples], set[MemoryId]]:
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


def decode_nodes(nodes: Mapping[MemoryId, NodeTriples]) -> dict[MemoryId, StoredItem]:
    """Decode stored nodes (:func:`nodes_from_rows`) into objects, links and records.

    Raises:
        CorruptNodeError: a node does not decode.
    """
    return {memory_id: decode_item(node, memory_id) for memory_id, node in nodes.items()}


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


def links_and_hints(rows: Iterable[Row]) -> tuple[list[MemoryLink], dict[MemoryId, str]]:
    """Links of :func:`charmem_oxigraph._queries.links_of` rows by id, and their endpoints' kinds.

    The kinds are those the links' endpoint IRIs carry (hints, :func:`reference_kinds`).

    Args:
        rows: :func:`charmem_oxigraph._queries.links_of` rows (``?l ?c ?f ?t ?rec``).

    Raises:
        CorruptNodeError: a link does not decode (no record, several values of a field).
    """
    return _links_and_hints(link_nodes(rows))


def of_relations(links: list[MemoryLink], relations: Sequence[Relation] | None) -> list[MemoryLink]:
    """The links among ``links`` whose relation is one of ``relations`` (``None``: all), in order."""
    if relations is None:
        return links
    chosen = frozenset(relations)
    return [link for link in links if link.relation in chosen]


def node_links_and_hints(rows: Iterable[Row]) -> tuple[list[MemoryLink], dict[MemoryId, str]]:
    """:func:`links_and_hints` from ``(?l, ?p, ?o)`` rows: every triple of each link node."""
    return _links_and_hints(group_rows(rows))


def _links_and_hints(nodes: list[NodeTriples]) -> tuple[list[MemoryLink], dict[MemoryId, str]]:
    links = [item for item in (decode_item(node) for node in nodes) if isinstance(item, MemoryLink)]
    return sorted(links, key=BY_LINK_ID), reference_kinds(nodes)


#: The predicates of the columns of a :func:`charmem_oxigraph._queries.links_of` row after ``?l``.
_LINK_COLUMNS: Final = (v.RDF_TYPE, v.VOCAB + "from", v.VOCAB + "to", v.VOCAB + RECORD)


#: The predicates of the columns of a :func:`charmem_oxigraph._queries.node_records` row.
_RECORD_COLUMNS: Final = (v.RDF_TYPE, v.VOCAB + RECORD)


def link_nodes(rows: Iterable[Row]) -> list[NodeTriples]:
    """One node per link of :func:`charmem_oxigraph._queries.links_of` rows, first occurrence order."""
    return column_nodes(rows, _LINK_COLUMNS)


def column_nodes(rows: Iterable[Row], predicates: Sequence[str]) -> list[NodeTriples]:
    """One node per subject of rows ``(?subject, *one column per predicate)``, first occurrence order.

    A node with several values of a column (a damaged node) gives a row per combination; each
    value is kept once, so the decoder sees every value and refuses the node.
    """
    nodes: dict[str, NodeTriples] = {}
    for subject, *columns in rows:  # positional access is several times faster than by name
        iri = subject.value
        node = nodes.get(iri)
        if node is None:
            node = nodes[iri] = NodeTriples(iri)
        props = node.props  # filled inline: a call of NodeTriples.add per value cost a tenth more
        for predicate, term in zip(predicates, columns, strict=True):
            if term is None:
                continue
            values = props.get(predicate)
            if values is None:
                props[predicate] = [term]
            elif term not in values:
                values.append(term)
    return list(nodes.values())


def facts_from_rows(wanted: Sequence[MemoryId], rows: Iterable[Row]) -> dict[MemoryId, CurrencyFacts]:
    """Currency facts of every id of ``wanted`` from :func:`charmem_oxigraph._queries.currency` rows.

    Args:
        wanted: the ids asked about (each gets facts, ``stored=False`` when it is no object).
        rows: rows binding ``?x`` and one of ``?c``, ``?rt``, ``?lt`` (a link's record literal).

    Raises:
        ValueError: a stored instant is not a valid ``xsd:dateTime``, or a link's record holds no
            valid ``created_at`` (:class:`~charmem_oxigraph._codec.CorruptNodeError`).
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
            superseded.setdefault(memory_id, []).append(_created_at(row["x"].value, created.value))
    return {
        memory_id: CurrencyFacts(
            memory_id in stored,
            tuple(suppressed.get(memory_id, ())),
            tuple(superseded.get(memory_id, ())),
        )
        for memory_id in wanted
    }


def _created_at(iri: str, record: str) -> datetime:
    try:
        return datetime.fromisoformat(parse_record(iri, record)["created_at"])
    except (KeyError, TypeError) as exc:
        raise CorruptNodeError(f"a supersedes link to {iri} has no valid created_at") from exc


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
