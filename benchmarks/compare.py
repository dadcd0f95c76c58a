"""Side by side on the same vectors: charmem, qdrant-client local mode and chromadb.

What a user would pick instead of charmem, measured on the same clustered vectors (the corpus of
``latency.py``: a Gaussian mixture on the sphere, generated sentences as texts), the same queries
and the same protocol, each system in its own subprocess so that its peak RSS is its own:

1. the parent writes the vectors (``vectors.npy``, float32 (N, D)), the query vectors
   (``queries.npy``) and the texts (``texts.json``) to a temporary directory, and times the floor:
   ``np.argpartition(-(M @ q), 10)[:10]`` over the matrix in memory, the median of 200 queries in
   a loop of its own (no thread limit);
2. each worker loads them, builds its store on disk (texts stored beside the vectors: charmem's
   graph, a qdrant payload, a chromadb document), closes it, measures the disk it holds, opens it
   again in the same process and runs the queries twice: **cold** (the first pass after the
   reopen) and **warm** (the same queries again). No query is embedded: every system is given
   the query vector (charmem through a provider answering from the precomputed vectors);
3. the worker prints one JSON object: ingest rate, p50 / p95 of each pass, disk after close, its
   RSS at each stage and its peak RSS (``VmHWM``).

Systems:

- ``charmem``: ``CharacterMemory.retrieve`` on the embedded stores (Oxigraph, Qdrant Edge, SQLite;
  the CLI's), cold and warm; and charmem's own vector index, ``VectorIndex.search``, dense top 10
  and dense + BM25 top 40 (what ``retrieve`` asks it for);
- ``qdrant``: ``QdrantClient(path=...)`` (local mode, exact search), ``query_points`` top 10;
- ``chromadb``: ``PersistentClient`` (HNSW, cosine), ``query`` top 10, run with the Python given by
  ``--chromadb-python`` (chromadb is heavy: keep it in a venv of its own); skipped with a message
  when that Python cannot import it.

``--graph-flush-every N`` adds an experiment: charmem again, its Oxigraph store flushed
(``Store.flush``: memtables written to SST files, their memory and write-ahead logs released)
after every N commits, to measure what bounding RocksDB's memtables would save.

``--footprint`` adds, to charmem's worker, where its disk goes (per store and per kind of file)
and where its RSS goes (``/proc/self/smaps`` grouped by mapping, the Python heap by
``tracemalloc``, the graph cache's entries). tracemalloc slows the worker and adds its own memory:
latency and peak RSS from such a run are not comparable, so it runs as an extra worker after the
timed ones.

    python benchmarks/compare.py                                         # 384-d, 5,000 and 50,000
    python benchmarks/compare.py --sizes 5000 --chromadb-python /work/venv-chroma/bin/python
    python benchmarks/compare.py --sizes 50000 --footprint --json-out compare.json
    nox -s bench-compare -- --sizes 5000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
K = 10
FLOOR_QUERIES = 200
COLLECTION = "compare"
SYSTEMS = ("charmem", "qdrant", "chromadb")

# ------------------------------------------------------------------------------- measuring
# (stdlib and numpy only: the workers run in other venvs too)


def rss_mb() -> dict[str, float]:
    """This process's resident memory now and at its peak, in MiB (Linux ``/proc/self/status``)."""
    fields = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = int(value.split()[0]) / 1024
    return {"now": fields.get("VmRSS", 0.0), "peak": fields.get("VmHWM", 0.0)}


def directory_bytes(path: Path, *, apparent: bool = False) -> int:
    """Bytes the files under ``path`` take on disk (allocated blocks, as ``du``), or their sizes.

    Preallocated, sparse files (Qdrant's WAL and mmap storage) have sizes far above what they
    hold: allocated blocks are the disk a user pays for.
    """
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size if apparent else p.stat().st_blocks * 512 for p in files)


