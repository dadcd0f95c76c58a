"""Retrieval statistics computed from the graph authority (``RETRIEVAL_STATS_STORE_MODE=graph``).

The counters the other stats stores keep as rows (objects per type, current objects per type,
links per relation, links at given ids) are answered here by SPARQL aggregate queries on the
collection's named graph, so every process reading one graph server sees the same numbers and
there is nothing to record, lose or repair. The queries are plans (as in ``_reads.py``), run by
the collection's graph store: over HTTP for the service store, in a worker thread for the
persistent store (sharing the process's handle on the directory).
"""

from __future__ import annotations

import re
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Final, Self

from charmem.composition import ClassFactory
from charmem.domain.graph import LifecycleAction
from charmem.domain.ids import MemoryId
from charmem.domain.model import Relation
from charmem.errors import ConfigurationError
from charmem.ports import StatsEntry, StatsSummary
from charmem.settings import Settings, validate_collection_name

from charmem_oxigraph import _vocab as v
from charmem_oxigraph._iris import endpoint_iris
from charmem_oxigraph._reads import CachedGraphStore, Plan

__all__ = ["DEGREE_BATCH", "GraphRetrievalStatsStore", "graph"]

#: Ids bound per degree query: each id of unknown kind is bound under ~6 IRIs per side, so a
#: query holds at most ~6,000 IRIs (~300 kB of text), well under any server's request limit.
DEGREE_BATCH: Final = 500
#: Ids whose kind one query looks up when counting the objects a lifecycle fact makes not current.
_KIND_BATCH: Final = 1_000

_MODE_KEY: Final = "RETRIEVAL_STATS_STORE_MODE"
#: The graph store modes whose graph another store of the same process or server can read.
_SHARED_GRAPH_MODES: Final = ("service", "persistent")
_OBJECT_CLASSES: Final = {v.VOCAB + v.CLASS_OF_KIND[kind]: kind for kind in v.OBJECT_KINDS}
_LINK_CLASS: Final = v.VOCAB + v.CLASS_OF_KIND["link"]
#: Links and records are never a link's end: their IRIs need no binding in a degree query.
_NEVER_ENDS: Final = tuple(v.node_iri(kind, MemoryId(uuid.UUID(int=0)))[:-36] for kind in ("link", "record"))


def _p(local_name: str) -> str:
    return v.iri_ref(v.VOCAB + local_name)


def _values(variable: str, iris: Iterable[str]) -> str:
    return f"VALUES ?{variable} {{ {' '.join(v.iri_ref(iri) for iri in iris)} }}"


def _suppress() -> str:
    action = LifecycleAction.SUPPRESS.value
    if re.fullmatch(r"[a-z_]+", action) is None:  # pragma: no cover - an enum constant
        raise ValueError(f"unexpected action value {action!r}")
    return f'"{action}"'


def type_counts(graph: str) -> str:
    """Nodes per ``rdf:type`` of the collection (``?c``, ``?n``): objects, links, records, tombstones."""
    return f"SELECT ?c (COUNT(?x) AS ?n) WHERE {{ GRAPH {v.iri_ref(graph)} {{ ?x a ?c }} }} GROUP BY ?c"


def relation_counts(graph: str) -> str:
    """Link nodes per ``vocab:relation`` (``?rel``, ``?n``)."""
    return (
        f"SELECT ?rel (COUNT(?l) AS ?n) WHERE {{ GRAPH {v.iri_ref(graph)} {{ ?l {_p('relation')} ?rel }} }} "
        "GROUP BY ?rel"
    )


def lifecycle_targets(graph: str) -> str:
    """Every IRI a ``suppress`` record targets or a ``supersedes`` link points at (``?t``)."""
    suppressed = f"?r {_p('action')} {_suppress()} . ?r {_p('target')} ?t"
    superseded = f"?l {_p('relation')} {_p('supersedes')} . ?l {_p('to')} ?t"
    return (
        f"SELECT DISTINCT ?t WHERE {{ GRAPH {v.iri_ref(graph)} {{ "
        f"{{ {suppressed} }} UNION {{ {superseded} }} }} }}"
    )


