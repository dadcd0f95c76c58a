"""The SPARQL text of every read (one query per port call, ids bound with ``VALUES``) and update.

Only IRIs reach the query text, each checked by :func:`charmem_oxigraph._vocab.iri_ref`: vocabulary
constants, the collection's graph IRI (a validated collection name) and node IRIs built from
UUIDs. Memory text never does. The ``VALUES`` block sits inside the same group as the patterns it
binds (inside ``GRAPH <g> { ... }``, and inside each ``UNION`` branch), which lets Oxigraph start
from the bound ids (measured ~800x faster than a ``VALUES`` outside the graph group).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Sequence
from typing import Final

from charmem.domain.graph import LifecycleAction
from charmem.domain.ids import MemoryId

from charmem_oxigraph import _vocab as v

__all__ = [
    "any_statement",
    "census",
    "character",
    "construct_all",
    "currency",
    "delete_data",
    "early_references",
    "episode_turns",
    "erase",
    "insert_data",
    "layout_version",
    "lifecycle_count",
    "links_of",
    "migrate",
    "name_assertions",
    "node_records",
    "nodes",
    "raced_nodes",
    "records_about",
    "statement_count",
    "superseding_links",
    "suppress_instants",
    "tombstones",
    "typed_nodes",
    "unmarked_endpoints",
    "unmigrated",
    "unstored_endpoints",
    "version_update",
]


def _values(variable: str, iris: Iterable[str]) -> str:
    return f"VALUES ?{variable} {{ {' '.join(v.iri_ref(iri) for iri in iris)} }}"


def _p(local_name: str) -> str:
    return v.iri_ref(v.VOCAB + local_name)


def nodes(graph: str, iris: Iterable[str], *, assertions: bool = False) -> str:
    """Every triple of the nodes ``iris`` (and, with ``assertions``, of their assertion nodes).

    Rows: ``?root ?p ?o`` for the node itself (``?a`` unbound), ``?root ?a ?p ?o`` for a triple of
    its assertion node ``?a``. The compact layout holds assertions in the record literal, so only
    the layout-1 decoder (``charmem migrate``) asks for them; that branch binds only the
    ``urn:charmem:derived:`` IRIs (each binding costs a lookup, also for absent ids).
    """
    every = list(iris)
    derived = [iri for iri in every if iri.startswith(_DERIVED_PREFIX)] if assertions else []
    branch = (
        f"UNION {{ {_values('root', derived)} ?root {_p('assertion')} ?a . ?a ?p ?o }} " if derived else ""
    )
    return (
        f"SELECT ?root ?a ?p ?o WHERE {{ GRAPH {v.iri_ref(graph)} {{ "
        f"{{ {_values('root', every)} ?root ?p ?o }} {branch}}} }}"
    )


def node_records(graph: str, iris: Iterable[str]) -> str:
    """The ``rdf:type`` (``?c``) and record literal (``?rec``) of the nodes ``iris`` (``?root``).

    All that decoding an item reads, in one row per node (:func:`nodes` reads every triple: 3 rows
    for an observation). A tombstone, or a node without a type or a record, gives no row.
    """
    return (
        f"SELECT ?root ?c ?rec WHERE {{ GRAPH {v.iri_ref(graph)} {{ {_values('root', iris)} "
        f"?root {_p('record')} ?rec . ?root a ?c }} }}"
    )


#: ``urn:charmem:derived:``, the start of every derived memory's IRI.
_DERIVED_PREFIX = v.node_iri("derived", MemoryId(uuid.UUID(int=0))).removesuffix(str(uuid.UUID(int=0)))


def records_about(graph: str, target_iris: Iterable[str]) -> str:
    """Every triple of the lifecycle records whose ``vocab:target`` is one of ``target_iris``."""
    return (
        f"SELECT ?r ?p ?o WHERE {{ GRAPH {v.iri_ref(graph)} {{ {_values('t', target_iris)} "
        f"?r {_p('target')} ?t . ?r ?p ?o }} }}"
    )


def links_of(
    graph: str, from_iris: Iterable[str], to_iris: Iterable[str], relation_iris: Iterable[str] | None
) -> str:
    """The link nodes with ``vocab:from`` in ``from_iris`` or ``vocab:to`` in ``to_iris``, a row each.

    Rows bind ``?l`` (the link), ``?c`` (its ``rdf:type``), ``?f`` and ``?t`` (its endpoint IRIs)
    and ``?rec`` (its record literal, which holds every field): one row per link, where reading
    every triple of the node gave five (a cold read costs per row). ``?c`` and ``?rec`` are
    optional so that a damaged link still reaches the decoder, which names it.

    Args:
        graph: the collection's graph IRI.
        from_iris: IRIs a link's ``vocab:from`` may carry.
        to_iris: IRIs a link's ``vocab:to`` may carry.
        relation_iris: only links whose ``vocab:relation`` is one of these (``None``: any).
    """
    relation_filter = ""
    if relation_iris is not None:
        # A FILTER, not a second VALUES block: Oxigraph 0.5 plans a VALUES ?rel join badly (~1000x
        # slower, measured), while the filter is applied to the links the endpoints already bound.
        allowed = ", ".join(v.iri_ref(iri) for iri in relation_iris)
        relation_filter = f"?l {_p('relation')} ?rel . FILTER(?rel IN ({allowed})) "
    # Each branch binds its endpoint column and reads the other one: reading both again after
    # the union costs a seek per link more (measured ~15% of the query).
    from_side = f"{{ {_values('f', from_iris)} ?l {_p('from')} ?f . ?l {_p('to')} ?t }}"
    to_side = f"{{ {_values('t', to_iris)} ?l {_p('to')} ?t . ?l {_p('from')} ?f }}"
    fields = f"OPTIONAL {{ ?l a ?c }} OPTIONAL {{ ?l {_p('record')} ?rec }} "
    return (
        f"SELECT DISTINCT ?l ?c ?f ?t ?rec WHERE {{ GRAPH {v.iri_ref(graph)} {{ "
        f"{from_side} UNION {to_side} {relation_filter}{fields}}} }}"
    )


def currency(graph: str, iris: Iterable[str]) -> str:
    """What currency needs about ``iris``: their item class, suppressions, incoming supersedes.

    Rows bind ``?x`` and one of: ``?c`` (an ``rdf:type`` of ``?x``), ``?rt`` (``recordedAt`` of a
    ``suppress`` record targeting ``?x``), ``?lt`` (the record literal of a ``supersedes`` link to
    ``?x``, which holds its ``created_at``).
    """
    supersedes = v.iri_ref(v.VOCAB + "supersedes")
    # The VALUES block is repeated inside each UNION branch: one outside the branches is joined
    # after them, so each branch first reads every typed node, suppress record and supersedes
    # link of the collection (a cost per request that grows with the collection, measured 230x).
    values = _values("x", iris)
    suppressed = f"?r {_p('target')} ?x . ?r {_p('action')} {_suppress()} . ?r {_p('recordedAt')} ?rt"
    return (
        f"SELECT ?x ?c ?rt ?lt WHERE {{ GRAPH {v.iri_ref(graph)} {{ "
        f"{{ {values} ?x a ?c }} "
        f"UNION {{ {values} {suppressed} }} "
        f"UNION {{ {values} ?l {_p('to')} ?x . ?l {_p('relation')} {supersedes} . ?l {_p('record')} ?lt }} "
        f"}} }}"
    )


def _suppress() -> str:
    suppress = LifecycleAction.SUPPRESS.value
    if re.fullmatch(r"[a-z_]+", suppress) is None:  # pragma: no cover - an enum constant
        raise ValueError(f"unexpected action value {suppress!r}")
    return f'"{suppress}"'


def lifecycle_count(graph: str) -> str:
    """How many ``supersedes`` links (``?links``) and ``suppress`` records (``?records``) there are."""
    g = v.iri_ref(graph)
    supersedes = v.iri_ref(v.VOCAB + "supersedes")
    links = f"SELECT (COUNT(?l) AS ?links) WHERE {{ GRAPH {g} {{ ?l {_p('relation')} {supersedes} }} }}"
    records = f"SELECT (COUNT(?r) AS ?records) WHERE {{ GRAPH {g} {{ ?r {_p('action')} {_suppress()} }} }}"
    return f"SELECT ?links ?records WHERE {{ {{ {links} }} {{ {records} }} }}"


def superseding_links(graph: str) -> str:
    """Every triple of every ``supersedes`` link node of the collection (``?l ?p ?o``)."""
    supersedes = v.iri_ref(v.VOCAB + "supersedes")
    pattern = f"?l {_p('relation')} {supersedes} . ?l ?p ?o"
    return f"SELECT ?l ?p ?o WHERE {{ GRAPH {v.iri_ref(graph)} {{ {pattern} }} }}"


def suppress_instants(graph: str) -> str:
    """The target (``?t``) and ``recordedAt`` (``?rt``) of every ``suppress`` record."""
    return (
        f"SELECT ?t ?rt WHERE {{ GRAPH {v.iri_ref(graph)} {{ ?r {_p('action')} {_suppress()} . "
        f"?r {_p('target')} ?t . ?r {_p('recordedAt')} ?rt }} }}"
    )


def census(graph: str, limit: int) -> str:
    """Every item node and tombstone of the collection (``?x``) with its class (``?c``).

    One scan of the graph's ``rdf:type`` triples, at most ``limit`` rows.
    """
    classes = ", ".join(v.iri_ref(iri) for iri in (*v.ITEM_CLASSES, v.TOMBSTONE_CLASS))
    return (
        f"SELECT ?x ?c WHERE {{ GRAPH {v.iri_ref(graph)} {{ ?x a ?c . FILTER(?c IN ({classes})) }} }} "
        f"LIMIT {int(limit)}"
    )


def early_references(graph: str) -> str:
    """The ``urn:charmem:object:`` IRIs (``?x``) a ``suppress`` record or ``supersedes`` link targets.

    A reference carries ``object`` when its target was not stored at write time (neither field
    declares a kind): those are the currency facts of an id that predate its node.
    """
    supersedes = v.iri_ref(v.VOCAB + "supersedes")
    prefix = v.node_iri("object", MemoryId(uuid.UUID(int=0))).removesuffix(str(uuid.UUID(int=0)))
    return (
        f"SELECT DISTINCT ?x WHERE {{ GRAPH {v.iri_ref(graph)} {{ "
        f"{{ ?r {_p('target')} ?x . ?r {_p('action')} {_suppress()} }} "
        f"UNION {{ ?l {_p('relation')} {supersedes} . ?l {_p('to')} ?x }} "
        f'FILTER(STRSTARTS(STR(?x), "{prefix}")) }} }}'
    )


def episode_turns(graph: str, episode_iris: Iterable[str]) -> str:
    """The records of the observations ``has_observation`` links from ``episode_iris`` reach.

    One row per link ``?l`` whose ``vocab:from`` is one of ``episode_iris`` (``?x``) and whose
    ``vocab:to`` is a stored ``Observation`` ``?o``: its record literal ``?rec`` (which holds its
    ``episode_id``, ``observed_at`` and ``created_at``; callers keep rows whose episode and ``?x``
    carry one id).
    """
    return (
        f"SELECT ?x ?l ?o ?rec WHERE {{ GRAPH {v.iri_ref(graph)} {{ {_values('x', episode_iris)} "
        f"?l {_p('from')} ?x . ?l {_p('relation')} {v.iri_ref(v.VOCAB + 'has_observation')} . "
        f"?l {_p('to')} ?o . ?o a {_p('Observation')} . ?o {_p('record')} ?rec }} }}"
    )


def typed_nodes(graph: str, class_iris: Iterable[str]) -> str:
    """Every node typed with one of ``class_iris`` in the collection's graph, as ``?x``."""
    allowed = ", ".join(v.iri_ref(iri) for iri in class_iris)
    return (
        f"SELECT DISTINCT ?x WHERE {{ GRAPH {v.iri_ref(graph)} {{ ?x a ?c . FILTER(?c IN ({allowed})) }} }}"
    )