def percentiles(samples: Sequence[float]) -> dict[str, float]:
    """p50 / p95 / count of ``samples`` (seconds) in milliseconds."""
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]
    return {"p50_ms": statistics.median(ordered) * 1000, "p95_ms": p95 * 1000, "count": len(ordered)}


def timed(calls: Sequence[Callable[[], Any]]) -> list[float]:
    """Seconds per call, every call counted (a cold pass must count its first calls)."""
    samples = []
    for call in calls:
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return samples


def floor_ms(matrix: np.ndarray, queries: np.ndarray) -> float:
    """The floor: median ms of ``argpartition(-(M @ q), 10)[:10]``, 200 queries in their own loop."""
    samples = []
    for i in range(FLOOR_QUERIES):
        q = queries[i % len(queries)]
        start = time.perf_counter()
        np.argpartition(-(matrix @ q), K)[:K]
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


class Data:
    """What the parent wrote: vectors, query vectors and texts of memories and queries."""

    def __init__(self, path: Path) -> None:
        self.vectors = np.load(path / "vectors.npy")
        self.queries = np.load(path / "queries.npy")
        texts = json.loads((path / "texts.json").read_text(encoding="utf-8"))
        self.texts: list[str] = texts["memories"]
        self.query_texts: list[str] = texts["queries"]


# ------------------------------------------------------------------------------- workers


def qdrant_worker(data: Data, store: Path, batch: int) -> dict[str, Any]:
    """qdrant-client local mode on disk: build, close, disk, reopen, query cold then warm."""
    from qdrant_client import QdrantClient, models

    out: dict[str, Any] = {"system": "qdrant-client local", "rss_mb": {"imported": rss_mb()}}
    path = store / "qdrant"
    client = QdrantClient(path=str(path))
    client.create_collection(
        COLLECTION,
        vectors_config=models.VectorParams(size=data.vectors.shape[1], distance=models.Distance.COSINE),
    )
    start = time.perf_counter()
    for first in range(0, len(data.vectors), batch):
        stop = min(len(data.vectors), first + batch)
        client.upsert(
            COLLECTION,
            points=[
                models.PointStruct(id=i, vector=data.vectors[i].tolist(), payload={"text": data.texts[i]})
                for i in range(first, stop)
            ],
        )
    out["ingest_per_second"] = len(data.vectors) / (time.perf_counter() - start)
    out["rss_mb"]["built"] = rss_mb()
    client.close()
    del client
    gc.collect()
    out["disk_bytes"] = directory_bytes(path)
    out["disk_apparent_bytes"] = directory_bytes(path, apparent=True)
    client = QdrantClient(path=str(path))
    out["rss_mb"]["reopened"] = rss_mb()
    calls = [lambda q=q: client.query_points(COLLECTION, query=q.tolist(), limit=K) for q in data.queries]
    out["latency"] = {"cold": percentiles(timed(calls)), "warm": percentiles(timed(calls))}
    out["rss_mb"]["queried"] = rss_mb()
    client.close()
    return out


def chromadb_worker(data: Data, store: Path, batch: int) -> dict[str, Any]:
    """chromadb persistent client (HNSW, cosine): build, close, disk, reopen, query cold then warm."""
    import chromadb
    from chromadb.api.client import SharedSystemClient
    from chromadb.config import Settings

    out: dict[str, Any] = {"system": f"chromadb {chromadb.__version__}", "rss_mb": {"imported": rss_mb()}}
    path = store / "chroma"
    settings = Settings(anonymized_telemetry=False)
    client = chromadb.PersistentClient(path=str(path), settings=settings)
    collection = client.create_collection(COLLECTION, metadata={"hnsw:space": "cosine"})
    batch = min(batch, client.get_max_batch_size())
    start = time.perf_counter()
    for first in range(0, len(data.vectors), batch):
        stop = min(len(data.vectors), first + batch)
        collection.add(
            ids=[str(i) for i in range(first, stop)],
            embeddings=data.vectors[first:stop],
            documents=data.texts[first:stop],
        )
    out["ingest_per_second"] = len(data.vectors) / (time.perf_counter() - start)
    out["rss_mb"]["built"] = rss_mb()
    del collection, client
    SharedSystemClient.clear_system_cache()  # chromadb's way to let go of a persistent client
    gc.collect()
    out["disk_bytes"] = directory_bytes(path)
    out["disk_apparent_bytes"] = directory_bytes(path, apparent=True)
    client = chromadb.PersistentClient(path=str(path), settings=settings)
    collection = client.get_collection(COLLECTION)
    out["rss_mb"]["reopened"] = rss_mb()
    calls = [lambda q=q: collection.query(query_embeddings=[q], n_results=K) for q in data.queries]
    out["latency"] = {"cold": percentiles(timed(calls)), "warm": percentiles(timed(calls))}
    out["rss_mb"]["queried"] = rss_mb()
    return out


