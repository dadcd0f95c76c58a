"""The HNSW build of the embedded index: copy the shard, optimize the copy in a child, swap it in.

Qdrant Edge builds an HNSW graph in ``EdgeShard.optimize()``, which holds the GIL for the whole
build, so the build never runs in the serving process: the shard is flushed and copied (the index
pauses for the copy), a child process (``python -m charmem_qdrant._hnsw_build``, at nice 10)
optimizes the copy while the index keeps serving and journals its writes, and the copy then
replaces the shard, the journal replayed on it (a second pause). A crash at any point leaves the
complete old shard or the complete new one: a swap record, ``<root>/.<collection>.hnsw-swap.json``,
names the old one until the new one holds every acknowledged write, and the next open rolls back
an unfinished swap (:func:`charmem_qdrant._shard.recover_swap`).

:class:`HnswBuilds` is the part of :class:`~charmem_qdrant.EdgeVectorIndex` that runs builds.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import qdrant_edge as qe

from charmem.errors import BackendError, CharmemError, ConfigurationError
from charmem.log import get_logger
from charmem_qdrant._hnsw import (
    HNSW_THRESHOLD_KEY,
    GraphRecord,
    HnswSettings,
    child_command,
    hnsw_from_settings,
)
from charmem_qdrant._marker import MARKER_FILE_NAME, ShardMarker, write_atomic
from charmem_qdrant._shard import (
    collection_lock,
    fsync_dir,
    recover_swap,
    shard_path,
    swap_sentinel,
)

__all__ = ["HnswBuildReport", "HnswBuilds", "shard_to_optimize"]

if TYPE_CHECKING:
    from charmem.settings import Settings

_log = get_logger("charmem_qdrant")


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


class BuildCancelledError(Exception):
    """The index closed while an HNSW build ran."""


class Build:
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


def shard_to_optimize(settings: Settings, collection: str) -> ShardMarker:
    """The marker of the shard ``charmem optimize`` builds: HNSW must be on, the shard exist.

    Raises:
        ConfigurationError: HNSW is off (``VECTOR_HNSW_THRESHOLD``), a malformed setting, or
            the collection has no vector shard under ``VECTOR_STORE_PATH``.
    """
    _, path = shard_path(settings.vector_store_path, collection)
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
    return marker


class HnswBuilds:
    """The HNSW builds of :class:`~charmem_qdrant.EdgeVectorIndex` (its state, declared here).

    The index lock ``_lock`` guards the shard and the HNSW state; ``_state_lock`` guards
    ``_build``. The build swaps the shard under the collection lock, so no opener ever sees the
    directory half swapped.
    """

    _collection: str
    _vector_size: int
    _root: Path
    _path: Path
    _lock_timeout: float
    _hnsw: HnswSettings | None
    _lock: threading.Lock
    _shard: qe.EdgeShard | None
    _indexed: int  # dense vectors in a graph
    _pending: int  # points written since the last build (or unindexed at open)
    _journal: list[qe.UpdateOperation] | None  # writes made during a build
    _counts: dict[tuple[str, ...], int]  # exact filtered point counts, cleared by writes
    _state_lock: threading.Lock
    _build: Build | None

    if TYPE_CHECKING:

        def _config(self) -> qe.EdgeConfig: ...
        def _load(self) -> qe.EdgeShard: ...
        def _count_sync(self) -> int: ...
        def _backend_error(self, action: str, exc: BaseException) -> BackendError: ...

    @property
    def hnsw(self) -> HnswSettings | None:
        """The HNSW settings, or ``None`` when every search is an exact scan.

        Given at open (``hnsw``, or the ``VECTOR_HNSW_*`` keys through ``from_settings``).
        """
        return self._hnsw

    @property
    def hnsw_indexed(self) -> int:
        """Dense vectors in an HNSW graph (count; 0 until a build finished).

        Searches report ``approximate`` recall once it is above 0.
        """
        return self._indexed

    @property
    def building(self) -> bool:
        """Whether an HNSW build is running (in the background, or for :meth:`optimize`).

        :meth:`close` stops it; the next open starts it again once enough points wait.
        """
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

    def _new_build(self, hnsw: HnswSettings) -> Build:
        """A build whose thread is not started yet (call holding ``_state_lock``)."""
        build = Build()
        build.thread = threading.Thread(
            target=self._build_main,
            args=(build, hnsw),
            name=f"charmem-hnsw-{self._collection}",
            daemon=True,
        )
        self._build = build
        return build

    def _build_main(self, build: Build, hnsw: HnswSettings) -> None:
        try:
            build.report = self._build_steps(build, hnsw)
            _log.info(
                "vector_hnsw_built", collection=self._collection, **attrs.asdict(build.report)
            )
        except BuildCancelledError:
            _log.info("vector_hnsw_build_stopped", collection=self._collection)
        except BaseException as exc:  # reported to optimize() and the log
            build.error = exc
            _log.warning("vector_hnsw_build_failed", collection=self._collection, error=str(exc))
        finally:
            self._end_build(build)

    def _end_build(self, build: Build) -> None:
        """Forget ``build`` and wake whoever waits for it."""
        with self._state_lock:
            if self._build is build:
                self._build = None
        build.done.set()

    def _build_steps(self, build: Build, hnsw: HnswSettings) -> HnswBuildReport:
        """Copy the shard, optimize the copy in a child process, swap it in (see the class)."""
        copy = self._root / f".{self._collection}.hnsw-{uuid.uuid4().hex}"
        try:
            start = time.perf_counter()
            with self._lock:
                shard = self._shard
                if shard is None or build.cancel.is_set():
                    raise BuildCancelledError
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
                    raise BuildCancelledError
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

    def _run_child(self, build: Build, copy: Path, hnsw: HnswSettings) -> dict[str, Any]:
        """Run the build child on ``copy``; its JSON report.

        Raises:
            BuildCancelledError: the index closed meanwhile.
            BackendError: the child failed (its stderr tail in the message).
        """
        command = child_command(str(copy), self._vector_size, hnsw)
        with build.guard:
            if build.cancel.is_set():
                raise BuildCancelledError
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
            raise BuildCancelledError
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
        sentinel = swap_sentinel(self._root, self._collection)
        with collection_lock(self._root, self._collection, self._lock_timeout):
            live = self._shard
            if live is None:
                raise BuildCancelledError
            write_atomic(sentinel, json.dumps({"tomb": tomb.name}))
            live.close()  # every acknowledged write is in its synced WAL (a rollback replays it)
            self._shard = None
            try:
                self._path.rename(tomb)
                copy.rename(self._path)
                fsync_dir(self._root)
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
                    recover_swap(self._root, self._path, self._collection)
                finally:
                    self._shard = self._load()
                raise self._backend_error("swap in the HNSW-indexed shard", exc) from exc
            sentinel.unlink()
            fsync_dir(self._root)
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
        return await asyncio.to_thread(self._optimize_blocking)

    def _optimize_blocking(self) -> HnswBuildReport:
        """:meth:`optimize` in the calling thread (blocks it, not the GIL)."""
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