def name_assertions(graph: str) -> str:
    """Every ``KnownAs`` assertion: ``?d`` (derived memory), ``?s`` (subject), ``?name``."""
    return (
        f"SELECT ?d ?s ?name WHERE {{ GRAPH {v.iri_ref(graph)} {{ ?d {_p('assertion')} ?a . "
        f"?a {_p('assertionSubject')} ?s . ?a {_p('knownAs')} ?name }} }}"
    )


def raced_nodes(graph: str) -> str:
    """Every triple (``?s ?p ?o``) of the nodes holding more than one record literal.

    Only writers that raced leave such a node (a write stored after its writer lease was lost).
    """
    g, record = v.iri_ref(graph), _p("record")
    return (
        f"SELECT ?s ?p ?o WHERE {{ GRAPH {g} {{ {{ SELECT ?s WHERE {{ ?s {record} ?r }} GROUP BY ?s "
        f"HAVING (COUNT(?r) > 1) }} ?s ?p ?o }} }}"
    )


def statement_count(graph: str) -> str:
    """The number of triples in the collection's graph, as ``?n``."""
    return f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH {v.iri_ref(graph)} {{ ?s ?p ?o }} }}"


def tombstones(graph: str, iris: Iterable[str] | None) -> str:
    """Tombstones as ``?x`` (node IRI) and ``?t`` (``purgedAt``): among ``iris``, or all (``None``)."""
    values = "" if iris is None else _values("x", iris) + " "
    return (
        f"SELECT ?x ?t WHERE {{ GRAPH {v.iri_ref(graph)} {{ {values}"
        f"?x a {v.iri_ref(v.TOMBSTONE_CLASS)} . ?x {_p(v.PURGED_AT)} ?t }} }}"
    )


