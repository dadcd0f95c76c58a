"""Latency and scale: query latency, write throughput, disk, memory and HNSW recall, in one table.

Every figure is measured in one run against a reference measured in the same run, and printed
with its ratio to it (machines are noisy, ratios much less so):

- **Query latency** (p50 / p95 over ``--queries`` queries, a precomputed query vector, so no
  embedding is timed) at each size N (remembered memories) and dimension, in five columns:
  (a) a numpy exact scan over the same normalised vectors (the floor, ratio 1), (b) charmem's
  vector index alone (``EdgeVectorIndex.search``, dense only), (b+) the same call with the BM25
  cue, as ``retrieve`` makes it, (c) the full ``CharacterMemory.retrieve`` (embedded Oxigraph,
  Qdrant Edge, SQLite stats: the CLI's stores) with graph authority and expansion, its memories
  mostly read from the store for the first time in the process, (c2) the same retrieve right
  again, every graph read answered by the process's graph cache, (c3) retrieve on the REOPENED
  store (``close()``, then ``CharacterMemory.open`` again in this process: every query's first
  retrieve counted, no warm-up), (d) qdrant-client in local mode (``QdrantClient(":memory:")``,
  what a Python user would otherwise pick; up to 50,000). The "growth" column fits log(p50)
  against log(N) (the exponent: 1 is linear) and gives the p50 added per 1,000 memories between
  the smallest and the largest size.
- **The floor** the issue's targets divide by: ``np.argpartition(-(M @ q), 10)[:10]`` over the
  float32 (N, D) matrix in memory, 200 queries timed in a loop of their own (no thread limit; (a)
  above runs interleaved with the other columns on one BLAS thread, top 40). A second table
  gives, per size, warm retrieve (c2) / floor (target <= 12), (c2) / (b+) (<= 2) and cold (c3) /
  floor (<= 25), the targets being stated at 5,000 x 1,536; ``--json-out`` holds them under
  ``targets``. The floor is timed again on one BLAS thread (not a target): on busy cores the
  unlimited floor is inflated by thread contention, which flatters every ratio to it. The
  objects the garbage collector tracks are counted per size (a full collection's pause grows
  with them).
- **Write throughput** (embedding excluded: the provider hands back precomputed vectors, and the
  CLI's ``TimedEmbedder`` subtracts even that): ``remember`` one memory at a time, and a bulk plan
  of ``--batch`` memories per ``commit``; with the share of commit time spent in the graph, the
  vector index and the stats store (timing proxies around the three adapters).
- **Disk** bytes (allocated blocks, as ``du``) per memory for the graph, the vectors and the
  stats (the marginal bytes between two sizes in brackets: the fixed cost of a store dominates
  small sizes), the bytes each store
  holds after ``close()``, vector points, and the process's peak RSS while that size was written
  and measured (the kernel's peak is reset before each size).
- **HNSW** at the largest size (``--hnsw-m`` x ``--hnsw-ef``): recall@10 against the exact top 10
  (numpy) on the same clustered vectors, p50 / p95 and the ratio to numpy; build time; how long
  the event loop was blocked during the build (charmem builds in a child process) against an
  in-process ``EdgeShard.optimize()`` in a worker thread (which holds the GIL).
- **Concurrency** at each size: 8 concurrent retrieves and one writer (``remember``) in one
  process for ``--concurrency-seconds``: retrieves/s against retrieves alone, commits/s, and the
  event loop's lag (a 5 ms ticker: worst and p99), and what the late ticks (over 10 ms) were
  made of: how much of their lag overlapped a garbage collection (``gc.callbacks``), the
  writer's store calls (graph, vectors, stats) and the Qdrant Edge shard's ``update`` and
  ``flush`` in the index's worker thread.
- ``--large``: the vector index alone at 1,000,000 x 384 (dense, no text), exact scan and HNSW
  (the first ``--hnsw-m``, ``ef`` swept), against numpy; the full ``retrieve`` is not measured
  (ingesting a million memories through ``commit`` takes hours at the measured bulk rate, which
  the table states).

Vectors are clustered: a Gaussian mixture of ``--centres`` centres on the sphere, not uniform
noise. Memory texts are generated sentences whose nouns follow the memory's cluster, so the BM25
cue has words to index; a query is a memory's vector plus noise with a short question about it.
One ``remember`` of a text is one memory (an episode and its observation), one vector point.

    python benchmarks/latency.py                                   # 100, 1,000, 5,000 x 1,536, 384
    python benchmarks/latency.py --sizes 100,1000,5000,50000 --json-out latency.json
    python benchmarks/latency.py --large --dims 384                # + 1,000,000 x 384, index alone
    python benchmarks/latency.py --sizes 5000 --dims 1536 --hnsw-m ''   # the issue's targets only
    python benchmarks/latency.py --sizes 1000,10000,100000 --dims 384 --hnsw-m '' # growth table
    nox -s bench -- --sizes 100,1000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import gc
import json
import math
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import qdrant_edge as qe
from rich.console import Console
from rich.table import Table
from threadpoolctl import threadpool_limits

from charmem import (
    CharacterMemory,
    EpisodeDraft,
    MemoryId,
    ObjectType,
    ObservationDraft,
    RememberDrafts,
    RememberInput,
    RetrievalContext,
)
from charmem.ports import VectorPoint, VectorQuery
from charmem.testing import stores_of
from charmem_cli.app import TimedEmbedder, cli_settings
from charmem_qdrant import EdgeVectorIndex, HnswSettings
from charmem_qdrant._hnsw import shard_config

COLLECTION = "latency"
LIMIT = 40  # RetrievalContext's default candidate_limit: what retrieve asks the index for
RECALL_K = 10
FLOOR_K = 10  # the floor's top k
FLOOR_QUERIES = 200  # the floor's queries, timed in a loop of their own
T0 = datetime(2024, 1, 1, tzinfo=UTC)
SCOPE = RetrievalContext(query="scope").object_type_defaults
LARGE_N = 1_000_000
LARGE_DIM = 384

# ------------------------------------------------------------------------------- corpus

PEOPLE = (
    "Ines", "Tomas", "Mara", "Jonas", "Aiko", "Priya", "Lukas", "Sofia",
    "Omar", "Elena", "Noah", "Yara", "Felix", "Hana", "Mateo", "Lena",
)  # fmt: skip
TOPICS = (
    (("practised", "played", "tuned"), ("violin", "cello", "piano", "choir part", "sonata", "metronome")),
    (("cooked", "baked", "tasted"), ("lasagne", "sourdough", "curry", "apple pie", "risotto", "dumplings")),
    (("planted", "watered", "pruned"), ("tomatoes", "roses", "basil", "apple tree", "tulips", "hedge")),
    (("booked", "missed", "took"), ("train", "ferry", "flight", "night bus", "tram", "taxi")),
    (("read", "finished", "borrowed"), ("novel", "poetry book", "biography", "comic", "cookbook", "atlas")),
    (("walked", "fed", "groomed"), ("dog", "puppy", "cat", "horse", "rabbit", "parrot")),
    (("fixed", "painted", "cleaned"), ("bicycle", "kitchen", "fence", "roof", "boat", "car")),
    (("wrote", "sent", "answered"), ("letter", "email", "postcard", "report", "invitation", "poem")),
    (("visited", "called", "hugged"), ("grandmother", "brother", "cousin", "neighbour", "aunt", "teacher")),
    (("trained for", "ran", "swam"), ("marathon", "relay", "triathlon", "race", "lap", "hill climb")),
    (("bought", "returned", "sold"), ("jacket", "sofa", "camera", "laptop", "lamp", "bookshelf")),
    (
        ("studied", "revised", "passed"),
        ("chemistry exam", "driving test", "thesis", "spanish course", "statistics", "history essay"),
    ),
    (
        ("painted", "sketched", "framed"),
        ("portrait", "landscape", "mural", "still life", "seascape", "poster"),
    ),
    (
        ("celebrated", "planned", "hosted"),
        ("birthday", "wedding", "anniversary", "graduation", "reunion", "party"),
    ),
    (
        ("climbed", "hiked", "camped on"),
        ("mountain", "glacier", "ridge", "volcano", "canyon", "forest trail"),
    ),
    (
        ("debugged", "deployed", "reviewed"),
        ("server", "database", "website", "mobile app", "script", "pipeline"),
    ),
)
PLACES = (
    "at the harbour", "in the garden", "at the station", "in the old town", "at home",
    "at the library", "by the lake", "at the office", "in the park", "at the market",
)  # fmt: skip
WHENS = (
    "on Monday morning", "last weekend", "after dinner", "before sunrise", "in the rain",
    "on a quiet afternoon", "late at night", "during the holidays", "at lunchtime", "yesterday",
)  # fmt: skip
TAILS = (
    "and felt proud", "which took longer than planned", "with a lot of laughter",
    "and promised to do it again", "though it was cold", "and told everyone about it",
    "while it snowed", "for the first time",
)  # fmt: skip


class Corpus:
    """Clustered unit vectors with generated texts, and the queries about them.

    Memory ``i`` belongs to cluster ``c``; its vector is the cluster centre plus Gaussian noise
    (within-cluster cosine about 0.75), normalised, float32; its text is a sentence whose verb and
    noun come from the cluster's topic. A query is a memory's vector plus smaller noise (cosine
    about 0.9 to it) with a short question about the memory.
    """

    def __init__(self, dim: int, count: int, centres: int, seed: int) -> None:
        self.dim = dim
        rng = np.random.default_rng(seed)
        self._rng = rng
        centre_vectors = rng.standard_normal((centres, dim)).astype(np.float32)
        centre_vectors /= np.linalg.norm(centre_vectors, axis=1, keepdims=True)
        self.centres = centre_vectors
        self.cluster = rng.integers(0, centres, count)
        self.vectors = np.empty((count, dim), dtype=np.float32)
        for start in range(0, count, 50_000):
            stop = min(count, start + 50_000)
            noise = rng.standard_normal((stop - start, dim)).astype(np.float32) * (0.9 / math.sqrt(dim))
            block = centre_vectors[self.cluster[start:stop]] + noise
            self.vectors[start:stop] = block / np.linalg.norm(block, axis=1, keepdims=True)
        self._texts: list[str] = []
        self._text_parts: list[tuple[str, str, str]] = []

    def texts(self, count: int) -> list[str]:
        """The first ``count`` memory texts (unique), generated on demand."""
        seen = set(self._texts)
        words = random.Random(int(self._rng.integers(2**31)))
        while len(self._texts) < count:
            i = len(self._texts)
            verbs, nouns = TOPICS[int(self.cluster[i]) % len(TOPICS)]
            person, verb, noun = words.choice(PEOPLE), words.choice(verbs), words.choice(nouns)
            text = (
                f"{person} {verb} the {noun} {words.choice(PLACES)} {words.choice(WHENS)} "
                f"{words.choice(TAILS)}"
            )
            if text in seen:
                text = f"{text}, day {i}"
            seen.add(text)
            self._texts.append(text)
            self._text_parts.append((person, verb, noun))
        return self._texts[:count]

    def queries(self, among: int, count: int, seed: int) -> list[tuple[str, np.ndarray]]:
        """``count`` (question, vector) pairs about random memories among the first ``among``."""
        rng = np.random.default_rng(seed)
        self.texts(among)
        out: list[tuple[str, np.ndarray]] = []
        seen: set[str] = set()
        while len(out) < count:
            i = int(rng.integers(0, among))
            person, verb, noun = self._text_parts[i]
            text = f"when {person} {verb} the {noun}?"
            if text in seen:
                text = f"what happened when {person} {verb} the {noun} ({len(out)})?"
            seen.add(text)
            noisy = self.vectors[i] + rng.standard_normal(self.dim).astype(np.float32) * (
                0.45 / math.sqrt(self.dim)
            )
            out.append((text, noisy / np.linalg.norm(noisy)))
        return out


class PrecomputedEmbedder:
    """An ``EmbeddingProvider`` answering from precomputed vectors: no embedding is timed."""

    def __init__(self, corpus: Corpus) -> None:
        self.model_id = f"precomputed-clustered-{corpus.dim}"
        self.vector_size = corpus.dim
        self._corpus = corpus
        self._rows: dict[str, int] = {}
        self._queries: dict[str, list[float]] = {}

    def know(self, texts: Sequence[str], start: int) -> None:
        for offset, text in enumerate(texts):
            self._rows[text] = start + offset

    def know_queries(self, queries: Sequence[tuple[str, np.ndarray]]) -> None:
        for text, vector in queries:
            self._queries[text] = vector.tolist()

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._corpus.vectors[self._rows[text]].tolist() for text in texts]

    async def embed_query(self, text: str) -> list[float]:
        return self._queries[text]


# ------------------------------------------------------------------------------- measuring


def percentiles(samples: Sequence[float]) -> tuple[float, float]:
    """(p50, p95) of ``samples`` in milliseconds (samples are seconds)."""
    ordered = sorted(samples)
    p50 = statistics.median(ordered)
    p95 = ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]
    return p50 * 1000, p95 * 1000


async def time_calls(calls: Sequence[Callable[[], Awaitable[Any]]], warmup: int = 2) -> list[float]:
    """Seconds per call (the first ``warmup`` calls are run but not counted)."""
    for call in calls[:warmup]:
        await call()
    samples = []
    for call in calls:
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return samples


async def interleaved(
    methods: Mapping[str, Sequence[Callable[[], Awaitable[Any]]]], warmup: int = 2
) -> dict[str, list[float]]:
    """Seconds per call of every method, query by query in turn (a load spike hits them all).

    Each method has one call per query; the first ``warmup`` queries are run but not counted.
    numpy runs on one BLAS thread (threads only add noise to a matrix-vector product).
    """
    count = min(len(calls) for calls in methods.values())
    out: dict[str, list[float]] = {name: [] for name in methods}
    with threadpool_limits(limits=1):
        for i in range(-min(warmup, count), count):
            for name, calls in methods.items():
                start = time.perf_counter()
                await calls[i if i >= 0 else -i - 1]()
                if i >= 0:
                    out[name].append(time.perf_counter() - start)
    return out


def numpy_calls(
    matrix: np.ndarray, queries: Sequence[tuple[str, np.ndarray]], k: int
) -> list[Callable[[], Awaitable[Any]]]:
    """One exact top-``k`` scan per query, as calls for :func:`interleaved`."""

    def call(vector: np.ndarray) -> Callable[[], Awaitable[Any]]:
        async def run() -> Any:
            return numpy_top(matrix, vector, k)

        return run

    return [call(v) for _t, v in queries]


#: Set in the writer task of the concurrency run: its store calls are the ones recorded.
WRITER: contextvars.ContextVar[bool] = contextvars.ContextVar("writer", default=False)


class Timed:
    """Wraps an adapter and adds up the seconds its coroutine methods take (write shares).

    While ``intervals`` is a list (not ``None``), each call the writer task makes (``WRITER``
    set) is appended too, as (start, end, method): the loop-lag attribution tells which of the
    writer's store calls a late tick overlapped (the readers' calls overlap every tick).
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.seconds = 0.0
        self.intervals: list[tuple[float, float, str]] | None = None

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not asyncio.iscoroutinefunction(value):
            return value

        async def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await value(*args, **kwargs)
            finally:
                end = time.perf_counter()
                self.seconds += end - start
                if self.intervals is not None and WRITER.get():
                    self.intervals.append((start, end, name))

        return timed


