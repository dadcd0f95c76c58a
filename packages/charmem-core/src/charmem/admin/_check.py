"""``check``: is a collection's derived data in step with its graph authority?

The graph is the authority; candidate recall (vectors) and retrieval statistics are derived from it
by repairable writes that follow the graph batch. A crash between those writes, a lost vector
shard or a deleted stats file leaves them behind; :func:`check` says what differs from what
:func:`~charmem.usecases.maintenance.rebuild_vector_index` and
:func:`~charmem.usecases.commit.rebuild_stats` would make, and :func:`~charmem.admin.repair` runs
those rebuilds.

It also reports what the graph itself should never hold: signs of a half-written batch
(:mod:`charmem.admin._partial_batches`), stored breaches of the supersession and time-order rules
and forgets of episodes written before forgetting reached an episode's parts
(:mod:`charmem.admin._rule_breaches`), and stored triples that do not decode into an object or
link (a node missing a required triple). The report's types are in :mod:`charmem.admin._report`.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, TypeVar

import attrs

from charmem.admin._partial_batches import partial_batch_problems
from charmem.admin._repair import refuse_wiping_derived_data, repair
from charmem.admin._report import (
    CHECK_FORMAT_VERSION,
    CheckReport,
    GraphProblem,
    GraphProblemKind,
    RepairOutcome,
    StatsDrift,
    SurfaceVectors,
)
from charmem.admin._rule_breaches import (
    episode_forget_problems,
    supersession_problems,
    time_order_problems,
)
from charmem.composition import load_factory
from charmem.domain.graph import LifecycleRecord
from charmem.domain.ids import MemoryId
from charmem.domain.model import MemoryLink, MemoryObject
from charmem.domain.retrieval import CurrencyStatus
from charmem.errors import BackendError, ConfigurationError, StoreCorruptedError
from charmem.log import get_logger
from charmem.memory import CharacterMemory
from charmem.ports import (
    EmbeddingProvider,
    GraphStore,
    RacedWrites,
    RetrievalStatsStore,
    StatsSummary,
    VectorIndex,
    VectorQuery,
    VectorSurface,
)
from charmem.settings import Settings, validate_collection_name
from charmem.stats.memory import InMemoryRetrievalStatsStore
from charmem.usecases.commit import link_stats_row, object_stats_row
from charmem.usecases.maintenance import INDEXED_TYPES, current_index_entries

__all__ = [
    "CHECK_FORMAT_VERSION",
    "CheckReport",
    "GraphProblem",
    "GraphProblemKind",
    "RepairOutcome",
    "StatsDrift",
    "SurfaceVectors",
    "check",
    "check_settings",
    "check_stores",
    "refuse_wiping_derived_data",
    "repair",
    "unreadable_items",
]

log = get_logger("charmem.admin")

_READ_BATCH: Final = 512
_DEGREE_BATCH: Final = 400  # ids per degrees() call: SQLite binds each id twice
_K = TypeVar("_K")
_V = TypeVar("_V")


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


async def _read_records(
    graph: GraphStore, targets: Sequence[MemoryId], problems: list[GraphProblem]
) -> list[LifecycleRecord]:
    """The records about ``targets``; a batch that does not decode is split until the bad target is found."""
    try:
        return await graph.get_records(targets)
    except BackendError as exc:
        if len(targets) == 1:
            detail = f"the lifecycle records about it cannot be read: {exc}"
            problems.append(GraphProblem(kind=GraphProblemKind.UNREADABLE, id=targets[0], detail=detail))
            return []
    middle = len(targets) // 2
    return [
        *await _read_records(graph, targets[:middle], problems),
        *await _read_records(graph, targets[middle:], problems),
    ]


def _raced_problem(memory_id: MemoryId) -> GraphProblem:
    return GraphProblem(
        kind=GraphProblemKind.RACED_WRITE,
        id=memory_id,
        detail="stored with several contents by writers of several processes that raced (a write "
        "stored after its writer lost the writer lease); `charmem check --repair` keeps one",
    )


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

    * Vectors, each surface on its own (content, then the scene surfaces in
      ``report.surfaces``): the points :func:`~charmem.usecases.maintenance.current_index_entries`
      expects (what a rebuild writes) that are missing; points with no current object of an
      indexable type behind them (superseded, suppressed, unknown ids, notions). An episode a
      commit indexed before a later observation echoed its summary is backed by a current object
      and not reported.
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
    graph_read = await _read_graph(graph)
    compared = {s: await _compare_vectors(graph_read, vectors, s) for s in VectorSurface}
    content = compared.pop(VectorSurface.CONTENT)
    stats_rows, drift = await _compare_stats(graph_read, stats)
    problems = graph_read.problems
    report = CheckReport(
        collection=graph_read.collection,
        objects=len(graph_read.object_ids),
        links=len(graph_read.link_ids),
        expected_vectors=content.expected,
        vector_points=content.points,
        stats_rows=stats_rows,
        missing_vectors=content.missing,
        orphan_vectors=content.orphans,
        surfaces=tuple(compared.values()),
        stats_drift=tuple(drift),
        graph_problems=tuple(sorted(problems, key=lambda p: (p.kind.value, p.id))),
    )
    log.info(
        "collection_checked",
        collection=graph_read.collection,
        consistent=report.consistent,
        objects=report.objects,
        missing_vectors=len(content.missing) + sum(len(s.missing) for s in compared.values()),
        orphan_vectors=len(content.orphans) + sum(len(s.orphans) for s in compared.values()),
        stats_drift=len(drift),
        graph_problems=len(problems),
    )
    return report


@attrs.frozen(kw_only=True)
class _GraphRead:
    """Everything :func:`check_stores` read from the graph, and the graph problems found in it.

    Attributes:
        collection: the collection.
        object_ids: every stored object id (readable or not).
        link_ids: every stored link id.
        objects: the readable objects by id.
        links: the readable links by id.
        currency: the currency of every readable object.
        expected_points: the ids a vector rebuild would index on each surface
            (:func:`current_index_entries`).
        problems: unreadable items, partial-batch signs and rule breaches, in the order found.
    """

    collection: str
    object_ids: Sequence[MemoryId]
    link_ids: Sequence[MemoryId]
    objects: Mapping[MemoryId, MemoryObject]
    links: Mapping[MemoryId, MemoryLink]
    currency: Mapping[MemoryId, CurrencyStatus]
    expected_points: Mapping[VectorSurface, frozenset[MemoryId]]
    problems: tuple[GraphProblem, ...]


_EveryItem = tuple[
    list[MemoryId],
    list[MemoryId],
    dict[MemoryId, MemoryObject],
    dict[MemoryId, MemoryLink],
    list[LifecycleRecord],
]


async def _read_every_item(graph: GraphStore, problems: list[GraphProblem]) -> _EveryItem:
    """Object ids, link ids, readable objects, readable links, records; the unreadable to ``problems``."""
    object_ids = await graph.object_ids()
    link_ids = await graph.link_ids()
    objects = await _read_all(graph.get_objects, object_ids, "object", problems)
    links = await _read_all(graph.get_links, link_ids, "link", problems)
    records: list[LifecycleRecord] = []
    for start in range(0, len(object_ids), _READ_BATCH):
        records += await _read_records(graph, object_ids[start : start + _READ_BATCH], problems)
    return object_ids, link_ids, objects, links, records


async def unreadable_items(memory: CharacterMemory) -> list[GraphProblem]:
    """The stored items of the memory's collection that do not decode, as :func:`check` finds them.

    Reads every object, link and lifecycle record in batches (what ``charmem export`` warns about:
    a backup holding them cannot be restored).

    Returns:
        list[GraphProblem]: one ``UNREADABLE`` problem per item that does not decode, in the order
        found (empty: every item reads).

    Raises:
        BackendError: the graph store failed otherwise.
    """
    problems: list[GraphProblem] = []
    await _read_every_item(memory._stores.graph, problems)
    return problems


async def _read_graph(graph: GraphStore) -> _GraphRead:
    """Read every object, link, currency and record in batches, and look for graph problems.

    While ids stored with several contents (``RACED_WRITE``) are there, they are the only graph
    problems reported: what reads around them show is checked once ``repair`` settled them.
    """
    collection = graph.collection
    problems: list[GraphProblem] = []
    raced = await graph.raced_writes() if isinstance(graph, RacedWrites) else []
    object_ids, link_ids, objects, links, records = await _read_every_item(graph, problems)
    currency = await _chunked(graph.currency, sorted(objects), _READ_BATCH)
    purged = set(await graph.tombstones())
    if raced:
        problems = [_raced_problem(memory_id) for memory_id in raced]
    else:
        problems += partial_batch_problems(collection, set(object_ids), objects, links, records, purged)
        problems += supersession_problems(links.values(), records)
        problems += time_order_problems(collection, objects, links)
        problems += episode_forget_problems(collection, objects, links, records)
    entries, _ = current_index_entries(objects.values(), currency)
    return _GraphRead(
        collection=collection,
        object_ids=object_ids,
        link_ids=link_ids,
        objects=objects,
        links=links,
        currency=currency,
        expected_points={s: frozenset(e.id for e in entries if e.surface is s) for s in VectorSurface},
        problems=tuple(problems),
    )


async def _compare_vectors(
    graph_read: _GraphRead, vectors: VectorIndex | None, surface: VectorSurface
) -> SurfaceVectors:
    """One surface's point count (``None``: missing index), missing points and orphans.

    A point is an orphan when no current object of an indexable type is behind it; points of
    objects that do not decode are neither (their problem is reported on the graph).
    """
    if vectors is None:
        points: set[MemoryId] = set()
        vector_points: int | None = None
    else:
        points = await vectors.point_ids(surface)
        vector_points = len(points)
        if points:
            await _probe_search(vectors, graph_read.collection, surface)
    backed = {
        memory_id
        for memory_id, obj in graph_read.objects.items()
        if obj.object_type in INDEXED_TYPES and graph_read.currency.get(memory_id) is CurrencyStatus.CURRENT
    }
    unreadable = set(graph_read.object_ids) - graph_read.objects.keys()
    expected = graph_read.expected_points[surface]
    return SurfaceVectors(
        surface=surface,
        expected=len(expected),
        points=vector_points,
        missing=tuple(sorted(expected - points)),
        orphans=tuple(sorted(points - backed - unreadable)),
    )


async def _compare_stats(
    graph_read: _GraphRead, stats: RetrievalStatsStore | None
) -> tuple[int | None, list[StatsDrift]]:
    """The stats store's row count (``None``: missing) and the counters that differ from the graph's.

    The expected counters come from rows built from the graph as
    :func:`~charmem.usecases.commit.rebuild_stats` builds them, in a reference in-memory store:
    the row count first, then the summary counters, then the degree of every readable object.
    """
    reference = InMemoryRetrievalStatsStore(graph_read.collection)
    await reference.record(
        [object_stats_row(obj, graph_read.currency) for obj in graph_read.objects.values()]
        + [link_stats_row(link) for link in graph_read.links.values()]
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
    readable = sorted(graph_read.objects)
    for start in range(0, len(readable), _DEGREE_BATCH):
        chunk = readable[start : start + _DEGREE_BATCH]
        want = await reference.degrees(chunk)
        have = await stats.degrees(chunk) if stats is not None else dict.fromkeys(chunk, 0)
        drift += [
            StatsDrift(counter="degree", key=str(i), stored=have.get(i, 0), expected=want[i])
            for i in chunk
            if have.get(i, 0) != want[i]
        ]
    return stats_rows, drift


async def _probe_search(vectors: VectorIndex, collection: str, surface: VectorSurface) -> None:
    """Search the index once (dense and lexical cues, every point scanned): it must answer.

    Counting points reads none of their vectors; a damaged vector or payload file shows only
    when a search reads it, so check would call a collection consistent that no retrieval can
    search.

    Raises:
        StoreCorruptedError: the search failed.
    """
    probe = [1.0] + [0.0] * (vectors.vector_size - 1)
    try:
        await vectors.search(VectorQuery(vector=probe, limit=1, text="check", surface=surface))
    except BackendError as exc:
        raise StoreCorruptedError(
            f"the vector index of collection {collection!r} holds points but cannot be searched "
            f"({exc}); its files are damaged. The vectors are derived data: rebuild them from the "
            "graph with `charmem rebuild-vectors --drop` (or CharacterMemory.open(..., "
            "rebuild_vectors=True))"
        ) from exc


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
