"""What ``RETRIEVAL_STATS_STORE_MODE=graph`` costs next to ``sqlite``, per call.

Writes one collection of ``--objects`` memory objects (entities, episodes, observations, with
``has_observation``, ``involves`` and ``mentions`` links) to a real ``oxigraph serve`` and to a
persistent Oxigraph store, rebuilds SQLite stats from the graph, then times ``degrees`` of every
object, ``degrees`` of 20 ids (what one retrieval asks), ``summary`` and ``row_count`` in each mode
(median of ``--repeat`` calls, milliseconds).

    python benchmarks/graph_stats_cost.py --objects 5000
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from charmem.domain.graph import GraphBatch
from charmem.domain.ids import MemoryId
from charmem.domain.model import Entity, Episode, MemoryLink, Observation, Relation
from charmem.settings import Settings
from charmem.stats import SQLiteRetrievalStatsStore
from charmem.usecases.maintenance import rebuild_stats
from charmem_oxigraph import OxigraphGraphStore, SparqlServiceGraphStore
from charmem_oxigraph._stats import GraphRetrievalStatsStore
from charmem_oxigraph.testing import OxigraphServer

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def batches(objects: int) -> tuple[list[GraphBatch], list[MemoryId]]:
    """About ``objects`` objects: 1 entity per 50, 1 episode per 5, the rest observations."""
    entities = [Entity(id=MemoryId.new(), entity_type="person", created_at=T0) for _ in range(objects // 50)]
    episodes_n = (objects - len(entities)) // 5
    out, ids = [GraphBatch(objects=entities)], [e.id for e in entities]
    per = (objects - len(entities) - episodes_n) // episodes_n
    for n in range(episodes_n):
        at = T0 + timedelta(minutes=n)
        ep = Episode(id=MemoryId.new(), occurred_at=at, summary=f"talk {n}", created_at=at)
        obs = [
            Observation(
                id=MemoryId.new(), episode_id=ep.id, text=f"said {n}.{k}", observed_at=at, created_at=at
            )
            for k in range(per)
        ]
        who = entities[n % len(entities)].id
        links = [
            MemoryLink(id=MemoryId.new(), from_id=ep.id, relation=Relation.INVOLVES, to_id=who, created_at=at)
        ]
        for o in obs:
            links.append(
                MemoryLink(
                    id=MemoryId.new(),
                    from_id=ep.id,
                    relation=Relation.HAS_OBSERVATION,
                    to_id=o.id,
                    created_at=at,
                )
            )
            links.append(
                MemoryLink(
                    id=MemoryId.new(), from_id=o.id, relation=Relation.MENTIONS, to_id=who, created_at=at
                )
            )
        out.append(GraphBatch(objects=[ep, *obs], links=links))
        ids += [ep.id, *(o.id for o in obs)]
    return out, ids


async def timed(call: Callable[[], Awaitable[Any]], repeat: int) -> float:
    """Median milliseconds of ``repeat`` calls (after one warm-up call)."""
    await call()
    spent = []
    for _ in range(repeat):
        started = time.perf_counter()
        await call()
        spent.append((time.perf_counter() - started) * 1000)
    return statistics.median(spent)


async def measure(name: str, stats: Any, ids: list[MemoryId], repeat: int) -> None:
    few = ids[:: max(1, len(ids) // 20)][:20]
    rows = {
        "degrees(all)": await timed(lambda: stats.degrees(ids), repeat),
        "degrees(20)": await timed(lambda: stats.degrees(few), repeat),
        "summary": await timed(stats.summary, repeat),
        "row_count": await timed(stats.row_count, repeat),
    }
    print(f"{name:<22}" + "".join(f"{k} {v:8.2f} ms   " for k, v in rows.items()))


async def main(objects: int, repeat: int) -> None:
    data, ids = batches(objects)
    with tempfile.TemporaryDirectory() as tmp, OxigraphServer(Path(tmp) / "server") as server:
        service = Settings.from_mapping(
            {
                "GRAPH_STORE_MODE": "service",
                "SPARQL_QUERY_ENDPOINT": server.query_endpoint,
                "SPARQL_UPDATE_ENDPOINT": server.update_endpoint,
                "SPARQL_TIMEOUT": "60",
            }
        )
        persistent = Settings.from_mapping(
            {"GRAPH_STORE_MODE": "persistent", "OXIGRAPH_PATH": f"{tmp}/oxigraph"}
        )
        async with SparqlServiceGraphStore.from_settings(service, "bench") as remote:
            for batch in data:
                await remote.write_batch(batch)
            sqlite = SQLiteRetrievalStatsStore(Path(tmp) / "stats.sqlite3", "bench")
            rows = await rebuild_stats(remote, sqlite)
            print(f"{len(ids)} objects, {rows - len(ids)} links")
            await measure("sqlite", sqlite, ids, repeat)
            await sqlite.close()
        graph_stats = GraphRetrievalStatsStore.from_settings(service, "bench")
        await measure("graph (oxigraph serve)", graph_stats, ids, repeat)
        await graph_stats.close()
        local = OxigraphGraphStore.from_settings(persistent, "bench")
        for batch in data:
            await local.write_batch(batch)
        graph_stats = GraphRetrievalStatsStore.from_settings(persistent, "bench")
        await measure("graph (persistent)", graph_stats, ids, repeat)
        await graph_stats.close()
        await local.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--objects", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.objects, args.repeat))
