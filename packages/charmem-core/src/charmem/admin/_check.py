"""``check``: is a collection's derived data in step with its graph authority? (DESIGN §4.9, §5, §7).

The graph is the authority; candidate recall (vectors) and retrieval statistics are derived from it
by repairable writes that follow the graph batch (DESIGN §5). A crash between those writes, a lost
vector shard or a deleted stats file leaves them behind; :func:`check` says what differs from what
:func:`~charmem.usecases.maintenance.rebuild_vector_index` and
:func:`~charmem.usecases.commit.rebuild_stats` would make, and :func:`repair` runs those rebuilds.

It also looks for what a half-written graph batch would leave: a batch (a plan's objects, its
caller and derived links, or a lifecycle operation's replacement, links and records) is written in
one transaction by the embedded Oxigraph store and in one SPARQL update by the service store, so
none should ever be found. Signs of one: links whose endpoints are not stored, objects naming ids
that are not stored, objects without the links commit derives from them, corrections whose
replacement is missing or does not supersede the target, cascaded suppressions without the
record of their origin, and stored triples that do not decode into an object or link (a node
missing a required triple). Those are not repaired here: replay the plan or operation that wrote
the batch (DESIGN §4.3: replays are idempotent).

Last, it reports breaches of the supersession rules the write path enforces (a cycle of
``supersedes`` links, a memory superseded by more than one write), which stores written before
those rules, imports or direct graph writes may hold, and breaches of time order (a memory dated
before what it depends on was created).

One graph problem is not a partial batch but history written by an earlier version: an episode
forgotten before forgets reached its observations, which are still current. :func:`repair`
appends what that forget lacks (:mod:`charmem.usecases.forgetting`).
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from datetime import UTC
from typing import Any, Final, TypeVar

import attrs

from charmem.composition import load_factory
from charmem.domain._fields import ChoiceEnum, id_set
from charmem.domain.graph import LifecycleAction, LifecycleRecord
from charmem.domain.ids import ID_ORDER, MemoryId
from charmem.domain.model import MemoryLink, MemoryObject, Relation
from charmem.domain.plan import RepairMarker, RepairMarkerType
from charmem.domain.retrieval import CurrencyStatus
from charmem.domain.rules import derived_link_id, supersession_cycles, time_order_breach
from charmem.errors import BackendError, ConfigurationError, StoreCorruptedError
from charmem.log import get_logger
from charmem.memory import CharacterMemory
from charmem.ports import (
    EmbeddingProvider,
    GraphStore,
    RetrievalStatsStore,
    StatsSummary,
    VectorIndex,
    VectorQuery,
)
from charmem.settings import Settings, validate_collection_name
from charmem.stats.memory import InMemoryRetrievalStatsStore
from charmem.usecases.commit import link_stats_row, object_stats_row
from charmem.usecases.forgetting import collection_forget_gaps, complete_episode_forgets
from charmem.usecases.maintenance import INDEXED_TYPES, VectorRebuildReport, current_index_entries
from charmem.usecases.planning import derive_links
from charmem.usecases.validation import object_references, time_order_dependencies

__all__ = [
    "CHECK_FORMAT_VERSION",
    "CheckReport",
    "GraphProblem",
    "GraphProblemKind",
    "RepairOutcome",
    "StatsDrift",
    "check",
    "check_settings",
    "repair",
]

log = get_logger("charmem.admin")

#: Version of :meth:`CheckReport.to_dict`'s layout.
CHECK_FORMAT_VERSION: Final = 1

_READ_BATCH: Final = 512
_DEGREE_BATCH: Final = 400  # ids per degrees() call: SQLite binds each id twice
_K = TypeVar("_K")
_V = TypeVar("_V")


class GraphProblemKind(ChoiceEnum):
    """What is wrong in the graph itself (signs of a partial batch; see the module docstring)."""

    DANGLING_LINK = "dangling_link"
    """A link whose ``from_id`` or ``to_id`` is not a stored object."""

    MISSING_REFERENCE = "missing_reference"
    """An object or lifecycle record names ids that are not stored objects."""

    MISSING_DERIVED_LINK = "missing_derived_link"
    """An object lacks a link commit derives from it (DESIGN §3 table)."""

    BROKEN_CORRECTION = "broken_correction"
    """A ``correct`` record whose replacement is missing or does not supersede its target."""

    ORPHAN_CASCADE = "orphan_cascade"
    """A suppression cascaded from a forget whose target has no record of that forget."""

    EPISODE_PARTS_NOT_FORGOTTEN = "episode_parts_not_forgotten"
    """A forgotten episode whose observations (or what is grounded on them) are still current.

    Forgets recorded before forgetting an episode reached its parts leave them; ``repair``
    appends the missing suppressions at the original forget's record time
    (:func:`~charmem.usecases.forgetting.episode_forget_gaps`). The only repairable kind.
    """

    UNREADABLE = "unreadable"
    """Stored triples that do not decode into an object or link (e.g. a missing required one)."""

    # Supersession rules (not partial batches: writes the current validation refuses, stored by
    # an older version, an import or a direct graph write; see _supersession_problems).

    SUPERSESSION_CYCLE = "supersession_cycle"
    """``supersedes`` links that form a cycle: none of its memories is current or reachable."""

    SECOND_SUCCESSOR = "second_successor"
    """A memory superseded by memories that more than one write (plan or correction) added."""

    OUT_OF_TIME_ORDER = "out_of_time_order"
    """A memory or caller link dated before what it depends on was created.

    An observation before its episode, a derived memory before a source episode or observation
    or before a memory it supersedes, a caller-authored link before an endpoint
    (:func:`~charmem.domain.rules.time_order_breach`): an ``as_of`` view between the two instants
    shows it without what it depends on. The write path refuses these.
    """


#: The graph problems :func:`repair` fixes by appending what is missing; the others need the
#: plan or operation that wrote the partial batch replayed.
_REPAIRABLE_GRAPH_PROBLEMS: Final = frozenset({GraphProblemKind.EPISODE_PARTS_NOT_FORGOTTEN})


@attrs.frozen(kw_only=True)
class GraphProblem:
    """One sign of a partial graph batch.

    Attributes:
        kind: what is wrong.
        id: the object, link or record concerned.
        detail: a sentence saying what is missing.
        related_ids: the ids that are missing or involved, sorted.
    """

    kind: GraphProblemKind = attrs.field(converter=GraphProblemKind)
    id: MemoryId
    detail: str
    related_ids: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types: ``kind``, ``id``, ``detail``, ``related_ids``."""
        return {
            "kind": self.kind.value,
            "id": str(self.id),
            "detail": self.detail,
            "related_ids": [str(i) for i in self.related_ids],
        }