#: The most triples one ``INSERT DATA`` operation holds: Virtuoso 7's SPARQL parser refuses an
#: operation of more than 4,989 ("memory exhausted"), and takes many operations in one request.
INSERT_DATA_MAX_TRIPLES: Final = 4000


def insert_data(graph: str, lines: Sequence[str]) -> str:
    """``INSERT DATA`` into ``graph`` of N-Triples ``lines``: one update request.

    The lines come from :func:`charmem_oxigraph._codec.encode_item` (literals serialised by
    pyoxigraph, IRIs built from constants and UUIDs). More than :data:`INSERT_DATA_MAX_TRIPLES`
    lines become several ``INSERT DATA`` operations of the one request (``;`` between them).
    """
    g, step = v.iri_ref(graph), INSERT_DATA_MAX_TRIPLES
    parts = [lines[start : start + step] for start in range(0, len(lines), step)] or [lines]
    return " ;\n".join(_insert_operation(g, part) for part in parts)


def _insert_operation(graph_ref: str, lines: Sequence[str]) -> str:
    triples = "\n".join(lines)
    return f"INSERT DATA {{ GRAPH {graph_ref} {{\n{triples}\n}} }}"


def delete_data(graph: str, lines: Sequence[str]) -> str:
    """``DELETE DATA`` from ``graph`` of N-Triples ``lines`` (built as :func:`insert_data`'s)."""
    triples = "\n".join(lines)
    return f"DELETE DATA {{ GRAPH {v.iri_ref(graph)} {{\n{triples}\n}} }}"


