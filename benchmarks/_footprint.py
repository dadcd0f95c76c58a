"""charmem's worker for ``compare.py``: timings on its embedded stores, and where its footprint goes.

Imported by the worker subprocess only (the parent and the competitors' workers never import
charmem). With ``footprint=True`` the run also records:

- **disk after close** per store and per kind of file: Oxigraph's SST files, write-ahead logs and
  the rest (MANIFEST, OPTIONS, LOCK); Qdrant Edge's shard directory with segment ids folded to
  ``*`` (vector storage, sparse storage, payload storage and indexes, id tracker, WAL); SQLite;
- **resident memory by mapping** (``/proc/self/smaps``: the heap and anonymous mappings, each
  shared library, each store file mapped), after ingest (the usual peak) and after queries;
- **the Python heap** by file (``tracemalloc``, started after the imports), after ingest;
- **the graph cache's entries** per map.
"""

from __future__ import annotations

import asyncio
import gc
import re
import time
import tracemalloc
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from compare import COLLECTION, Data, directory_bytes, percentiles, rss_mb

from charmem import (
    CharacterMemory,
    EpisodeDraft,
    MemoryId,
    ObservationDraft,
    RememberDrafts,
    RetrievalContext,
)
from charmem.ports import VectorQuery
from charmem.testing import stores_of
from charmem_cli.app import cli_settings

T0 = datetime(2024, 1, 1, tzinfo=UTC)
LIMIT = 40  # what retrieve asks the vector index for (RetrievalContext's candidate_limit)
SCOPE = RetrievalContext(query="scope").object_type_defaults
_ID_PREFIX = re.compile(r"^[0-9a-z]{20,}-")
_FOLD = re.compile(r"^(?:[0-9a-f]{8}-[0-9a-f-]{27}|[0-9]+|[0-9a-f]{16,})$")


class RowEmbedder:
    """An ``EmbeddingProvider`` answering from the worker's matrix: no embedding is timed."""

    def __init__(self, data: Data) -> None:
        self.model_id = f"precomputed-clustered-{data.vectors.shape[1]}"
        self.vector_size = int(data.vectors.shape[1])
        self._data = data
        self._rows = {text: i for i, text in enumerate(data.texts)}
        self._queries = {text: i for i, text in enumerate(data.query_texts)}

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._data.vectors[self._rows[text]].tolist() for text in texts]

    async def embed_query(self, text: str) -> list[float]:
        return list(self._data.queries[self._queries[text]].tolist())


async def open_memory(store: Path, embedder: RowEmbedder) -> CharacterMemory:
    return await CharacterMemory.open(cli_settings({}, str(store)), COLLECTION, embedding_provider=embedder)


async def ingest(memory: CharacterMemory, texts: Sequence[str], batch: int, flush_every: int = 0) -> float:
    """Bulk plans of ``batch`` memories (an episode and its observation each); memories per second.

    ``flush_every`` > 0: Oxigraph's ``Store.flush`` every that many commits (an experiment
    through a private handle: what bounded memtables would cost and save).
    """
    start = time.perf_counter()
    for commits, first in enumerate(range(0, len(texts), batch), start=1):
        episodes, observations = [], []
        for i in range(first, min(len(texts), first + batch)):
            episode = MemoryId.deterministic(COLLECTION, "episode", str(i))
            episodes.append(EpisodeDraft(id=episode, occurred_at=T0 + timedelta(minutes=i)))
            observations.append(ObservationDraft(text=texts[i], episode_id=episode))
        plan = await memory.prepare(RememberDrafts(episodes=episodes, observations=observations))
        await memory.commit(plan)
        if flush_every and commits % flush_every == 0:
            store = stores_of(memory).graph._handle().store  # type: ignore[attr-defined]
            await asyncio.to_thread(store.flush)
    return len(texts) / (time.perf_counter() - start)


async def timed(calls: Sequence[Any]) -> list[float]:
    samples = []
    for call in calls:
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return samples