@attrs.frozen(kw_only=True)
class StatsDrift:
    """One counter of the retrieval statistics that differs from what the graph implies.

    Attributes:
        counter: ``"rows"``, ``"objects"`` (per object type), ``"current_objects"`` (per object
            type), ``"links"`` (per relation) or ``"degree"`` (links touching one object).
        key: the object type, relation or object id ("" for ``rows``).
        stored: the stats store's value (count).
        expected: the value :func:`~charmem.usecases.commit.rebuild_stats` would give (count).
    """

    counter: str
    key: str
    stored: int
    expected: int

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types."""
        return attrs.asdict(self)


@attrs.frozen(kw_only=True)
class CheckReport:
    """What :func:`check` found in one collection.

    Attributes:
        collection: the collection checked.
        objects: stored objects (count, readable or not).
        links: stored links (count).
        expected_vectors: points the vector index should hold (current episodes with their own
            summary, observations, derived memories and threads).
        vector_points: points it holds; ``None`` when the vector index is missing (a lost shard).
        stats_rows: rows the stats store holds; ``None`` when the stats store is missing.
        missing_vectors: current indexable objects without a point, sorted.
        orphan_vectors: points without a current indexable graph object behind them, sorted.
        stats_drift: the statistics counters that differ from the graph's.
        graph_problems: signs of partial graph batches (never expected; see the module).
    """

    collection: str
    objects: int
    links: int
    expected_vectors: int
    vector_points: int | None
    stats_rows: int | None
    missing_vectors: tuple[MemoryId, ...] = ()
    orphan_vectors: tuple[MemoryId, ...] = ()
    stats_drift: tuple[StatsDrift, ...] = ()
    graph_problems: tuple[GraphProblem, ...] = ()

    @property
    def vector_index_missing(self) -> bool:
        """Whether the collection's vector index (the embedded shard) does not exist."""
        return self.vector_points is None

    @property
    def stats_missing(self) -> bool:
        """Whether the stats store (the SQLite file) does not exist."""
        return self.stats_rows is None

    @property
    def vectors_consistent(self) -> bool:
        """Candidate recall holds exactly the current indexable objects.

        A missing index counts as consistent when nothing should be indexed.
        """
        return not self.missing_vectors and not self.orphan_vectors

    @property
    def stats_consistent(self) -> bool:
        """The statistics equal what a rebuild from the graph gives."""
        return not self.stats_drift

    @property
    def graph_consistent(self) -> bool:
        """No sign of a partial graph batch."""
        return not self.graph_problems

    @property
    def consistent(self) -> bool:
        """Everything agrees with the graph and the graph shows no partial batch."""
        return self.vectors_consistent and self.stats_consistent and self.graph_consistent

    @property
    def repairable(self) -> bool:
        """Whether :func:`repair` can make the collection consistent.

        True when only derived data differs and every graph problem is one repair appends the
        missing records for (``EPISODE_PARTS_NOT_FORGOTTEN``).
        """
        return all(problem.kind in _REPAIRABLE_GRAPH_PROBLEMS for problem in self.graph_problems)

    def to_dict(self) -> dict[str, Any]:
        """The report in plain JSON types, with ``format_version`` (:data:`CHECK_FORMAT_VERSION`)."""
        return {
            "format_version": CHECK_FORMAT_VERSION,
            "collection": self.collection,
            "consistent": self.consistent,
            "repairable": self.repairable,
            "objects": self.objects,
            "links": self.links,
            "vectors": {
                "consistent": self.vectors_consistent,
                "index_missing": self.vector_index_missing,
                "expected": self.expected_vectors,
                "points": self.vector_points,
                "missing": [str(i) for i in self.missing_vectors],
                "orphans": [str(i) for i in self.orphan_vectors],
            },
            "stats": {
                "consistent": self.stats_consistent,
                "store_missing": self.stats_missing,
                "rows": self.stats_rows,
                "drift": [drift.to_dict() for drift in self.stats_drift],
            },
            "graph": {
                "consistent": self.graph_consistent,
                "problems": [problem.to_dict() for problem in self.graph_problems],
            },
        }

    def describe(self, *, limit: int = 10) -> list[str]:
        """Human-readable lines: a verdict, then what differs (at most ``limit`` examples each)."""
        verdict = "consistent" if self.consistent else "INCONSISTENT"
        points = "missing" if self.vector_points is None else str(self.vector_points)
        rows = "missing" if self.stats_rows is None else str(self.stats_rows)
        lines = [
            f"collection {self.collection!r}: {verdict}",
            f"  graph: {self.objects} objects, {self.links} links, {len(self.graph_problems)} problem(s)",
            f"  vectors: {points} points for {self.expected_vectors} expected, "
            f"{len(self.missing_vectors)} missing, {len(self.orphan_vectors)} orphan(s)",
            f"  stats: {rows} rows, {len(self.stats_drift)} counter(s) drifted",
        ]
        for problem in self.graph_problems[:limit]:
            lines.append(f"  graph {problem.kind.value} {problem.id}: {problem.detail}")
        for memory_id in self.missing_vectors[:limit]:
            lines.append(f"  vector missing for {memory_id}")
        for memory_id in self.orphan_vectors[:limit]:
            lines.append(f"  vector without a current object: {memory_id}")
        for drift in self.stats_drift[:limit]:
            key = f"[{drift.key}]" if drift.key else ""
            lines.append(f"  stats {drift.counter}{key}: stored {drift.stored}, graph says {drift.expected}")
        if self.vector_index_missing and self.expected_vectors:
            lines.append("  the vector index is missing (a lost shard): repair rebuilds it from the graph")
        if not self.repairable:
            lines.append(
                "  graph problems are not repaired by rebuilding: replay the plan or operation that "
                "wrote the batch, or restore the store"
            )
        elif not self.graph_consistent:
            lines.append(
                "  repairable: `charmem check --repair` appends the suppressions old forgets of "
                "episodes lack (at their original time) and rebuilds what drifted"
            )
        elif not self.consistent:
            lines.append("  repairable: `charmem check --repair` rebuilds vectors and stats from the graph")
        return lines