def erase(
    graph: str,
    object_iris: Sequence[str],
    link_iris: Sequence[str],
    record_iris: Sequence[str],
    tombstone_lines: Sequence[str],
) -> str:
    """One update request (applied atomically) removing nodes and writing tombstones.

    In order: the direct edges ``<from> <relation> <to>`` of the links; the ``BeliefAssertion``
    nodes and scene nodes (participants, custom key/values) of the objects; every triple whose
    subject is one of the objects, links or records, except direct edges (a relation predicate:
    those belong to links, and a kept ``supersedes`` link from an erased object keeps its edge);
    then ``INSERT DATA`` of the tombstones.
    """
    g = v.iri_ref(graph)
    operations: list[str] = []
    if link_iris:
        operations.append(
            f"DELETE {{ GRAPH {g} {{ ?f ?rel ?t }} }} WHERE {{ GRAPH {g} {{ {_values('l', link_iris)} "
            f"?l {_p('from')} ?f . ?l {_p('relation')} ?rel . ?l {_p('to')} ?t . ?f ?rel ?t }} }}"
        )
    if object_iris:
        # One VALUES block before the union: about as fast as the assertion-only pattern was
        # (2,000 ids, embedded); a block inside each branch would triple the request's ids.
        described = " UNION ".join(f"{{ ?x {_p(name)} ?a }}" for name in ("assertion", *v.SCENE_NODES))
        operations.append(
            f"DELETE {{ GRAPH {g} {{ ?a ?p ?o }} }} WHERE {{ GRAPH {g} {{ {_values('x', object_iris)} "
            f"{described} ?a ?p ?o }} }}"
        )
    subjects = [*object_iris, *link_iris, *record_iris]
    if subjects:
        edges = ", ".join(v.iri_ref(iri) for iri in v.RELATION_IRIS)
        operations.append(
            f"DELETE {{ GRAPH {g} {{ ?x ?p ?o }} }} WHERE {{ GRAPH {g} {{ {_values('x', subjects)} "
            f"?x ?p ?o . FILTER(?p NOT IN ({edges})) }} }}"
        )
    if tombstone_lines:
        operations.append(insert_data(graph, tombstone_lines))
    return " ;\n".join(operations)


