"""``repair``: bring a collection back in step with its graph after :func:`~charmem.admin.check`.

Vectors and statistics are derived from the graph, so repair rebuilds them
(:meth:`~charmem.CharacterMemory.rebuild_vector_index`, :meth:`~charmem.CharacterMemory.rebuild_stats`);
forgets of episodes written before forgetting reached an episode's parts are completed by
appending what they lack (:mod:`charmem.usecases.forgetting`); ids stored with several contents by
writers that raced are settled by the graph store (:class:`charmem.ports.RacedWrites`). Other
graph problems are left alone: rebuilding cannot know what a partial batch held.
"""

from __future__ import annotations

from charmem.admin._report import CheckReport, GraphProblemKind, RepairOutcome
from charmem.domain.ids import MemoryId
from charmem.domain.plan import RepairMarker, RepairMarkerType
from charmem.errors import ConfigurationError, StoreCorruptedError
from charmem.log import get_logger
from charmem.memory import CharacterMemory
from charmem.ports import RacedWrites
from charmem.usecases.forgetting import complete_episode_forgets
from charmem.usecases.lost_graph import lost_graph_ways_out

__all__ = ["refuse_wiping_derived_data", "repair"]

log = get_logger("charmem.admin")


def refuse_wiping_derived_data(report: CheckReport, *, graph_endpoint: str | None = None) -> None:
    """Refuse a repair that would empty vectors or statistics because the graph holds nothing.

    The graph is the authority, but an empty graph beside vectors or statistics
    (:attr:`CheckReport.graph_looks_lost`) is far more likely a lost or replaced graph store (or
    settings pointing at another one: ``OXIGRAPH_PATH``, a SPARQL endpoint or shard) than a
    collection that forgot everything: rebuilding from it would delete the only remaining trace.

    Args:
        report: the check report.
        graph_endpoint: the SPARQL query endpoint read when the graph is a service (the message
            then gives the service's ways out), or ``None`` for an embedded graph store.

    Raises:
        StoreCorruptedError: the graph holds no object and no link while the vector index holds
            points or the statistics hold rows.
    """
    if not report.graph_looks_lost:
        return
    read = "the graph" if graph_endpoint is None else f"the graph at {graph_endpoint}"
    raise StoreCorruptedError(
        f"collection {report.collection!r}: {read} holds nothing while the vector index holds "
        f"{report.vector_points or 0} points and the statistics {report.stats_rows or 0} rows; "
        "repairing would delete them, so nothing was changed. "
        + lost_graph_ways_out(report.collection, service=graph_endpoint is not None)
    )


def _service_endpoint(graph: object) -> str | None:
    """The query endpoint of a SPARQL service graph store (its ``query_endpoint``), else ``None``."""
    endpoint = getattr(graph, "query_endpoint", None)
    return endpoint if isinstance(endpoint, str) else None


async def repair(memory: CharacterMemory, report: CheckReport) -> RepairOutcome:
    """Repair what ``report`` found: raced writes, old episode forgets, then vectors and statistics.

    Ids stored with several contents (``RACED_WRITE``) are settled first by the graph store
    (:meth:`~charmem.ports.RacedWrites.settle_raced_writes`); vectors and statistics are then
    rebuilt, as they may hold a removed content. Then the forgotten episodes reported as
    ``EPISODE_PARTS_NOT_FORGOTTEN`` get the suppressions their forget lacks, appended at the
    original forget's record time with the record ids a forget derives (repairing twice writes
    nothing new); their vectors leave candidate recall. Then
    :meth:`CharacterMemory.rebuild_vector_index` runs when the vectors differ (or removing those
    vectors failed) and :meth:`CharacterMemory.rebuild_stats` when the statistics drifted (or
    refreshing them failed); each waits for writers. Other graph problems are left alone:
    rebuilding cannot know what a partial batch held (replay its plan). Check again afterwards to
    confirm.

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
    refuse_wiping_derived_data(report, graph_endpoint=_service_endpoint(memory._stores.graph))
    settled = await _settle_raced_writes(memory, report)
    suppressed, markers = await _complete_episode_forgets(memory, report)
    vector_failed = bool(settled) or any(isinstance(m, RepairMarker.VectorMaintenance) for m in markers)
    stats_failed = bool(settled) or any(isinstance(m, RepairMarker.StatsMaintenance) for m in markers)
    rebuild_vectors = vector_failed or not report.vectors_consistent
    vectors = await memory.rebuild_vector_index() if rebuild_vectors else None
    rows = await memory.rebuild_stats() if stats_failed or not report.stats_consistent else None
    log.info(
        "collection_repaired",
        collection=memory.collection,
        suppressed=len(suppressed),
        settled=len(settled),
        vectors=vectors is not None,
        stats=rows is not None,
    )
    return RepairOutcome(
        vectors=vectors, stats_rows=rows, suppressed_ids=suppressed, settled_ids=tuple(sorted(settled))
    )


async def _settle_raced_writes(memory: CharacterMemory, report: CheckReport) -> list[MemoryId]:
    """Settle the ids the report found stored with several contents (writers wait meanwhile)."""
    graph = memory._stores.graph
    if not isinstance(graph, RacedWrites):
        return []
    if not any(p.kind is GraphProblemKind.RACED_WRITE for p in report.graph_problems):
        return []
    async with memory.exclusive():
        return await graph.settle_raced_writes()


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