class ShardCalls:
    """Wraps a Qdrant Edge shard: records when its ``update`` and ``flush`` calls ran.

    They run in the vector index's worker thread; a late tick of the event loop that overlaps a
    flush points at it (the GIL held, or the cores busy).
    """

    def __init__(self, shard: Any) -> None:
        self._shard = shard
        self.intervals: list[tuple[float, float, str]] = []

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._shard, name)
        if name not in ("update", "flush"):
            return value

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return value(*args, **kwargs)
            finally:
                self.intervals.append((start, time.perf_counter(), name))

        return timed


class LoopLag:
    """A task that sleeps ``interval`` seconds in a loop and records how late it wakes.

    ``async async with LoopLag() as lag:`` starts the ticker before the body runs; on exit the sleep
    still pending counts too, so a body that blocks the loop to its very end is not missed.

    Python's garbage collector stops every thread while it runs (a full collection of a process
    with charmem's dependencies imported takes tens of milliseconds here): the time it spent
    during each tick is recorded too, so the table can tell the lag charmem causes (a blocking
    call on the loop, the GIL held by a native call) from the collector's pauses.
    """

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.lags: list[float] = []
        self.ticks: list[tuple[float, float]] = []  # (asleep since, woke at), perf_counter seconds
        self.gc_runs: list[tuple[float, float]] = []  # (start, end) of each collection
        self._task: asyncio.Task[None] | None = None
        self._asleep_since: float | None = None
        self._ticking = asyncio.Event()
        self._gc_started: float | None = None

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        elif self._gc_started is not None:
            self.gc_runs.append((self._gc_started, time.perf_counter()))
            self._gc_started = None

    def _tick(self) -> None:
        assert self._asleep_since is not None
        now = time.perf_counter()
        self.lags.append(max(0.0, now - self._asleep_since - self.interval))
        self.ticks.append((self._asleep_since, now))

    async def _run(self) -> None:
        while True:
            self._asleep_since = time.perf_counter()
            self._ticking.set()
            await asyncio.sleep(self.interval)
            self._tick()

    async def __aenter__(self) -> LoopLag:
        gc.callbacks.append(self._on_gc)
        self._task = asyncio.get_running_loop().create_task(self._run())
        await self._ticking.wait()  # the ticker is asleep: from now on lag is seen
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._asleep_since is not None:
            self._tick()
        gc.callbacks.remove(self._on_gc)

    @property
    def worst_gc_pause_ms(self) -> float:
        """The longest single garbage collection during the window (ms)."""
        return max((end - start for start, end in self.gc_runs), default=0.0) * 1000

    @property
    def worst_without_gc_ms(self) -> float:
        """The worst lag once the collections that overlapped the same tick are taken off (ms)."""
        net = []
        for lag, (asleep, woke) in zip(self.lags, self.ticks, strict=True):
            collecting = sum(max(0.0, min(woke, end) - max(asleep, start)) for start, end in self.gc_runs)
            net.append(max(0.0, lag - collecting))
        return max(net, default=0.0) * 1000

    @property
    def worst_ms(self) -> float:
        return max(self.lags, default=0.0) * 1000

    @property
    def p99_ms(self) -> float:
        return sorted(self.lags)[int(0.99 * (len(self.lags) - 1))] * 1000 if self.lags else 0.0

    def made_of(
        self, sources: Mapping[str, Sequence[tuple[float, float, str]]], late_ms: float = 10.0
    ) -> dict[str, Any]:
        """What the late ticks (lag over ``late_ms``) overlapped: ms per source, summed over them.

        ``sources`` maps a name to (start, end, call) intervals (store calls, shard flushes);
        garbage collections are a source too. A tick's overlap with a source is capped at its
        lag, so the sums read as "lag during which this was running" (sources may overlap each
        other, so they can add up to more than the lag). Also the worst tick's own breakdown, and
        per source the count, median and longest duration of its calls.
        """
        every = {"gc": [(start, end, "collect") for start, end in self.gc_runs]}
        for name, intervals in sources.items():
            calls = sorted({call for _s, _e, call in intervals})
            for call in calls:
                every[f"{name}.{call}"] = [i for i in intervals if i[2] == call]

        def overlaps(asleep: float, woke: float, lag: float) -> dict[str, float]:
            start = woke - lag  # the tick was due here: the lag is [start, woke]
            return {
                name: min(lag, sum(max(0.0, min(woke, e) - max(start, s)) for s, e, _c in spans)) * 1000
                for name, spans in every.items()
            }

        late = [(lag, tick) for lag, tick in zip(self.lags, self.ticks, strict=True) if lag * 1000 > late_ms]
        totals: dict[str, float] = dict.fromkeys(every, 0.0)
        for lag, (asleep, woke) in late:
            for name, value in overlaps(asleep, woke, lag).items():
                totals[name] += value
        worst: dict[str, float] = {}
        if self.lags:
            i = max(range(len(self.lags)), key=self.lags.__getitem__)
            worst = overlaps(*self.ticks[i], self.lags[i])
        calls = {
            name: {
                "count": len(spans),
                "median_ms": statistics.median(e - s for s, e, _c in spans) * 1000,
                "max_ms": max(e - s for s, e, _c in spans) * 1000,
            }
            for name, spans in every.items()
            if spans
        }
        return {
            "calls": calls,
            "late_ms": late_ms,
            "late_ticks": len(late),
            "late_lag_ms": sum(lag for lag, _t in late) * 1000,
            "overlap_ms": {k: v for k, v in totals.items() if v > 0},
            "worst_overlap_ms": {k: v for k, v in worst.items() if v > 0},
        }