def construct_all(graph: str) -> str:
    """Every triple of the collection's graph (``CONSTRUCT``, for an export over the protocol)."""
    return f"CONSTRUCT {{ ?s ?p ?o }} WHERE {{ GRAPH {v.iri_ref(graph)} {{ ?s ?p ?o }} }}"


def layout_version(graph: str) -> str:
    """The layout version(s) the collection's graph records, as ``?v``.

    The record is ``<graph> vocab:layoutVersion n`` inside the graph itself, so an export carries it.
    """
    g = v.iri_ref(graph)
    return f"SELECT ?v WHERE {{ GRAPH {g} {{ {g} {_p(v.LAYOUT_VERSION)} ?v }} }}"


def version_update(graph: str, version_line: str) -> str:
    """The update replacing every layout version ``graph`` records by ``version_line`` (N-Triples)."""
    g, version = v.iri_ref(graph), _p(v.LAYOUT_VERSION)
    return (
        f"DELETE {{ GRAPH {g} {{ {g} {version} ?v }} }} WHERE {{ GRAPH {g} {{ {g} {version} ?v }} }} ;\n"
        f"{insert_data(graph, [version_line])}"
    )


def unstored_endpoints(graph: str, limit: int) -> str:
    """The endpoint IRIs (``?x``) links mark ``vocab:unstoredEndpoint``, at most ``limit`` rows.

    One scan of that predicate's triples: as many rows as links written before their endpoints.
    """
    return (
        f"SELECT ?x WHERE {{ GRAPH {v.iri_ref(graph)} {{ ?l {_p(v.UNSTORED_ENDPOINT)} ?x }} }} "
        f"LIMIT {int(limit)}"
    )