def node_classes(graph: str, iris: Iterable[str]) -> str:
    """The ``rdf:type`` (``?c``) of each of ``iris`` (``?x``) that is a stored node."""
    return f"SELECT ?x ?c WHERE {{ GRAPH {v.iri_ref(graph)} {{ {_values('x', iris)} ?x a ?c }} }}"


def degree_counts(
    graph: str, from_iris: Iterable[str], to_iris: Iterable[str], relation: Relation | None
) -> str:
    """Link nodes touching each id (``?id``: the UUID text ending its IRIs; ``?n``: distinct links).

    Each side binds its ``VALUES`` inside its own ``UNION`` branch (the server starts from the
    ids); grouping by the UUID counts a link once per id even when its two ends name the same id
    (a self-link) or one id under two IRIs (a reference written before the id was stored).
    """
    by_relation = "" if relation is None else f"?l {_p('relation')} {v.iri_ref(v.relation_iri(relation))} . "
    return (
        f"SELECT ?id (COUNT(DISTINCT ?l) AS ?n) WHERE {{ GRAPH {v.iri_ref(graph)} {{ "
        f"{{ {_values('x', from_iris)} ?l {_p('from')} ?x }} "
        f"UNION {{ {_values('x', to_iris)} ?l {_p('to')} ?x }} "
        f"{by_relation}BIND(SUBSTR(STR(?x), STRLEN(STR(?x)) - 35) AS ?id) }} }} GROUP BY ?id"
    )


def row_count_plan(graph: str) -> Plan[int]:
    """Objects plus links of the collection: the rows a recording stats store holds (one query)."""
    rows = yield type_counts(graph)
    counted = (*_OBJECT_CLASSES, _LINK_CLASS)
    return sum(int(row["n"].value) for row in rows if row["c"].value in counted)


def summary_plan(graph: str) -> Plan[StatsSummary]:
    """The collection's counters (:class:`~charmem.ports.StatsSummary`), in 3 + k queries.

    Objects per type and links per relation are two aggregates. An object is current unless a
    ``suppress`` record or a ``supersedes`` link names it (:func:`charmem.domain.rules.is_current`
    with no ``as_of``); those names are read (one query) and their kinds looked up, under every
    object kind, ``_KIND_BATCH`` ids per query: lifecycle facts are rare next to memories.
    """
    objects: Counter[str] = Counter()
    for row in (yield type_counts(graph)):
        kind = _OBJECT_CLASSES.get(row["c"].value)
        if kind is not None:
            objects[kind] += int(row["n"].value)
    links = Counter(
        {v.relation_of(row["rel"].value).value: int(row["n"].value) for row in (yield relation_counts(graph))}
    )
    targets = sorted({v.memory_id_of(row["t"].value) for row in (yield lifecycle_targets(graph))}, key=str)
    not_current: Counter[str] = Counter()
    for start in range(0, len(targets), _KIND_BATCH):
        chunk = targets[start : start + _KIND_BATCH]
        iris = [iri for memory_id in chunk for iri in v.node_iris_of(v.OBJECT_KINDS, memory_id)]
        for row in (yield node_classes(graph, iris)):
            kind = _OBJECT_CLASSES.get(row["c"].value)
            if kind is not None:
                not_current[kind] += 1
    return StatsSummary(
        objects=dict(sorted(objects.items())),
        current_objects={
            kind: count - not_current[kind]
            for kind, count in sorted(objects.items())
            if count > not_current[kind]  # as the recording stores: a type without a current object is absent
        },
        links=dict(sorted(links.items())),
    )


def degrees_plan(
    graph: str, ids: Sequence[MemoryId], known: dict[MemoryId, str], relation: Relation | None
) -> Plan[dict[MemoryId, int]]:
    """Links touching each of ``ids`` (of ``relation``, or any), ``DEGREE_BATCH`` ids per query.

    Each id is bound under every IRI a link's end may carry for it (``endpoint_iris``: its kind
    when ``known`` has it, else every stored kind, plus the kinds a relation declares and
    ``object``, for references written before the id was stored).
    """
    counts = dict.fromkeys(ids, 0)
    unique = list(counts)
    relations = None if relation is None else [relation]
    for start in range(0, len(unique), DEGREE_BATCH):
        chunk = unique[start : start + DEGREE_BATCH]
        sides = endpoint_iris(chunk, known, relations)
        from_iris, to_iris = ([iri for iri in side if not iri.startswith(_NEVER_ENDS)] for side in sides)
        for row in (yield degree_counts(graph, from_iris, to_iris, relation)):
            memory_id = MemoryId(uuid.UUID(row["id"].value))
            if memory_id in counts:
                counts[memory_id] += int(row["n"].value)
    return counts


