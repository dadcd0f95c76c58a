"""Disk work around a Qdrant Edge shard: free space, completeness, its WAL lock and fsyncs.

Qdrant Edge keeps a shard in memory-mapped, sparse files: ``wal/open-*`` segments and storage
chunks of 32 MiB each whose pages get disk blocks only when touched. On a full file system a
touched page cannot get one and the kernel kills the process with ``SIGBUS`` (measured with
1-3 MB free on a tmpfs: creating and loading a shard both died). So space is checked before the
shard code runs (:func:`require_space`), by :data:`SHARD_DISK_SPACE`'s rule.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import attrs
from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

from charmem.errors import InsufficientStorageError, StoreCorruptedError, StoreLockedError

try:  # POSIX; elsewhere a drop opens the shard to take its lock
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "REBUILD_HINT",
    "SEGMENT_FLUSH",
    "SHARD_DISK_SPACE",
    "SegmentFlush",
    "ShardDiskSpace",
    "check_complete",
    "free_bytes",
    "require_space",
    "sync_segments",
    "sync_wal",
    "wal_held",
    "wal_lock",
]

_MIB: Final = 1024 * 1024

#: How to get a collection's vectors back: they are derived from the graph.
REBUILD_HINT: Final = (
    "the vectors are derived data: rebuild them from the graph with `charmem rebuild-vectors "
    "--drop` or CharacterMemory.open(settings, collection, rebuild_vectors=True)"
)


@attrs.frozen(kw_only=True)
class ShardDiskSpace:
    """Free space (bytes) a shard needs before Qdrant Edge may touch it.

    Attributes:
        create: to create a new shard: 4 MiB. A new shard's files are 175 MB apparent but
            sparse; creating it touched 3.2 MB of them on a tmpfs (216 KB of ext4 blocks), so
            4 MiB covers it with a margin.
        load_margin: to load an existing shard, besides the unallocated parts of its files
            (:func:`unallocated_bytes`): 1 MiB. Loading maps every storage chunk and, on a tmpfs,
            fills its holes (37.8 MB for a new shard); a disk file system allocates them only
            when written, so the rule is pessimistic there but never short.
        write_margin: before each write, besides ``per_point`` for each point: 2 MiB (the WAL
            record, and pages of the id tracker, payload and sparse storage a write touches).
        per_point: per point written, besides ``write_margin``: 4 KiB plus 8 bytes per
            dimension (the dense vector in the storage and in the WAL).
    """

    create: int = 4 * _MIB
    load_margin: int = 1 * _MIB
    write_margin: int = 2 * _MIB
    per_point: int = 4096

    def to_load(self, shard: Path) -> int:
        """Bytes needed to load the shard at ``shard``."""
        return unallocated_bytes(shard) + self.load_margin

    def to_write(self, points: int, vector_size: int) -> int:
        """Bytes needed to write ``points`` points of ``vector_size`` dimensions."""
        return self.write_margin + points * (self.per_point + 8 * vector_size)


#: The rule the embedded index applies (see :class:`ShardDiskSpace`).
SHARD_DISK_SPACE: Final = ShardDiskSpace()


@attrs.frozen(kw_only=True)
class SegmentFlush:
    """When the writes since a shard's segments were last flushed call for ``flush()``.

    An update lands in the write-ahead log (made durable by :func:`sync_wal`) and in the
    segments' memory maps; ``EdgeShard.flush()`` writes the segments out and acknowledges the
    log, so a load replays only the updates after it. The flush holds the GIL for about 20
    ``fsync``/``msync`` calls (12 ms median, 340 ms worst at 10,000 x 384 on a busy disk, all of
    it an event-loop stall), so it runs only when the replay it saves grows past these bounds.

    Attributes:
        operations: write operations since the last flush (count): 128.
        points: points written since the last flush (count): 1,024 (about 10 MB of log at
            1,536 dimensions).
    """

    operations: int = 128
    points: int = 1024

    def due(self, operations: int, points: int) -> bool:
        """Whether ``operations`` updates of ``points`` points since the last flush need one."""
        return operations >= self.operations or points >= self.points


#: The rule the embedded index applies (see :class:`SegmentFlush`).
SEGMENT_FLUSH: Final = SegmentFlush()


def _fsync(path: str) -> None:
    """``fsync`` the file or directory at ``path``; one that vanished meanwhile is skipped."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_wal(shard: Path) -> None:
    """Make every update applied to the shard durable: ``fsync`` its WAL files and directory.

    Qdrant Edge 0.9's ``update`` writes the WAL record into a memory-mapped segment and syncs
    nothing (traced: no ``msync`` or ``fsync`` until ``flush()``); the page cache already
    survives a process kill, and ``fsync`` on Linux writes a file's pages dirtied through a
    shared map too, so after this call the record survives an OS crash as well. ``os.fsync``
    releases the GIL, so the event loop runs meanwhile.

    Raises:
        OSError: the file system refused the sync.
    """
    wal = shard / "wal"
    with os.scandir(wal) as entries:
        files = [entry.path for entry in entries if entry.is_file()]
    for name in files:
        _fsync(name)
    _fsync(str(wal))  # a segment the update closed was renamed