def unmarked_endpoints(graph: str) -> str:
    """The links (``?l``) and endpoint IRIs (``?x``) naming no node, without their mark yet.

    What a migration marks ``vocab:unstoredEndpoint`` in a layout that did not record it: an
    endpoint IRI under which no node is stored (neither an item nor a tombstone) was written
    before its endpoint was stored, under another kind or never stored.
    """
    link, mark = _p("MemoryLink"), _p(v.UNSTORED_ENDPOINT)
    return (
        f"SELECT DISTINCT ?l ?x WHERE {{ GRAPH {v.iri_ref(graph)} {{ ?l a {link} . "
        f"{{ ?l {_p('from')} ?x }} UNION {{ ?l {_p('to')} ?x }} "
        f"FILTER NOT EXISTS {{ ?x a ?c }} FILTER NOT EXISTS {{ ?l {mark} ?x }} }} }}"
    )


def character(graph: str) -> str:
    """The character id(s) the collection's graph records, as ``?c`` (``<graph> vocab:characterId``)."""
    g = v.iri_ref(graph)
    return f"SELECT ?c WHERE {{ GRAPH {g} {{ {g} {_p(v.CHARACTER_ID)} ?c }} }}"


def any_statement(graph: str) -> str:
    """One statement of the collection's graph (``?s``), if it holds any."""
    return f"SELECT ?s WHERE {{ GRAPH {v.iri_ref(graph)} {{ ?s ?p ?o }} }} LIMIT 1"


def unmigrated(graph: str) -> str:
    """Every item node (``?x``) without a ``vocab:record`` literal: the layout-1 nodes."""
    classes = ", ".join(v.iri_ref(iri) for iri in v.ITEM_CLASSES)
    return (
        f"SELECT ?x WHERE {{ GRAPH {v.iri_ref(graph)} {{ ?x a ?c . FILTER(?c IN ({classes})) "
        f"FILTER NOT EXISTS {{ ?x {_p('record')} ?r }} }} }}"
    )


def migrate(
    graph: str,
    node_iris: Sequence[str],
    link_iris: Sequence[str],
    replaced: Sequence[str],
    dropped_assertion_props: Sequence[str],
    record_lines: Sequence[str],
) -> str:
    """One update request (applied atomically) rewriting layout-1 nodes into the compact layout.

    In order: the direct edges ``<from> <relation> <to>`` of the links; the ``dropped_assertion_props``
    of the nodes' assertion nodes; every triple of the nodes whose predicate is in ``replaced``
    (the layout-1 fields the record literal now holds; other triples stay); then ``INSERT DATA``
    of the record literals (``record_lines``).
    """
    g = v.iri_ref(graph)
    operations: list[str] = []
    if link_iris:
        operations.append(
            f"DELETE {{ GRAPH {g} {{ ?f ?rel ?t }} }} WHERE {{ GRAPH {g} {{ {_values('l', link_iris)} "
            f"?l {_p('from')} ?f . ?l {_p('relation')} ?rel . ?l {_p('to')} ?t . ?f ?rel ?t }} }}"
        )
    dropped = ", ".join(v.iri_ref(iri) for iri in dropped_assertion_props)
    operations.append(
        f"DELETE {{ GRAPH {g} {{ ?a ?p ?o }} }} WHERE {{ GRAPH {g} {{ {_values('x', node_iris)} "
        f"?x {_p('assertion')} ?a . ?a ?p ?o . FILTER(?p IN ({dropped})) }} }}"
    )
    operations.append(
        f"DELETE {{ GRAPH {g} {{ ?x ?p ?o }} }} WHERE {{ GRAPH {g} {{ {_values('x', node_iris)} "
        f"{_values('p', replaced)} ?x ?p ?o }} }}"
    )
    operations.append(insert_data(graph, record_lines))
    return " ;\n".join(operations)
