"""The store's layout version, the refusal of other layouts, and the migration from layouts 1 and 2.

A collection's graph records the layout it is written in as ``<graph> vocab:layoutVersion n``
(inside the graph, so an export carries it); the first write into an empty collection adds it.
Layout 1 (every field a triple of its own) recorded nothing; layout 2 is the compact one
(:mod:`charmem_oxigraph._codec`); layout 3 (:data:`CURRENT_LAYOUT`) is layout 2 plus a
``vocab:unstoredEndpoint`` mark on each link naming an endpoint before it was stored
(:func:`charmem_oxigraph._writing.unstored_endpoints`), so a read binds one IRI per endpoint of
known kind. Opening a collection whose graph holds data without the current version is refused
with :class:`~charmem.errors.StoreLayoutError`; :func:`pending`, :func:`migration_step` and
:func:`endpoint_marks` are the shared algorithm ``charmem migrate`` runs, one transaction per
batch of nodes, free of I/O (plans as in :mod:`charmem_oxigraph._reads`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Sequence
from typing import Any, Final

import attrs
from charmem.admin import LayoutMigration
from charmem.errors import BackupFormatError, StoreLayoutError
from pyoxigraph import Literal

from charmem_oxigraph import _legacy
from charmem_oxigraph import _logic as lg
from charmem_oxigraph import _queries as q
from charmem_oxigraph import _vocab as v
from charmem_oxigraph._codec import ASSERTION, FIELDS, RECORD, CorruptNodeError, record_line

__all__ = [
    "CURRENT_LAYOUT",
    "MIGRATION_BATCH",
    "REPLACED_PREDICATES",
    "LayoutState",
    "MigrationStep",
    "batches",
    "check_dump_layout",
    "check_layout",
    "endpoint_marks",
    "layout_state",
    "marked_links",
    "migratable",
    "migrate_in_place",
    "migration_report",
    "migration_step",
    "pending",
    "version_line",
    "version_update",
]

#: The layout this charmem reads and writes.
CURRENT_LAYOUT: Final = 3
#: The compact layout without the ``vocab:unstoredEndpoint`` marks (migrated by adding them).
_UNMARKED_LAYOUT: Final = 2
#: Nodes rewritten per transaction by a migration: one update request stays a few hundred
#: kilobytes (a SPARQL server takes it), and the transaction is short.
MIGRATION_BATCH: Final = 500

#: The predicates the compact layout keeps as triples (their layout-1 triples are the same).
KEPT_PREDICATES: Final = (
    v.RDF_TYPE,
    v.VOCAB + RECORD,
    v.VOCAB + ASSERTION,
    *sorted({v.VOCAB + f.prop for fields in FIELDS.values() for f in fields if f.indexed}),
)
#: The field predicates of layout 1 that the compact layout does not keep: what a migration
#: removes from a node once its record literal holds them. Triples of any other predicate (a
#: caller's own annotations) stay where they are.
REPLACED_PREDICATES: Final = tuple(
    sorted({v.VOCAB + f.prop for fields in FIELDS.values() for f in fields} - set(KEPT_PREDICATES))
)
#: What layout 1 held on an assertion node and the compact layout does not (its order is the
#: record literal's).
_DROPPED_ASSERTION_PROPS: Final = (v.RDF_TYPE, v.VOCAB + _legacy.POSITION)


@attrs.frozen
class LayoutState:
    """What a collection's graph says about its layout.

    Attributes:
        found: the recorded layout version (``None``: none recorded).
        has_data: the graph holds at least one statement.
    """

    found: int | None
    has_data: bool

    @property
    def current(self) -> bool:
        """Readable and writable as is: the current version, or an empty graph."""
        return self.found == CURRENT_LAYOUT or (self.found is None and not self.has_data)


def layout_state(graph: str) -> Generator[str, list[Any], LayoutState]:
    """Plan: read the recorded layout version and whether the graph holds anything (two queries)."""
    versions = [row["v"].value for row in (yield q.layout_version(graph))]
    has_data = bool((yield q.any_statement(graph)))
    found: int | None = None
    if versions:
        try:
            found = max(int(value) for value in versions)
        except ValueError:
            found = -1  # not a number: an unknown layout
    return LayoutState(found, has_data)


def check_layout(state: LayoutState, *, store: str, migrate_hint: str) -> None:
    """Refuse a collection not in the current layout.

    Args:
        state: from :func:`layout_state`.
        store: where the store is and which collection, for the message.
        migrate_hint: the ``charmem migrate`` command line that upgrades this store.

    Raises:
        StoreLayoutError: the graph holds data of layout 1 (no version record) or records another
            version; nothing was read or written.
    """
    if state.current:
        return
    if state.found is None or state.found < CURRENT_LAYOUT:
        found = "layout 1 (no layout version recorded)" if state.found is None else f"layout {state.found}"
        raise StoreLayoutError(
            f"{store} holds charmem data in {found}; this charmem reads layout {CURRENT_LAYOUT}. "
            f"Upgrade it in place with `{migrate_hint}` (back it up first), then open it again; "
            "nothing was read or written",
            store=store,
            found=state.found,
            expected=CURRENT_LAYOUT,
        )
    raise StoreLayoutError(
        f"{store} records graph layout {state.found}, which this charmem does not know (it reads "
        f"layout {CURRENT_LAYOUT}): it was written by a newer charmem. Upgrade charmem "
        "(pip install -U charmem-oxigraph) to open it; nothing was read or written",
        store=store,
        found=state.found,
        expected=CURRENT_LAYOUT,
    )


def check_dump_layout(term: object) -> None:
    """Refuse a dump's recorded layout version unless a charmem wrote it and this one reads it.

    Layout 1 records none; 2 and :data:`CURRENT_LAYOUT` are recorded as integer literals.

    Args:
        term: the object of a dump's ``vocab:layoutVersion`` statement.

    Raises:
        BackupFormatError: ``term`` is not an integer literal, is below 2 (a damaged backup), or
            above :data:`CURRENT_LAYOUT` (written by a newer charmem).
    """
    value = term.value if isinstance(term, Literal) else str(term)
    try:
        found = int(value)
    except ValueError:
        found = None
    if found is None or found < _UNMARKED_LAYOUT:
        why = "which is not a number" if found is None else "which no charmem writes"
        raise BackupFormatError(
            f"the backup's graph records layout version {value}, {why} (layout 1 records none, "
            f"later ones 2 to {CURRENT_LAYOUT}): the backup is damaged; restore another copy"
        )
    if found > CURRENT_LAYOUT:
        raise BackupFormatError(
            f"the backup's graph is in layout {found}, written by a newer charmem (this one reads "
            f"layout {CURRENT_LAYOUT}): upgrade charmem-oxigraph to restore it"
        )


def version_line(graph: str) -> str:
    """The N-Triples line recording :data:`CURRENT_LAYOUT` in the collection's graph ``graph``."""
    return f"<{graph}> <{v.VOCAB}{v.LAYOUT_VERSION}> {Literal(CURRENT_LAYOUT)} ."


