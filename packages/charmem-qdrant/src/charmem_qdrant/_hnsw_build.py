"""The HNSW build child: ``python -m charmem_qdrant._hnsw_build PATH VECTOR_SIZE THRESHOLD M EF``.

Kept out of the package's imports so ``-m`` runs it cleanly; see :mod:`charmem_qdrant._hnsw`.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import qdrant_edge as qe

from charmem_qdrant._hnsw import GraphRecord, HnswSettings, settle_wal, shard_config

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Open the shard copy, ``optimize()`` it, flush, close; print a JSON report.

    Arguments: ``PATH VECTOR_SIZE THRESHOLD M EF_CONSTRUCT``. Runs at a lower CPU priority (nice
    10, where the platform has it) so the serving process keeps its share. Exit status 0 with
    ``{"optimized": bool, "seconds": float, "indexed": int, "points": int}`` on stdout.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    path, vector_size, threshold, m, ef_construct = args[0], *(int(a) for a in args[1:5])
    if hasattr(os, "nice"):
        with contextlib.suppress(OSError):  # a refused nice is harmless
            os.nice(10)
    hnsw = HnswSettings(threshold=threshold, m=m, ef_construct=ef_construct)
    shard = qe.EdgeShard.load(path, shard_config(vector_size, hnsw))
    try:
        before = shard.info().indexed_vectors_count
        start = time.perf_counter()
        optimized = shard.optimize()
        settle_wal(shard)  # the parent loads this copy holding the GIL: keep that short
        seconds = time.perf_counter() - start
        # ``indexed_vectors_count`` counts sparse vectors too (their index always exists), so
        # only its growth over the build tells how many dense vectors entered a graph
        grown = shard.info().indexed_vectors_count - before
        points = shard.count(qe.CountRequest(exact=True))
    finally:
        shard.close()
    record = GraphRecord.read(Path(path))
    indexed = max(0, (record.indexed if record is not None else 0) + grown)
    if indexed > 0:
        GraphRecord(indexed=indexed, points=points).write(Path(path))
    report = {
        "optimized": bool(optimized),
        "seconds": seconds,
        "indexed": indexed,
        "points": points,
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
