"""The embedded shard's files: its path, its locks, opening retries, swap recovery and drop.

Everything here is about one Qdrant Edge shard directory, ``<root>/<collection>``, and the files
beside it in the vector store root: the collection lock ``.<collection>.lock`` (held while the
directory may move), the HNSW swap record ``.<collection>.hnsw-swap.json`` and the hidden build
copies and tombstones. :class:`charmem_qdrant.EdgeVectorIndex` opens, swaps and drops shards
through these functions.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

import filelock
import qdrant_edge as qe
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_fixed

from charmem.errors import (
    BackendError,
    ConfigurationError,
    StoreCorruptedError,
    StoreLayoutError,
    StoreLockedError,
)
from charmem.log import get_logger
from charmem.settings import validate_collection_name
from charmem_qdrant import _disk
from charmem_qdrant._marker import MARKER_FILE_NAME, SCHEMA_VERSION, ShardMarker
from charmem_qdrant._recall import PAYLOAD_SURFACE, PAYLOAD_TYPE

__all__ = [
    "ShardHeldError",
    "backend_error",
    "collection_lock",
    "drop_shard",
    "fsync_dir",
    "holds_shard_data",
    "is_lock_error",
    "load_shard",
    "open_shard",
    "open_with_retry",
    "prepare_shard",
    "recover_swap",
    "remove_stale_builds",
    "shard_outdated",
    "shard_path",
    "swap_sentinel",
]

_LOCK_RETRY_WAIT: Final = 0.05  # seconds between attempts to take a held shard lock

_log = get_logger("charmem_qdrant")


class ShardHeldError(Exception):
    """Another opener holds the shard's WAL lock (found before loading; retried like Edge's)."""


def is_lock_error(exc: BaseException) -> bool:
    """Whether ``exc`` is Qdrant Edge refusing a shard whose WAL another opener holds.

    Qdrant Edge 0.9 takes ``flock(LOCK_EX | LOCK_NB)`` on ``<shard>/wal`` and, when it is held
    (by another process, or by another open shard object in this one), raises a bare
    ``Exception("Service runtime error: failed to open WAL ...: Can't init WAL:
    Kind(WouldBlock)")``.
    """
    return "WouldBlock" in str(exc)


def holds_shard_data(path: Path) -> bool:
    """Whether the directory ``path`` holds shard data (segments, a WAL or an Edge config)."""
    return any((path / name).exists() for name in ("segments", "wal", "edge_config.json"))


def shard_path(root: str | os.PathLike[str], collection: str) -> tuple[Path, Path]:
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


def backend_error(collection: str, path: Path, action: str, exc: BaseException) -> BackendError:
    return BackendError(
        f"Qdrant Edge failed to {action} for collection {collection!r} at {path}: {exc} (if it "
        "keeps failing, the shard's files may be damaged: the vectors are derived data, rebuild "
        "them from the graph with `charmem rebuild-vectors --drop`)"
    )


def open_with_retry(
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
        retry=retry_if_exception(is_lock_error),
        stop=stop_after_delay(lock_timeout),
        wait=wait_fixed(_LOCK_RETRY_WAIT),
        reraise=True,
    )
    try:
        return retrying(opener)
    except Exception as exc:
        if is_lock_error(exc):
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
        return backend_error(collection, path, action, exc)
    return StoreCorruptedError(
        f"Qdrant Edge cannot {action} of collection {collection!r} at {path}, which looks "
        f"damaged ({exc}); {_disk.REBUILD_HINT}",
        path=str(path),
    )


def fsync_dir(path: Path) -> None:
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
def collection_lock(root: Path, collection: str, timeout: float) -> Iterator[None]:
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
        raise backend_error(collection, root, "create the vector store root", exc) from exc
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


def swap_sentinel(root: Path, collection: str) -> Path:
    return root / f".{collection}.hnsw-swap.json"


def recover_swap(root: Path, path: Path, collection: str) -> None:
    """Undo an HNSW swap a crash interrupted (call holding :func:`collection_lock`).

    The sentinel exists from before the old shard moves away until the new one holds every
    acknowledged write, so while it exists the old shard (the tombstone it names) is the
    complete one: put it back.
    """
    sentinel = swap_sentinel(root, collection)
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
    fsync_dir(root)


def remove_stale_builds(root: Path, collection: str) -> None:
    """Delete build copies and swap tombstones left by a crash (call holding the shard)."""
    for pattern in (f".{collection}.hnsw-*", f".{collection}.pre-hnsw-*"):
        for stale in root.glob(pattern):
            if stale.is_dir():
                shutil.rmtree(stale, ignore_errors=True)


def drop_shard(root: str | os.PathLike[str], collection: str, lock_timeout: float) -> bool:
    """Remove the shard of ``collection`` under ``root``, never loading it.

    The lock Qdrant Edge holds on the shard's WAL is taken first (so a shard in use is never
    removed), the directory is renamed to a hidden tombstone while the lock is held, then the
    lock is released and the tombstone deleted. An interrupted HNSW swap is rolled back first.
    Returns and raises as :meth:`charmem_qdrant.EdgeVectorIndex.drop`.
    """
    root_path, path = shard_path(root, collection)
    if not path.exists() and not swap_sentinel(root_path, collection).exists():
        return False
    tombstone = path.with_name(f".{collection}.dropped-{uuid.uuid4().hex}")
    with collection_lock(root_path, collection, lock_timeout):
        recover_swap(root_path, path, collection)
        if not path.exists():
            return False
        with _disk.wal_lock(path, collection, lock_timeout) as locked:
            shard: qe.EdgeShard | None = None
            if not locked and holds_shard_data(path):  # no flock here: the shard's own lock
                shard = open_with_retry(
                    collection,
                    path,
                    lock_timeout,
                    "open the shard to drop it",
                    lambda: qe.EdgeShard.load(str(path)),
                )
            try:
                path.rename(tombstone)
            except OSError as exc:
                raise backend_error(collection, path, "drop the shard", exc) from exc
            finally:
                if shard is not None:
                    shard.close()
        remove_stale_builds(root_path, collection)
    shutil.rmtree(tombstone, ignore_errors=True)
    _log.info("vector_shard_dropped", collection=collection, path=str(path))
    return True


def load_shard(
    path: Path, collection: str, config: qe.EdgeConfig, lock_timeout: float
) -> qe.EdgeShard:
    """Load the existing shard at ``path``, waiting up to ``lock_timeout`` s for its lock.

    Raises:
        StoreLockedError: still held by another opener after ``lock_timeout`` seconds.
        StoreCorruptedError: the shard exists but does not load.
        BackendError: any other driver failure (cause chained).
    """

    def load() -> qe.EdgeShard:
        # never let Qdrant Edge load a shard another opener holds (see _disk.wal_held)
        if _disk.wal_held(path):
            raise ShardHeldError(f"the WAL of {path} is locked: WouldBlock")
        return qe.EdgeShard.load(str(path), config)

    return open_with_retry(collection, path, lock_timeout, "open the shard", load)


def _create_shard(
    root: Path, path: Path, collection: str, config: qe.EdgeConfig, lock_timeout: float
) -> qe.EdgeShard:
    """Create a new shard; if another opener created it meanwhile, open that one."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise backend_error(collection, path, "create the vector store root", exc) from exc
    try:
        return qe.EdgeShard.create(str(path), config)
    except Exception as exc:
        if not is_lock_error(exc) and not holds_shard_data(path):
            raise backend_error(collection, path, "create the shard", exc) from exc
    return load_shard(path, collection, config, lock_timeout)