@attrs.frozen(kw_only=True)
class RepairOutcome:
    """What :func:`repair` rebuilt.

    Attributes:
        vectors: the vector rebuild's report, ``None`` when the vectors were consistent.
        stats_rows: rows written by the stats rebuild, ``None`` when the stats were consistent.
        suppressed_ids: memories suppressed by completing old forgets of episodes, sorted.
    """

    vectors: VectorRebuildReport | None = None
    stats_rows: int | None = None
    suppressed_ids: tuple[MemoryId, ...] = ()


async def _chunked(
    fetch: Callable[[Sequence[_K]], Awaitable[Mapping[_K, _V]]], keys: Sequence[_K], size: int
) -> dict[_K, _V]:
    found: dict[_K, _V] = {}
    for start in range(0, len(keys), size):
        found.update(await fetch(keys[start : start + size]))
    return found


async def _read_items(
    fetch: Callable[[Sequence[MemoryId]], Awaitable[Mapping[MemoryId, _V]]],
    ids: Sequence[MemoryId],
    what: str,
    problems: list[GraphProblem],
) -> dict[MemoryId, _V]:
    """Read ``ids`` in batches; a batch that does not decode is split until the bad ids are found."""
    try:
        return dict(await fetch(ids))
    except BackendError as exc:
        if len(ids) == 1:
            problems.append(
                GraphProblem(
                    kind=GraphProblemKind.UNREADABLE,
                    id=ids[0],
                    detail=f"the stored {what} cannot be read: {exc}",
                )
            )
            return {}
    middle = len(ids) // 2
    return {
        **await _read_items(fetch, ids[:middle], what, problems),
        **await _read_items(fetch, ids[middle:], what, problems),
    }


