"""The embedded vector index: one Qdrant Edge shard per collection (DESIGN §6.1, §7)."""

from __future__ import annotations

import asyncio
import math
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar

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
    StoreLockedError,
)
from charmem.log import get_logger
from charmem.ports import VectorHit, VectorPoint, VectorQuery, VectorSearchResult
from charmem.settings import validate_collection_name
from charmem_qdrant._fusion import (
    DEFAULT_FUSION_WEIGHTS,
    RRF_K,
    StageRanker,
    check_weights,
    rrf_fuse,
    stage_size,
)
from charmem_qdrant._marker import MARKER_FILE_NAME, ShardMarker

if TYPE_CHECKING:
    from charmem.settings import Settings

__all__ = [
    "DENSE_VECTOR",
    "LEXICAL_CUE_KEY",
    "LEXICAL_VECTOR",
    "LEXICAL_WEIGHT_KEY",
    "RRF_K",
    "EdgeVectorIndex",
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


def _parse_bool(settings: Settings, key: str, default: bool) -> bool:
    raw = settings.extra.get(key)
    if raw is None or not raw.strip():
        return default
    value = raw.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise ConfigurationError(f"{key}={raw!r} must be true or false", key=key)


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


def _point_key(point: qe.ScoredPoint) -> tuple[str, float]:
    """A scored point's (id, score), the input of the canonical ranking and of the fusion."""
    return str(point.id), float(point.score)


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
        f"Qdrant Edge failed to {action} for collection {collection!r} at {path}: {exc}"
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
        raise _backend_error(collection, path, action, exc) from exc


class EdgeVectorIndex:
    """Candidate recall over an embedded Qdrant Edge shard (the ``embedded`` vector index).

    One shard per collection lives at ``<root>/<collection>``; it holds a dense cosine vector
    (``"dense"``, ``vector_size`` floats) and a sparse BM25 vector (``"lexical"``,
    ``Modifier.Idf``) per point, with the payload ``{"object_type": ..., "memory_id": ...}``.
    Point ids are the MemoryId UUIDs. Search is an exact scan (no HNSW is ever built, the
    indexing threshold is zero), so recall is always reported ``exhaustive``.

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
    and are serialised per index by a lock.

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
        self._lock = threading.Lock()
        self._bm25 = qe.Bm25()
        self._shard: qe.EdgeShard | None = self._open()

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_settings(
        cls, settings: Settings, collection: str, *, model_id: str, vector_size: int
    ) -> EdgeVectorIndex:
        """Open (or create) the shard of ``collection`` under ``settings.vector_store_path``.

        Reads ``VECTOR_LEXICAL_CUE`` (``true``/``false``, default true) and
        ``VECTOR_LEXICAL_WEIGHT`` (the lexical stage's RRF weight, a finite number > 0, default
        1.0) from ``settings.extra``.

        Args:
            settings: the deployment settings.
            collection: the collection name.
            model_id: the embedding provider's model id.
            vector_size: the embedding provider's dimension.

        Returns:
            An open index bound to the collection's shard.

        Raises:
            ConfigurationError: see the class; also a malformed ``VECTOR_LEXICAL_CUE`` or
                ``VECTOR_LEXICAL_WEIGHT``.
            DimensionMismatchError: see the class.
            EmbedderMismatchError: see the class.
            StoreLockedError: see the class.
            BackendError: see the class.
        """
        validate_collection_name(collection)
        lexical = _parse_bool(settings, LEXICAL_CUE_KEY, default=True)
        weights = _weights_from_settings(settings)
        return cls(
            settings.vector_store_path,
            collection,
            model_id=model_id,
            vector_size=vector_size,
            lexical=lexical,
            fusion_weights=weights,
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
        ``model_id`` / ``vector_size`` and re-upsert from the graph. The shard lock is taken
        first (so a shard in use is never removed), the directory is renamed to a hidden
        tombstone while the lock is held, then the lock is released and the tombstone deleted.

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
        _, path = _shard_path(root, collection)
        if not path.exists():
            return False
        tombstone = path.with_name(f".{collection}.dropped-{uuid.uuid4().hex}")
        shard: qe.EdgeShard | None = None
        if _holds_shard_data(path):
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
        return qe.EdgeConfig(
            vectors={
                DENSE_VECTOR: qe.EdgeVectorParams(
                    size=self._vector_size, distance=qe.Distance.Cosine
                )
            },
            sparse_vectors={LEXICAL_VECTOR: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
            optimizers=qe.EdgeOptimizersConfig(indexing_threshold=0),
        )

    def _backend_error(self, action: str, exc: BaseException) -> BackendError:
        return _backend_error(self._collection, self._path, action, exc)

    def _load(self) -> qe.EdgeShard:
        path, config = str(self._path), self._config()
        return _open_with_retry(
            self._collection,
            self._path,
            self._lock_timeout,
            "open the shard",
            lambda: qe.EdgeShard.load(path, config),
        )

    def _open(self) -> qe.EdgeShard:
        """Open the shard, creating it (and its marker) on first use.

        The marker is checked before waiting for the lock (a mismatch fails fast) and again
        once the lock is held (another opener may have written it meanwhile). A shard left
        without a marker by a crash between creation and marker write is adopted if empty.
        """
        marker_path = self._path / MARKER_FILE_NAME
        marker = ShardMarker.read(marker_path)
        if marker is not None:
            self._check(marker)
        created = not _holds_shard_data(self._path)
        shard = self._create() if created else self._load()
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
        values = [float(x) for x in vector]
        if len(values) != self._vector_size:
            raise DimensionMismatchError(
                f"{what} has {len(values)} dimensions but collection {self._collection!r} "
                f"stores {self._vector_size} (model {self._model_id!r})",
                expected=self._vector_size,
                actual=len(values),
            )
        if not all(math.isfinite(x) for x in values):
            raise BackendError(
                f"{what} contains NaN or infinite values; embedders must return finite floats"
            )
        return values

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

        def write(shard: qe.EdgeShard) -> None:
            shard.update(qe.UpdateOperation.upsert_points(prepared))
            shard.flush()

        self._run("upsert points", write)
        _log.debug("vector_points_upserted", collection=self._collection, count=len(prepared))

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

        def write(shard: qe.EdgeShard) -> None:
            shard.update(qe.UpdateOperation.delete_points(point_ids))
            shard.flush()

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
        stages: list[qe.Query] = [qe.Query.Nearest(vector, using=DENSE_VECTOR)]
        if self._lexical and query.text and query.text.strip():
            sparse = self._bm25.embed_query(query.text)
            if sparse.indices:
                stages.append(qe.Query.Nearest(sparse, using=LEXICAL_VECTOR))
        exact = qe.SearchParams(exact=True)

        def request(stage: int, n: int) -> qe.QueryRequest:
            return qe.QueryRequest(
                limit=n,
                query=stages[stage],
                filter=type_filter,
                params=exact if stage == 0 else None,  # ``exact`` concerns the dense search only
                score_threshold=query.min_score if stage == 0 else None,  # a cosine floor
                with_payload=True,
            )

        def run(shard: qe.EdgeShard) -> tuple[int, list[list[qe.ScoredPoint]]]:
            scanned = shard.count(qe.CountRequest(exact=True, filter=type_filter))
            if limit <= 0 or scanned == 0:
                return scanned, []
            want = limit if len(stages) == 1 else stage_size(limit)
            ranker = StageRanker([want] * len(stages), scanned, _point_key)
            while ranker.pending:
                batch = qe.QueryBatchRequest([request(s, n) for s, n in ranker.pending])
                ranker.accept(shard.query_batch(batch))
            return scanned, ranker.ranked()

        scanned, ranked = self._run("search", run)
        if len(ranked) <= 1:
            hits = tuple(self._hit(point, point.score) for stage in ranked for point in stage)
        else:
            by_id = {str(point.id): point for stage in ranked for point in stage}
            fused = rrf_fuse(
                [[_point_key(point) for point in stage] for stage in ranked],
                k=RRF_K,
                weights=self._weights,
            )
            hits = tuple(self._hit(by_id[point_id], score) for point_id, score in fused[:limit])
        return VectorSearchResult(
            hits=hits,
            completeness=VectorRecallCompleteness(
                CompletenessKind.EXHAUSTIVE, scanned=scanned, fetched=len(hits)
            ),
        )

    def _hit(self, point: qe.ScoredPoint, score: float) -> VectorHit:
        payload: Mapping[str, object] = point.payload or {}
        try:
            object_type = ObjectType(payload[_PAYLOAD_TYPE])
            memory_id = MemoryId(str(point.id))
        except (KeyError, ValueError) as exc:
            raise BackendError(
                f"point {point.id} in the vector shard of collection {self._collection!r} has no "
                f"valid {_PAYLOAD_TYPE!r} payload or id; the shard was written by something else. "
                "Rebuild it with rebuild_vector_index()"
            ) from exc
        return VectorHit(memory_id, object_type, float(score))

    async def search(self, query: VectorQuery) -> VectorSearchResult:
        """Nearest points to ``query.vector`` among ``query.object_types`` (all when empty).

        The dense search is an exact cosine scan and the hit score its cosine. With the lexical
        cue on and a query ``text`` that has BM25 terms, the dense stage and a BM25 sparse stage
        (both filtered, each its best ``max(4 * limit, 64)`` points by score descending, id
        ascending) run as one ``query_batch`` and are fused client-side by reciprocal rank
        fusion: ``score = sum over stages of 1 / ((rank + 1) / weight + k - 1)``, which is
        ``1 / (k + rank)`` at the default weight 1.0, ``k`` = :data:`RRF_K`, ``rank`` 0-based
        and shared by points with equal stage scores (the first rank of their tie group); the
        hit score is the fused score. Hits are ordered by score descending, ties by id
        ascending, whatever the insertion order (see the class for why the fusion is not
        Qdrant's ``Fusion.Rrf``).

        Args:
            query: the vector (``vector_size`` finite floats), limit (count), object types and
                optional cue text.

        Returns:
            At most ``query.limit`` hits, and ``exhaustive`` completeness with ``scanned`` = the
            number of points matching the type filter and ``fetched`` = the hits returned.

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

    # ------------------------------------------------------------------ lifecycle

    def close_sync(self) -> None:
        """Release the shard and its lock without an event loop; idempotent.

        Acknowledged writes are already durable, so closing only frees the lock and memory.
        """
        with self._lock:
            shard, self._shard = self._shard, None
            if shard is None:
                return
            try:
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