def sync_segments(shard: Path) -> None:
    """``fsync`` every file under ``<shard>/segments`` (the GIL released), before ``flush()``.

    ``flush()`` then finds the pages already written, and holds the GIL for ~9 ms instead of
    ~67 ms (median at 10,000 x 384 on a busy disk, 20 updates between flushes).

    Raises:
        OSError: the file system refused the sync.
    """
    for directory, _dirs, files in os.walk(shard / "segments"):
        for name in files:
            _fsync(os.path.join(directory, name))


def unallocated_bytes(shard: Path) -> int:
    """Bytes of the shard's files that have no disk blocks yet (holes in sparse files)."""
    total = 0
    for directory, _dirs, files in os.walk(shard):
        for name in files:
            try:
                stat = os.stat(os.path.join(directory, name))
            except OSError:
                continue
            blocks = getattr(stat, "st_blocks", None)
            allocated = stat.st_size if blocks is None else blocks * 512
            total += max(0, stat.st_size - allocated)
    return total


def free_bytes(path: Path) -> int:
    """Bytes this process may still write on the file system of ``path`` (or its nearest parent)."""
    probe = path
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    return shutil.disk_usage(probe).free


def require_space(path: Path, needed: int, *, collection: str, action: str) -> None:
    """Refuse ``action`` on the shard at ``path`` unless ``needed`` bytes are free there.

    Raises:
        InsufficientStorageError: fewer bytes are free; nothing was touched.
    """
    available = free_bytes(path)
    if available >= needed:
        return
    raise InsufficientStorageError(
        f"not enough free disk space to {action} of collection {collection!r} at {path}: "
        f"{needed / _MIB:.1f} MiB needed, {available / _MIB:.1f} MiB free. Qdrant Edge's "
        "memory-mapped files would crash the process on a full disk, so nothing was touched; "
        "free some space and call again",
        path=str(path),
        needed=needed,
        available=available,
    )


def check_complete(shard: Path, collection: str) -> None:
    """Refuse to load a shard directory missing part of what every shard has.

    A shard holds ``edge_config.json``, ``wal/`` and ``segments/``; Qdrant Edge loads one
    without ``segments/`` as an empty shard, which would hide the loss.

    Raises:
        StoreCorruptedError: one of them is missing.
    """
    missing = [
        name for name in ("edge_config.json", "wal", "segments") if not (shard / name).exists()
    ]
    if missing:
        raise StoreCorruptedError(
            f"the vector shard of collection {collection!r} at {shard} is damaged: "
            f"{', '.join(missing)} missing; {REBUILD_HINT}",
            path=str(shard),
        )


class _HeldError(Exception):
    """The WAL lock is held by another opener (retried)."""


def wal_held(shard: Path) -> bool:
    """Whether another opener (in any process, this one included) holds ``<shard>/wal``'s lock.

    Qdrant Edge 0.9's load touches a shard's files before it finds the WAL locked, and what it
    touches breaks the flushes of the opener holding the shard (measured: every later upsert of
    that opener failed with "Failed to flush mmap sparse vector gridstore"). So a loader asks
    first, taking and releasing the lock itself (``flock`` conflicts between open files, so an
    opener in this process is seen too).

    Returns:
        bool: True when the lock is held; False when it is free, or cannot be taken here (no
        ``fcntl``, no ``wal`` directory: a new or damaged shard, where Qdrant Edge decides).
    """
    wal = shard / "wal"
    if fcntl is None or not wal.is_dir():
        return False
    fd = os.open(wal, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


@contextlib.contextmanager
def wal_lock(shard: Path, collection: str, timeout: float) -> Iterator[bool]:
    """Hold the lock Qdrant Edge takes on ``<shard>/wal`` without loading the shard.

    Qdrant Edge 0.9 takes ``flock(LOCK_EX | LOCK_NB)`` on the ``wal`` directory while a shard is
    open, so holding it proves no opener (in any process) uses the shard, even a damaged one
    that could not be loaded.

    Yields:
        bool: whether the lock was taken (False without ``fcntl``, or without a ``wal``
        directory, where nothing can hold it).

    Raises:
        StoreLockedError: another opener held it for ``timeout`` seconds.
    """
    wal = shard / "wal"
    if fcntl is None or not wal.is_dir():
        yield False
        return
    fd = os.open(wal, os.O_RDONLY)
    try:

        def take() -> None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as exc:
                raise _HeldError from exc

        try:
            Retrying(
                retry=retry_if_exception_type(_HeldError),
                stop=stop_after_delay(timeout),
                wait=wait_fixed(0.05),
                reraise=True,
            )(take)
        except _HeldError as exc:
            raise StoreLockedError(
                f"the vector shard {shard} of collection {collection!r} is open in another "
                f"opener (still locked after {timeout:g} s); close it first"
            ) from exc
        yield True
    finally:
        os.close(fd)