async def _read_all(
    fetch: Callable[[Sequence[MemoryId]], Awaitable[Mapping[MemoryId, _V]]],
    ids: Sequence[MemoryId],
    what: str,
    problems: list[GraphProblem],
) -> dict[MemoryId, _V]:
    found: dict[MemoryId, _V] = {}
    for start in range(0, len(ids), _READ_BATCH):
        found.update(await _read_items(fetch, ids[start : start + _READ_BATCH], what, problems))
    return found


def _graph_problems(
    collection: str,
    stored: set[MemoryId],
    objects: Mapping[MemoryId, MemoryObject],
    links: Mapping[MemoryId, MemoryLink],
    records: Sequence[LifecycleRecord],
    purged: AbstractSet[MemoryId] = frozenset(),
) -> list[GraphProblem]:
    """The partial-batch signs among readable objects, links and records (pure).

    ``purged`` ids (tombstones of ``charmem.admin.purge``) are known, not missing: references to
    them are expected, the links derived towards them were erased on purpose, a kept
    ``supersedes`` link may start at one, and a suppression cascaded from one keeps no origin
    record (it was erased with the purged memory).
    """
    problems: list[GraphProblem] = []

    def found(kind: GraphProblemKind, memory_id: MemoryId, detail: str, related: Iterable[MemoryId]) -> None:
        problems.append(GraphProblem(kind=kind, id=memory_id, detail=detail, related_ids=related))

    stated = {(link.from_id, link.relation, link.to_id) for link in links.values()}
    known = stored | purged
    for link in links.values():
        absent = [end for end in (link.from_id, link.to_id) if end not in known]
        if absent:
            found(
                GraphProblemKind.DANGLING_LINK,
                link.id,
                f"{link.relation.value} link {link.from_id} -> {link.to_id} joins {len(absent)} id(s) "
                "that are not stored objects",
                absent,
            )
    for obj in objects.values():
        absent = sorted(object_references(obj) - known)
        if absent:
            found(
                GraphProblemKind.MISSING_REFERENCE,
                obj.id,
                f"the {obj.object_type.value} names {len(absent)} id(s) that are not stored",
                absent,
            )
        lacking = [
            link
            for link in derive_links(collection, [obj])
            if (link.from_id, link.relation, link.to_id) not in stated
            and link.from_id not in purged
            and link.to_id not in purged
        ]
        if lacking:
            described = ", ".join(f"{link.relation.value} {link.from_id} -> {link.to_id}" for link in lacking)
            found(
                GraphProblemKind.MISSING_DERIVED_LINK,
                obj.id,
                f"the {obj.object_type.value} lacks derived link(s): {described}",
                [end for link in lacking for end in (link.from_id, link.to_id)],
            )
    origins = {(r.target_id, r.rationale) for r in records if not r.related_ids}
    for record in records:
        absent = sorted(set(record.related_ids) - known)
        if absent:
            found(
                GraphProblemKind.MISSING_REFERENCE,
                record.id,
                f"the {record.action.value} record about {record.target_id} names {len(absent)} id(s) "
                "that are not stored",
                absent,
            )
        if record.action is LifecycleAction.CORRECT:
            unsuperseding = [
                i
                for i in record.related_ids
                if i in stored and (i, Relation.SUPERSEDES, record.target_id) not in stated
            ]
            if unsuperseding:
                found(
                    GraphProblemKind.BROKEN_CORRECTION,
                    record.id,
                    f"the correction of {record.target_id} names replacement(s) with no supersedes "
                    "link to it",
                    unsuperseding,
                )
        elif record.related_ids and not any(
            (origin, record.rationale) in origins or origin in purged for origin in record.related_ids
        ):
            found(
                GraphProblemKind.ORPHAN_CASCADE,
                record.id,
                f"the {record.action.value} of {record.target_id} cascaded from "
                f"{', '.join(map(str, record.related_ids))}, which has no record of that forget",
                record.related_ids,
            )
    return problems