async def charmem_run(
    data: Data, store: Path, batch: int, *, footprint: bool, flush_every: int = 0
) -> dict[str, Any]:
    """Build, close, measure the disk, reopen, retrieve cold then warm, then the index alone."""
    out: dict[str, Any] = {"system": "charmem", "rss_mb": {"imported": rss_mb()}}
    root = store / "charmem"
    embedder = RowEmbedder(data)
    if footprint:
        tracemalloc.start()
    memory = await open_memory(root, embedder)
    out["ingest_per_second"] = await ingest(memory, data.texts, batch, flush_every)
    out["rss_mb"]["built"] = rss_mb()
    if footprint:
        out["smaps_mb"] = smaps_by_mapping(root)
        out["tracemalloc_mb"] = heap_by_file(tracemalloc.take_snapshot())
        out["tracemalloc_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
        out["caches"] = cache_sizes(memory)
    await memory.close()
    del memory
    gc.collect()
    out["rss_mb"]["closed"] = rss_mb()
    out["disk_bytes"] = directory_bytes(root)
    out["disk_apparent_bytes"] = directory_bytes(root, apparent=True)
    if footprint:
        out["disk_parts"] = disk_parts(root)
        out["points"], out["dim"] = data.vectors.shape
    memory = await open_memory(root, embedder)
    out["rss_mb"]["reopened"] = rss_mb()
    retrieves = [lambda t=t: memory.retrieve(RetrievalContext(query=t)) for t in data.query_texts]
    vectors = stores_of(memory).vectors

    def search(i: int, *, fused: bool) -> Any:
        query = VectorQuery(
            vector=data.queries[i].tolist(),
            limit=LIMIT if fused else 10,
            object_types=SCOPE,
            text=data.query_texts[i] if fused else None,
        )
        return lambda: vectors.search(query)

    cold = await timed(retrieves)
    warm = await timed(retrieves)
    dense = await timed([search(i, fused=False) for i in range(len(data.queries))])
    fused = await timed([search(i, fused=True) for i in range(len(data.queries))])
    out["latency"] = {
        "retrieve cold (reopened)": percentiles(cold),
        "retrieve warm": percentiles(warm),
        "VectorIndex.search dense k=10": percentiles(dense),
        "VectorIndex.search dense+BM25 k=40": percentiles(fused),
    }
    out["rss_mb"]["queried"] = rss_mb()
    if footprint:
        out["smaps_mb_queried"] = smaps_by_mapping(root)
    await memory.close()
    return out


def disk_parts(root: Path) -> dict[str, int]:
    """Allocated bytes per store and kind of file under ``root`` (ids in paths folded to ``*``)."""
    parts: dict[str, int] = defaultdict(int)
    for path in root.rglob("*"):
        if not path.is_file():
            continue
        relative = path.relative_to(root).parts
        size = path.stat().st_blocks * 512
        if relative[0] == "oxigraph":
            kind = {".sst": "SST files", ".log": "write-ahead logs"}.get(
                path.suffix, "MANIFEST, OPTIONS, other"
            )
            parts[f"oxigraph: {kind}"] += size
        elif relative[0] == "vectors":
            folded = [_ID_PREFIX.sub("*-", "*" if _FOLD.match(p) else p) for p in relative[2:-1]]
            parts["qdrant edge: " + "/".join(folded[:4] or ["(shard root)"])] += size
        else:
            parts[f"other: {re.sub(r'-(wal|shm)$', '', relative[0])}"] += size
    return dict(parts)


def smaps_by_mapping(root: Path) -> list[tuple[str, float]]:
    """Resident MiB per mapping of this process, largest first (store files relative to ``root``)."""
    resident: dict[str, float] = defaultdict(float)
    name = "?"
    try:
        lines = Path("/proc/self/smaps").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        fields = line.split()
        if fields and re.match(r"^[0-9a-f]+-[0-9a-f]+$", fields[0]):
            path = fields[5] if len(fields) > 5 else "[anonymous]"
            if path.startswith(str(root)):
                relative = Path(path).relative_to(root).parts
                path = "store: " + "/".join("*" if _FOLD.match(p) else p for p in relative)
            elif "/" in path:
                path = Path(path).name
            name = path
        elif fields and fields[0] == "Rss:":
            resident[name] += int(fields[1]) / 1024
    return sorted(((k, round(v, 1)) for k, v in resident.items() if v >= 0.5), key=lambda kv: -kv[1])


def heap_by_file(snapshot: tracemalloc.Snapshot) -> list[tuple[str, float]]:
    """Live Python allocations by the file that made them, MiB, largest first."""
    stats = snapshot.statistics("filename")
    return [
        ("/".join(Path(s.traceback[0].filename).parts[-2:]), round(s.size / 2**20, 1)) for s in stats[:25]
    ]


def cache_sizes(memory: CharacterMemory) -> dict[str, Any]:
    """Entries per map of the graph cache (whatever dict-like attributes it has)."""
    graph = stores_of(memory).graph
    try:
        cache = graph._cache()  # type: ignore[attr-defined]
    except Exception as exc:  # noqa: BLE001 (a diagnosis, not a contract)
        return {"graph cache": f"not found ({exc!r})"}
    sizes = {}
    for key, value in vars(cache).items():
        if hasattr(value, "__len__") and not isinstance(value, str):
            sizes[key] = len(value)
    return {"graph cache entries per map": sizes}