def open_shard(
    root: Path, path: Path, fingerprint: ShardMarker, config: qe.EdgeConfig, lock_timeout: float
) -> tuple[qe.EdgeShard, bool]:
    """Open the shard at ``path``, creating it on first use; (shard, whether it was created).

    An HNSW swap a crash interrupted is rolled back first. The marker is checked before waiting
    for the shard's lock (a mismatch fails fast), the free disk space before loading or
    creating; stale build copies are removed once the shard is held. Check the marker again
    with :func:`prepare_shard` (another opener may have written it meanwhile).

    Raises:
        ConfigurationError, DimensionMismatchError, EmbedderMismatchError: the marker does not
            match ``fingerprint``.
        InsufficientStorageError: too little free disk space.
        StoreLockedError, StoreCorruptedError, BackendError: as :func:`load_shard`.
    """
    collection = fingerprint.collection
    with collection_lock(root, collection, lock_timeout):
        recover_swap(root, path, collection)
        marker = ShardMarker.read(path / MARKER_FILE_NAME)
        if marker is not None:
            _check_marker(marker, fingerprint, path)
        created = not holds_shard_data(path)
        if created:
            needed, action = _disk.SHARD_DISK_SPACE.create, "create the vector shard"
        else:
            _disk.check_complete(path, collection)
            needed, action = _disk.SHARD_DISK_SPACE.to_load(path), "load the vector shard"
        _disk.require_space(path, needed, collection=collection, action=action)
        if created:
            shard = _create_shard(root, path, collection, config, lock_timeout)
        else:
            shard = load_shard(path, collection, config, lock_timeout)
        with contextlib.suppress(OSError):  # leftovers are retried at the next open
            remove_stale_builds(root, collection)
    return shard, created


