"""What :func:`~charmem.admin.check` reports: graph problems, statistics drift, the report itself.

The report is plain data with a versioned dict layout (:data:`CHECK_FORMAT_VERSION`) for scripts
and a human-readable :meth:`CheckReport.describe` for the ``charmem check`` command.
"""

from __future__ import annotations

from typing import Any, Final

import attrs

from charmem.domain._fields import ChoiceEnum, id_set
from charmem.domain.ids import MemoryId
from charmem.domain.surfaces import VectorSurface
from charmem.usecases.maintenance import VectorRebuildReport

__all__ = [
    "CHECK_FORMAT_VERSION",
    "REPAIRABLE_GRAPH_PROBLEMS",
    "CheckReport",
    "GraphProblem",
    "GraphProblemKind",
    "RepairOutcome",
    "StatsDrift",
    "SurfaceVectors",
]

#: Version of :meth:`CheckReport.to_dict`'s layout: 2 adds ``vectors.surfaces`` (the scene
#: surfaces' points).
CHECK_FORMAT_VERSION: Final = 2


class GraphProblemKind(ChoiceEnum):
    """What is wrong in the graph itself.

    Signs of a partial batch (:mod:`charmem.admin._partial_batches`), breaches of the
    supersession and time-order rules, and old forgets of episodes
    (:mod:`charmem.admin._rule_breaches`).
    """

    DANGLING_LINK = "dangling_link"
    """A link whose ``from_id`` or ``to_id`` is not a stored object."""

    MISSING_REFERENCE = "missing_reference"
    """An object or lifecycle record names ids that are not stored objects."""

    MISSING_DERIVED_LINK = "missing_derived_link"
    """An object lacks a link commit derives from it (:func:`~charmem.usecases.planning.derive_links`)."""

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

    RACED_WRITE = "raced_write"
    """An id stored with several contents by writers of several processes that raced.

    Only a write stored after its writer lost the store's writer exclusion leaves one
    (:class:`charmem.ports.RacedWrites`); ``repair`` keeps one content, by a rule every process
    computes alike, and removes the others.
    """

    # Supersession rules (not partial batches: writes the current validation refuses, stored by
    # an older version, an import or a direct graph write; see _rule_breaches).

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
REPAIRABLE_GRAPH_PROBLEMS: Final = frozenset(
    {GraphProblemKind.EPISODE_PARTS_NOT_FORGOTTEN, GraphProblemKind.RACED_WRITE}
)


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
class SurfaceVectors:
    """The points of one scene surface (setting words, person words) against the graph's.

    Attributes:
        surface: the surface (a report's ``surfaces`` never hold ``CONTENT``: its own vector
            fields count that one).
        expected: points a rebuild writes on it (current episodes whose scene has its words).
        points: points the index holds on it; ``None`` when the vector index is missing.
        missing: expected ids without a point on it, sorted.
        orphans: ids with a point on it but no current indexable object behind them, sorted.
    """

    surface: VectorSurface = attrs.field(converter=VectorSurface)
    expected: int
    points: int | None
    missing: tuple[MemoryId, ...] = ()
    orphans: tuple[MemoryId, ...] = ()

    @property
    def consistent(self) -> bool:
        """Nothing missing and no orphan on this surface."""
        return not self.missing and not self.orphans

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types: ``expected``, ``points``, ``missing``, ``orphans``."""
        return {
            "expected": self.expected,
            "points": self.points,
            "missing": [str(i) for i in self.missing],
            "orphans": [str(i) for i in self.orphans],
        }


@attrs.frozen(kw_only=True)
class CheckReport:
    """What :func:`check` found in one collection.

    Attributes:
        collection: the collection checked.
        objects: stored objects (count, readable or not).
        links: stored links (count).
        expected_vectors: content points the vector index should hold (current episodes with
            their own summary, observations, derived memories and threads).
        vector_points: content points it holds; ``None`` when the vector index is missing (a
            lost shard).
        stats_rows: rows the stats store holds; ``None`` when the stats store is missing.
        missing_vectors: current indexable objects without a content point, sorted.
        orphan_vectors: content points without a current indexable graph object behind them,
            sorted.
        surfaces: the scene surfaces' points (:class:`SurfaceVectors`: setting words, then
            person words), compared the same way.
        stats_drift: the statistics counters that differ from the graph's.
        graph_problems: signs of partial graph batches and stored rule breaches (never
            expected; see :class:`GraphProblemKind`).
    """

    collection: str
    objects: int
    links: int
    expected_vectors: int
    vector_points: int | None
    stats_rows: int | None
    missing_vectors: tuple[MemoryId, ...] = ()
    orphan_vectors: tuple[MemoryId, ...] = ()
    surfaces: tuple[SurfaceVectors, ...] = ()
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
        """Candidate recall holds exactly the current indexable objects, on every surface.

        A missing index counts as consistent when nothing should be indexed.
        """
        return (
            not self.missing_vectors
            and not self.orphan_vectors
            and all(surface.consistent for surface in self.surfaces)
        )

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
    def graph_looks_lost(self) -> bool:
        """Whether the graph holds nothing while the vectors hold points or the stats rows.

        The graph read is then most likely not the one that wrote them (a lost or replaced
        store, a settings path or SPARQL shard pointing elsewhere): rebuilding from it would
        delete the only remaining trace, so this is never repairable.
        """
        return not self.objects and not self.links and bool(self.vector_points or self.stats_rows)

    @property
    def repairable(self) -> bool:
        """Whether :func:`repair` can make the collection consistent.

        True when only derived data differs and every graph problem is one repair settles
        (``RACED_WRITE``) or appends the missing records for (``EPISODE_PARTS_NOT_FORGOTTEN``);
        never while :attr:`graph_looks_lost`.
        """
        if self.graph_looks_lost:
            return False
        return all(problem.kind in REPAIRABLE_GRAPH_PROBLEMS for problem in self.graph_problems)

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
                "surfaces": {surface.surface.value: surface.to_dict() for surface in self.surfaces},
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

    def _vector_differences(self, limit: int) -> list[str]:
        """The missing and orphan points, content first, then each scene surface's."""
        lines = [f"  vector missing for {memory_id}" for memory_id in self.missing_vectors[:limit]]
        lines += [f"  vector without a current object: {i}" for i in self.orphan_vectors[:limit]]
        for surface in self.surfaces:
            name = surface.surface.value
            lines += [f"  {name} vector missing for {memory_id}" for memory_id in surface.missing[:limit]]
            lines += [f"  {name} vector without a current object: {i}" for i in surface.orphans[:limit]]
        return lines

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
            *_surface_lines(self.surfaces),
            f"  stats: {rows} rows, {len(self.stats_drift)} counter(s) drifted",
        ]
        for problem in self.graph_problems[:limit]:
            lines.append(f"  graph {problem.kind.value} {problem.id}: {problem.detail}")
        lines += self._vector_differences(limit)
        for drift in self.stats_drift[:limit]:
            key = f"[{drift.key}]" if drift.key else ""
            lines.append(f"  stats {drift.counter}{key}: stored {drift.stored}, graph says {drift.expected}")
        if self.vector_index_missing and self.expected_vectors:
            lines.append("  the vector index is missing (a lost shard): repair rebuilds it from the graph")
        if self.graph_looks_lost:
            lines.append(
                "  not repairable: the graph holds nothing beside these vectors or stats, so it "
                "looks lost or misplaced and a repair would delete them; point the settings at "
                "the graph that holds the collection (for a SPARQL service: SPARQL_ENDPOINTS "
                "unchanged or the collection pinned to its shard), or restore a backup with "
                "`charmem import`"
            )
        elif not self.repairable:
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


def _surface_lines(surfaces: tuple[SurfaceVectors, ...]) -> list[str]:
    """One summary line per scene surface that holds or expects points."""
    return [
        f"  {surface.surface.value} vectors: "
        f"{'missing' if surface.points is None else surface.points} points for {surface.expected} "
        f"expected, {len(surface.missing)} missing, {len(surface.orphans)} orphan(s)"
        for surface in surfaces
        if surface.expected or surface.points
    ]


@attrs.frozen(kw_only=True)
class RepairOutcome:
    """What :func:`repair` rebuilt.

    Attributes:
        vectors: the vector rebuild's report, ``None`` when the vectors were consistent.
        stats_rows: rows written by the stats rebuild, ``None`` when the stats were consistent.
        suppressed_ids: memories suppressed by completing old forgets of episodes, sorted.
        settled_ids: ids stored with several contents that now hold one (``RACED_WRITE``), sorted.
    """

    vectors: VectorRebuildReport | None = None
    stats_rows: int | None = None
    suppressed_ids: tuple[MemoryId, ...] = ()
    settled_ids: tuple[MemoryId, ...] = ()
