"""The embedded vector index: one Qdrant Edge shard per collection (DESIGN §6.1, §7)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import operator
import os
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import attrs
import filelock
import qdrant_edge as qe
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_fixed

from charmem.domain.ids import MemoryId
from charmem.domain.model import ObjectType
from charmem.domain.retrieval import CompletenessKind, VectorRecallCompleteness
from charmem.errors import (
    BackendError,
    CharmemError,
    ConfigurationError,
    DimensionMismatchError,
    StoreCorruptedError,
    StoreLockedError,
)
from charmem.log import get_logger
from charmem.ports import VectorHit, VectorPoint, VectorQuery, VectorSearchResult
from charmem.settings import validate_collection_name
from charmem_qdrant import _disk
from charmem_qdrant._fusion import (
    DEFAULT_FUSION_WEIGHTS,
    RRF_K,
    StageRanker,
    check_weights,
    rrf_fuse,
    stage_size,
)
from charmem_qdrant._hnsw import (
    HNSW_THRESHOLD_KEY,
    GraphRecord,
    HnswSettings,
    bool_setting,
    child_command,
    hnsw_from_settings,
    settle_wal,
    shard_config,
)
from charmem_qdrant._marker import MARKER_FILE_NAME, ShardMarker, write_atomic

if TYPE_CHECKING:
    from charmem.settings import Settings

__all__ = [
    "DENSE_VECTOR",
    "LEXICAL_CUE_KEY",
    "LEXICAL_VECTOR",
    "LEXICAL_WEIGHT_KEY",
    "RRF_K",
    "EdgeVectorIndex",
    "HnswBuildReport",
]

_T = TypeVar("_T")

#: Name of the dense (cosine) vector in every shard.
DENSE_VECTOR: Final = "dense"
#: Name of the sparse BM25 vector (``Modifier.Idf``) in every shard.
LEXICAL_VECTOR: Final = "lexical"
#: Settings key (read from ``Settings.extra``) that turns the lexical cue off or on:
#: ``true`` (the default, DESIGN §6.1) or ``false``.
LEXICAL_CUE_KEY: Final = "VECTOR_LEXICAL_CUE"
#: Settings key (read from ``Settings.extra``): the RRF weight of the lexical stage, a finite
#: number > 0 (default 1.0; the dense stage weighs 1.5).
LEXICAL_WEIGHT_KEY: Final = "VECTOR_LEXICAL_WEIGHT"

_PAYLOAD_TYPE: Final = "object_type"
_PAYLOAD_ID: Final = "memory_id"
_SCROLL_PAGE: Final = 1024
_LOCK_RETRY_WAIT: Final = 0.05  # seconds between attempts to take a held shard lock

_log = get_logger("charmem_qdrant")


class _ShardHeldError(Exception):
    """Another opener holds the shard's WAL lock (found before loading; retried like Edge's)."""


def _is_lock_error(exc: BaseException) -> bool:
    """Whether ``exc`` is Qdrant Edge refusing a shard whose WAL another opener holds.

    Qdrant Edge 0.9 takes ``flock(LOCK_EX | LOCK_NB)`` on ``<shard>/wal`` and, when it is held
    (by another process, or by another open shard object in this one), raises a bare
    ``Exception("Service runtime error: failed to open WAL ...: Can't init WAL:
    Kind(WouldBlock)")``.
    """
    return "WouldBlock" in str(exc)


def _holds_shard_data(path: Path) -> bool:
    return any((path / name).exists() for name in ("segments", "wal", "edge_config.json"))


def _weights_from_settings(settings: Settings) -> tuple[float, float]:
    """The fusion weights (dense 1.5, lexical ``VECTOR_LEXICAL_WEIGHT`` or 1.0).

    Raises:
        ConfigurationError: ``VECTOR_LEXICAL_WEIGHT`` is not a finite number > 0.
    """
    raw = settings.extra.get(LEXICAL_WEIGHT_KEY)
    if raw is None or not raw.strip():
        return DEFAULT_FUSION_WEIGHTS
    try:
        weight = float(raw)
    except ValueError:
        weight = math.nan
    if not math.isfinite(weight) or weight <= 0:
        raise ConfigurationError(
            f"{LEXICAL_WEIGHT_KEY}={raw!r} must be a finite number > 0 (the RRF weight of the "
            f"lexical stage; set {LEXICAL_CUE_KEY}=false to turn the cue off)",
            key=LEXICAL_WEIGHT_KEY,
        )
    return (DEFAULT_FUSION_WEIGHTS[0], weight)


def _checked_weights(weights: Sequence[float]) -> tuple[float, float]:
    """Constructor ``fusion_weights`` as (dense, lexical) floats.

    Raises:
        ConfigurationError: not two finite numbers > 0.
    """
    try:
        dense, lexical = check_weights(weights, 2)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(
            f"fusion_weights must be (dense, lexical), two finite numbers > 0: {exc}",
            key="fusion_weights",
        ) from exc
    return dense, lexical


def _checked_vector(
    vector: Sequence[float], what: str, size: int, collection: str, model_id: str
) -> list[float]:
    """``vector`` as ``size`` finite numbers, for a point or a query of ``collection``.

    A list (what core's checked embeddings are: plain floats) is used as it is when one C-level
    sum of it succeeds and is finite (a NaN or an infinity makes the sum non-finite; overflow
    alone can too, so a non-finite sum is checked element by element); the driver converts the
    numbers. Anything else, or a list whose sum fails (an element that is not a number), is
    converted element by element with ``float``. Both vector indexes (Edge and service) check
    vectors here. Scanning the element types of every vector took a quarter of the Edge
    upsert's own time (~25 µs per 1,536 floats, measured), for lists core had already checked.

    Raises:
        DimensionMismatchError: the vector has another length than ``size``.
        BackendError: the vector holds NaN or infinity.
        TypeError, ValueError: an element is not a number (``float`` refuses it).
    """
    values: list[float] = vector if type(vector) is list else [float(x) for x in vector]
    if len(values) != size:
        raise DimensionMismatchError(
            f"{what} has {len(values)} dimensions but collection {collection!r} "
            f"stores {size} (model {model_id!r})",
            expected=size,
            actual=len(values),
        )
    try:
        total = float(sum(values))
    except (TypeError, ValueError, OverflowError):
        values = [float(x) for x in values]
        total = sum(values)
    if not math.isfinite(total) and not all(map(math.isfinite, values)):
        raise BackendError(
            f"{what} contains NaN or infinite values; embedders must return finite floats"
        )
    return values


def _type_filter(
    object_types: Sequence[ObjectType], within: Sequence[MemoryId] | None = None
) -> qe.Filter | None:
    """Scope by object type and, with ``within``, to those point ids (``VectorQuery``)."""
    must: list[
        qe.FieldCondition
        | qe.IsEmptyCondition
        | qe.IsNullCondition
        | qe.HasIdCondition
        | qe.HasVectorCondition
        | qe.NestedCondition
        | qe.Filter
    ] = []
    if object_types:
        values = sorted({ObjectType(t).value for t in object_types})
        must.append(qe.FieldCondition(_PAYLOAD_TYPE, match=qe.MatchAny(values)))
    if within is not None:
        must.append(qe.HasIdCondition({str(MemoryId(i)) for i in within}))
    return qe.Filter(must=must) if must else None


#: A scored point as the search keeps it: (id, score, ``object_type`` payload value), read once
#: per point. The id comes from the ``memory_id`` payload (the same UUID string, written with
#: the point): reading ``ScoredPoint.id`` builds a ``uuid.UUID`` on every access, which took a
#: quarter of a fused search's time at 3,000 points (measured).
_Found = tuple[str, float, object]


def _found(point: qe.ScoredPoint) -> _Found:
    payload: Mapping[str, object] = point.payload or {}
    point_id = payload.get(_PAYLOAD_ID)
    return (
        point_id if isinstance(point_id, str) else str(point.id),
        float(point.score),
        payload.get(_PAYLOAD_TYPE),
    )


#: A found point's id, score, and (id, score): the input of the canonical ranking and of the fusion
#: (``operator`` getters: the stage sorts call them in C).
_FOUND_ID: Final = operator.itemgetter(0)
_FOUND_SCORE: Final = operator.itemgetter(1)
_point_key: Final = operator.itemgetter(0, 1)


def _shard_path(root: str | os.PathLike[str], collection: str) -> tuple[Path, Path]:
    """The resolved (root, shard directory) of ``collection``, checked before anything is made.

    Raises:
        ConfigurationError: the name is not a collection name, the root holds a NUL character,
            or the shard directory resolves outside the root (a symlink).
    """
    validate_collection_name(collection)
    root_path = Path(root)
    if "\x00" in str(root_path):
        raise ConfigurationError(
            "the vector store root holds a NUL character, which no file system accepts",
            key="VECTOR_STORE_PATH",
        )
    resolved_root = root_path.resolve()
    path = (root_path / collection).resolve()
    if path.parent != resolved_root:
        raise ConfigurationError(
            f"the shard of collection {collection!r} resolves to {path}, outside the vector "
            f"store root {resolved_root}; remove the link at {root_path / collection}",
            key="VECTOR_STORE_PATH",
        )
    return resolved_root, path


def _backend_error(collection: str, path: Path, action: str, exc: BaseException) -> BackendError:
    return BackendError(
        f"Qdrant Edge failed to {action} for collection {collection!r} at {path}: {exc} (if it "
        "keeps failing, the shard's files may be damaged: the vectors are derived data, rebuild "
        "them from the graph with `charmem rebuild-vectors --drop`)"
    )


def _open_with_retry(
    collection: str,
    path: Path,
    lock_timeout: float,
    action: str,
    opener: Callable[[], qe.EdgeShard],
) -> qe.EdgeShard:
    """Run ``opener``, retrying while another opener holds the shard lock (tenacity).

    Raises:
        StoreLockedError: still locked after ``lock_timeout`` seconds.
        BackendError: any other driver failure (cause chained).
    """
    retrying = Retrying(
        retry=retry_if_exception(_is_lock_error),
        stop=stop_after_delay(lock_timeout),
        wait=wait_fixed(_LOCK_RETRY_WAIT),
        reraise=True,
    )
    try:
        return retrying(opener)
    except Exception as exc:
        if _is_lock_error(exc):
            raise StoreLockedError(
                f"the vector shard {path} of collection {collection!r} is held by another "
                "opener (another process, or another open index in this process) and was still "
                f"locked after {lock_timeout:g} s; close the other opener first (an embedded "
                "store serves one process; use VECTOR_STORE_MODE=service to share one)"
            ) from exc
        raise _load_error(collection, path, action, exc) from exc
    except BaseException as exc:  # pyo3's PanicException derives from BaseException
        if type(exc).__name__ != "PanicException":
            raise
        raise _load_error(collection, path, action, exc) from exc


def _load_error(collection: str, path: Path, action: str, exc: BaseException) -> BackendError:
    """A shard that exists but does not load is damaged (unless the files are unreadable)."""
    if "Permission denied" in str(exc):
        return _backend_error(collection, path, action, exc)
    return StoreCorruptedError(
        f"Qdrant Edge cannot {action} of collection {collection!r} at {path}, which looks "
        f"damaged ({exc}); {_disk.REBUILD_HINT}",
        path=str(path),
    )


def _fsync_dir(path: Path) -> None:
    """Make renames inside ``path`` durable (best effort where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. Windows
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover - some file systems refuse fsync on a directory
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def _collection_lock(root: Path, collection: str, timeout: float) -> Iterator[None]:
    """Hold ``<root>/.<collection>.lock`` (a ``filelock``) while the shard directory may move.

    Opening, dropping and the HNSW swap (which closes the shard, so its WAL lock is briefly free)
    take it, so no opener ever sees the directory half swapped.

    Raises:
        StoreLockedError: still held by another opener after ``timeout`` seconds.
        BackendError: the lock file cannot be created.
    """
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _backend_error(collection, root, "create the vector store root", exc) from exc
    lock = filelock.FileLock(str(root / f".{collection}.lock"), timeout=timeout)
    try:
        lock.acquire()
    except filelock.Timeout as exc:
        raise StoreLockedError(
            f"the vector shard of collection {collection!r} under {root} is being swapped or "
            f"opened by another opener and was still busy after {timeout:g} s; close the other "
            "opener first"
        ) from exc
    try:
        yield
    finally:
        lock.release()


def _swap_sentinel(root: Path, collection: str) -> Path:
    return root / f".{collection}.hnsw-swap.json"


def _recover_swap(root: Path, path: Path, collection: str) -> None:
    """Undo an HNSW swap a crash interrupted (call holding :func:`_collection_lock`).

    The sentinel exists from before the old shard moves away until the new one holds every
    acknowledged write, so while it exists the old shard (the tombstone it names) is the
    complete one: put it back.
    """
    sentinel = _swap_sentinel(root, collection)
    if not sentinel.exists():
        return
    try:
        tomb = root / str(json.loads(sentinel.read_text("utf-8"))["tomb"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BackendError(
            f"the HNSW swap record {sentinel} of collection {collection!r} is unreadable ({exc}); "
            f"if {path} holds the shard, delete {sentinel}; otherwise restore the directory "
            f"named .{collection}.pre-hnsw-* under {root} to {path}"
        ) from exc
    if tomb.is_dir():
        if path.exists():
            shutil.rmtree(path)
        tomb.rename(path)
        _log.warning("vector_hnsw_swap_rolled_back", collection=collection, path=str(path))
    sentinel.unlink()
    _fsync_dir(root)


def _remove_stale_builds(root: Path, collection: str) -> None:
    """Delete build copies and swap tombstones left by a crash (call holding the shard)."""
    for pattern in (f".{collection}.hnsw-*", f".{collection}.pre-hnsw-*"):
        for stale in root.glob(pattern):
            if stale.is_dir():
                shutil.rmtree(stale, ignore_errors=True)


@attrs.frozen(kw_only=True)
class HnswBuildReport:
    """What one HNSW build of the embedded shard did.

    Attributes:
        built: whether Qdrant Edge optimized anything (False: nothing was above the threshold).
        points: points in the shard afterwards (count).
        indexed: dense vectors in an HNSW graph afterwards (count).
        copy_seconds: the index was paused while the shard was flushed and copied (seconds).
        build_seconds: the child process's ``optimize()`` (seconds; the index kept serving).
        swap_seconds: the index was paused while the built copy replaced the shard and the
            writes made meanwhile were replayed on it (seconds).
        replayed: write operations made during the build and replayed on the copy (count).
    """

    built: bool
    points: int
    indexed: int
    copy_seconds: float = 0.0
    build_seconds: float = 0.0
    swap_seconds: float = 0.0
    replayed: int = 0


class _BuildCancelledError(Exception):
    """The index closed while an HNSW build ran."""


class _Build:
    """State of one HNSW build (a worker thread driving a child process)."""

    def __init__(self) -> None:
        self.cancel = threading.Event()
        self.done = threading.Event()
        self.guard = threading.Lock()  # orders process start against cancellation
        self.process: subprocess.Popen[bytes] | None = None
        self.thread: threading.Thread | None = None
        self.report: HnswBuildReport | None = None
        self.error: BaseException | None = None

    def stop(self) -> None:
        with self.guard:
            self.cancel.set()
            if self.process is not None and self.process.poll() is None:
                self.process.kill()


class EdgeVectorIndex:
    """Candidate recall over an embedded Qdrant Edge shard (the ``embedded`` vector index).

    One shard per collection lives at ``<root>/<collection>``; it holds a dense cosine vector
    (``"dense"``, ``vector_size`` floats) and a sparse BM25 vector (``"lexical"``,
    ``Modifier.Idf``) per point, with the payload ``{"object_type": ..., "memory_id": ...}``.
    Point ids are the MemoryId UUIDs. Search is an exact scan (the indexing threshold is zero),
    so recall is reported ``exhaustive``, unless HNSW is on (``hnsw``, below).

    HNSW for scale (``hnsw``, DESIGN §7): once the shard holds ``hnsw.threshold`` points, an HNSW
    graph is built, and then again whenever ``hnsw.threshold`` more points were written. Qdrant
    Edge builds it in ``optimize()``, which holds the GIL for the whole build, so the build never
    runs in this process: the shard is flushed and copied (the index pauses for the copy), a child
    process (``python -m charmem_qdrant._hnsw_build``, at nice 10) optimizes the copy while this
    index keeps serving and journals its writes, and the copy then replaces the shard, the journal
    replayed on it (a second pause). A crash at any point leaves the complete old shard or the
    complete new one (a swap record, ``<root>/.<collection>.hnsw-swap.json``, names the old one
    until the new one holds every acknowledged write; the next open rolls back an unfinished
    swap). Searches over a shard with a graph use ``hnsw_ef`` = ``hnsw.ef`` and report
    ``approximate`` recall; points written since the last build are still scanned exactly.

    Fusion (lexical cue on, query text with BM25 terms): the dense and the BM25 stage run as two
    plain Qdrant queries in one ``query_batch`` call, each ranked canonically (score descending,
    id ascending, fetching more while its cut is tied), and are fused here by reciprocal rank
    fusion as Qdrant defines it (``k`` = :data:`RRF_K`, 0-based ranks, ``fusion_weights``), except
    that points with equal stage scores share the rank of the first of their tie group. Qdrant's
    own ``Fusion.Rrf`` is not used because, measured on Qdrant Edge 0.9, it ranks equal stage
    scores by where the points are stored, an order set by the insertion order: identical points
    got different fused scores and the hits depended on the insertion order, against DESIGN
    §6.6. The rule lives in :mod:`charmem_qdrant._fusion`, shared with the service index.

    Durability: every write is applied to the shard's write-ahead log and then flushed
    (``msync``/``fsync``) before the call returns, so an acknowledged write survives a process
    kill and an OS crash. Exclusivity: the shard's WAL lock admits one opener at a time; a
    second one (another process, or another index object in this process) waits up to
    ``lock_timeout`` seconds and then gets :class:`~charmem.errors.StoreLockedError`.

    The async methods run the blocking shard calls in a worker thread (``asyncio.to_thread``)
    and are serialised per index by a lock. Qdrant Edge holds the GIL while it searches, so the
    hop does not let the event loop run during the search itself; it costs 0.1-0.25 ms and keeps
    the loop free for the Python around it (the benchmark in ``benchmarks/latency.py`` measures
    both).

    Args:
        root: the vector store root (``VECTOR_STORE_PATH``); created if missing.
        collection: the collection name, ``[a-z0-9][a-z0-9_-]{0,127}``, checked before any
            directory is created.
        model_id: the embedding model's stable name (recorded in the marker).
        vector_size: the dense vector dimension (recorded in the marker), >= 1.
        lexical: fuse a BM25 lexical cue into :meth:`search` when the query has text.
        lock_timeout: seconds to keep retrying a shard held by another opener.
        fusion_weights: the RRF weights of the (dense, lexical) stages, finite and > 0;
            :data:`DEFAULT_FUSION_WEIGHTS` (1.5, 1.0) by default. A stage at rank ``r`` adds
            ``1 / ((r + 1) / weight + k - 1)``, i.e. ``1 / (k + r)`` at weight 1.0.
        hnsw: when and how to build an HNSW graph (:class:`~charmem_qdrant._hnsw.HnswSettings`),
            or ``None`` (the default): exact scan only.

    Raises:
        ConfigurationError: bad collection name, a path escaping ``root``, bad ``model_id``,
            ``vector_size`` or ``fusion_weights``, or a marker naming another collection.
        DimensionMismatchError: the shard stores vectors of another size.
        EmbedderMismatchError: the shard was indexed with another model of the same size.
        StoreLockedError: another opener holds the shard.
        BackendError: Qdrant Edge failed to open or create the shard.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        collection: str,
        *,
        model_id: str,
        vector_size: int,
        lexical: bool = False,
        lock_timeout: float = 1.0,
        fusion_weights: tuple[float, float] = DEFAULT_FUSION_WEIGHTS,
        hnsw: HnswSettings | None = None,
    ) -> None:
        root_path, path = _shard_path(root, collection)
        weights = _checked_weights(fusion_weights)
        if not isinstance(model_id, str) or not model_id.strip():
            raise ConfigurationError("model_id must be a non-empty string", key="model_id")
        if isinstance(vector_size, bool) or not isinstance(vector_size, int) or vector_size < 1:
            raise ConfigurationError(
                f"vector_size must be a positive int, not {vector_size!r}", key="vector_size"
            )
        self._root = root_path
        self._path = path
        self._collection = collection
        self._model_id = model_id
        self._vector_size = vector_size
        self._lexical = lexical
        self._weights = weights
        self._lock_timeout = lock_timeout
        self._hnsw = hnsw
        self._lock = threading.Lock()
        self._bm25 = qe.Bm25()
        # HNSW state: read and written under ``_lock``, except ``_build`` (under ``_state_lock``).
        self._indexed = 0  # dense vectors in a graph
        self._pending = 0  # points written since the last build (or unindexed at open)
        self._journal: list[qe.UpdateOperation] | None = None  # writes made during a build
        # exact filtered point counts by object-type scope, under ``_lock``; cleared by writes
        self._counts: dict[tuple[str, ...], int] = {}
        self._state_lock = threading.Lock()
        self._build: _Build | None = None
        self._shard: qe.EdgeShard | None = self._open()

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_settings(
        cls, settings: Settings, collection: str, *, model_id: str, vector_size: int
    ) -> EdgeVectorIndex:
        """Open (or create) the shard of ``collection`` under ``settings.vector_store_path``.

        Reads ``VECTOR_LEXICAL_CUE`` (``true``/``false``, default true),
        ``VECTOR_LEXICAL_WEIGHT`` (the lexical stage's RRF weight, a finite number > 0, default
        1.0) and the HNSW keys (``VECTOR_HNSW_THRESHOLD``, ``VECTOR_HNSW_M``,
        ``VECTOR_HNSW_EF_CONSTRUCT``, ``VECTOR_HNSW_EF``, ``VECTOR_HNSW_BACKGROUND``; see
        :func:`charmem_qdrant._hnsw.hnsw_from_settings`) from ``settings.extra``.

        Args:
            settings: the deployment settings.
            collection: the collection name.
            model_id: the embedding provider's model id.
            vector_size: the embedding provider's dimension.

        Returns:
            An open index bound to the collection's shard.

        Raises:
            ConfigurationError: see the class; also a malformed ``VECTOR_LEXICAL_CUE``,
                ``VECTOR_LEXICAL_WEIGHT`` or HNSW key (the message names the key).
            DimensionMismatchError: see the class.
            EmbedderMismatchError: see the class.
            StoreLockedError: see the class.
            BackendError: see the class.
        """
        validate_collection_name(collection)
        lexical = bool_setting(settings, LEXICAL_CUE_KEY, default=True)
        weights = _weights_from_settings(settings)
        hnsw = hnsw_from_settings(settings)
        return cls(
            settings.vector_store_path,
            collection,
            model_id=model_id,
            vector_size=vector_size,
            lexical=lexical,
            fusion_weights=weights,
            hnsw=hnsw,
        )

    @classmethod
    def drop(
        cls,
        root: str | os.PathLike[str],
        collection: str,
        *,
        lock_timeout: float = 1.0,
    ) -> bool:
        """Remove the shard of ``collection`` (points and marker), whatever its fingerprint.

        For ``rebuild_vector_index()`` with another embedder: drop, then open with the new
        ``model_id`` / ``vector_size`` and re-upsert from the graph, and for a damaged shard
        (``charmem rebuild-vectors --drop``). The shard is never loaded: the lock Qdrant Edge
        holds on its WAL is taken first (so a shard in use is never removed), the directory is
        renamed to a hidden tombstone while the lock is held, then the lock is released and the
        tombstone deleted.

        Args:
            root: the vector store root (``VECTOR_STORE_PATH``).
            collection: the collection name.
            lock_timeout: seconds to keep retrying a shard held by another opener.

        Returns:
            True if a shard directory was removed, False if there was none.

        Raises:
            ConfigurationError: bad collection name, or a path escaping ``root``.
            StoreLockedError: another opener holds the shard; nothing was removed.
            BackendError: Qdrant Edge or the file system failed (cause chained).
        """
        root_path, path = _shard_path(root, collection)
        if not path.exists() and not _swap_sentinel(root_path, collection).exists():
            return False
        tombstone = path.with_name(f".{collection}.dropped-{uuid.uuid4().hex}")
        with _collection_lock(root_path, collection, lock_timeout):
            _recover_swap(root_path, path, collection)
            if not path.exists():
                return False
            with _disk.wal_lock(path, collection, lock_timeout) as locked:
                shard: qe.EdgeShard | None = None
                if not locked and _holds_shard_data(path):  # no flock here: the shard's own lock
                    shard = _open_with_retry(
                        collection,
                        path,
                        lock_timeout,
                        "open the shard to drop it",
                        lambda: qe.EdgeShard.load(str(path)),
                    )
                try:
                    path.rename(tombstone)
                except OSError as exc:
                    raise _backend_error(collection, path, "drop the shard", exc) from exc
                finally:
                    if shard is not None:
                        shard.close()
            _remove_stale_builds(root_path, collection)
        shutil.rmtree(tombstone, ignore_errors=True)
        _log.info("vector_shard_dropped", collection=collection, path=str(path))
        return True

    @classmethod
    def drop_from_settings(cls, settings: Settings, collection: str) -> bool:
        """:meth:`drop` the shard of ``collection`` under ``settings.vector_store_path``.

        Returns:
            True if a shard directory was removed, False if there was none.

        Raises:
            ConfigurationError: see :meth:`drop`.
            StoreLockedError: see :meth:`drop`.
            BackendError: see :meth:`drop`.
        """
        return cls.drop(settings.vector_store_path, collection)

    @classmethod
    def exists_from_settings(cls, settings: Settings, collection: str) -> bool:
        """Whether the shard of ``collection`` exists under ``VECTOR_STORE_PATH``.

        Opening would create a missing one; checks use this to report a lost shard instead.

        Returns:
            True if the shard directory holds shard data.

        Raises:
            ConfigurationError: bad collection name, or a path escaping the root.
        """
        _, path = _shard_path(settings.vector_store_path, collection)
        return _holds_shard_data(path)

    def _config(self) -> qe.EdgeConfig:
        return shard_config(self._vector_size, self._hnsw)

    def _backend_error(self, action: str, exc: BaseException) -> BackendError:
        return _backend_error(self._collection, self._path, action, exc)

    def _load(self) -> qe.EdgeShard:
        path, config = str(self._path), self._config()

        def load() -> qe.EdgeShard:
            # never let Qdrant Edge load a shard another opener holds (see _disk.wal_held)
            if _disk.wal_held(self._path):
                raise _ShardHeldError(f"the WAL of {path} is locked: WouldBlock")
            return qe.EdgeShard.load(path, config)

        return _open_with_retry(
            self._collection, self._path, self._lock_timeout, "open the shard", load
        )

    def _open(self) -> qe.EdgeShard:
        """Open the shard, creating it (and its marker) on first use.

        The marker is checked before waiting for the lock (a mismatch fails fast) and again
        once the lock is held (another opener may have written it meanwhile). A shard left
        without a marker by a crash between creation and marker write is adopted if empty. An HNSW
        swap a crash interrupted is rolled back first, and stale build copies are removed once
        the shard is held.
        """
        with _collection_lock(self._root, self._collection, self._lock_timeout):
            _recover_swap(self._root, self._path, self._collection)
            marker_path = self._path / MARKER_FILE_NAME
            marker = ShardMarker.read(marker_path)
            if marker is not None:
                self._check(marker)
            created = not _holds_shard_data(self._path)
            if created:
                needed, action = _disk.SHARD_DISK_SPACE.create, "create the vector shard"
            else:
                _disk.check_complete(self._path, self._collection)
                needed, action = _disk.SHARD_DISK_SPACE.to_load(self._path), "load the vector shard"
            _disk.require_space(self._path, needed, collection=self._collection, action=action)
            shard = self._create() if created else self._load()
            with contextlib.suppress(OSError):  # leftovers are retried at the next open
                _remove_stale_builds(self._root, self._collection)
        return self._prepare(shard, created)

    def _prepare(self, shard: qe.EdgeShard, created: bool) -> qe.EdgeShard:
        """Check or write the marker, index the payload, read the HNSW state; close on failure."""
        marker_path = self._path / MARKER_FILE_NAME
        try:
            marker = ShardMarker.read(marker_path)
            if marker is not None:
                self._check(marker)
            else:
                points = shard.count(qe.CountRequest(exact=True))
                if points:
                    raise ConfigurationError(
                        f"the directory {self._path} holds a vector shard with {points} points "
                        f"but no {MARKER_FILE_NAME}, so its collection and embedder are unknown; "
                        "move it away and rebuild the collection's vectors with "
                        "rebuild_vector_index()",
                        key="VECTOR_STORE_PATH",
                    )
                ShardMarker(
                    collection=self._collection,
                    model_id=self._model_id,
                    vector_size=self._vector_size,
                ).write(marker_path)
            if _PAYLOAD_TYPE not in shard.info().payload_schema:
                shard.update(
                    qe.UpdateOperation.create_field_index(
                        _PAYLOAD_TYPE, qe.PayloadSchemaType.Keyword
                    )
                )
                shard.flush()
            points = shard.count(qe.CountRequest(exact=True))
            self._read_graph_record(points)
        except BaseException as exc:
            shard.close()
            if isinstance(exc, CharmemError) or not isinstance(exc, Exception):
                raise
            raise self._backend_error("prepare the shard", exc) from exc
        _log.info(
            "vector_shard_opened",
            collection=self._collection,
            path=str(self._path),
            created=created,
            points=points,
            lexical=self._lexical,
            hnsw_indexed=self._indexed,
        )
        return shard

    def _check(self, marker: ShardMarker) -> None:
        marker.check(
            collection=self._collection,
            model_id=self._model_id,
            vector_size=self._vector_size,
            path=self._path,
        )

    def _create(self) -> qe.EdgeShard:
        """Create a new shard; if another opener created it meanwhile, open that one."""
        try:
            self._root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self._backend_error("create the vector store root", exc) from exc
        try:
            return qe.EdgeShard.create(str(self._path), self._config())
        except Exception as exc:
            if not _is_lock_error(exc) and not _holds_shard_data(self._path):
                raise self._backend_error("create the shard", exc) from exc
        return self._load()

    # ------------------------------------------------------------------ properties

    @property
    def collection(self) -> str:
        """The collection this index serves."""
        return self._collection

    @property
    def model_id(self) -> str:
        """The embedding model id recorded in the shard marker."""
        return self._model_id

    @property
    def vector_size(self) -> int:
        """The dense vector dimension recorded in the shard marker."""
        return self._vector_size

    @property
    def path(self) -> Path:
        """The shard directory (``<root>/<collection>``, resolved)."""
        return self._path

    @property
    def lexical(self) -> bool:
        """Whether :meth:`search` fuses the BM25 lexical cue when a query has text."""
        return self._lexical

    @property
    def fusion_weights(self) -> tuple[float, float]:
        """The RRF weights of the (dense, lexical) stages of a fused search."""
        return self._weights

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has run."""
        return self._shard is None

    def __repr__(self) -> str:
        state = "closed" if self._shard is None else "open"
        return (
            f"EdgeVectorIndex(collection={self._collection!r}, path='{self._path}', "
            f"model_id={self._model_id!r}, vector_size={self._vector_size}, "
            f"lexical={self._lexical}, fusion_weights={self._weights}, {state})"
        )

    # ------------------------------------------------------------------ plumbing

    def _run(self, action: str, body: Callable[[qe.EdgeShard], _T]) -> _T:
        """Run ``body`` on the open shard under the index lock, translating driver errors."""
        with self._lock:
            shard = self._shard
            if shard is None:
                raise BackendError(
                    f"cannot {action}: the vector index of collection {self._collection!r} is "
                    "closed; open a new one"
                )
            try:
                return body(shard)
            except CharmemError:
                raise
            except Exception as exc:
                raise self._backend_error(action, exc) from exc

    def _checked_vector(self, vector: Sequence[float], what: str) -> list[float]:
        return _checked_vector(vector, what, self._vector_size, self._collection, self._model_id)

    # ------------------------------------------------------------------ writes

    def _upsert_sync(self, points: Sequence[VectorPoint]) -> None:
        prepared: list[qe.Point] = []
        for point in points:
            vector = self._checked_vector(point.vector, f"the vector of {point.id}")
            vectors: dict[str, qe.NamedVector] = {DENSE_VECTOR: vector}
            if point.text and point.text.strip():
                sparse = self._bm25.embed_document(point.text)
                if sparse.indices:
                    vectors[LEXICAL_VECTOR] = sparse
            object_type = ObjectType(point.object_type).value
            payload = {_PAYLOAD_TYPE: object_type, _PAYLOAD_ID: str(point.id)}
            prepared.append(qe.Point(str(point.id), vectors, payload))
        if not prepared:
            return
        needed = _disk.SHARD_DISK_SPACE.to_write(len(prepared), self._vector_size)
        _disk.require_space(self._path, needed, collection=self._collection, action="write vectors")
        operation = qe.UpdateOperation.upsert_points(prepared)

        def write(shard: qe.EdgeShard) -> None:
            self._counts.clear()
            shard.update(operation)
            shard.flush()
            if self._journal is not None:
                self._journal.append(operation)
            self._pending += len(prepared)

        self._run("upsert points", write)
        _log.debug("vector_points_upserted", collection=self._collection, count=len(prepared))
        self._maybe_build()

    async def upsert(self, points: Sequence[VectorPoint]) -> None:
        """Insert or replace points (one Qdrant update per call), durable on return.

        Every point is checked before anything is written. A point with non-blank ``text``
        also gets a BM25 sparse vector of it (``Bm25.embed_document``).

        Args:
            points: the points; each ``vector`` has ``vector_size`` finite floats.

        Raises:
            DimensionMismatchError: a vector has another length (``actual``) than
                ``vector_size`` (``expected``); nothing is written.
            BackendError: a vector holds NaN or infinity (nothing is written), the index is
                closed, or Qdrant Edge failed (cause chained).
        """
        await asyncio.to_thread(self._upsert_sync, list(points))

    def _delete_sync(self, ids: Sequence[MemoryId]) -> None:
        point_ids: list[qe.PointId] = [str(MemoryId(i)) for i in ids]
        if not point_ids:
            return

        needed = _disk.SHARD_DISK_SPACE.to_write(0, self._vector_size)
        _disk.require_space(
            self._path, needed, collection=self._collection, action="delete vectors"
        )
        operation = qe.UpdateOperation.delete_points(point_ids)

        def write(shard: qe.EdgeShard) -> None:
            self._counts.clear()
            shard.update(operation)
            shard.flush()
            if self._journal is not None:
                self._journal.append(operation)

        self._run("delete points", write)
        _log.debug("vector_points_deleted", collection=self._collection, count=len(point_ids))

    async def delete(self, ids: Sequence[MemoryId]) -> None:
        """Remove points by id, durable on return; absent ids are ignored.

        Args:
            ids: the ids to remove.

        Raises:
            BackendError: the index is closed, or Qdrant Edge failed (cause chained).
        """
        await asyncio.to_thread(self._delete_sync, list(ids))

    # ------------------------------------------------------------------ reads

    def _search_sync(self, query: VectorQuery) -> VectorSearchResult:
        vector = self._checked_vector(query.vector, "the query vector")
        limit = query.limit
        type_filter = _type_filter(query.object_types, query.within)
        # counts are cached per type scope; a ``within`` scope is counted each time
        count_key = (
            None
            if query.within is not None
            else tuple(sorted({ObjectType(t).value for t in query.object_types}))
        )
        stages: list[qe.Query] = [qe.Query.Nearest(vector, using=DENSE_VECTOR)]
        if self._lexical and query.text and query.text.strip():
            sparse = self._bm25.embed_query(query.text)
            if sparse.indices:
                stages.append(qe.Query.Nearest(sparse, using=LEXICAL_VECTOR))

        def run(shard: qe.EdgeShard) -> tuple[bool, int, list[list[_Found]]]:
            # read under the index lock: a finished HNSW build changes it
            hnsw = self._hnsw if self._indexed > 0 else None
            approximate = hnsw is not None
            dense = qe.SearchParams(exact=True)
            if hnsw is not None:
                dense = qe.SearchParams(hnsw_ef=hnsw.ef)
            scan_filter = type_filter

            def request(stage: int, n: int) -> qe.QueryRequest:
                return qe.QueryRequest(
                    limit=n,
                    query=stages[stage],
                    filter=scan_filter,
                    params=dense if stage == 0 else None,  # the parameters concern dense only
                    score_threshold=query.min_score if stage == 0 else None,  # a cosine floor
                    with_payload=True,
                )

            scanned = None if count_key is None else self._counts.get(count_key)
            if scanned is None:  # an exact filtered count, kept until the next write
                scanned = shard.count(qe.CountRequest(exact=True, filter=type_filter))
                if count_key is not None:
                    self._counts[count_key] = scanned
            if limit <= 0 or scanned == 0:
                return approximate, scanned, []
            if not approximate and type_filter is not None and count_key is not None:
                total = self._counts.get(())
                if total is None:
                    total = self._counts[()] = shard.count(qe.CountRequest(exact=True))
                if total == scanned:  # every point is of a scoped type: a filter only slows it
                    scan_filter = None
            want = limit if len(stages) == 1 else stage_size(limit)
            ranker: StageRanker[_Found] = StageRanker(
                [want] * len(stages), scanned, _FOUND_ID, _FOUND_SCORE
            )
            while ranker.pending:
                batch = qe.QueryBatchRequest([request(s, n) for s, n in ranker.pending])
                answers = shard.query_batch(batch)
                ranker.accept([[_found(point) for point in answer] for answer in answers])
            return approximate, scanned, ranker.ranked()

        approximate, scanned, ranked = self._run("search", run)
        if len(ranked) <= 1:
            hits = tuple(self._hit(found, found[1]) for stage in ranked for found in stage)
        else:
            by_id = {found[0]: found for stage in ranked for found in stage}
            fused = rrf_fuse(
                [list(map(_point_key, stage)) for stage in ranked],
                k=RRF_K,
                weights=self._weights,
            )
            hits = tuple(self._hit(by_id[point_id], score) for point_id, score in fused[:limit])
        kind = CompletenessKind.APPROXIMATE if approximate else CompletenessKind.EXHAUSTIVE
        return VectorSearchResult(
            hits=hits,
            completeness=VectorRecallCompleteness(kind, scanned=scanned, fetched=len(hits)),
        )

    def _hit(self, found: _Found, score: float) -> VectorHit:
        point_id, _score, raw_type = found
        try:
            object_type = ObjectType(raw_type)
            memory_id = MemoryId(point_id)
        except ValueError as exc:
            raise BackendError(
                f"point {point_id} in the vector shard of collection {self._collection!r} has no "
                f"valid {_PAYLOAD_TYPE!r} payload or id; the shard was written by something else. "
                "Rebuild it with rebuild_vector_index()"
            ) from exc
        return VectorHit(memory_id, object_type, float(score))

    async def search(self, query: VectorQuery) -> VectorSearchResult:
        """Nearest points to ``query.vector`` among ``query.object_types`` (all when empty).

        The dense search is an exact cosine scan (an HNSW search with ``hnsw_ef`` once a graph was
        built, see the class) and the hit score its cosine. An exact scan whose type scope covers
        every point (the cached exact counts of the scope and of the shard agree) runs without the
        type filter, which only slows a scan down (about 1.5 ms of 4 at 5,000 x 1,536). With the
        lexical cue on and a query ``text`` that has BM25 terms, the dense stage and a BM25 sparse
        stage (both filtered, each its best ``max(4 * limit, 64)`` points by score descending, id
        ascending) run as one ``query_batch`` and are fused client-side by reciprocal rank fusion:
        ``score = sum over stages of 1 / ((rank + 1) / weight + k - 1)``, which is ``1 / (k +
        rank)`` at the default weight 1.0, ``k`` = :data:`RRF_K`, ``rank`` 0-based and shared by
        points with equal stage scores (the first rank of their tie group); the hit score is the
        fused score. Hits are ordered by score descending, ties by id ascending, whatever the
        insertion order (see the class for why the fusion is not Qdrant's ``Fusion.Rrf``).

        Args:
            query: the vector (``vector_size`` finite floats), limit (count), object types and
                optional cue text.

        Returns:
            At most ``query.limit`` hits, and ``exhaustive`` completeness (``approximate`` once
            an HNSW graph holds points) with ``scanned`` = the number of points matching the
            type filter and ``fetched`` = the hits returned.

        Raises:
            DimensionMismatchError: the query vector has another length than ``vector_size``.
            BackendError: the query vector is not finite, the index is closed, or Qdrant Edge
                failed (cause chained).
        """
        return await asyncio.to_thread(self._search_sync, query)

    def _point_ids_sync(self) -> set[MemoryId]:
        def run(shard: qe.EdgeShard) -> set[MemoryId]:
            ids: set[MemoryId] = set()
            offset: qe.PointId | None = None
            while True:
                records, offset = shard.scroll(
                    qe.ScrollRequest(
                        offset=offset, limit=_SCROLL_PAGE, with_payload=False, with_vector=False
                    )
                )
                ids.update(MemoryId(str(record.id)) for record in records)
                if offset is None:
                    return ids

        return self._run("list point ids", run)

    async def point_ids(self) -> set[MemoryId]:
        """Every point id in the shard (scrolled in pages of 1024).

        Returns:
            The ids of all stored points.

        Raises:
            BackendError: the index is closed, or Qdrant Edge failed (cause chained).
        """
        return await asyncio.to_thread(self._point_ids_sync)

    def _count_sync(self) -> int:
        return self._run("count points", lambda shard: shard.count(qe.CountRequest(exact=True)))

    async def count(self) -> int:
        """Number of points in the shard (an exact count).

        Raises:
            BackendError: the index is closed, or Qdrant Edge failed (cause chained).
        """
        return await asyncio.to_thread(self._count_sync)

    # ------------------------------------------------------------------ HNSW

    @property
    def hnsw(self) -> HnswSettings | None:
        """The HNSW settings, or ``None`` when every search is an exact scan."""
        return self._hnsw

    @property
    def hnsw_indexed(self) -> int:
        """Dense vectors in an HNSW graph (count; 0 until a build finished)."""
        return self._indexed

    @property
    def building(self) -> bool:
        """Whether an HNSW build is running."""
        return self._build is not None

    def _read_graph_record(self, points: int) -> None:
        """Set the HNSW state from the shard's graph record (hold ``_lock`` or be opening)."""
        record = GraphRecord.read(self._path)
        self._indexed = record.indexed if record is not None else 0
        self._pending = max(0, points - (record.points if record is not None else 0))

    def _maybe_build(self) -> None:
        """Start a background build once ``hnsw.threshold`` points wait for a graph."""
        hnsw = self._hnsw
        if hnsw is None or not hnsw.background or self._pending < hnsw.threshold:
            return
        with self._state_lock:
            if self._build is not None or self._shard is None:
                return
            build = self._new_build(hnsw)
        if build.thread is not None:
            build.thread.start()

    def _new_build(self, hnsw: HnswSettings) -> _Build:
        """A build whose thread is not started yet (call holding ``_state_lock``)."""
        build = _Build()
        build.thread = threading.Thread(
            target=self._build_main,
            args=(build, hnsw),
            name=f"charmem-hnsw-{self._collection}",
            daemon=True,
        )
        self._build = build
        return build

    def _build_main(self, build: _Build, hnsw: HnswSettings) -> None:
        try:
            build.report = self._build_steps(build, hnsw)
            _log.info(
                "vector_hnsw_built", collection=self._collection, **attrs.asdict(build.report)
            )
        except _BuildCancelledError:
            _log.info("vector_hnsw_build_stopped", collection=self._collection)
        except BaseException as exc:  # reported to optimize() and the log
            build.error = exc
            _log.warning("vector_hnsw_build_failed", collection=self._collection, error=str(exc))
        finally:
            self._end_build(build)

    def _end_build(self, build: _Build) -> None:
        """Forget ``build`` and wake whoever waits for it."""
        with self._state_lock:
            if self._build is build:
                self._build = None
        build.done.set()

    def _build_steps(self, build: _Build, hnsw: HnswSettings) -> HnswBuildReport:
        """Copy the shard, optimize the copy in a child process, swap it in (see the class)."""
        copy = self._root / f".{self._collection}.hnsw-{uuid.uuid4().hex}"
        try:
            start = time.perf_counter()
            with self._lock:
                shard = self._shard
                if shard is None or build.cancel.is_set():
                    raise _BuildCancelledError
                try:
                    shard.flush()
                    shutil.copytree(self._path, copy)
                except Exception as exc:
                    raise self._backend_error("copy the shard for an HNSW build", exc) from exc
                self._journal = []
                self._pending = 0
            copy_seconds = time.perf_counter() - start
            child = self._run_child(build, copy, hnsw)
            start = time.perf_counter()
            with self._lock:
                journal, self._journal = self._journal or [], None
                if self._shard is None or build.cancel.is_set():
                    raise _BuildCancelledError
                points = self._swap_in(copy, journal)
            return HnswBuildReport(
                built=bool(child.get("optimized")),
                points=points,
                indexed=self._indexed,
                copy_seconds=copy_seconds,
                build_seconds=float(child.get("seconds", 0.0)),
                swap_seconds=time.perf_counter() - start,
                replayed=len(journal),
            )
        finally:
            with self._lock:
                self._journal = None
            shutil.rmtree(copy, ignore_errors=True)

    def _run_child(self, build: _Build, copy: Path, hnsw: HnswSettings) -> dict[str, Any]:
        """Run the build child on ``copy``; its JSON report.

        Raises:
            _BuildCancelledError: the index closed meanwhile.
            BackendError: the child failed (its stderr tail in the message).
        """
        command = child_command(str(copy), self._vector_size, hnsw)
        with build.guard:
            if build.cancel.is_set():
                raise _BuildCancelledError
            try:
                # our own interpreter and module; the arguments are a path and integers
                process = subprocess.Popen(  # noqa: S603
                    command, stdout=subprocess.PIPE, stderr=subprocess.PIPE
                )
            except OSError as exc:
                raise self._backend_error("start the HNSW build process", exc) from exc
            build.process = process
        out, err = process.communicate()
        if build.cancel.is_set():
            raise _BuildCancelledError
        if process.returncode != 0:
            tail = err.decode("utf-8", "replace").strip()[-2000:]
            raise BackendError(
                f"the HNSW build of collection {self._collection!r} failed (exit status "
                f"{process.returncode}); the shard is unchanged and still searched exactly where "
                f"it has no graph: {tail}"
            )
        report: dict[str, Any] = json.loads(out.decode("utf-8").strip().splitlines()[-1])
        return report

    def _swap_in(self, copy: Path, journal: Sequence[qe.UpdateOperation]) -> int:
        """Replace the shard with the built ``copy`` and replay ``journal`` on it (hold ``_lock``).

        Returns:
            The points of the new shard (count).

        Raises:
            BackendError: the swap failed; the old shard is back in place and open.
        """
        tomb = self._root / f".{self._collection}.pre-hnsw-{uuid.uuid4().hex}"
        sentinel = _swap_sentinel(self._root, self._collection)
        with _collection_lock(self._root, self._collection, self._lock_timeout):
            live = self._shard
            if live is None:
                raise _BuildCancelledError
            write_atomic(sentinel, json.dumps({"tomb": tomb.name}))
            live.close()  # every acknowledged write was flushed when it was made
            self._shard = None
            try:
                self._path.rename(tomb)
                copy.rename(self._path)
                _fsync_dir(self._root)
                new = qe.EdgeShard.load(str(self._path), self._config())
                try:
                    for operation in journal:
                        new.update(operation)
                    new.flush()
                    points = new.count(qe.CountRequest(exact=True))
                except BaseException:
                    new.close()
                    raise
            except BaseException as exc:
                try:
                    _recover_swap(self._root, self._path, self._collection)
                finally:
                    self._shard = self._load()
                raise self._backend_error("swap in the HNSW-indexed shard", exc) from exc
            sentinel.unlink()
            _fsync_dir(self._root)
            self._shard = new
            self._counts.clear()
            self._read_graph_record(points)
        shutil.rmtree(tomb, ignore_errors=True)
        return points

    async def optimize(self) -> HnswBuildReport:
        """Build the HNSW graph now (waiting for a background build already running first).

        The build runs as in the background (see the class): the index keeps serving except
        for the copy and the swap, reported in seconds. Nothing is built while the shard holds
        fewer than ``hnsw.threshold`` points.

        Returns:
            What the build did (``built`` False and zero seconds when below the threshold).

        Raises:
            ConfigurationError: HNSW is off (``VECTOR_HNSW_THRESHOLD`` unset or 0).
            BackendError: the index is closed, or the copy, the child or the swap failed (the
                shard is then unchanged).
        """
        return await asyncio.to_thread(self.optimize_sync)

    @classmethod
    def optimize_from_settings(cls, settings: Settings, collection: str) -> HnswBuildReport:
        """Open the shard of ``collection`` with the fingerprint of its marker, build, close.

        For ``charmem optimize``: no embedder is needed, the marker names the model and size.

        Returns:
            What the build did (see :meth:`optimize`).

        Raises:
            ConfigurationError: HNSW is off (``VECTOR_HNSW_THRESHOLD``), a malformed setting, or
                the collection has no vector shard under ``VECTOR_STORE_PATH``.
            StoreLockedError: another process holds the shard (stop it first).
            BackendError: the build failed; the shard is unchanged.
        """
        _, path = _shard_path(settings.vector_store_path, collection)
        if hnsw_from_settings(settings) is None:
            raise ConfigurationError(
                f"HNSW is off: set {HNSW_THRESHOLD_KEY} to the number of points from which to "
                "build it (e.g. 20000)",
                key=HNSW_THRESHOLD_KEY,
            )
        marker = ShardMarker.read(path / MARKER_FILE_NAME)
        if marker is None:
            raise ConfigurationError(
                f"collection {collection!r} has no vector shard at {path}; check "
                "VECTOR_STORE_PATH and the collection name",
                key="VECTOR_STORE_PATH",
            )
        index = cls.from_settings(
            settings, collection, model_id=marker.model_id, vector_size=marker.vector_size
        )
        try:
            return index.optimize_sync()
        finally:
            index.close_sync()

    def optimize_sync(self) -> HnswBuildReport:
        """:meth:`optimize` without an event loop (blocks the calling thread, not the GIL)."""
        hnsw = self._hnsw
        if hnsw is None:
            raise ConfigurationError(
                f"HNSW is off for collection {self._collection!r}: set {HNSW_THRESHOLD_KEY} to "
                "the number of points from which to build it (e.g. 20000)",
                key=HNSW_THRESHOLD_KEY,
            )
        while True:
            with self._state_lock:
                running = self._build
                if running is None:
                    if self._shard is None:
                        raise BackendError(
                            f"cannot optimize: the vector index of collection "
                            f"{self._collection!r} is closed; open a new one"
                        )
                    build = self._new_build(hnsw)
                    build.thread = None  # runs in this thread, below
                    break
            running.done.wait()
        try:
            points = self._count_sync()
        except BaseException:
            self._end_build(build)
            raise
        if points < hnsw.threshold:
            self._end_build(build)
            return HnswBuildReport(built=False, points=points, indexed=self._indexed)
        self._build_main(build, hnsw)
        if build.error is not None:
            if isinstance(build.error, CharmemError):
                raise build.error
            raise self._backend_error("build the HNSW index", build.error) from build.error
        if build.report is None:
            raise BackendError(
                f"the HNSW build of collection {self._collection!r} stopped: the index closed"
            )
        return build.report

    # ------------------------------------------------------------------ lifecycle

    def close_sync(self) -> None:
        """Release the shard and its lock without an event loop; idempotent.

        Acknowledged writes are already durable, so closing only frees the lock and memory. A
        running HNSW build is stopped (its child killed, its copy removed); the next open starts
        it again once enough points wait for a graph.
        """
        with self._state_lock:
            build = self._build
        if build is not None:
            build.stop()
            if build.thread is not None and build.thread is not threading.current_thread():
                build.thread.join()
        with self._lock:
            shard, self._shard = self._shard, None
            if shard is None:
                return
            try:
                try:
                    settle_wal(shard)  # so the next open does not apply the last write again
                finally:
                    shard.close()
            except Exception as exc:
                raise self._backend_error("close the shard", exc) from exc
        _log.info("vector_shard_closed", collection=self._collection, path=str(self._path))

    async def close(self) -> None:
        """Release the shard and its lock (another opener may then open it); idempotent.

        Raises:
            BackendError: Qdrant Edge failed to close the shard (cause chained).
        """
        await asyncio.to_thread(self.close_sync)
