"""The embedded vector index: one Qdrant Edge shard per collection.

The driver of :mod:`charmem_qdrant._recall` over an in-process shard: the shard's files and locks
are in :mod:`charmem_qdrant._shard`, its HNSW builds in :mod:`charmem_qdrant._edge_build`, how a
search's points are asked for and read in :mod:`charmem_qdrant._edge_points`.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import qdrant_edge as qe

from charmem.domain.ids import MemoryId
from charmem.errors import BackendError, CharmemError
from charmem.log import get_logger
from charmem.ports import VectorPoint, VectorQuery, VectorSearchResult, VectorSurface
from charmem.settings import validate_collection_name
from charmem_qdrant import _disk
from charmem_qdrant._edge_build import HnswBuildReport, HnswBuilds, shard_to_optimize
from charmem_qdrant._edge_points import (
    SCORE,
    count_surface,
    found,
    found_with_payload,
    ids_only,
    plan_filter,
    scope_key,
    surface_condition,
    surface_ids,
    typed,
)
from charmem_qdrant._fusion import DEFAULT_FUSION_WEIGHTS
from charmem_qdrant._hnsw import (
    HnswSettings,
    hnsw_from_settings,
    settle_wal,
    shard_config,
)
from charmem_qdrant._recall import (
    Found,
    QdrantRecall,
    SearchPlan,
    point_ids_of,
)
from charmem_qdrant._shard import (
    backend_error,
    drop_shard,
    holds_shard_data,
    load_shard,
    open_shard,
    prepare_shard,
    shard_outdated,
    shard_path,
)

if TYPE_CHECKING:
    from charmem.settings import Settings

__all__ = ["EdgeVectorIndex", "HnswBuildReport"]

_T = TypeVar("_T")

#: The key of the cached count of scene surfaces' points (a search scope is never this tuple).
_SCENE_POINTS = ("scene surfaces",)

_log = get_logger("charmem_qdrant")


class EdgeVectorIndex(QdrantRecall, HnswBuilds):
    """Candidate recall over an embedded Qdrant Edge shard (the ``embedded`` vector index).

    One shard per collection lives at ``<root>/<collection>``; its points, search stages and
    client-side fusion are those of :mod:`charmem_qdrant._recall`, the stages of a search sent
    in one ``query_batch`` call. Search is an exact scan (the indexing threshold is zero), so
    recall is reported ``exhaustive``, unless HNSW is on.

    HNSW for scale (``hnsw``; exact scan by default, HNSW on request): once the shard holds
    ``hnsw.threshold`` points, an HNSW graph is built in a child process on a copy of the shard,
    and again whenever ``hnsw.threshold`` more points were written
    (:mod:`charmem_qdrant._edge_build`). Searches over a shard with a graph use ``hnsw_ef`` =
    ``hnsw.ef`` and report ``approximate`` recall; points written since the last build are still
    scanned exactly.

    Durability: every write is applied to the shard's write-ahead log, whose files are then
    ``fsync``-ed (the GIL released) before the call returns, so an acknowledged write survives a
    process kill and an OS crash (a load replays the log). The segments are flushed only when
    :data:`~charmem_qdrant._disk.SEGMENT_FLUSH` says the replay grew long, and on close: the
    flush holds the GIL, so each one stalls the event loop.

    Exclusivity: the shard's WAL lock admits one opener at a time; a second one (another
    process, or another index object in this process) waits up to ``lock_timeout`` seconds and
    then gets :class:`~charmem.errors.StoreLockedError`.

    The async methods run the blocking shard calls in a worker thread (``asyncio.to_thread``,
    0.1-0.25 ms a hop, measured by ``benchmarks/latency.py``), serialised per index by a lock;
    :meth:`search` runs in the calling thread when the lock is free (see there).

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
        root_path, self._path = shard_path(root, collection)
        super().__init__(collection, model_id, vector_size, lexical, fusion_weights)
        self._root = root_path
        self._lock_timeout = lock_timeout
        self._hnsw = hnsw
        self._lock = threading.Lock()
        # HNSW state and point counts: under ``_lock``, ``_build`` under ``_state_lock``
        self._indexed, self._pending, self._journal, self._counts = 0, 0, None, {}
        self._unflushed = (0, 0)  # (operations, points) since the segments were flushed
        self._state_lock = threading.Lock()
        self._build = None
        self._shard = self._open()

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

        Returns:
            An open index bound to the collection's shard.

        Raises:
            ConfigurationError: see the class; also a malformed ``VECTOR_LEXICAL_CUE``,
                ``VECTOR_LEXICAL_WEIGHT`` or HNSW key (the message names the key).
            DimensionMismatchError, EmbedderMismatchError, StoreLockedError, BackendError: see
                the class.
        """
        validate_collection_name(collection)
        lexical, weights = cls._cue_from_settings(settings)
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
        (``charmem rebuild-vectors --drop``). The shard is never loaded, and never removed while
        in use (:func:`charmem_qdrant._shard.drop_shard`).

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
        return drop_shard(root, collection, lock_timeout)

    @classmethod
    def drop_from_settings(cls, settings: Settings, collection: str) -> bool:
        """:meth:`drop` the shard of ``collection`` under ``settings.vector_store_path``.

        Returns:
            True if a shard directory was removed, False if there was none.

        Raises:
            ConfigurationError, StoreLockedError, BackendError: see :meth:`drop`.
        """
        return cls.drop(settings.vector_store_path, collection)

    @classmethod
    def exists_from_settings(cls, settings: Settings, collection: str) -> bool:
        """Whether the shard of ``collection`` exists under ``VECTOR_STORE_PATH``.

        Opening would create a missing one; checks use this to report a lost shard instead.

        Raises:
            ConfigurationError: bad collection name, or a path escaping the root.
        """
        _, path = shard_path(settings.vector_store_path, collection)
        return holds_shard_data(path)

    @classmethod
    def outdated_from_settings(cls, settings: Settings, collection: str) -> bool:
        """Whether the shard of ``collection`` is of an older schema version (rebuild it).

        ``CharacterMemory.open`` asks this (the ``embedded`` factory's ``outdated``) and then
        drops and rebuilds the shard from the graph, logged and reported through
        ``rebuild_progress`` like a lost shard's rebuild.

        Raises:
            ConfigurationError: bad collection name, a path escaping the root, or a marker this
                version does not read.
            StoreCorruptedError: the marker is damaged.
        """
        _, path = shard_path(settings.vector_store_path, collection)
        return shard_outdated(path)

    @property
    def path(self) -> Path:
        """The shard directory (``<root>/<collection>``, resolved)."""
        return self._path

    def _config(self) -> qe.EdgeConfig:
        return shard_config(self._vector_size, self._hnsw)

    def _backend_error(self, action: str, exc: BaseException) -> BackendError:
        return backend_error(self._collection, self._path, action, exc)

    def _load(self) -> qe.EdgeShard:
        return load_shard(self._path, self._collection, self._config(), self._lock_timeout)

    def _open(self) -> qe.EdgeShard:
        """Open the shard (creating it and its marker on first use); close it if preparing fails."""
        fingerprint = self._fingerprint()
        shard, created = open_shard(
            self._root, self._path, fingerprint, self._config(), self._lock_timeout
        )
        try:
            points = prepare_shard(shard, self._path, fingerprint)
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

    # ------------------------------------------------------------------ properties

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has run."""
        return self._shard is None

    def __repr__(self) -> str:
        return self._describe(f"path='{self._path}'")

    # ------------------------------------------------------------------ plumbing

    def _run(self, action: str, body: Callable[[qe.EdgeShard], _T]) -> _T:
        """Run ``body`` on the open shard under the index lock, translating driver errors."""
        with self._lock:
            return self._held(action, body)

    def _held(self, action: str, body: Callable[[qe.EdgeShard], _T]) -> _T:
        """Run ``body`` on the open shard (the caller holds the index lock)."""
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

    def _write(self, action: str, operation: qe.UpdateOperation, points: int) -> None:
        """Apply ``operation`` durably, journal it for a running build, count ``points`` new."""

        def write(shard: qe.EdgeShard) -> None:
            self._counts.clear()
            shard.update(operation)
            _disk.sync_wal(self._path)
            if self._journal is not None:
                self._journal.append(operation)
            self._pending += points
            self._flush_if_due(shard, points)

        self._run(action, write)

    def _flush_if_due(self, shard: qe.EdgeShard, points: int) -> None:
        """Count a write; flush the segments once :data:`_disk.SEGMENT_FLUSH` says so."""
        operations, written = self._unflushed[0] + 1, self._unflushed[1] + points
        if _disk.SEGMENT_FLUSH.due(operations, written):
            _disk.sync_segments(self._path)  # so the flush holding the GIL finds little to write
            shard.flush()
            operations, written = 0, 0
        self._unflushed = operations, written

    # ------------------------------------------------------------------ writes

    def _upsert_sync(self, points: Sequence[VectorPoint]) -> None:
        prepared = [
            qe.Point(parts.id, parts.named_vectors(), parts.payload)
            for parts in self._point_parts(points)
        ]
        if not prepared:
            return
        needed = _disk.SHARD_DISK_SPACE.to_write(len(prepared), self._vector_size)
        _disk.require_space(self._path, needed, collection=self._collection, action="write vectors")
        self._write("upsert points", qe.UpdateOperation.upsert_points(prepared), len(prepared))
        _log.debug("vector_points_upserted", collection=self._collection, count=len(prepared))
        self._maybe_build()

    async def upsert(self, points: Sequence[VectorPoint]) -> None:
        """See ``VectorIndex.upsert``: one Qdrant update per call, durable on return (its WAL).

        Raises:
            DimensionMismatchError: a vector has another length (``actual``) than
                ``vector_size`` (``expected``); nothing is written.
            InsufficientStorageError: too little free disk space for the write.
            BackendError: a vector holds NaN or infinity (nothing is written), the index is
                closed, or Qdrant Edge failed (cause chained).
        """
        await asyncio.to_thread(self._upsert_sync, list(points))

    def _delete_sync(self, ids: Sequence[MemoryId]) -> None:
        point_ids: list[qe.PointId] = list(point_ids_of(ids))
        if not point_ids:
            return
        needed = _disk.SHARD_DISK_SPACE.to_write(0, self._vector_size)
        _disk.require_space(
            self._path, needed, collection=self._collection, action="delete vectors"
        )
        self._write("delete points", qe.UpdateOperation.delete_points(point_ids), 0)
        _log.debug("vector_points_deleted", collection=self._collection, count=len(point_ids))

    async def delete(self, ids: Sequence[MemoryId]) -> None:
        """See ``VectorIndex.delete``: every surface's point id, durable on return.

        Raises:
            BackendError: the index is closed, or Qdrant Edge failed (cause chained).
        """
        await asyncio.to_thread(self._delete_sync, list(ids))

    # ------------------------------------------------------------------ reads

    def _scanned(
        self, shard: qe.EdgeShard, type_filter: qe.Filter | None, scope: tuple[str, ...] | None
    ) -> int:
        """The exact count of the points in the filter, cached per type ``scope`` until a write.

        A ``within`` scope (``scope`` None) is counted each time.
        """
        scanned = None if scope is None else self._counts.get(scope)
        if scanned is None:
            scanned = shard.count(qe.CountRequest(exact=True, filter=type_filter))
            if scope is not None:
                self._counts[scope] = scanned
        return scanned

    def _holds_scene_points(self, shard: qe.EdgeShard) -> bool:
        """Whether any point is a scene surface's (cached until the next write)."""
        held = self._counts.get(_SCENE_POINTS)
        if held is None:
            scene = qe.Filter(must_not=[surface_condition(None)])
            held = self._counts[_SCENE_POINTS] = shard.count(
                qe.CountRequest(exact=True, filter=scene)
            )
        return held > 0

    def _covers_all(self, shard: qe.EdgeShard, scanned: int) -> bool:
        """Whether ``scanned`` is every point of the shard (cached until the next write)."""
        total = self._counts.get(())
        if total is None:
            total = self._counts[()] = shard.count(qe.CountRequest(exact=True))
        return total == scanned

    def _ranked(
        self, shard: qe.EdgeShard, plan: SearchPlan
    ) -> tuple[bool, int, list[tuple[Found, float]]]:
        """Run the stages under the index lock: (approximate, scanned, typed hits)."""
        type_filter = plan_filter(plan, scene_points=self._holds_scene_points(shard))
        scope = scope_key(plan)
        hnsw = self._hnsw if self._indexed > 0 else None  # a finished build changes it
        scanned = self._scanned(shard, type_filter, scope)
        by_id = ids_only(plan)
        ranker = plan.ranker(scanned, SCORE, found if by_id else found_with_payload)
        if ranker is None:
            return hnsw is not None, scanned, []
        scan_filter = type_filter
        # a type filter only slows an exact scan that covers every point anyway (about 1.5 ms
        # of 4 at 5,000 x 1,536)
        if hnsw is None and scope is not None and type_filter is not None:
            scan_filter = None if self._covers_all(shard, scanned) else type_filter
        dense = qe.SearchParams(exact=True) if hnsw is None else qe.SearchParams(hnsw_ef=hnsw.ef)
        stages = [qe.Query.Nearest(vector, using=name) for name, vector in plan.queries]
        while ranker.pending:
            batch = qe.QueryBatchRequest(
                [
                    qe.QueryRequest(
                        limit=n,
                        query=stages[stage],
                        filter=scan_filter,
                        params=dense if stage == 0 else None,  # they concern dense only
                        score_threshold=plan.threshold(stage),
                        with_payload=not by_id,
                    )
                    for stage, n in ranker.pending
                ]
            )
            ranker.accept(shard.query_batch(batch))
        scored = self._scored(ranker.ranked(), ranker.ranks(), plan)
        return hnsw is not None, scanned, typed(shard, scored) if by_id else scored

    def _search_held(self, query: VectorQuery) -> VectorSearchResult:
        """Search, the caller holding the index lock."""
        plan = self._plan(query)
        approximate, scanned, scored = self._held("search", lambda shard: self._ranked(shard, plan))
        where = f"the vector shard of collection {self._collection!r}"
        return self._result(scored, scanned, where=where, approximate=approximate)

    def _search_sync(self, query: VectorQuery) -> VectorSearchResult:
        with self._lock:
            return self._search_held(query)

    async def search(self, query: VectorQuery) -> VectorSearchResult:
        """See ``VectorIndex.search``; the stages and fusion of :mod:`charmem_qdrant._recall`.

        The dense stage is an exact cosine scan, or an HNSW search with ``hnsw_ef`` once a graph
        was built (see the class); the hit score is its cosine, or the fused score when the
        lexical cue fused a BM25 stage (each stage its best ``max(4 * limit, 64)`` points, both
        in one ``query_batch``).

        Runs in the calling thread when the index is free, in a worker thread when a write holds
        it (so the event loop never waits for a flush): Qdrant Edge holds the GIL while it
        searches, so a worker thread freed nothing for the loop and cost a thread hop.

        Returns:
            At most ``query.limit`` hits, ``exhaustive`` completeness (``approximate`` once an
            HNSW graph holds points), ``scanned`` = points matching the type filter.

        Raises:
            DimensionMismatchError: the query vector has another length than ``vector_size``.
            BackendError: the query vector is not finite, the index is closed, or Qdrant Edge
                failed (cause chained).
        """
        if self._lock.acquire(blocking=False):
            try:
                return self._search_held(query)
            finally:
                self._lock.release()
        return await asyncio.to_thread(self._search_sync, query)

    async def point_ids(self, surface: VectorSurface = VectorSurface.CONTENT) -> set[MemoryId]:
        """See ``VectorIndex.point_ids`` (scrolled in pages of 1024).

        Raises:
            BackendError: the index is closed, or Qdrant Edge failed (cause chained).
        """
        surface = VectorSurface(surface)
        return await asyncio.to_thread(
            self._run, "list point ids", lambda s: surface_ids(s, surface)
        )

    def _count_sync(self) -> int:
        """Every point, of any surface (the HNSW builds' measure)."""
        return self._run("count points", lambda shard: shard.count(qe.CountRequest(exact=True)))

    async def count(self, surface: VectorSurface = VectorSurface.CONTENT) -> int:
        """See ``VectorIndex.count`` (an exact count).

        Raises:
            BackendError: the index is closed, or Qdrant Edge failed (cause chained).
        """
        surface = VectorSurface(surface)
        return await asyncio.to_thread(
            self._run, "count points", lambda s: count_surface(s, surface)
        )

    # ------------------------------------------------------------------ HNSW

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
        marker = shard_to_optimize(settings, collection)
        index = cls.from_settings(
            settings, collection, model_id=marker.model_id, vector_size=marker.vector_size
        )
        try:
            return index._optimize_blocking()
        finally:
            index._close_blocking()

    # ------------------------------------------------------------------ lifecycle

    def _close_blocking(self) -> None:
        """Release the shard and its lock in the calling thread; idempotent.

        Acknowledged writes are already durable (the WAL); closing flushes the segments, so the
        next load replays nothing, and frees the lock and memory. A
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
        await asyncio.to_thread(self._close_blocking)