def prepare_shard(shard: qe.EdgeShard, path: Path, fingerprint: ShardMarker) -> int:
    """Check or write the marker and index the ``object_type`` payload; the points (count).

    A shard left without a marker by a crash between creation and marker write is adopted if
    empty.

    Raises:
        ConfigurationError: the shard holds points but no marker, or the marker names another
            collection.
        DimensionMismatchError, EmbedderMismatchError: the marker does not match ``fingerprint``.
    """
    marker_path = path / MARKER_FILE_NAME
    marker = ShardMarker.read(marker_path)
    if marker is not None:
        _check_marker(marker, fingerprint, path)
    else:
        points = shard.count(qe.CountRequest(exact=True))
        if points:
            raise ConfigurationError(
                f"the directory {path} holds a vector shard with {points} points "
                f"but no {MARKER_FILE_NAME}, so its collection and embedder are unknown; "
                "move it away and rebuild the collection's vectors with "
                "rebuild_vector_index()",
                key="VECTOR_STORE_PATH",
            )
        fingerprint.write(marker_path)
    if marker is not None and marker.schema_version < SCHEMA_VERSION:
        _upgrade_empty(shard, marker, fingerprint, path)
    indexed = shard.info().payload_schema
    missing = [key for key in (PAYLOAD_TYPE, PAYLOAD_SURFACE) if key not in indexed]
    for key in missing:
        shard.update(qe.UpdateOperation.create_field_index(key, qe.PayloadSchemaType.Keyword))
    if missing:
        shard.flush()
    return shard.count(qe.CountRequest(exact=True))


def shard_outdated(path: Path) -> bool:
    """Whether the shard at ``path`` has a marker of an older schema version than this package's.

    Raises:
        StoreCorruptedError, ConfigurationError: as :meth:`ShardMarker.read`.
    """
    marker = ShardMarker.read(path / MARKER_FILE_NAME)
    return marker is not None and marker.schema_version < SCHEMA_VERSION


def _upgrade_empty(
    shard: qe.EdgeShard, marker: ShardMarker, fingerprint: ShardMarker, path: Path
) -> None:
    """Record the current schema in an empty shard of an older one; refuse one holding points.

    Its points lack what the current schema writes (the scene surfaces), which only the graph
    can give back: ``CharacterMemory.open`` drops and rebuilds such a shard before opening it
    (``outdated`` of the ``embedded`` factory), so only a direct opener meets the refusal.

    Raises:
        StoreLayoutError: the shard holds points.
    """
    points = shard.count(qe.CountRequest(exact=True))
    if points:
        raise StoreLayoutError(
            f"the vector shard {path} has schema version {marker.schema_version} and {points} "
            f"points; this charmem-qdrant writes version {SCHEMA_VERSION} (scene surfaces). "
            "Rebuild it from the graph: open the collection with CharacterMemory.open (it "
            "rebuilds an outdated shard, VECTOR_REBUILD_ON_OPEN), or "
            "`charmem rebuild-vectors --drop`",
            store=str(path),
            found=marker.schema_version,
            expected=SCHEMA_VERSION,
        )
    fingerprint.write(path / MARKER_FILE_NAME)
    _log.info(
        "vector_shard_upgraded",
        path=str(path),
        found=marker.schema_version,
        expected=SCHEMA_VERSION,
    )


def _check_marker(marker: ShardMarker, fingerprint: ShardMarker, path: Path) -> None:
    marker.check(
        collection=fingerprint.collection,
        model_id=fingerprint.model_id,
        vector_size=fingerprint.vector_size,
        path=path,
    )