class GraphRetrievalStatsStore:
    """``RETRIEVAL_STATS_STORE_MODE=graph``: statistics computed from the graph authority.

    See :class:`charmem.ports.RetrievalStatsStore`. Every answer is a SPARQL aggregate over the
    collection's named graph, read through a graph store of the same collection (the SPARQL
    service, or the persistent store's shared handle), so all processes on one graph server agree
    and nothing can drift: :meth:`record` and :meth:`clear` do nothing, and :meth:`row_count` is
    the number of rows a recorded store would hold (objects plus links). Costs: :meth:`summary`
    reads the collection's ``rdf:type`` and ``vocab:relation`` triples (grows with it);
    :meth:`degrees` binds the asked ids (grows with the ids and their links, not the collection).

    Args:
        graph: a graph store of the collection (closed by :meth:`close`).
    """

    #: The counters are computed, not recorded: nothing to rebuild when the collection opens.
    records_rows = False

    def __init__(self, graph: CachedGraphStore) -> None:
        self._graph = graph
        self.collection = graph.collection

    @classmethod
    def from_settings(cls, settings: Settings, collection: str) -> Self:
        """Open a graph store of ``collection`` as ``GRAPH_STORE_MODE`` selects, to count in.

        Args:
            settings: ``GRAPH_STORE_MODE`` ``service`` (its endpoints, or the collection's shard
                of ``SPARQL_ENDPOINTS``) or ``persistent`` (``OXIGRAPH_PATH``).
            collection: the collection name.

        Returns:
            GraphRetrievalStatsStore: the collection's statistics.

        Raises:
            ConfigurationError: the graph store mode keeps its graph in this store object only
                (``in_memory``, ``reference``), or a graph setting is bad.
            StoreLockedError, BackendError: the persistent store cannot be opened.
        """
        validate_collection_name(collection)
        if settings.graph_store_mode not in _SHARED_GRAPH_MODES:
            raise ConfigurationError(
                f"{_MODE_KEY}=graph computes statistics from a graph other stores can read "
                f"(GRAPH_STORE_MODE=service or persistent), not GRAPH_STORE_MODE="
                f"{settings.graph_store_mode!r}; choose {_MODE_KEY}=in_memory or sqlite",
                key=_MODE_KEY,
            )
        if settings.graph_store_mode == "service":
            from charmem_oxigraph._service import SparqlServiceGraphStore

            return cls(SparqlServiceGraphStore.from_settings(settings, collection))
        from charmem_oxigraph._store import PersistentOxigraphGraphStore

        return cls(PersistentOxigraphGraphStore.from_settings(settings, collection))

    async def record(self, entries: Sequence[StatsEntry]) -> None:
        """Nothing to write: the graph already holds what the rows would say."""
        del entries

    async def degrees(
        self, ids: Sequence[MemoryId], *, relation: Relation | None = None
    ) -> dict[MemoryId, int]:
        """See :meth:`charmem.ports.RetrievalStatsStore.degrees`; one query per ``DEGREE_BATCH`` ids."""
        reader = self._graph._reader()
        plan = degrees_plan(reader.graph, ids, reader.cache.kinds(ids), relation)
        return await self._graph._read("count links", plan, len(ids))

    async def summary(self) -> StatsSummary:
        """See :meth:`charmem.ports.RetrievalStatsStore.summary`."""
        reader = self._graph._reader()
        return await self._graph._read("count objects and links", summary_plan(reader.graph), 1 << 62)

    async def row_count(self) -> int:
        """Objects plus links of the collection (the rows a recording store would hold)."""
        reader = self._graph._reader()
        return await self._graph._read("count objects and links", row_count_plan(reader.graph), 1 << 62)

    async def clear(self) -> None:
        """Nothing to remove (the statistics are computed, not stored)."""

    async def close(self) -> None:
        """Close the graph store it counts in."""
        await self._graph.close()


#: The factory the ``charmem.stats_stores`` entry point ``graph`` names.
graph = ClassFactory(GraphRetrievalStatsStore)