def _supersession_problems(
    links: Iterable[MemoryLink], records: Sequence[LifecycleRecord]
) -> list[GraphProblem]:
    """Stored breaches of the supersession rules (pure).

    Cycles are exact: :func:`~charmem.domain.rules.supersession_cycles` over every stored
    ``supersedes`` link, one problem per cycle, under its smallest id.

    Second successors: the graph keeps no trace of which write stored a link, so "superseded by
    memories from more than one plan" is decided from what each write leaves. A correction writes
    exactly one successor, named by its ``correct`` record on the target; a plan writes its
    ``supersedes`` links with its successors' ``created_at``, which a prepared plan fills from one
    clock reading. A memory with several successors is reported when one of them is a
    correction's replacement, or when their ``supersedes`` links carry different ``created_at``
    instants. A split written by one plan whose drafts were given different ``created_at`` values
    is therefore reported too (it cannot be told apart), and two plans that gave their successors
    the same instant are not. The write path refuses both second successors and cycles, so these
    come only from stores written before those rules, imports or direct graph writes.
    """
    supersedes = [link for link in links if link.relation is Relation.SUPERSEDES]
    problems = [
        GraphProblem(
            kind=GraphProblemKind.SUPERSESSION_CYCLE,
            id=cycle[0],
            detail=f"supersedes links form a cycle ({' supersedes '.join(map(str, (*cycle, cycle[0])))}): "
            "none of these memories is current, and retrieval never reaches them; remember the right "
            "belief anew",
            related_ids=cycle,
        )
        for cycle in supersession_cycles((link.from_id, link.to_id) for link in supersedes)
    ]
    incoming: dict[MemoryId, list[MemoryLink]] = {}
    for link in supersedes:
        if link.from_id != link.to_id:
            incoming.setdefault(link.to_id, []).append(link)
    corrected = {
        (record.target_id, replacement)
        for record in records
        if record.action is LifecycleAction.CORRECT
        for replacement in record.related_ids
    }
    for target, arriving in sorted(incoming.items(), key=lambda item: ID_ORDER(item[0])):
        successors = {link.from_id for link in arriving}
        if len(successors) < 2:
            continue
        by_correction = sorted((s for s in successors if (target, s) in corrected), key=ID_ORDER)
        instants = {link.created_at.astimezone(UTC) for link in arriving}
        if by_correction:
            why = f"{by_correction[0]} is a correction's replacement, and a correction writes one successor"
        elif len(instants) > 1:
            why = f"their supersedes links were written at {len(instants)} different instants"
        else:
            continue
        problems.append(
            GraphProblem(
                kind=GraphProblemKind.SECOND_SUCCESSOR,
                id=target,
                detail=f"superseded by {len(successors)} memories that more than one write added ({why}); "
                "a memory gains successors in one plan or correction only",
                related_ids=successors,
            )
        )
    return problems


def _time_order_problems(
    collection: str, objects: Mapping[MemoryId, MemoryObject], links: Mapping[MemoryId, MemoryLink]
) -> list[GraphProblem]:
    """Stored objects and caller links dated before what they depend on (pure).

    Derived links carry their source object's ``created_at`` and are judged through it (a derived
    memory's ``supersedes`` and ``derived_from``, an observation's ``has_observation``); a link is
    caller-authored when its id is not the derived one.
    """
    problems = []
    caller_links = [
        link
        for link in links.values()
        if link.id != derived_link_id(collection, link.from_id, link.relation, link.to_id)
    ]
    for item in [*objects.values(), *caller_links]:
        depends = time_order_dependencies(item)
        earlier = {i: objects[i].created_at for i in depends if i in objects}
        breach = time_order_breach(item.created_at, earlier=earlier)
        if breach is None or breach.earlier_id is None:
            continue
        kind = (
            "link"
            if isinstance(item, MemoryLink)
            else item.object_type.value.replace("derived", "derived memory")
        )
        late = sorted((i for i, at in earlier.items() if item.created_at < at), key=ID_ORDER)
        problems.append(
            GraphProblem(
                kind=GraphProblemKind.OUT_OF_TIME_ORDER,
                id=item.id,
                detail=f"the {kind} is dated {item.created_at.isoformat()}, before its "
                f"{depends[breach.earlier_id]} {breach.earlier_id} was created "
                f"({breach.bound.isoformat()}): an as_of view between the two shows it without what "
                "it depends on; written before the write path refused this, by an import or a direct "
                "graph write",
                related_ids=late,
            )
        )
    return problems


def _episode_forget_problems(
    collection: str,
    objects: Mapping[MemoryId, MemoryObject],
    links: Mapping[MemoryId, MemoryLink],
    records: Sequence[LifecycleRecord],
) -> list[GraphProblem]:
    """Forgotten episodes whose forget lacks suppressions (:func:`collection_forget_gaps`), pure."""
    return [
        GraphProblem(
            kind=GraphProblemKind.EPISODE_PARTS_NOT_FORGOTTEN,
            id=episode_id,
            detail=f"the episode was forgotten at {gaps[0].recorded_at.isoformat()}, but {len(gaps)} of "
            "its observation(s) or the memories grounded on them are still current (forgotten before "
            "forgetting an episode reached its parts)",
            related_ids=[record.target_id for record in gaps],
        )
        for episode_id, gaps in collection_forget_gaps(collection, objects, links.values(), records).items()
    ]


def _summary_drift(stored: StatsSummary, expected: StatsSummary) -> list[StatsDrift]:
    drift: list[StatsDrift] = []
    for counter in ("objects", "current_objects", "links"):
        have: Mapping[str, int] = getattr(stored, counter)
        want: Mapping[str, int] = getattr(expected, counter)
        for key in sorted(have.keys() | want.keys()):
            if have.get(key, 0) != want.get(key, 0):
                drift.append(
                    StatsDrift(counter=counter, key=key, stored=have.get(key, 0), expected=want.get(key, 0))
                )
    return drift


