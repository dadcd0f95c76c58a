"""One pyoxigraph ``Store`` handle per path in a process, shared by reference count.

RocksDB allows one read-write opener of a directory; a process therefore keeps one handle per
path and every collection (one named graph each) shares it. A second *process* gets
:class:`~charmem.errors.StoreLockedError` after a short bounded retry.

A directory is checked before it is opened (:func:`charmem_oxigraph._disk.check_store_directory`).
After a "no space left on device" error RocksDB refuses every later write until the database is
opened again, so such an error marks the handle stale (:meth:`SharedStore.mark_stale`) and the
next use reopens it: once space is freed, the same graph stores work again.

RocksDB keeps what was written in memtables until it flushes them to its data files; left alone,
Oxigraph's write buffers (128 MiB per column family) hold most of a long ingest in memory. So each
handle flushes them before a write once :data:`DEFAULT_FLUSH_BYTES` of N-Triples text were written
through it since the last flush (``OXIGRAPH_FLUSH_MIB``, :func:`flush_bytes_from_settings`), in the
writer's worker thread: their memory stays bounded, whatever the store's size.

The last release flushes the store and closes it; when RocksDB left flushed write-ahead logs
behind (kept for reuse, see :func:`charmem_oxigraph._disk.holds_spent_logs`), it opens and closes
the store once more so RocksDB deletes them, and a closed store holds one empty log.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import tenacity
from charmem.errors import BackendError, ConfigurationError, StoreLockedError
from charmem.log import get_logger
from pyoxigraph import Store

from charmem_oxigraph import _disk
from charmem_oxigraph._cache import GraphCache

__all__ = [
    "DEFAULT_FLUSH_BYTES",
    "DEFAULT_LOCK_TIMEOUT",
    "FLUSH_KEY",
    "SharedStore",
    "acquire",
    "flush_bytes_from_settings",
    "is_lock_error",
    "release",
    "share",
]

#: Seconds an opener keeps retrying a store locked by another process before giving up.
DEFAULT_LOCK_TIMEOUT: Final = 1.0
#: N-Triples bytes written through a persistent handle between two flushes of RocksDB's
#: memtables: about 3,500 memories of one observation each (2.4 kB of text). A byte of text
#: held about 6 bytes of memtables (the quad indexes and the term table), so this bounds them
#: to ~50 MiB; the flush runs in the worker thread, and the write rate does not drop.
DEFAULT_FLUSH_BYTES: Final = 8 * 2**20
#: Settings key (read from ``Settings.extra``): mebibytes of N-Triples text written between two
#: memtable flushes of a persistent store (``0``: never flush while open, RocksDB's own bounds).
FLUSH_KEY: Final = "OXIGRAPH_FLUSH_MIB"

_REGISTRY: dict[Path, SharedStore] = {}
_REGISTRY_LOCK = threading.Lock()

_log = get_logger("charmem_oxigraph.registry")


class SharedStore:
    """One open pyoxigraph store, the lock serialising its writers, and its user count.

    Attributes:
        path: the store directory, or ``None`` for an in-memory store.
        write_lock: held for a whole check-then-write (pyoxigraph does not isolate them).
        users: graph stores (collections) using this handle; the last ``release`` closes it.
        flush_bytes: N-Triples bytes written between two memtable flushes (0: none while open).
        flushes: memtable flushes :meth:`flush_if_due` made so far.
    """

    def __init__(
        self,
        store: Store,
        path: Path | None,
        *,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        flush_bytes: int = DEFAULT_FLUSH_BYTES,
    ) -> None:
        self._store: Store | None = store
        self.path = path
        self.write_lock = threading.Lock()
        self.users = 1
        self.flush_bytes = flush_bytes
        self.flushes = 0
        self._unflushed = 0
        self._flush_lock = threading.Lock()
        self._caches: dict[str, GraphCache] = {}
        self._caches_lock = threading.Lock()
        self._closed = False
        self._stale = False
        self._reopen_lock = threading.Lock()
        self._lock_timeout = lock_timeout

    def cache(self, graph_iri: str) -> GraphCache:
        """The cache of one collection (named graph) of this store, shared by its graph stores.

        Coherent: every write to this store in this process goes through this handle's writers
        (:meth:`GraphCache.apply_write` under :attr:`write_lock`), and RocksDB's lock keeps other
        processes out of a persistent store.
        """
        with self._caches_lock:
            cache = self._caches.get(graph_iri)
            if cache is None:
                cache = self._caches[graph_iri] = GraphCache(coherent=True)
            return cache

    @property
    def store(self) -> Store:
        """The open pyoxigraph store (reopened first when :meth:`mark_stale` was called).

        Raises:
            BackendError: the handle was released.
            InsufficientStorageError: a stale store could not be reopened for lack of space.
        """
        if self._stale and not self._closed:
            self._reopen()
        store = self._store
        if store is None or self._closed:
            raise BackendError("the Oxigraph store was closed; open the graph store again")
        return store

    def wrote(self, size: int) -> None:
        """Count ``size`` bytes of N-Triples a write just committed (see :meth:`flush_if_due`)."""
        with self._flush_lock:
            self._unflushed += size

    def flush_if_due(self) -> None:
        """Flush the memtables if :attr:`flush_bytes` were written since the last flush.

        A writer calls it before its write, outside the writer lock, in its worker thread
        (``Store.flush`` releases the GIL: the event loop and readers go on meanwhile). Flushing
        before the next write rather than after the last one leaves a final write's memtables to
        the flush of ``close()``, as before, and bounds them all the same (the budget plus one
        batch). Every acknowledged write is durable before the flush (RocksDB's write-ahead log),
        so a failed flush is only logged; a full disk marks the handle stale, as a failed write
        does.
        """
        if self.path is None or self.flush_bytes <= 0:
            return
        with self._flush_lock:
            if self._unflushed < self.flush_bytes:
                return
            self._unflushed = 0
        try:
            self.store.flush()
        except (OSError, BackendError) as exc:
            if _disk.is_no_space_error(exc):
                self.mark_stale()
            _log.warning("oxigraph_flush_failed", path=str(self.path), error=str(exc))
            return
        self.flushes += 1

    @property
    def is_open(self) -> bool:
        """Whether the handle still holds its store."""
        return not self._closed

    def mark_stale(self) -> None:
        """Reopen the persistent store before its next use (after "no space left on device")."""
        if self.path is not None:
            self._stale = True

    def _reopen(self) -> None:
        """Close and open the store again; the caches start cold (they are rebuilt from reads)."""
        with self._reopen_lock:
            if not self._stale or self._closed or self.path is None:
                return
            old, self._store = self._store, None
            del old  # the last reference (bar in-flight reads): RocksDB closes and frees its LOCK
            with self._caches_lock:
                self._caches.clear()
            self._store = _open_persistent(self.path, self._lock_timeout)
            self._stale = False

    def _drop(self) -> Store | None:
        store, self._store = self._store, None
        self._closed = True
        self._caches.clear()
        return store


def is_lock_error(exc: BaseException) -> bool:
    """Whether ``exc`` is pyoxigraph's "store directory locked" error.

    pyoxigraph 0.5 raises a plain :class:`OSError` whose message names RocksDB's ``LOCK`` file:
    ``IO error: While lock file: <path>/LOCK: Resource temporarily unavailable`` (another process)
    or ``IO error: lock hold by current process ...`` (another handle in this process).
    """
    if not isinstance(exc, OSError):
        return False
    message = str(exc)
    return "/LOCK" in message or "\\LOCK" in message or "lock hold" in message or "lock file" in message


def _open_persistent(path: Path, lock_timeout: float) -> Store:
    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception(is_lock_error),
        stop=tenacity.stop_after_delay(lock_timeout),
        wait=tenacity.wait_exponential(multiplier=0.02, max=0.2),
        reraise=True,
    )
    _disk.check_store_directory(path)
    try:
        return retrying(Store, str(path))
    except (OSError, RuntimeError) as exc:
        if is_lock_error(exc):
            raise StoreLockedError(
                f"the Oxigraph store at {path} is held by another process (still locked after "
                f"{lock_timeout:g} s); close that process's charmem memory, or use another OXIGRAPH_PATH"
            ) from exc
        raise _disk.translate_error(path, "open the store", exc) from exc


def flush_bytes_from_settings(extra: Mapping[str, str]) -> int:
    """``OXIGRAPH_FLUSH_MIB`` of ``extra`` in bytes; :data:`DEFAULT_FLUSH_BYTES` when unset or blank.

    Raises:
        ConfigurationError: the value is not a finite number >= 0 (mebibytes).
    """
    raw = extra.get(FLUSH_KEY)
    if raw is None or not raw.strip():
        return DEFAULT_FLUSH_BYTES
    try:
        mebibytes = float(raw)
    except ValueError:
        mebibytes = math.nan
    if not math.isfinite(mebibytes) or mebibytes < 0:
        raise ConfigurationError(
            f"{FLUSH_KEY}={raw!r} must be a number of mebibytes >= 0 (graph text written between two "
            "flushes of the store's write buffers; 0 keeps them until close)",
            key=FLUSH_KEY,
        )
    return round(mebibytes * 2**20)


def acquire(
    path: Path | None,
    *,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    flush_bytes: int = DEFAULT_FLUSH_BYTES,
) -> SharedStore:
    """Open (or share) the store at ``path``; ``None`` opens a fresh in-memory store.

    Args:
        path: the store directory (created with its parents if missing), or ``None``.
        lock_timeout: seconds to keep retrying while another process holds the store.
        flush_bytes: N-Triples bytes written between two memtable flushes
            (:meth:`SharedStore.flush_if_due`); a handle already open keeps its own.

    Returns:
        SharedStore: the process's handle for that path, its ``users`` count incremented.

    Raises:
        StoreLockedError: another process holds the store after ``lock_timeout`` seconds.
        ConfigurationError: ``path`` holds a NUL character.
        StoreCorruptedError: the directory holds data but no complete store, or RocksDB found
            damaged files; nothing was created.
        InsufficientStorageError: the disk is full.
        BackendError: the directory cannot be created.
    """
    if path is None:
        try:
            return SharedStore(Store(), None)
        except OSError as exc:
            raise BackendError(f"could not create an in-memory Oxigraph store: {exc}") from exc
    if "\x00" in str(path):
        raise ConfigurationError(
            "the Oxigraph store path holds a NUL character, which no file system accepts",
            key="OXIGRAPH_PATH",
        )
    try:
        path.mkdir(parents=True, exist_ok=True)
        key = path.resolve()
    except OSError as exc:
        raise BackendError(f"could not create the Oxigraph store directory {path}: {exc}") from exc
    with _REGISTRY_LOCK:
        shared = _REGISTRY.get(key)
        if shared is not None:
            shared.users += 1
            return shared
        store = _open_persistent(key, lock_timeout)
        shared = SharedStore(store, key, lock_timeout=lock_timeout, flush_bytes=flush_bytes)
        _REGISTRY[key] = shared
        return shared


def share(shared: SharedStore) -> SharedStore:
    """Register one more user of an open handle (another collection on the same store).

    Raises:
        BackendError: the handle was already released.
    """
    with _REGISTRY_LOCK:
        if not shared.is_open:
            raise BackendError("the Oxigraph store was closed; open the graph store again")
        shared.users += 1
        return shared


def release(shared: SharedStore) -> None:
    """Drop one user; the last one flushes (persistent stores) and releases the store and its lock.

    After a successful flush, spent write-ahead logs are removed by one more open and close
    (:func:`_drop_spent_logs`); writing nothing leaves none, so a read-only session skips it.

    Raises:
        BackendError: the final flush failed (the handle is released anyway).
    """
    with _REGISTRY_LOCK:
        shared.users -= 1
        if shared.users > 0:
            return
        if shared.path is not None and _REGISTRY.get(shared.path) is shared:
            del _REGISTRY[shared.path]
        store = shared._drop()
        if store is None or shared.path is None:
            return
        # Flush under the registry lock so a concurrent re-open never meets the old handle's LOCK.
        try:
            store.flush()
        except OSError as exc:
            raise BackendError(f"could not flush the Oxigraph store at {shared.path}: {exc}") from exc
        finally:
            del store  # the last reference: pyoxigraph closes RocksDB and frees its LOCK
        _drop_spent_logs(shared.path)


def _drop_spent_logs(path: Path) -> None:
    """Open and close the flushed store at ``path`` once more if spent write-ahead logs remain.

    Every memtable was flushed, so these logs hold nothing a recovery needs; RocksDB itself deletes
    them while it opens the store (charmem deletes no log itself). Best effort, and only
    when :func:`charmem_oxigraph._disk.holds_spent_logs`: the open cost 0.07 s at 5,000 memories
    and 0.18 s at 50,000 (the flush before it about 0.3 s and 3 s). If it fails (another process
    took the store in between, or the handle is still alive in another thread), the logs stay
    until the next open.
    """
    if not _disk.holds_spent_logs(path):
        return
    try:
        store = Store(str(path))  # nothing is written through it: closing it needs no flush
    except (OSError, RuntimeError) as exc:
        _log.info("oxigraph_spent_logs_kept", path=str(path), error=str(exc))
        return
    del store