def charmem_worker(data: Data, store: Path, batch: int, footprint: bool, flush_every: int) -> dict[str, Any]:
    """charmem's embedded stores: build, close, disk, reopen, retrieve cold then warm, the index alone."""
    sys.path.insert(0, str(HERE))
    import _footprint

    return asyncio.run(
        _footprint.charmem_run(data, store, batch, footprint=footprint, flush_every=flush_every)
    )


def worker(args: argparse.Namespace) -> int:
    data = Data(args.data)
    store = Path(args.worker_store)
    if args.worker == "qdrant":
        result = qdrant_worker(data, store, args.batch)
    elif args.worker == "chromadb":
        result = chromadb_worker(data, store, args.batch)
    else:
        result = charmem_worker(data, store, args.batch, args.footprint, args.graph_flush_every)
    result["rss_mb"]["end"] = rss_mb()
    result["peak_rss_mb"] = rss_mb()["peak"]
    result["points"] = len(data.vectors)
    print(json.dumps(result))
    return 0


# ------------------------------------------------------------------------------- the parent


def write_data(path: Path, dim: int, count: int, queries: int, centres: int, seed: int) -> np.ndarray:
    """The corpus of ``latency.py`` (vectors, texts, queries) written for the workers."""
    sys.path.insert(0, str(HERE))
    import latency

    corpus = latency.Corpus(dim, count, centres, seed + dim)
    asked = corpus.queries(count, queries, seed + count)
    path.mkdir(parents=True, exist_ok=True)
    np.save(path / "vectors.npy", corpus.vectors)
    query_matrix = np.stack([v for _t, v in asked]).astype(np.float32)
    np.save(path / "queries.npy", query_matrix)
    texts = {"memories": corpus.texts(count), "queries": [t for t, _v in asked]}
    (path / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
    return query_matrix


def importable(python: str, module: str) -> bool:
    probe = subprocess.run([python, "-c", f"import {module}"], capture_output=True, check=False)
    return probe.returncode == 0


def run_worker(
    python: str, system: str, data: Path, store: Path, args: argparse.Namespace, *extra: str
) -> dict[str, Any]:
    """One worker in a subprocess of its own (``extra``: worker options); its JSON or ``{"error": ...}``."""
    store.mkdir(parents=True, exist_ok=True)
    command = [
        *(python, str(Path(__file__).resolve()), "--worker", system, "--data", str(data)),
        *("--worker-store", str(store), "--batch", str(args.batch), *extra),
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    shutil.rmtree(store, ignore_errors=True)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["wall_seconds"] = time.perf_counter() - start
    return result


def fmt_ms(value: float) -> str:
    return f"{value:.3g}" if value < 10 else f"{value:.0f}"


def cell(latency: dict[str, float], floor: float) -> str:
    return f"{fmt_ms(latency['p50_ms'])} / {fmt_ms(latency['p95_ms'])} ms (x{latency['p50_ms'] / floor:.3g})"


def storage_cells(result: dict[str, Any], reference: dict[str, Any]) -> tuple[str, str]:
    """Disk after close and peak RSS (while building / overall), with ratios to ``reference``.

    The build peak is the peak RSS before the store was closed and opened again: qdrant-client's
    local mode loads every point back through pickle on open, which makes its overall peak far
    higher than its build's.
    """
    disk = result["disk_bytes"] / 2**20
    peaks = (result["rss_mb"]["built"]["peak"], result["peak_rss_mb"])
    disk_cell, rss_cell = f"{disk:.0f} MiB", "{:.0f} / {:.0f} MiB".format(*peaks)
    if reference and reference is not result and "disk_bytes" in reference:
        base = (reference["rss_mb"]["built"]["peak"], reference["peak_rss_mb"])
        disk_cell += f" (x{disk / (reference['disk_bytes'] / 2**20):.2g})"
        rss_cell += " (x{:.2g} / x{:.2g})".format(*(p / b for p, b in zip(peaks, base, strict=True)))
    return disk_cell, rss_cell


def rows_of(size: dict[str, Any]) -> Iterator[tuple[str, str, str, str, str]]:
    """(system and measure, query p50 / p95, disk, peak RSS, ingest) rows of one size."""
    floor = size["floor_ms"]
    yield ("numpy floor (argpartition, k=10)", f"{fmt_ms(floor)} ms (x1)", "", "", "")
    reference = size["systems"].get("qdrant", {})
    for name, result in size["systems"].items():
        if "error" in result or "skipped" in result:
            yield (name, result.get("skipped") or f"failed: {result['error']}", "", "", "")
            continue
        storage = storage_cells(result, reference)
        ingest = f"{result['ingest_per_second']:.0f}/s"
        for label, latency in result["latency"].items():
            yield (f"{name}: {label}", cell(latency, floor), *storage, ingest)
            storage, ingest = ("", ""), ""


def render(document: dict[str, Any]) -> str:
    lines = [
        "| N x D | system: measure | query p50 / p95 (x floor) | disk after close (x qdrant-client) "
        "| peak RSS: build / overall (x qdrant-client) | ingest |",
        "|---|---|---|---|---|---|",
    ]
    for key, size in document["sizes"].items():
        for row in rows_of(size):
            lines.append(f"| {key} | " + " | ".join(row) + " |")
    footprint = document.get("footprint")
    if footprint:
        lines.append("")
        lines.extend(_footprint_lines(footprint))
    return "\n".join(lines)


def _footprint_lines(footprint: dict[str, Any]) -> list[str]:
    lines = [f"charmem footprint at {footprint['points']:,} x {footprint['dim']}:"]
    lines.append("  disk after close, MiB:")
    for name, size in sorted(footprint["disk_parts"].items(), key=lambda kv: -kv[1]):
        lines.append(f"    {size / 2**20:9.1f}  {name}")
    lines.append(
        "  RSS by stage (now / peak MiB): "
        + ", ".join(f"{stage} {v['now']:.0f}/{v['peak']:.0f}" for stage, v in footprint["rss_mb"].items())
    )
    lines.append("  resident mappings at the peak stage, MiB:")
    for name, size in footprint["smaps_mb"][:12]:
        lines.append(f"    {size:9.1f}  {name}")
    lines.append("  Python heap (tracemalloc, by file), MiB:")
    for name, size in footprint["tracemalloc_mb"][:12]:
        lines.append(f"    {size:9.1f}  {name}")
    for name, value in footprint.get("caches", {}).items():
        lines.append(f"  {name}: {value}")
    return lines


def parse_ints(text: str) -> list[int]:
    return [int(part.replace("_", "")) for part in text.split(",") if part.strip()]


def parser() -> argparse.ArgumentParser:
    cli = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cli.add_argument("--sizes", type=parse_ints, default=[5000, 50000], help="memories (default 5000,50000)")
    cli.add_argument("--dim", type=int, default=384, help="dimensions (default 384)")
    cli.add_argument("--queries", type=int, default=100, help="queries per pass (default 100)")
    cli.add_argument("--centres", type=int, default=256, help="clusters of the mixture (default 256)")
    cli.add_argument("--batch", type=int, default=500, help="memories per write (default 500)")
    cli.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated, of {', '.join(SYSTEMS)}")
    cli.add_argument(
        "--chromadb-python",
        default=sys.executable,
        help="the Python that runs chromadb (default: this one; skipped if it cannot import chromadb)",
    )
    cli.add_argument(
        "--qdrant-python",
        default=sys.executable,
        help="the Python that runs qdrant-client (default: this one)",
    )
    cli.add_argument(
        "--footprint", action="store_true", help="also charmem's disk and RSS breakdown at the largest size"
    )
    cli.add_argument(
        "--graph-flush-every",
        type=int,
        default=0,
        help="experiment: one more charmem run that flushes Oxigraph (Store.flush) every N commits",
    )
    cli.add_argument("--seed", type=int, default=0)
    cli.add_argument("--store", type=Path, help="working directory (default: a temporary one, removed)")
    cli.add_argument("--json-out", type=Path, help="write every figure as JSON")
    cli.add_argument("--render", type=Path, help="print the table of a --json-out file and stop")
    cli.add_argument("--worker", choices=SYSTEMS, help=argparse.SUPPRESS)
    cli.add_argument("--worker-store", help=argparse.SUPPRESS)
    cli.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    return cli


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.worker:
        return worker(args)
    if args.render:
        print(render(json.loads(args.render.read_text(encoding="utf-8"))))
        return 0
    systems = [s for s in args.systems.split(",") if s]
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        parser().error(f"unknown --systems {sorted(unknown)}; choose among {', '.join(SYSTEMS)}")
    pythons = {"charmem": sys.executable, "qdrant": args.qdrant_python, "chromadb": args.chromadb_python}
    modules = {"charmem": "charmem", "qdrant": "qdrant_client", "chromadb": "chromadb"}
    work = Path(tempfile.mkdtemp(prefix="charmem-compare-", dir=args.store))
    document: dict[str, Any] = {"dim": args.dim, "sizes": {}}
    try:
        for n in sorted(args.sizes):
            data = work / f"data-{n}"
            queries = write_data(data, args.dim, n, args.queries, args.centres, args.seed)
            matrix = np.load(data / "vectors.npy")
            size: dict[str, Any] = {"floor_ms": floor_ms(matrix, queries), "systems": {}}
            del matrix
            for system in systems:
                python = pythons[system]
                if not importable(python, modules[system]):
                    size["systems"][system] = {
                        "skipped": f"skipped: {python} cannot import {modules[system]} "
                        f"(see --{system}-python)"
                    }
                    print(f"{system}: {size['systems'][system]['skipped']}", file=sys.stderr)
                    continue
                print(f"{n:,} x {args.dim}: {system}", file=sys.stderr)
                size["systems"][system] = run_worker(python, system, data, work / f"store-{system}", args)
            if args.graph_flush_every:
                label = f"charmem, graph flushed every {args.graph_flush_every} commits"
                print(f"{n:,} x {args.dim}: {label}", file=sys.stderr)
                size["systems"][label] = run_worker(
                    sys.executable,
                    "charmem",
                    data,
                    work / "store-flush",
                    args,
                    *("--graph-flush-every", str(args.graph_flush_every)),
                )
            if args.footprint and n == max(args.sizes):
                print(f"{n:,} x {args.dim}: charmem footprint (tracemalloc)", file=sys.stderr)
                document["footprint"] = run_worker(
                    sys.executable, "charmem", data, work / "store-footprint", args, "--footprint"
                )
            document["sizes"][f"{n:,} x {args.dim}"] = size
            shutil.rmtree(data, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    document["machine"] = {"cpus": os.cpu_count(), "load_average": os.getloadavg()}
    print(render(document))
    if args.json_out:
        args.json_out.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