_UNSET: Final = object()


async def check(
    memory: CharacterMemory | GraphStore,
    vectors: VectorIndex | object | None = _UNSET,
    stats: RetrievalStatsStore | object | None = _UNSET,
) -> CheckReport:
    """Compare a collection's vectors and statistics with its graph, and look for partial batches.

    ``check(memory)`` checks an open memory while holding its writer lock
    (:meth:`CharacterMemory.exclusive`), so no commit of that memory is seen half-way. The old
    form ``check(graph, vectors, stats)`` still works for one minor version and warns
    (``DeprecationWarning``): pass the memory instead.

    Read-only. Reads every object, link and lifecycle record of the collection (in batches of
    512), their currency, every point id of the vector index and the statistics counters.

    * Vectors: the points :func:`~charmem.usecases.maintenance.current_index_entries` expects
      (what a rebuild writes) that are missing; points with no current object of an indexable type
      behind them (superseded, suppressed, unknown ids, notions). An episode a commit indexed
      before a later observation echoed its summary is backed by a current object and not
      reported.
    * Statistics: the counters per object type (all and current) and relation, the row count and
      the degree of every object, against rows built from the graph as
      :func:`~charmem.usecases.commit.rebuild_stats` builds them.
    * Graph: the partial-batch signs of :class:`GraphProblemKind`.

    Args:
        memory: the open memory of the collection (the deprecated form passes its graph store).
        vectors: deprecated form only: the vector index, or ``None`` when the index does not
            exist (a lost shard: every expected point is then reported missing).
        stats: deprecated form only: the retrieval-stats store, or ``None`` when it does not
            exist (counted as empty).

    Returns:
        CheckReport: what differs; ``report.consistent`` when nothing does.

    Raises:
        TypeError: a memory together with stores, or stores missing in the deprecated form.
        CharmemError: the memory is closed.
        BackendError: a store failed (an object or link that does not decode is reported, not
            raised).
    """
    if isinstance(memory, CharacterMemory):
        if vectors is not _UNSET or stats is not _UNSET:
            raise TypeError("check(memory) takes the memory alone: its stores come with it")
        async with memory.exclusive():
            stores = memory._stores
            return await check_stores(stores.graph, stores.vectors, stores.stats)
    if vectors is _UNSET or stats is _UNSET:
        raise TypeError("check takes an open CharacterMemory: check(memory)")
    warnings.warn(
        "charmem.admin.check(graph, vectors, stats) is deprecated and will be removed in the next "
        "minor version; pass the open memory: check(memory)",
        DeprecationWarning,
        stacklevel=2,
    )
    return await check_stores(memory, vectors, stats)  # type: ignore[arg-type]


