"""HNSW for scale on the embedded shard: its settings, the shard configuration, the build step.

Qdrant Edge searches by exact scan until ``EdgeShard.optimize()`` builds an HNSW graph over the
segments larger than the shard's indexing threshold (charmem's rule: exact scan by default, HNSW
on request for scale). ``optimize()`` runs in the calling process, holds the GIL for the whole build
(measured on qdrant-edge-py 0.9: a 20,000 x 384 build took 20-30 s on two busy cores, and a Python
thread ticking every millisecond ran twice in that time), so charmem never runs it in the serving
process: ``python -m charmem_qdrant._hnsw_build`` is a child process that opens a *copy* of the
shard, optimizes it and exits; the index then swaps the copy in (see
:class:`charmem_qdrant.EdgeVectorIndex`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

import attrs
import qdrant_edge as qe

from charmem.errors import BackendError, ConfigurationError
from charmem_qdrant._marker import write_atomic

if TYPE_CHECKING:
    from charmem.settings import Settings

__all__ = [
    "DEFAULT_HNSW_EF",
    "DEFAULT_HNSW_EF_CONSTRUCT",
    "DEFAULT_HNSW_M",
    "GRAPH_RECORD",
    "HNSW_BACKGROUND_KEY",
    "HNSW_EF_CONSTRUCT_KEY",
    "HNSW_EF_KEY",
    "HNSW_M_KEY",
    "HNSW_THRESHOLD_KEY",
    "GraphRecord",
    "HnswSettings",
    "bool_setting",
    "hnsw_from_settings",
    "indexing_threshold_kb",
    "settle_wal",
    "shard_config",
]

#: Settings key: build an HNSW index once the shard holds this many points (an integer >= 1);
#: unset, empty or ``0``: never (every search is an exact scan, the default).
HNSW_THRESHOLD_KEY: Final = "VECTOR_HNSW_THRESHOLD"
#: Settings key: HNSW edges per node (``m``), an integer in [4, 128]; default 16.
HNSW_M_KEY: Final = "VECTOR_HNSW_M"
#: Settings key: HNSW build candidates (``ef_construct``), an integer in [4, 4096]; default 100.
HNSW_EF_CONSTRUCT_KEY: Final = "VECTOR_HNSW_EF_CONSTRUCT"
#: Settings key: HNSW search candidates (``hnsw_ef``), an integer in [1, 4096]; default 512
#: (measured by ``benchmarks/latency.py --large``: at 1,000,000 x 384 clustered vectors, m 16,
#: recall@10 0.95 at ef 512 against 0.85 at 128, p50 9 ms against 8 ms).
HNSW_EF_KEY: Final = "VECTOR_HNSW_EF"
#: Settings key: build in the background after writes (``true``, the default) or only when asked
#: (``false``: ``charmem optimize`` / ``EdgeVectorIndex.optimize()``).
HNSW_BACKGROUND_KEY: Final = "VECTOR_HNSW_BACKGROUND"

DEFAULT_HNSW_M: Final = 16
DEFAULT_HNSW_EF_CONSTRUCT: Final = 100
DEFAULT_HNSW_EF: Final = 512

_DENSE: Final = "dense"
_LEXICAL: Final = "lexical"


def _in_range(key: str, low: int, high: int) -> Callable[[object, attrs.Attribute[int], int], None]:
    def check(_instance: object, _attribute: attrs.Attribute[int], value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ConfigurationError(
                f"{key}={value!r} must be an integer from {low} to {high}", key=key
            )

    return check


@attrs.frozen(kw_only=True)
class HnswSettings:
    """When and how the embedded shard builds its HNSW index (on request, for scale).

    Attributes:
        threshold: build once the shard holds at least this many points (count, >= 1), and
            again each time this many points were written since the last build.
        m: edges per node of the graph (Qdrant ``m``, 4..128).
        ef_construct: candidates kept while building (Qdrant ``ef_construct``, 4..4096).
        ef: candidates kept while searching (Qdrant ``hnsw_ef``, 1..4096); Qdrant never uses
            fewer than the limit asked for.
        background: build in a child process after the write that passes the threshold (True),
            or only on an explicit ``optimize()`` (False).

    Raises:
        ConfigurationError: a value outside its range, naming the settings key.
    """

    threshold: int = attrs.field(validator=_in_range(HNSW_THRESHOLD_KEY, 1, 2**40))
    m: int = attrs.field(default=DEFAULT_HNSW_M, validator=_in_range(HNSW_M_KEY, 4, 128))
    ef_construct: int = attrs.field(
        default=DEFAULT_HNSW_EF_CONSTRUCT,
        validator=_in_range(HNSW_EF_CONSTRUCT_KEY, 4, 4096),
    )
    ef: int = attrs.field(default=DEFAULT_HNSW_EF, validator=_in_range(HNSW_EF_KEY, 1, 4096))
    background: bool = True


def _int_setting(settings: Settings, key: str, default: int) -> int:
    raw = settings.extra.get(key)
    if raw is None or not raw.strip():
        return default
    try:
        return int(raw.strip())
    except ValueError:
        raise ConfigurationError(f"{key}={raw!r} must be an integer", key=key) from None


def bool_setting(settings: Settings, key: str, default: bool) -> bool:
    """``settings.extra[key]`` as a boolean (true/1/yes/on, false/0/no/off; unset: ``default``).

    Raises:
        ConfigurationError: any other value, naming ``key``.
    """
    raw = settings.extra.get(key)
    if raw is None or not raw.strip():
        return default
    value = raw.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise ConfigurationError(f"{key}={raw!r} must be true or false", key=key)


def hnsw_from_settings(settings: Settings) -> HnswSettings | None:
    """The HNSW settings of ``settings.extra``, or ``None`` when HNSW is off.

    Reads ``VECTOR_HNSW_THRESHOLD`` (unset, empty or 0: off), ``VECTOR_HNSW_M``,
    ``VECTOR_HNSW_EF_CONSTRUCT``, ``VECTOR_HNSW_EF`` and ``VECTOR_HNSW_BACKGROUND``. The other
    keys are checked even when HNSW is off, so a typo never waits for the day it is switched on.

    Raises:
        ConfigurationError: a malformed or out-of-range value, naming its key.
    """
    threshold = _int_setting(settings, HNSW_THRESHOLD_KEY, 0)
    if threshold < 0:
        raise ConfigurationError(
            f"{HNSW_THRESHOLD_KEY}={threshold} must be 0 (off) or a number of points >= 1",
            key=HNSW_THRESHOLD_KEY,
        )
    hnsw = HnswSettings(
        threshold=max(threshold, 1),
        m=_int_setting(settings, HNSW_M_KEY, DEFAULT_HNSW_M),
        ef_construct=_int_setting(settings, HNSW_EF_CONSTRUCT_KEY, DEFAULT_HNSW_EF_CONSTRUCT),
        ef=_int_setting(settings, HNSW_EF_KEY, DEFAULT_HNSW_EF),
        background=bool_setting(settings, HNSW_BACKGROUND_KEY, True),
    )
    return hnsw if threshold > 0 else None


def indexing_threshold_kb(points: int, vector_size: int) -> int:
    """Qdrant's indexing threshold (KiB of dense vectors in a segment) for ``points`` points.

    Qdrant indexes a segment whose vector storage reaches the threshold; a point holds
    ``vector_size`` float32 values, so ``points`` points take ``points * vector_size * 4`` bytes
    (rounded down to whole KiB, so a segment of exactly ``points`` points qualifies).
    """
    return max(1, points * vector_size * 4 // 1024)


def shard_config(vector_size: int, hnsw: HnswSettings | None) -> qe.EdgeConfig:
    """The shard configuration: dense cosine + sparse IDF vectors; HNSW settings when on.

    Without HNSW the indexing threshold is 0 (Qdrant never builds a graph). With HNSW, segments
    above :func:`indexing_threshold_kb` of ``hnsw.threshold`` points get a graph on the next
    ``optimize()``.
    """
    vectors = {_DENSE: qe.EdgeVectorParams(size=vector_size, distance=qe.Distance.Cosine)}
    sparse = {_LEXICAL: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)}
    if hnsw is None:
        return qe.EdgeConfig(
            vectors=vectors,
            sparse_vectors=sparse,
            optimizers=qe.EdgeOptimizersConfig(indexing_threshold=0),
        )
    return qe.EdgeConfig(
        vectors=vectors,
        sparse_vectors=sparse,
        optimizers=qe.EdgeOptimizersConfig(
            indexing_threshold=indexing_threshold_kb(hnsw.threshold, vector_size)
        ),
        hnsw_config=qe.HnswIndexConfig(
            m=hnsw.m,
            ef_construct=hnsw.ef_construct,
            full_scan_threshold=indexing_threshold_kb(hnsw.threshold, vector_size),
        ),
    )


#: File in the shard directory recording the HNSW graph the builds made (written by the build
#: child into the copy, so it moves in with the graph): ``{"indexed": n, "points": n}``.
GRAPH_RECORD: Final = "charmem-hnsw.json"


@attrs.frozen(kw_only=True)
class GraphRecord:
    """What the HNSW builds left in a shard.

    Attributes:
        indexed: dense vectors the builds put in a graph (count; deleted points stay counted
            until Qdrant vacuums them).
        points: points in the shard right after the last build (count); points beyond it were
            written since and wait for the next build.
    """

    indexed: int
    points: int

    @classmethod
    def read(cls, shard_path: Path) -> GraphRecord | None:
        """The record of the shard at ``shard_path``, or ``None`` (no graph was ever built).

        Raises:
            BackendError: the file exists but is not a record.
        """
        path = shard_path / GRAPH_RECORD
        try:
            document = json.loads(path.read_text("utf-8"))
            return cls(indexed=int(document["indexed"]), points=int(document["points"]))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise BackendError(
                f"the HNSW record {path} is unreadable ({exc}); delete it and run "
                "optimize() (or `charmem optimize`) to rebuild the graph"
            ) from exc

    def write(self, shard_path: Path) -> None:
        """Write the record atomically into the shard directory."""
        write_atomic(shard_path / GRAPH_RECORD, json.dumps(attrs.asdict(self), sort_keys=True))


#: A point id no memory has (MemoryIds are uuid4 or uuid5): deleting it changes nothing.
_NO_POINT: Final = "00000000-0000-0000-0000-000000000000"


def settle_wal(shard: qe.EdgeShard) -> None:
    """Make the next load of ``shard`` skip its last write instead of applying it again.

    Measured on qdrant-edge-py 0.9: a load re-applies the last operation of the write-ahead log
    even after ``flush()`` (only a later operation acknowledges it), so a shard whose last write
    was a 5,000 x 1,536 upsert took about 2 s to load (the GIL held) instead of 0.1 s. Deleting a
    point that cannot exist, then flushing, acknowledges it and changes nothing.
    """
    shard.update(qe.UpdateOperation.delete_points([_NO_POINT]))
    shard.flush()


def child_command(path: str, vector_size: int, hnsw: HnswSettings) -> list[str]:
    """The command line of the build child for the shard (copy) at ``path``."""
    return [
        sys.executable,
        "-m",
        "charmem_qdrant._hnsw_build",
        path,
        str(vector_size),
        str(hnsw.threshold),
        str(hnsw.m),
        str(hnsw.ef_construct),
    ]