def endpoint_marks(graph: str) -> Generator[str, list[Any], list[str]]:
    """Plan: the ``vocab:unstoredEndpoint`` lines a graph of layout 1 or 2 lacks (N-Triples, sorted).

    A link endpoint IRI that names no stored node (:func:`charmem_oxigraph._queries.unmarked_endpoints`)
    was written before its endpoint was stored; one that names a node already names it by the
    kind reads bind. One scan of the links, once per migration.
    """
    mark = f"<{v.VOCAB}{v.UNSTORED_ENDPOINT}>"
    rows = yield q.unmarked_endpoints(graph)
    return sorted({f"<{row['l'].value}> {mark} <{row['x'].value}> ." for row in rows})


def marked_links(marks: Sequence[str]) -> int:
    """How many links the ``marks`` (from :func:`endpoint_marks`) mark."""
    return len({line.split(" ", 1)[0] for line in marks})


def version_update(graph: str) -> str:
    """The update recording :data:`CURRENT_LAYOUT` in place of any version ``graph`` records."""
    return q.version_update(graph, version_line(graph))


def pending(graph: str) -> Generator[str, list[Any], list[str]]:
    """Plan: the IRIs of every item node without a record literal (layout-1 nodes), sorted.

    One scan of the graph's ``rdf:type`` triples; the migration then rewrites them in batches.
    """
    return sorted({row["x"].value for row in (yield q.unmigrated(graph))})


def migration_report(
    collection: str, store: str, outcome: tuple[int | None, int, tuple[str, ...]], started: float
) -> LayoutMigration:
    """The report of one migration: ``outcome`` is (found version, nodes rewritten, unreadable).

    ``started`` is the :func:`time.perf_counter` reading taken when it began (seconds).
    """
    found, count, unreadable = outcome
    return LayoutMigration(
        collection=collection,
        store=store,
        found=found,
        layout=CURRENT_LAYOUT,
        objects=count,
        seconds=time.perf_counter() - started,
        unreadable=unreadable,
    )