async def check_stores(
    graph: GraphStore,
    vectors: VectorIndex | None,
    stats: RetrievalStatsStore | None,
) -> CheckReport:
    """:func:`check` on explicit stores, for the tools of this package (not re-exported).

    ``vectors`` or ``stats`` is ``None`` when that store does not exist (:func:`check_settings`
    checks a lost shard or stats file without creating one).

    Raises:
        StoreCorruptedError: the vector index holds points but a search of it fails (damaged
            files: ``charmem rebuild-vectors --drop``).
        BackendError: a store failed.
    """
    collection = graph.collection
    problems: list[GraphProblem] = []
    object_ids = await graph.object_ids()
    link_ids = await graph.link_ids()
    objects = await _read_all(graph.get_objects, object_ids, "object", problems)
    links = await _read_all(graph.get_links, link_ids, "link", problems)
    readable = sorted(objects)
    currency = await _chunked(graph.currency, readable, _READ_BATCH)
    records: list[LifecycleRecord] = []
    for start in range(0, len(object_ids), _READ_BATCH):
        records += await graph.get_records(object_ids[start : start + _READ_BATCH])
    stored = set(object_ids)
    purged = set(await graph.tombstones())
    problems += _graph_problems(collection, stored, objects, links, records, purged)
    problems += _supersession_problems(links.values(), records)
    problems += _time_order_problems(collection, objects, links)
    problems += _episode_forget_problems(collection, objects, links, records)

    entries, _ = current_index_entries(objects.values(), currency)
    expected_points = {entry.id for entry in entries}
    if vectors is None:
        points: set[MemoryId] = set()
        vector_points: int | None = None
    else:
        points = await vectors.point_ids()
        vector_points = len(points)
        if points:
            await _probe_search(vectors, collection)
    backed = {
        memory_id
        for memory_id, obj in objects.items()
        if obj.object_type in INDEXED_TYPES and currency.get(memory_id) is CurrencyStatus.CURRENT
    }
    unreadable = stored - objects.keys()
    missing_vectors = sorted(expected_points - points)
    orphan_vectors = sorted(points - backed - unreadable)

    reference = InMemoryRetrievalStatsStore(collection)
    await reference.record(
        [object_stats_row(obj, currency) for obj in objects.values()]
        + [link_stats_row(link) for link in links.values()]
    )
    expected_summary = await reference.summary()
    stored_summary = StatsSummary(objects={}, current_objects={}, links={})
    stats_rows: int | None = None
    if stats is not None:
        stored_summary = await stats.summary()
        stats_rows = await stats.row_count()
    drift = _summary_drift(stored_summary, expected_summary)
    expected_rows = await reference.row_count()
    if (stats_rows or 0) != expected_rows:
        drift.insert(0, StatsDrift(counter="rows", key="", stored=stats_rows or 0, expected=expected_rows))
    for start in range(0, len(readable), _DEGREE_BATCH):
        chunk = readable[start : start + _DEGREE_BATCH]
        want = await reference.degrees(chunk)
        have = await stats.degrees(chunk) if stats is not None else dict.fromkeys(chunk, 0)
        drift += [
            StatsDrift(counter="degree", key=str(i), stored=have.get(i, 0), expected=want[i])
            for i in chunk
            if have.get(i, 0) != want[i]
        ]

    report = CheckReport(
        collection=collection,
        objects=len(object_ids),
        links=len(link_ids),
        expected_vectors=len(expected_points),
        vector_points=vector_points,
        stats_rows=stats_rows,
        missing_vectors=tuple(missing_vectors),
        orphan_vectors=tuple(orphan_vectors),
        stats_drift=tuple(drift),
        graph_problems=tuple(sorted(problems, key=lambda p: (p.kind.value, p.id))),
    )
    log.info(
        "collection_checked",
        collection=collection,
        consistent=report.consistent,
        objects=report.objects,
        missing_vectors=len(missing_vectors),
        orphan_vectors=len(orphan_vectors),
        stats_drift=len(drift),
        graph_problems=len(problems),
    )
    return report


async def _probe_search(vectors: VectorIndex, collection: str) -> None:
    """Search the index once (dense and lexical cues, every point scanned): it must answer.

    Counting points reads none of their vectors; a damaged vector or payload file shows only
    when a search reads it, so check would call a collection consistent that no retrieval can
    search.

    Raises:
        StoreCorruptedError: the search failed.
    """
    probe = [1.0] + [0.0] * (vectors.vector_size - 1)
    try:
        await vectors.search(VectorQuery(vector=probe, limit=1, text="check"))
    except BackendError as exc:
        raise StoreCorruptedError(
            f"the vector index of collection {collection!r} holds points but cannot be searched "
            f"({exc}); its files are damaged. The vectors are derived data: rebuild them from the "
            "graph with `charmem rebuild-vectors --drop` (or CharacterMemory.open(..., "
            "rebuild_vectors=True))"
        ) from exc


def refuse_wiping_derived_data(report: CheckReport) -> None:
    """Refuse a repair that would empty vectors or statistics because the graph holds nothing.

    The graph is the authority, but an empty graph beside vectors or statistics is far more
    likely a lost or replaced graph store (or ``OXIGRAPH_PATH`` pointing elsewhere) than a
    collection that forgot everything: rebuilding from it would delete the only remaining trace.

    Raises:
        StoreCorruptedError: the graph holds no object and no link while the vector index holds
            points or the statistics hold rows.
    """
    if report.objects or report.links or not (report.vector_points or report.stats_rows):
        return
    raise StoreCorruptedError(
        f"collection {report.collection!r}: the graph holds nothing while the vector index holds "
        f"{report.vector_points or 0} points and the statistics {report.stats_rows or 0} rows; "
        "repairing would delete them, so nothing was changed. The graph store looks lost or "
        "replaced: restore it (or point OXIGRAPH_PATH / --store at the right one), or restore a "
        "backup with `charmem import`; to discard these vectors on purpose, run "
        "`charmem rebuild-vectors --drop`"
    )