def directory_bytes(path: Path) -> int:
    """Bytes the files under ``path`` take on disk: allocated blocks, as ``du`` counts them.

    Qdrant Edge preallocates sparse files (32 MB storage chunks, its write-ahead log): their
    sizes are far above the disk they use.
    """
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_blocks * 512 for p in files)


def rss_mb() -> tuple[float, float]:
    """(current, peak) resident memory of this process in MB (Linux; else peak twice)."""
    fields: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) / 1024
    peak = fields.get("VmHWM", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return fields.get("VmRSS", peak), peak


def reset_peak_rss() -> None:
    """Reset the kernel's peak RSS of this process (``VmHWM``), so a size's peak is its own (Linux)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def floor_samples(matrix: np.ndarray, vectors: Sequence[np.ndarray]) -> list[float]:
    """The floor: seconds of ``np.argpartition(-(M @ q), 10)[:10]`` per query, in a loop of its own.

    Over the float32 (N, D) matrix in memory, no thread limit, each query once (200 by default):
    the ratios the targets are stated in divide by the median of these.
    """
    samples = []
    for q in vectors:
        start = time.perf_counter()
        np.argpartition(-(matrix @ q), FLOOR_K)[:FLOOR_K]
        samples.append(time.perf_counter() - start)
    return samples


def searcher(index: EdgeVectorIndex, vector: np.ndarray, limit: int) -> Callable[[], Awaitable[Any]]:
    """A call searching ``index`` for ``vector`` (dense only)."""
    query = VectorQuery(vector=vector.tolist(), limit=limit)
    return lambda: index.search(query)


async def recall_run(
    index: EdgeVectorIndex,
    matrix: np.ndarray,
    queries: Sequence[tuple[str, np.ndarray]],
    row_of: dict[str, int],
) -> tuple[dict[str, list[float]], list[set[int]], set[str]]:
    """Top-10 searches of ``index`` interleaved with numpy's: latencies, found rows, kinds."""
    found: list[set[int]] = []
    kinds: set[str] = set()

    def search(vector: np.ndarray) -> Callable[[], Awaitable[Any]]:
        query = VectorQuery(vector=vector.tolist(), limit=RECALL_K)

        async def run() -> None:
            result = await index.search(query)
            found.append({row_of[str(hit.id)] for hit in result.hits})
            kinds.add(result.completeness.kind.value)

        return run

    samples = await interleaved(
        {"numpy": numpy_calls(matrix, queries, RECALL_K), "index": [search(v) for _t, v in queries]},
        warmup=0,
    )
    return samples, found, kinds


def recall_at_k(found: Sequence[set[int]], truth: Sequence[set[int]]) -> float:
    return statistics.fmean(len(f & t) / RECALL_K for f, t in zip(found, truth, strict=True))


def numpy_top(matrix: np.ndarray, query: np.ndarray, k: int) -> np.ndarray:
    scores = matrix @ query
    k = min(k, len(scores))
    top = np.argpartition(-scores, k - 1)[:k]
    return top[np.argsort(-scores[top])]


# ------------------------------------------------------------------------------- the stack


class Stack:
    """One embedded store (the CLI's stores) per dimension, grown size by size."""

    def __init__(self, root: Path, corpus: Corpus, batch: int) -> None:
        self.root = root
        self.corpus = corpus
        self.batch = batch
        self.embedder = PrecomputedEmbedder(corpus)
        self.timer = TimedEmbedder(self.embedder)
        self.memory: CharacterMemory | None = None
        self.count = 0
        self.timed: dict[str, Timed] = {}

    async def open(self) -> CharacterMemory:
        memory = await CharacterMemory.open(
            cli_settings({}, str(self.root)), COLLECTION, embedding_provider=self.timer
        )
        stores = stores_of(memory)
        self.timed = {name: Timed(getattr(stores, name)) for name in ("graph", "vectors", "stats")}
        for name, proxy in self.timed.items():
            setattr(memory, f"_{name}", proxy)
        self.memory = memory
        return memory

    def _adapter_seconds(self) -> dict[str, float]:
        return {name: proxy.seconds for name, proxy in self.timed.items()}

    async def grow(self, target: int, singles: int) -> dict[str, Any]:
        """Remember memories up to ``target``: bulk plans, then ``singles`` one at a time."""
        memory = self.memory
        assert memory is not None
        texts = self.corpus.texts(target)
        self.embedder.know(texts, 0)
        bulk_until = max(self.count, target - singles)
        report: dict[str, Any] = {}
        if bulk_until > self.count:
            added = bulk_until - self.count
            before, embedding = self._adapter_seconds(), self.timer.seconds
            start = time.perf_counter()
            for first in range(self.count, bulk_until, self.batch):
                episodes, observations = [], []
                for i in range(first, min(bulk_until, first + self.batch)):
                    episode = MemoryId.deterministic(COLLECTION, "episode", str(i))
                    episodes.append(EpisodeDraft(id=episode, occurred_at=T0 + timedelta(minutes=i)))
                    observations.append(ObservationDraft(text=texts[i], episode_id=episode))
                plan = await memory.prepare(RememberDrafts(episodes=episodes, observations=observations))
                outcome = await memory.commit(plan)
                assert not outcome.repair_markers, outcome.repair_markers
            seconds = time.perf_counter() - start - (self.timer.seconds - embedding)
            after = self._adapter_seconds()
            report["bulk"] = {
                "memories": added,
                "seconds": seconds,
                "per_second": added / seconds,
                "shares": {name: (after[name] - before[name]) / seconds for name in after},
            }
            self.count = bulk_until
        if target > self.count:
            added = target - self.count
            embedding = self.timer.seconds
            start = time.perf_counter()
            for i in range(self.count, target):
                await memory.remember(RememberInput(texts[i], occurred_at=T0 + timedelta(minutes=i)))
            seconds = time.perf_counter() - start - (self.timer.seconds - embedding)
            report["single"] = {"memories": added, "seconds": seconds, "per_second": added / seconds}
            self.count = target
        return report

    def disk(self) -> dict[str, int]:
        return {
            "graph": directory_bytes(self.root / "oxigraph"),
            "vectors": directory_bytes(self.root / "vectors" / COLLECTION),
            "stats": sum(directory_bytes(p) for p in self.root.glob("retrieval-stats.sqlite3*")),
        }


async def query_latencies(
    stack: Stack, queries: Sequence[tuple[str, np.ndarray]], local: Any, local_name: str | None
) -> dict[str, list[float]]:
    memory = stack.memory
    assert memory is not None
    stack.embedder.know_queries(queries)
    matrix = stack.corpus.vectors[: stack.count]
    vectors = stores_of(memory).vectors

    def search(text: str | None, vector: np.ndarray) -> Callable[[], Awaitable[Any]]:
        query = VectorQuery(vector=vector.tolist(), limit=LIMIT, object_types=SCOPE, text=text)
        return lambda: vectors.search(query)

    def retrieve(text: str) -> Callable[[], Awaitable[Any]]:
        return lambda: memory.retrieve(RetrievalContext(query=text))

    methods = {
        "numpy": numpy_calls(matrix, queries, LIMIT),
        "edge_dense": [search(None, v) for _t, v in queries],
        "edge_fused": [search(t, v) for t, v in queries],
        "retrieve": [retrieve(t) for t, _v in queries],
        "retrieve_warm": [retrieve(t) for t, _v in queries],  # right after: the graph cache is warm
    }
    if local is not None and local_name is not None:

        def local_query(vector: np.ndarray) -> Callable[[], Awaitable[Any]]:
            async def run() -> Any:
                return local.query_points(local_name, query=vector.tolist(), limit=LIMIT)

            return run

        methods["qdrant_client"] = [local_query(v) for _t, v in queries]
    return await interleaved(methods)


async def thread_hop() -> list[float]:
    """Seconds of one ``asyncio.to_thread`` round trip doing nothing (the adapter's hop)."""
    return await time_calls([lambda: asyncio.to_thread(lambda: None)] * 200, warmup=20)


# ------------------------------------------------------------------------------- HNSW


async def fill(index: EdgeVectorIndex, ids: Sequence[MemoryId], matrix: np.ndarray, batch: int) -> None:
    """Upsert ``matrix`` (dense only, no text) under ``ids``, ``batch`` points per call."""
    for start in range(0, len(ids), batch):
        stop = min(len(ids), start + batch)
        await index.upsert(
            [
                VectorPoint(id=ids[i], object_type=ObjectType.OBSERVATION, vector=matrix[i].tolist())
                for i in range(start, stop)
            ]
        )


async def timed_build(index: EdgeVectorIndex) -> dict[str, Any]:
    """``index.optimize()`` with the event loop's worst lag meanwhile."""
    async with LoopLag() as lag:
        report = await index.optimize()
    return {
        "build_seconds": report.build_seconds,
        "copy_seconds": report.copy_seconds,
        "swap_seconds": report.swap_seconds,
        "indexed": report.indexed,
        "loop_lag_ms": lag.worst_ms,
    }


async def ef_runs(
    root: Path,
    name: str,
    dim: int,
    base: HnswSettings,
    efs: Sequence[int],
    matrix: np.ndarray,
    queries: Sequence[tuple[str, np.ndarray]],
    truth: Sequence[set[int]],
    row_of: dict[str, int],
) -> list[dict[str, Any]]:
    """Reopen the built shard once per ``ef``: recall@10, latencies, completeness kinds."""
    runs = []
    for ef in efs:
        settings = attrs.evolve(base, ef=ef)
        index = EdgeVectorIndex(root, name, model_id="clustered", vector_size=dim, hnsw=settings)
        try:
            samples, found, kinds = await recall_run(index, matrix, queries, row_of)
        finally:
            await index.close()
        runs.append(
            {
                "m": base.m,
                "ef": ef,
                "recall": recall_at_k(found, truth),
                "latency": samples["index"],
                "numpy": samples["numpy"],
                "completeness": sorted(kinds),
            }
        )
    return runs


async def hnsw_sweep(
    work: Path,
    matrix: np.ndarray,
    queries: Sequence[tuple[str, np.ndarray]],
    ms: Sequence[int],
    efs: Sequence[int],
    *,
    ef_construct: int,
    gil_probe: bool,
) -> dict[str, Any]:
    """Recall@10 and latency of the index alone with HNSW, per m and ef, against numpy."""
    count, dim = matrix.shape
    truth = [set(numpy_top(matrix, v, RECALL_K).tolist()) for _t, v in queries]
    ids = [MemoryId.deterministic("hnsw-bench", str(i)) for i in range(count)]
    row_of = {str(memory_id): row for row, memory_id in enumerate(ids)}
    out: dict[str, Any] = {"points": count, "runs": []}
    for m in ms:
        root = work / f"hnsw-m{m}"
        base = HnswSettings(
            threshold=max(1, min(count, 1000)), m=m, ef_construct=ef_construct, background=False
        )
        index = EdgeVectorIndex(root, "sweep", model_id="clustered", vector_size=dim, hnsw=base)
        try:
            await fill(index, ids, matrix, 5000)
            if not out["runs"]:  # the exact scan of the same shard, once, against numpy
                exact = await interleaved(
                    {
                        "numpy": numpy_calls(matrix, queries, RECALL_K),
                        "index": [searcher(index, v, RECALL_K) for _t, v in queries],
                    }
                )
                out["numpy"], out["edge_exact"] = exact["numpy"], exact["index"]
            build = await timed_build(index)
        finally:
            await index.close()
        runs = await ef_runs(root, "sweep", dim, base, efs, matrix, queries, truth, row_of)
        out["runs"].extend({**build, **run} for run in runs)
        shutil.rmtree(root, ignore_errors=True)
    if gil_probe:
        out["in_process"] = await in_process_optimize(work / "gil-probe", matrix, ms[0], ef_construct)
    return out


async def in_process_optimize(path: Path, matrix: np.ndarray, m: int, ef_construct: int) -> dict[str, float]:
    """``EdgeShard.optimize()`` in a worker thread of this process: how long the loop stalls."""
    count, dim = matrix.shape
    hnsw = HnswSettings(threshold=max(1, min(count, 1000)), m=m, ef_construct=ef_construct)
    shard = qe.EdgeShard.create(str(path), shard_config(dim, hnsw))
    try:
        for start in range(0, count, 5000):
            points = [
                qe.Point(i + 1, {"dense": matrix[i].tolist()}, {})
                for i in range(start, min(count, start + 5000))
            ]
            shard.update(qe.UpdateOperation.upsert_points(points))
        shard.flush()
        async with LoopLag() as lag:
            began = time.perf_counter()
            await asyncio.to_thread(shard.optimize)
            seconds = time.perf_counter() - began
    finally:
        shard.close()
        shutil.rmtree(path, ignore_errors=True)
    return {"build_seconds": seconds, "loop_lag_ms": lag.worst_ms}


# ------------------------------------------------------------------------------- concurrency


def watch_shard(stack: Stack) -> ShardCalls | None:
    """Record the shard's update and flush calls (``None`` if the index keeps no ``_shard``)."""
    index = stack.timed["vectors"]._inner
    shard = getattr(index, "_shard", None)
    if shard is None:
        return None
    calls = ShardCalls(shard)
    index._shard = calls
    return calls


def unwatch_shard(stack: Stack, calls: ShardCalls) -> None:
    index = stack.timed["vectors"]._inner
    if getattr(index, "_shard", None) is calls:
        index._shard = calls._shard


async def concurrency(
    stack: Stack, queries: Sequence[tuple[str, np.ndarray]], seconds: float
) -> dict[str, Any]:
    """8 concurrent retrieves and one writer in this process, against retrieves alone."""
    memory = stack.memory
    assert memory is not None
    stack.embedder.know_queries(queries)
    texts = stack.corpus.texts(min(len(stack.corpus.vectors), stack.count + 5000))
    stack.embedder.know(texts, 0)
    rng = random.Random(5)

    async def retrieves(deadline: float, latencies: list[float]) -> None:
        while time.perf_counter() < deadline:
            text = rng.choice(queries)[0]
            start = time.perf_counter()
            await memory.retrieve(RetrievalContext(query=text))
            latencies.append(time.perf_counter() - start)
            # A warm retrieve may finish without suspending; yield between requests as a server
            # does, or this loop alone would hold the event loop until its deadline.
            await asyncio.sleep(0)

    alone: list[float] = []
    async with LoopLag() as alone_lag:
        start = time.perf_counter()
        await retrieves(start + seconds / 2, alone)
        alone_seconds = time.perf_counter() - start

    commits = 0
    shard = watch_shard(stack)
    for proxy in stack.timed.values():
        proxy.intervals = []

    async def writer(deadline: float) -> None:
        nonlocal commits
        WRITER.set(True)  # this task's own context
        while time.perf_counter() < deadline and stack.count < len(texts):
            i = stack.count
            await memory.remember(RememberInput(texts[i], occurred_at=T0 + timedelta(minutes=i)))
            stack.count += 1
            commits += 1

    loaded: list[float] = []
    async with LoopLag() as lag:
        start = time.perf_counter()
        deadline = start + seconds
        await asyncio.gather(writer(deadline), *(retrieves(deadline, loaded) for _ in range(8)))
        elapsed = time.perf_counter() - start
    sources = {f"writer {name}": proxy.intervals or [] for name, proxy in stack.timed.items()}
    for proxy in stack.timed.values():
        proxy.intervals = None
    if shard is not None:
        sources["shard"] = shard.intervals
        unwatch_shard(stack, shard)
    return {
        "alone_per_second": len(alone) / alone_seconds,
        "alone_latency": alone,
        "alone_loop_lag_ms": alone_lag.worst_ms,
        "retrieves_per_second": len(loaded) / elapsed,
        "commits_per_second": commits / elapsed,
        "latency": loaded,
        "loop_lag_ms": lag.worst_ms,
        "loop_lag_p99_ms": lag.p99_ms,
        "loop_lag_made_of": lag.made_of(sources),
        "loop_lag_without_gc_ms": lag.worst_without_gc_ms,
        "alone_loop_lag_without_gc_ms": alone_lag.worst_without_gc_ms,
        "gc_pause_ms": max(lag.worst_gc_pause_ms, alone_lag.worst_gc_pause_ms),
    }


# ------------------------------------------------------------------------------- large


async def large_index(
    work: Path,
    queries_n: int,
    base: HnswSettings,
    efs: Sequence[int],
    seed: int,
    bulk_rate: float | None,
) -> dict[str, Any]:
    """1,000,000 x 384 in the vector index alone: exact scan, then HNSW (``base``), an ef sweep."""
    corpus = Corpus(LARGE_DIM, LARGE_N, centres=512, seed=seed)
    queries = corpus.queries(LARGE_N, queries_n, seed + 1)
    truth = [set(numpy_top(corpus.vectors, v, RECALL_K).tolist()) for _t, v in queries]
    root = work / "large"
    ids = [MemoryId.deterministic("large", str(i)) for i in range(LARGE_N)]
    row_of = {str(memory_id): row for row, memory_id in enumerate(ids)}
    out: dict[str, Any] = {"points": LARGE_N}
    index = EdgeVectorIndex(root, "large", model_id="clustered", vector_size=LARGE_DIM, hnsw=base)
    try:
        start = time.perf_counter()
        await fill(index, ids, corpus.vectors, 10_000)
        out["upsert_per_second"] = LARGE_N / (time.perf_counter() - start)
        exact = await interleaved(
            {
                "numpy": numpy_calls(corpus.vectors, queries[:10], RECALL_K),
                "index": [searcher(index, v, RECALL_K) for _t, v in queries[:10]],
            },
            warmup=1,
        )
        out["numpy"], out["edge_exact"] = exact["numpy"], exact["index"]
        out["build"] = await timed_build(index)
    finally:
        await index.close()
    out["runs"] = await ef_runs(root, "large", LARGE_DIM, base, efs, corpus.vectors, queries, truth, row_of)
    if bulk_rate:
        out["commit_ingest_hours"] = LARGE_N / bulk_rate / 3600
    shutil.rmtree(root, ignore_errors=True)
    return out


# ------------------------------------------------------------------------------- the run


def fill_local(local: Any, name: str, vectors: np.ndarray, first: int, stop: int) -> None:
    """Upsert rows ``first`` to ``stop`` of ``vectors`` into the qdrant-client collection."""
    from qdrant_client import models

    for start in range(first, stop, 2000):
        local.upsert(
            name,
            points=[
                models.PointStruct(id=i, vector=vectors[i].tolist(), payload={"object_type": "observation"})
                for i in range(start, min(stop, start + 2000))
            ],
        )


async def reopened(
    stack: Stack, queries: Sequence[tuple[str, np.ndarray]]
) -> tuple[list[float], dict[str, int]]:
    """Close the store, measure its disk, open it again and time the first retrieve of each query.

    Returns:
        (seconds per retrieve, every one counted, on the reopened store; bytes per store after close).
    """
    assert stack.memory is not None
    await stack.memory.close()
    gc.collect()
    closed = stack.disk()
    memory = await stack.open()
    cold = []
    for text, _vector in queries:
        start = time.perf_counter()
        await memory.retrieve(RetrievalContext(query=text))
        cold.append(time.perf_counter() - start)
    return cold, closed


async def measure_size(
    args: argparse.Namespace, stack: Stack, n: int, local: Any, console: Console
) -> dict[str, Any]:
    """Grow the store to ``n`` memories and take every per-size measure (peak RSS of this size only)."""
    dim = stack.corpus.dim
    reset_peak_rss()
    console.log(f"dim {dim}: remembering up to {n:,} memories")
    writes = await stack.grow(n, singles=min(args.singles, max(1, n // 4)))
    console.log(f"dim {dim}, {n:,} memories: queries")
    queries = stack.corpus.queries(n, args.queries, args.seed + n)
    if args.gc_freeze:  # what a long-running application may do once it has started
        gc.freeze()
    latencies = await query_latencies(stack, queries, local if n <= 50_000 else None, "bench")
    floor_queries = stack.corpus.queries(n, FLOOR_QUERIES, args.seed + n + 1)
    matrix = stack.corpus.vectors[: stack.count]
    floor = floor_samples(matrix, [v for _t, v in floor_queries])
    with threadpool_limits(limits=1):  # the same on one BLAS thread: how much the cores' load inflates it
        floor_one_thread = floor_samples(matrix, [v for _t, v in floor_queries])
    disk = stack.disk()
    latencies["retrieve_cold"], closed = await reopened(stack, queries)
    assert stack.memory is not None
    out: dict[str, Any] = {
        "floor": floor,
        "floor_one_thread": floor_one_thread,
        "gc_tracked_objects": len(gc.get_objects()),
        "latency": latencies,
        "writes": writes,
        "disk": disk,
        "disk_closed": closed,
        "vector_points": await stores_of(stack.memory).vectors.count(),
    }
    if args.concurrency_seconds > 0:
        console.log(f"dim {dim}, {n:,}: 8 retrieves + 1 writer for {args.concurrency_seconds:g} s")
        out["concurrency"] = {
            "n": n,
            **await concurrency(stack, stack.corpus.queries(n, 50, args.seed + 7), args.concurrency_seconds),
        }
    out["rss_mb"] = rss_mb()
    return out


async def run_dim(
    args: argparse.Namespace, dim: int, corpus: Corpus, work: Path, console: Console
) -> dict[str, Any]:
    """Query latency, writes, disk and concurrency for one dimension, size by size."""
    sizes = sorted(args.sizes)
    stack = Stack(work / f"store-{dim}", corpus, args.batch)
    await stack.open()
    local: Any = None
    if not args.no_qdrant_client:
        from qdrant_client import QdrantClient, models

        local = QdrantClient(location=":memory:")
        local.create_collection(
            "bench", vectors_config=models.VectorParams(size=dim, distance=models.Distance.COSINE)
        )
    local_count = 0
    result: dict[str, Any] = {"dim": dim, "sizes": {}}
    previous: tuple[int, dict[str, int]] | None = None
    try:
        for n in sizes:
            if local is not None and n <= 50_000:
                fill_local(local, "bench", corpus.vectors, local_count, n)
                local_count = n
            size = await measure_size(args, stack, n, local, console)
            size["disk_marginal"] = (
                {k: (size["disk"][k] - previous[1][k]) / (n - previous[0]) for k in size["disk"]}
                if previous is not None
                else None
            )
            result["sizes"][n] = size
            previous = (n, size["disk"])
        result["thread_hop"] = await thread_hop()
        if "concurrency" in result["sizes"][sizes[-1]]:
            result["concurrency"] = result["sizes"][sizes[-1]]["concurrency"]
    finally:
        assert stack.memory is not None
        await stack.memory.close()
        if local is not None:
            local.close()
    return result


# ------------------------------------------------------------------------------- the table


def ms(value: float) -> str:
    return f"{value:.3g}" if value < 10 else f"{value:.0f}"


def ratio(value: float) -> str:
    if value >= 10_000:
        return f"x{value / 1000:.0f}k"
    return f"x{value:.0f}" if value >= 100 else f"x{value:.2g}" if value < 10 else f"x{value:.1f}"


def latency_cell(samples: Sequence[float] | None, floor: Sequence[float] | None) -> str:
    if not samples:
        return "-"
    p50, p95 = percentiles(samples)
    cell = f"{ms(p50)} / {ms(p95)} ms"
    if floor:
        cell += f"  {ratio(p50 / percentiles(floor)[0])}"
    return cell


def growth_cell(points: Sequence[tuple[int, float]]) -> str:
    """Log-log slope of p50 against N, and the ms added per 1,000 memories (smallest to largest)."""
    points = [(n, p) for n, p in points if p > 0]
    if len(points) < 2:
        return "-"
    logs = np.log([[n, p] for n, p in points])
    slope = float(np.polyfit(logs[:, 0], logs[:, 1], 1)[0])
    (n0, p0), (n1, p1) = points[0], points[-1]
    per_1k = (p1 - p0) / ((n1 - n0) / 1000)
    return f"N^{slope:.2f}  {'+' if per_1k >= 0 else '-'}{ms(abs(per_1k))} ms/1k"


def build_cell(run: dict[str, Any]) -> str:
    return (
        f"{run['build_seconds']:.1f} s; paused: copy {run['copy_seconds']:.2f} s, swap "
        f"{run['swap_seconds']:.2f} s; loop lag {run['loop_lag_ms']:.0f} ms"
    )


def human_bytes(value: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if abs(value) < 1000:
            return f"{value:.3g} {unit}"
        value /= 1000
    return f"{value:.3g} TB"


LATENCY_ROWS = (
    ("numpy", "query p50 / p95: (a) numpy exact (floor)"),
    ("edge_dense", "(b) vector index alone, dense"),
    ("edge_fused", "(b+) vector index, dense + BM25 (as retrieve)"),
    ("retrieve", "(c) retrieve() full: graph + expansion"),
    ("retrieve_warm", "(c2) the same retrieve() again (warm cache)"),
    ("retrieve_cold", "(c3) retrieve() on the reopened store (cold)"),
    ("qdrant_client", "(d) qdrant-client local mode"),
)


def lag_rows(row: Callable[[str, dict[int, str]], None], loads: Mapping[int, dict[str, Any]]) -> None:
    """The concurrency rows: throughput, the event loop's lag and what its late ticks overlapped."""
    row(
        "8 retrieves + 1 writer: retrieves/s",
        {
            n: f"{load['retrieves_per_second']:.1f}/s  "
            f"{ratio(load['retrieves_per_second'] / load['alone_per_second'])} "
            f"of alone ({load['alone_per_second']:.1f}/s)"
            for n, load in loads.items()
        },
    )
    row(
        "  commits/s, retrieve p50/p95",
        {
            n: "{:.1f}/s, {} / {} ms".format(
                load["commits_per_second"], *map(ms, percentiles(load["latency"]))
            )
            for n, load in loads.items()
        },
    )
    row(
        "  event loop lag: worst, p99 (alone)",
        {
            n: f"{load['loop_lag_ms']:.0f} ms, p99 {load['loop_lag_p99_ms']:.0f} "
            f"(alone {load['alone_loop_lag_ms']:.0f})"
            for n, load in loads.items()
        },
    )
    row(
        "  worst without GC pauses (alone)",
        {
            n: f"{load['loop_lag_without_gc_ms']:.0f} ms (alone {load['alone_loop_lag_without_gc_ms']:.0f}); "
            f"longest GC {load['gc_pause_ms']:.0f} ms"
            for n, load in loads.items()
        },
    )
    row(
        "  ticks > 10 ms: count, lag; overlapped by",
        {n: made_of_cell(load["loop_lag_made_of"]) for n, load in loads.items()},
    )
    row(
        "  writer's slowest calls: median / max ms",
        {
            n: ", ".join(
                f"{k} {v['median_ms']:.0f}/{v['max_ms']:.0f}"
                for k, v in sorted(
                    load["loop_lag_made_of"]["calls"].items(), key=lambda kv: -kv[1]["median_ms"]
                )[:3]
            )
            for n, load in loads.items()
        },
    )
    row(
        "  the worst tick overlapped",
        {
            n: ", ".join(f"{k} {v:.0f}" for k, v in top(load["loop_lag_made_of"]["worst_overlap_ms"]))
            or "nothing recorded"
            for n, load in loads.items()
        },
    )


def top(values: Mapping[str, float], count: int = 3) -> list[tuple[str, float]]:
    return sorted(values.items(), key=lambda kv: -kv[1])[:count]


def made_of_cell(made_of: Mapping[str, Any]) -> str:
    head = f"{made_of['late_ticks']}, {made_of['late_lag_ms']:.0f} ms"
    parts = ", ".join(f"{k} {v:.0f}" for k, v in top(made_of["overlap_ms"]))
    return f"{head}: {parts}" if parts else head


#: The issue's targets (at 5,000 x 1,536), as (label, numerator, denominator, at most).
TARGETS = (
    ("warm retrieve / floor", "retrieve_warm", "floor", 12.0),
    ("warm retrieve / VectorIndex.search (b+)", "retrieve_warm", "edge_fused", 2.0),
    ("cold retrieve (reopened) / floor", "retrieve_cold", "floor", 25.0),
)


def target_ratios(size: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """The issue's ratios of one size (p50 over p50) with their targets."""

    def p50(key: str) -> float:
        return percentiles(size[key] if key.startswith("floor") else size["latency"][key])[0]

    def one_thread(den: str) -> str:
        return "floor_one_thread" if den == "floor" and "floor_one_thread" in size else den

    return {
        label: {
            "ratio": p50(num) / p50(den),
            "target": most,
            "p50_ms": p50(num),
            "reference_ms": p50(den),
            "ratio_one_thread_floor": p50(num) / p50(one_thread(den)),
        }
        for label, num, den, most in TARGETS
    }


def render_targets(results: Sequence[dict[str, Any]], console: Console) -> None:
    table = Table(title="issue targets: p50 ratios measured in one run (stated at 5,000 x 1,536)")
    table.add_column("dims x N", no_wrap=True)
    table.add_column("floor p50", justify="right")
    for label, *_rest in TARGETS:
        table.add_column(label, justify="right")
    for result in results:
        for n, size in result["sizes"].items():
            ratios = target_ratios(size)
            table.add_row(
                f"{result['dim']} x {n:,}",
                f"{ms(percentiles(size['floor'])[0])} ms",
                *(
                    f"{ms(r['p50_ms'])} ms  x{r['ratio']:.3g} "
                    + ("[green]ok[/green]" if r["ratio"] <= r["target"] else "[red]over[/red]")
                    + f" (<= {r['target']:g})"
                    + (
                        f"; 1-thread floor x{r['ratio_one_thread_floor']:.3g}"
                        if r["ratio_one_thread_floor"] != r["ratio"]
                        else ""
                    )
                    for r in ratios.values()
                ),
            )
    console.print(table)


def render(results: Sequence[dict[str, Any]], large: dict[str, Any] | None, console: Console) -> None:
    sizes = sorted({n for r in results for n in r["sizes"]})
    columns = [*sizes, *([LARGE_N] if large else [])]
    table = Table(title="charmem latency and scale (ratios: to (a) numpy exact, same run)", show_lines=False)
    table.add_column("dims / measure", no_wrap=True)
    for n in columns:
        table.add_column(f"N={n:,}", justify="right")
    table.add_column("growth (p50)", justify="right")

    def row(label: str, cells: dict[int, str], growth: str = "") -> None:
        table.add_row(label, *(cells.get(n, "") for n in columns), growth)

    for result in results:
        dim = result["dim"]
        data = result["sizes"]
        table.add_section()
        table.add_row(f"[bold]{dim} dimensions[/bold]", *[""] * (len(columns) + 1))
        row(
            "floor: argpartition k=10, own loop, p50/p95",
            {n: latency_cell(d["floor"], None) for n, d in data.items()},
            growth_cell([(n, percentiles(d["floor"])[0]) for n, d in data.items()]),
        )
        row(
            "  the same on one BLAS thread (not a target)",
            {n: latency_cell(d["floor_one_thread"], None) for n, d in data.items()},
        )
        for key, label in LATENCY_ROWS:
            cells = {
                n: latency_cell(d["latency"].get(key), d["latency"]["numpy"] if key != "numpy" else None)
                for n, d in data.items()
            }
            points = [
                (n, percentiles(d["latency"][key])[0]) for n, d in data.items() if d["latency"].get(key)
            ]
            if large and dim == LARGE_DIM:
                if key == "numpy":
                    cells[LARGE_N] = latency_cell(large["numpy"], None)
                elif key == "edge_dense":
                    cells[LARGE_N] = latency_cell(large["edge_exact"], large["numpy"]) + " (k=10)"
                elif key == "retrieve":
                    hours = large.get("commit_ingest_hours")
                    cells[LARGE_N] = f"not run: ingest ~{hours:.1f} h" if hours else "not run"
                elif key == "qdrant_client":
                    cells[LARGE_N] = "stops at 50,000"
            row(label, cells, growth_cell(points))
        row("vector points (1 per memory)", {n: f"{d['vector_points']:,}" for n, d in data.items()})
        row(
            "write: remember() one at a time",
            {
                n: f"{d['writes']['single']['per_second']:.1f} mem/s"
                for n, d in data.items()
                if "single" in d["writes"]
            },
        )
        row(
            "write: bulk commit (plans of --batch)",
            {
                n: f"{d['writes']['bulk']['per_second']:.0f} mem/s"
                for n, d in data.items()
                if "bulk" in d["writes"]
            },
        )
        row(
            "  bulk time in graph / vectors / stats",
            {
                n: " / ".join(
                    f"{100 * d['writes']['bulk']['shares'][k]:.0f}%" for k in ("graph", "vectors", "stats")
                )
                for n, d in data.items()
                if "bulk" in d["writes"]
            },
        )
        for key in ("graph", "vectors", "stats"):
            cells = {}
            for n, d in data.items():
                cell = human_bytes(d["disk"][key] / n)
                if d["disk_marginal"] is not None:
                    cell += f" ({human_bytes(d['disk_marginal'][key])})"
                cells[n] = cell
            row(f"disk per memory: {key} (marginal in brackets, du)", cells)
        row(
            "disk after close (du): graph / vectors / stats",
            {
                n: " / ".join(human_bytes(d["disk_closed"][k]) for k in ("graph", "vectors", "stats"))
                for n, d in data.items()
            },
        )
        row(
            "RSS of the process: now / peak (this size)",
            {n: "{:.0f} / {:.0f} MB".format(*d["rss_mb"]) for n, d in data.items()},
        )
        row(
            "objects the GC tracks (after the queries)",
            {n: f"{d['gc_tracked_objects']:,}" for n, d in data.items()},
        )
        hop = percentiles(result["thread_hop"])[0]
        smallest = data[min(data)]["latency"]["edge_dense"]
        row(
            "thread hop (asyncio.to_thread), p50",
            {min(data): f"{ms(hop)} ms = {100 * hop / percentiles(smallest)[0]:.0f}% of (b)"},
        )
        hnsw = result.get("hnsw")
        if hnsw:
            n = hnsw["points"]
            row(f"HNSW at N={n:,}: exact (b), k=10", {n: latency_cell(hnsw["edge_exact"], hnsw["numpy"])})
            for run in hnsw["runs"]:
                row(
                    f"  HNSW m={run['m']} ef={run['ef']}: recall@10, p50/p95",
                    {n: f"{run['recall']:.3f}  " + latency_cell(run["latency"], run["numpy"])},
                )
            builds = {run["m"]: run for run in hnsw["runs"]}
            for m, run in builds.items():
                row(
                    f"  HNSW m={m} build (child process)",
                    {n: build_cell(run)},
                )
            probe = hnsw.get("in_process")
            if probe:
                row(
                    "  vs optimize() in a worker thread (GIL)",
                    {n: f"{probe['build_seconds']:.1f} s, loop lag {probe['loop_lag_ms'] / 1000:.1f} s"},
                )
        loads = {n: d["concurrency"] for n, d in data.items() if "concurrency" in d}
        if loads:
            lag_rows(row, loads)
    if large:
        table.add_section()
        table.add_row(f"[bold]{LARGE_DIM} dimensions, index alone[/bold]", *[""] * (len(columns) + 1))
        build = large["build"]
        row(
            f"HNSW m={large['runs'][0]['m']} build (child process)" if large["runs"] else "HNSW build",
            {LARGE_N: build_cell(build)},
        )
        for run in large["runs"]:
            row(
                f"  HNSW m={run['m']} ef={run['ef']}: recall@10, p50/p95",
                {LARGE_N: f"{run['recall']:.3f}  " + latency_cell(run["latency"], run["numpy"])},
            )
        row("upsert into the index alone", {LARGE_N: f"{large['upsert_per_second']:.0f} points/s"})
    console.print(table)


def jsonable(results: Sequence[dict[str, Any]], large: dict[str, Any] | None) -> dict[str, Any]:
    """Raw samples replaced by p50 / p95 in ms."""

    def convert(value: Any) -> Any:
        if isinstance(value, dict):
            return {str(k): convert(v) for k, v in value.items()}
        if isinstance(value, list) and value and all(isinstance(x, float) for x in value):
            p50, p95 = percentiles(value)
            return {"p50_ms": p50, "p95_ms": p95, "count": len(value)}
        if isinstance(value, list):
            return [convert(v) for v in value]
        return value

    return {"results": convert(list(results)), "large": convert(large)}


def parse_ints(text: str) -> list[int]:
    return [int(part.replace("_", "")) for part in text.split(",") if part.strip()]


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cli.add_argument(
        "--sizes", type=parse_ints, default=[100, 1000, 5000], help="memories, e.g. 100,1000,5000,50000"
    )
    cli.add_argument("--dims", type=parse_ints, default=[1536, 384], help="dimensions (default 1536,384)")
    cli.add_argument("--queries", type=int, default=40, help="queries per measurement (default 40)")
    cli.add_argument("--batch", type=int, default=500, help="memories per bulk plan (default 500)")
    cli.add_argument(
        "--singles", type=int, default=25, help="memories remembered one at a time per size (default 25)"
    )
    cli.add_argument(
        "--centres", type=int, default=256, help="clusters of the Gaussian mixture (default 256)"
    )
    cli.add_argument(
        "--hnsw-m", type=parse_ints, default=[16, 32], help="HNSW m values (empty: no HNSW sweep)"
    )
    cli.add_argument(
        "--hnsw-ef", type=parse_ints, default=[16, 32, 64, 128, 256], help="HNSW search ef values"
    )
    cli.add_argument("--hnsw-ef-construct", type=int, default=100)
    cli.add_argument("--no-gil-probe", action="store_true", help="skip the in-process optimize() comparison")
    cli.add_argument(
        "--gc-freeze",
        action="store_true",
        help="gc.freeze() after each size is written: collections then skip what start-up allocated",
    )
    cli.add_argument("--concurrency-seconds", type=float, default=6.0, help="0: skip the concurrency part")
    cli.add_argument(
        "--no-qdrant-client", action="store_true", help="skip the qdrant-client local-mode column"
    )
    cli.add_argument(
        "--large", action="store_true", help="also 1,000,000 x 384, the vector index alone with HNSW"
    )
    cli.add_argument("--seed", type=int, default=0)
    cli.add_argument("--store", type=Path, help="working directory (default: a temporary one, removed)")
    cli.add_argument("--keep", action="store_true", help="keep the working directory")
    cli.add_argument("--json-out", type=Path, help="write every figure as JSON")
    return cli


@contextlib.contextmanager
def workdir(store: Path | None, keep: bool) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="charmem-latency-", dir=store))
    try:
        yield path
    finally:
        if not keep:
            shutil.rmtree(path, ignore_errors=True)


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    console = Console(stderr=True)
    results = []
    with workdir(args.store, args.keep) as work:
        corpora = {
            dim: Corpus(dim, max(args.sizes) + 5000, args.centres, args.seed + dim) for dim in args.dims
        }
        for dim in args.dims:
            results.append(await run_dim(args, dim, corpora[dim], work, console))
        largest = max(args.sizes)
        for result in results if args.hnsw_m else ():  # after every store, so RSS rows are theirs
            dim = result["dim"]
            console.log(f"dim {dim}: HNSW sweep at {largest:,} points")
            result["hnsw"] = await hnsw_sweep(
                work,
                corpora[dim].vectors[:largest],
                corpora[dim].queries(largest, args.queries, args.seed + 11),
                args.hnsw_m,
                args.hnsw_ef,
                ef_construct=args.hnsw_ef_construct,
                gil_probe=not args.no_gil_probe and dim == args.dims[-1],
            )
        large = None
        if args.large:
            console.log("1,000,000 x 384: the vector index alone (this takes long)")
            rates = [
                d["writes"]["bulk"]["per_second"]
                for r in results
                for d in r["sizes"].values()
                if "bulk" in d["writes"]
            ]
            base = HnswSettings(
                threshold=20_000,
                m=(args.hnsw_m or [16])[0],
                ef_construct=args.hnsw_ef_construct,
                background=False,
            )
            large = await large_index(
                work, args.queries, base, args.hnsw_ef, args.seed, min(rates) if rates else None
            )
    out = Console(width=max(160, Console().width), soft_wrap=False)
    render(results, large, out)
    render_targets(results, out)
    if args.gc_freeze:
        out.print("gc.freeze() ran after each size was written (--gc-freeze)")
    document = jsonable(results, large)
    document["targets"] = {
        f"{r['dim']}x{n}": target_ratios(size) for r in results for n, size in r["sizes"].items()
    }
    document["arguments"] = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    document["machine"] = {
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "load_average": os.getloadavg(),
    }
    if args.json_out:
        args.json_out.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return document


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not args.sizes or min(args.sizes) < 1:
        parser().error("--sizes needs positive sizes")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    asyncio.run(main_async(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