def batches(iris: Sequence[str]) -> list[Sequence[str]]:
    """``iris`` (from :func:`pending`) in batches of :data:`MIGRATION_BATCH`, each one transaction."""
    return [iris[start : start + MIGRATION_BATCH] for start in range(0, len(iris), MIGRATION_BATCH)]


@attrs.frozen
class MigrationStep:
    """One batch of a migration.

    Attributes:
        update: the update request rewriting the batch's decodable nodes (``None``: none is).
        rewritten: how many nodes it rewrites.
        unreadable: IRIs of the batch's nodes that do not decode as layout 1, left as they are.
    """

    update: str | None
    rewritten: int
    unreadable: tuple[str, ...]


def migration_step(graph: str, iris: Sequence[str]) -> Generator[str, list[Any], MigrationStep]:
    """Plan: the update rewriting the layout-1 nodes ``iris`` (a batch of :func:`pending`).

    Reads every triple of the nodes (and of their assertion nodes), decodes them with the layout-1
    decoder, and builds one update request (:func:`charmem_oxigraph._queries.migrate`) that removes
    the field triples the record replaces (:data:`REPLACED_PREDICATES`; other predicates stay)
    and adds each node's record literal in the same transaction, so a node is never unreadable
    and a migration stopped at any point resumes where it stopped (:func:`pending` no longer
    lists the nodes already rewritten). A node that does not decode is left as it is and named
    in the step's ``unreadable`` (``charmem check`` reports it as unreadable afterwards, as it
    did before): one damaged node does not hold the rest of the collection back.
    """
    nodes, _purged = lg.read_lookup((yield q.nodes(graph, iris, assertions=True)))
    iri_of = {v.memory_id_of(iri): iri for iri in iris}
    items = {}
    unreadable = []
    for memory_id, node in nodes.items():
        try:
            items[memory_id] = _legacy.decode_item(node)
        except CorruptNodeError:
            unreadable.append(iri_of.get(memory_id, node.iri))
    if not items:
        return MigrationStep(None, 0, tuple(sorted(unreadable)))
    rewritten = [iri_of[memory_id] for memory_id in items if memory_id in iri_of]
    lines = [record_line(item) for item in items.values()]
    links = [iri for iri in rewritten if v.kind_of_iri(iri) == "link"]
    update = q.migrate(graph, rewritten, links, REPLACED_PREDICATES, _DROPPED_ASSERTION_PROPS, lines)
    return MigrationStep(update, len(items), tuple(sorted(unreadable)))


#: A migration's outcome: (the layout version found, nodes rewritten, unreadable node IRIs).
MigrationOutcome = tuple[int | None, int, tuple[str, ...]]


def migrate_in_place(
    drive: Callable[[Generator[str, list[Any], Any]], Any],
    update: Callable[[str], None],
    graph: str,
    *,
    store: str,
    migrate_hint: str,
) -> MigrationOutcome:
    """Rewrite every layout-1 node of ``graph``, mark its links, then record the version (blocking).

    The embedded store's migration; the caller holds the writer lock. One ``update`` per batch
    of nodes (:func:`batches`), one for the endpoint marks (:func:`endpoint_marks`, layouts 1 and
    2), the version last, so a crash leaves no node unreadable and a second run finishes the job.

    Args:
        drive: runs a read plan to its answer.
        update: applies one SPARQL update (one transaction).
        graph: the collection's graph IRI.
        store: where the store is, for errors.
        migrate_hint: the ``charmem migrate`` command, for errors.

    Returns:
        MigrationOutcome: the version found, the nodes rewritten (layout 1) or links marked
        (layout 2), and the unreadable nodes.

    Raises:
        StoreLayoutError: the graph records a layout other than 1, 2 and the current one.
    """
    state = drive(layout_state(graph))
    if state.current:
        return state.found, 0, ()
    if not migratable(state):
        check_layout(state, store=store, migrate_hint=migrate_hint)
    count, unreadable = 0, list[str]()
    if state.found is None:
        for batch in batches(drive(pending(graph))):
            step = drive(migration_step(graph, batch))
            if step.update is not None:
                update(step.update)
            count += step.rewritten
            unreadable.extend(step.unreadable)
    marks = drive(endpoint_marks(graph))
    if marks:
        update(q.insert_data(graph, marks))
    update(version_update(graph))
    return state.found, count or marked_links(marks), tuple(unreadable)


def migratable(state: LayoutState) -> bool:
    """Whether ``charmem migrate`` upgrades a graph in ``state``: layout 1 (no record) or 2."""
    return state.found is None or state.found == _UNMARKED_LAYOUT