async def repair(memory: CharacterMemory, report: CheckReport) -> RepairOutcome:
    """Repair what ``report`` found: old episode forgets, then vectors and statistics.

    First the forgotten episodes reported as ``EPISODE_PARTS_NOT_FORGOTTEN`` get the
    suppressions their forget lacks, appended at the original forget's record time with the
    record ids a forget derives (repairing twice writes nothing new); their vectors leave
    candidate recall. Then :meth:`CharacterMemory.rebuild_vector_index` runs when the vectors
    differ (or removing those vectors failed) and :meth:`CharacterMemory.rebuild_stats` when the
    statistics drifted (or refreshing them failed); each waits for writers. Other graph problems
    are left alone: rebuilding cannot know what a partial batch held (replay its plan). Check
    again afterwards to confirm.

    Args:
        memory: the open collection the report is about.
        report: a :func:`check` report of it.

    Returns:
        RepairOutcome: the rebuilds that ran.

    Raises:
        ConfigurationError: the report is about another collection.
        StoreCorruptedError: the graph holds nothing while vectors or statistics exist
            (:func:`refuse_wiping_derived_data`); nothing was changed.
        BackendError: a store or the embedder failed (run the repair again).
    """
    if report.collection != memory.collection:
        raise ConfigurationError(
            f"the report is about collection {report.collection!r}, not {memory.collection!r}",
            key="collection",
        )
    refuse_wiping_derived_data(report)
    suppressed, markers = await _complete_episode_forgets(memory, report)
    vector_failed = any(isinstance(m, RepairMarker.VectorMaintenance) for m in markers)
    stats_failed = any(isinstance(m, RepairMarker.StatsMaintenance) for m in markers)
    rebuild_vectors = vector_failed or not report.vectors_consistent
    vectors = await memory.rebuild_vector_index() if rebuild_vectors else None
    rows = await memory.rebuild_stats() if stats_failed or not report.stats_consistent else None
    log.info(
        "collection_repaired",
        collection=memory.collection,
        suppressed=len(suppressed),
        vectors=vectors is not None,
        stats=rows is not None,
    )
    return RepairOutcome(vectors=vectors, stats_rows=rows, suppressed_ids=suppressed)


async def _complete_episode_forgets(
    memory: CharacterMemory, report: CheckReport
) -> tuple[tuple[MemoryId, ...], list[RepairMarkerType]]:
    """Append the suppressions the report's forgotten episodes lack (writers wait meanwhile)."""
    episodes = sorted(
        {p.id for p in report.graph_problems if p.kind is GraphProblemKind.EPISODE_PARTS_NOT_FORGOTTEN}
    )
    if not episodes:
        return (), []
    stores = memory._lifecycle_stores()
    async with memory.exclusive():
        return await complete_episode_forgets(
            episodes,
            collection=memory.collection,
            graph=stores.graph,
            vectors=stores.vectors,
            embedder=stores.embedder,
            stats=stores.stats,
        )


async def _open_existing(port: str, mode: str, settings: Settings, collection: str, **kwargs: Any) -> Any:
    """The adapter, or ``None`` when its factory says nothing is stored yet (``exists`` False)."""
    factory = load_factory(port, mode)
    if await asyncio.to_thread(factory.exists, settings, collection) is False:
        return None
    return await factory.open(settings, collection, **kwargs)


async def check_settings(
    settings: Settings, collection: str, *, embedding_provider: EmbeddingProvider
) -> CheckReport:
    """Open the stores ``settings`` select for ``collection`` without creating any, and :func:`check`.

    A store whose adapter's factory can tell whether it exists (``AdapterFactory.exists``: the
    persistent Oxigraph store, the Qdrant Edge shard, the SQLite stats file) is opened only when
    it exists: a missing vector shard or stats file is checked as missing (see :func:`check`);
    a missing graph store is an error, since there is nothing to check against.

    Args:
        settings: the deployment settings.
        collection: the collection name, checked first.
        embedding_provider: the collection's embedder (the vector index is opened with its
            fingerprint).

    Returns:
        CheckReport: the report (the stores are closed again).

    Raises:
        ConfigurationError: bad collection name; no graph store where the settings point; the
            collection holds nothing in any store (a mistyped name?); an adapter is missing.
        StoreLockedError: an embedded store is held by another process.
        DimensionMismatchError, EmbedderMismatchError: the vectors were made by another embedder.
        BackendError: a store failed.
    """
    validate_collection_name(collection)
    opened: list[Any] = []
    try:
        graph = await _open_existing("graph", settings.graph_store_mode, settings, collection)
        if graph is None:
            raise ConfigurationError(
                f"there is no graph store for GRAPH_STORE_MODE={settings.graph_store_mode!r} at "
                f"{settings.oxigraph_path}; nothing to check (point OXIGRAPH_PATH or --store at an "
                "existing store)",
                key="OXIGRAPH_PATH",
            )
        opened.append(graph)
        stats = await _open_existing("stats", settings.retrieval_stats_store_mode, settings, collection)
        if stats is not None:
            opened.append(stats)
        vectors = await _open_existing(
            "vectors",
            settings.vector_store_mode,
            settings,
            collection,
            model_id=embedding_provider.model_id,
            vector_size=embedding_provider.vector_size,
        )
        if vectors is not None:
            opened.append(vectors)
        report = await check_stores(graph, vectors, stats)
        if report.objects == report.links == 0 and not report.vector_points and not report.stats_rows:
            raise ConfigurationError(
                f"collection {collection!r} holds nothing in these stores; check its name "
                "(--collection) and the store paths",
                key="collection",
            )
        return report
    finally:
        for adapter in reversed(opened):
            await adapter.close()
