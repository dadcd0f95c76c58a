"""The graph authority over pyoxigraph: :class:`OxigraphGraphStore` and its two modes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, Final, TypeVar, cast

from charmem.admin import LayoutMigration
from charmem.domain.graph import GraphBatch, GraphErasure, GraphExport, GraphWriteResult
from charmem.domain.ids import MemoryId
from charmem.errors import (
    BackendError,
    CharmemError,
    CollectionNotEmptyError,
    ConfigurationError,
)
from charmem.log import get_logger
from charmem.settings import Settings, validate_collection_name
from pyoxigraph import NamedNode, QuerySolution, QuerySolutions, RdfFormat, serialize

from charmem_oxigraph import _character as character
from charmem_oxigraph import _disk, _registry
from charmem_oxigraph import _layout as lay
from charmem_oxigraph import _vocab as v
from charmem_oxigraph import _writing as wr
from charmem_oxigraph._cache import GraphCache
from charmem_oxigraph._codec import CorruptNodeError
from charmem_oxigraph._reads import CachedGraphStore, GraphReader, Plan
from charmem_oxigraph._staging import staged_dump

__all__ = [
    "ON_LOOP_IDS",
    "InMemoryOxigraphGraphStore",
    "OxigraphGraphStore",
    "PersistentOxigraphGraphStore",
]

#: A read the cache answers entirely runs on the event loop (no worker thread) for up to this
#: many ids: a few milliseconds of dictionary work at most. Larger reads go to a worker thread,
#: which uses the cache too, so the event loop is never blocked for long.
ON_LOOP_IDS: Final = 2048

_log = get_logger("charmem_oxigraph.store")

T = TypeVar("T")


class OxigraphGraphStore(CachedGraphStore):
    """The graph authority of one collection, stored as one named graph in a pyoxigraph store.

    Implements :class:`charmem.ports.GraphStore`. The collection's triples live in the named graph
    ``urn:charmem:collection:<name>``; objects, links and lifecycle records are nodes
    ``urn:charmem:<type>:<uuid>`` described with the vocabulary ``urn:charmem:vocab#`` (see the
    package README). Collections opened on the same path in one process share one pyoxigraph
    handle (reference counted: the last :meth:`close` releases it) and one writer lock.

    Every port method is ``async``; the pyoxigraph work runs in a worker thread
    (:func:`asyncio.to_thread`). Each call runs at most one SPARQL query per kind of fact (ids
    bound with ``VALUES``), never one per id.

    Reads follow the shared plans of :mod:`charmem_oxigraph._reads` over the collection's
    :class:`~charmem_oxigraph._cache.GraphCache` (one per named graph of the shared handle):
    decoded objects and links (immutable), ids known absent, adjacency, currency facts and names,
    which the writer keeps in step with every write. A read the cache answers entirely returns
    without a worker thread or a query; otherwise only the missing ids are read. Writing to the
    pyoxigraph store behind this class's back (another ``pyoxigraph.Store`` handle) is not
    supported. Reads of more than :data:`ON_LOOP_IDS` ids always run in a worker thread.

    Build with :meth:`from_settings`, :meth:`open` or :meth:`for_collection`.
    """

    def __init__(self, shared: _registry.SharedStore, collection: str, *, check_layout: bool = True) -> None:
        """Bind an open shared handle to a collection (prefer :meth:`open`).

        Args:
            shared: an acquired handle; this graph store releases it on :meth:`close`.
            collection: the collection name (``[a-z0-9][a-z0-9_-]{0,127}``).
            check_layout: refuse a collection of another layout (off only for the migration).

        Raises:
            ConfigurationError: the collection name is not allowed.
            StoreLayoutError: the collection holds data of an older or unknown layout.
        """
        self._collection = validate_collection_name(collection)
        self._shared: _registry.SharedStore | None = shared
        self._graph_iri = v.collection_graph(collection)
        self._graph = NamedNode(self._graph_iri)
        if check_layout:
            with self._backend_errors("read the layout version"):
                state = self._drive(self._reader().layout())
            lay.check_layout(state, store=self._where(), migrate_hint=self._migrate_hint())

    def _where(self) -> str:
        path = None if self._shared is None else self._shared.path
        store = "the in-memory Oxigraph store" if path is None else f"the Oxigraph store at {path}"
        return f"{store} (collection {self._collection!r})"

    def _migrate_hint(self) -> str:
        path = None if self._shared is None else self._shared.path
        if path is not None and path.name == "oxigraph":  # the layout ``--store DIR`` makes
            return f"charmem migrate --store {shlex.quote(str(path.parent))} --collection {self._collection}"
        return f"OXIGRAPH_PATH={shlex.quote(str(path))} charmem migrate --collection {self._collection}"

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        collection: str,
        *,
        path: str | os.PathLike[str] | None = None,
        lock_timeout: float = _registry.DEFAULT_LOCK_TIMEOUT,
        flush_bytes: int = _registry.DEFAULT_FLUSH_BYTES,
    ) -> OxigraphGraphStore:
        """Open the graph store of ``collection`` (blocking; call it off the event loop).

        Args:
            collection: the collection name, checked before any directory is touched.
            path: the store directory (created if missing; shared with every other collection
                opened on it in this process), or ``None`` for a fresh in-memory store.
            lock_timeout: seconds to keep retrying while another process holds the store.
            flush_bytes: N-Triples bytes written between two memtable flushes (0: none while
                open; :meth:`charmem_oxigraph._registry.SharedStore.flush_if_due`).

        Returns:
            OxigraphGraphStore: an open graph store.

        Raises:
            ConfigurationError: the collection name is not allowed.
            StoreLockedError: another process holds the store at ``path``.
            StoreCorruptedError: ``path`` holds data but no complete store (e.g. its ``CURRENT``
                file was lost), or RocksDB found damaged files; nothing was created or removed.
            InsufficientStorageError: the disk is full.
            BackendError: the store cannot be opened.
        """
        validate_collection_name(collection)
        where = None if path is None else Path(path)
        shared = _registry.acquire(where, lock_timeout=lock_timeout, flush_bytes=flush_bytes)
        try:
            return cls(shared, collection)
        except BaseException:
            _registry.release(shared)
            raise

    @classmethod
    async def open_async(
        cls,
        collection: str,
        *,
        path: str | os.PathLike[str] | None = None,
        lock_timeout: float = _registry.DEFAULT_LOCK_TIMEOUT,
    ) -> OxigraphGraphStore:
        """:meth:`open` in a worker thread (opening may wait up to ``lock_timeout`` seconds).

        Args:
            collection: the collection name.
            path: the store directory, or ``None`` for a fresh in-memory store.
            lock_timeout: seconds to keep retrying while another process holds the store.

        Returns:
            OxigraphGraphStore: an open graph store.

        Raises:
            ConfigurationError: the collection name is not allowed.
            StoreLockedError: another process holds the store at ``path``.
            BackendError: the store cannot be opened.
        """
        return await asyncio.to_thread(cls.open, collection, path=path, lock_timeout=lock_timeout)

    @classmethod
    def from_settings(cls, settings: Settings, collection: str) -> OxigraphGraphStore:
        """Build the graph store ``settings.graph_store_mode`` selects (``persistent``/``in_memory``).

        Args:
            settings: ``GRAPH_STORE_MODE`` and, for ``persistent``, ``OXIGRAPH_PATH``.
            collection: the collection name.

        Returns:
            OxigraphGraphStore: an open graph store.

        Raises:
            ConfigurationError: the mode is not an Oxigraph mode, or the collection name is bad.
            StoreLockedError: another process holds the persistent store.
            BackendError: the store cannot be opened.
        """
        if settings.graph_store_mode == "persistent":
            return PersistentOxigraphGraphStore.from_settings(settings, collection)
        if settings.graph_store_mode == "in_memory":
            return InMemoryOxigraphGraphStore.from_settings(settings, collection)
        raise ConfigurationError(
            f"GRAPH_STORE_MODE={settings.graph_store_mode!r} is not served by charmem-oxigraph "
            "(it provides 'persistent' and 'in_memory')",
            key="GRAPH_STORE_MODE",
        )

    def for_collection(self, collection: str) -> OxigraphGraphStore:
        """Another collection (named graph) on the same store handle.

        Args:
            collection: the other collection's name.

        Returns:
            OxigraphGraphStore: a graph store sharing this handle; close each one.

        Raises:
            ConfigurationError: the collection name is not allowed.
            BackendError: this graph store is closed.
        """
        validate_collection_name(collection)
        shared = _registry.share(self._handle())
        try:
            return type(self)(shared, collection)
        except BaseException:
            _registry.release(shared)
            raise

    # -- properties ---------------------------------------------------------------------------

    @property
    def path(self) -> Path | None:
        """The store directory (``None`` for an in-memory store or once closed)."""
        return None if self._shared is None else self._shared.path

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._shared is None

    def __repr__(self) -> str:
        where = "closed" if self._shared is None else (str(self._shared.path or "in memory"))
        return f"{type(self).__name__}(collection={self._collection!r}, {where})"

    # -- plumbing -----------------------------------------------------------------------------

    def _handle(self) -> _registry.SharedStore:
        if self._shared is None or not self._shared.is_open:
            raise BackendError(f"the graph store of collection {self._collection!r} is closed; open it again")
        return self._shared

    @contextlib.contextmanager
    def _backend_errors(self, action: str) -> Iterator[None]:
        try:
            yield
        except CharmemError:
            raise
        except CorruptNodeError as exc:
            raise BackendError(
                f"stored data of collection {self._collection!r} is not a valid charmem graph "
                f"({exc}); check the store with charmem's admin tools"
            ) from exc
        except (OSError, RuntimeError, SyntaxError, ValueError) as exc:
            shared = self._shared
            if shared is not None and shared.path is not None:
                if _disk.is_no_space_error(exc):
                    shared.mark_stale()  # RocksDB refuses writes until reopened
                if _disk.is_no_space_error(exc) or _disk.is_corruption_error(exc):
                    raise _disk.translate_error(shared.path, action, exc) from exc
            raise BackendError(
                f"Oxigraph failed to {action} in collection {self._collection!r}: {exc}"
            ) from exc

    def _select(self, query: str) -> list[QuerySolution]:
        solutions = self._handle().store.query(query)
        if not isinstance(solutions, QuerySolutions):  # pragma: no cover - every query is a SELECT
            raise TypeError("expected SELECT solutions")
        return list(solutions)

    def _cache(self) -> GraphCache:
        return self._handle().cache(self._graph_iri)

    def _reader(self) -> GraphReader:
        return GraphReader(self._cache(), self._graph_iri)

    async def _read(self, action: str, plan: Plan[T], size: int) -> T:
        """Run ``plan`` on the event loop while the cache answers it, its queries in a worker thread.

        A plan about more than :data:`ON_LOOP_IDS` ids runs wholly in the worker thread.
        """
        if size > ON_LOOP_IDS:
            return await asyncio.to_thread(self._run, action, plan, None)
        with self._backend_errors(action):
            try:
                query = next(plan)
            except StopIteration as done:
                return cast(T, done.value)
        return await asyncio.to_thread(self._run, action, plan, query)

    def _run(self, action: str, plan: Plan[T], query: str | None) -> T:
        with self._backend_errors(action):
            return self._drive(plan, query)

    def _drive(self, plan: Plan[T], query: str | None = None) -> T:
        """Run ``plan`` to its answer in this thread (``query``: the one it has yielded, if any)."""
        try:
            query = next(plan) if query is None else query
            while True:
                query = plan.send(self._select(query))
        except StopIteration as done:
            return cast(T, done.value)

    # -- the GraphStore port: writes and administration ----------------------------------------

    async def write_batch(self, batch: GraphBatch) -> GraphWriteResult:
        """See :meth:`charmem.ports.GraphStore.write_batch`: check-then-write under the writer lock.

        The batch's ids and the ids they reference are looked up in one read (any kind); equal
        content (:func:`charmem.domain.rules.content_equal`; records by their canonical form) is
        skipped, any different content refuses the whole batch. New items are written in one
        transactional ``Store.load`` of their N-Triples (literals serialised by pyoxigraph).
        Acknowledged writes survive a process crash (RocksDB write-ahead log); :meth:`close`
        flushes.

        Raises:
            PurgedMemoryError: an id of the batch was purged; nothing was written.
            IdConflictError: an id is stored (as any kind) or repeated in the batch with different
                content; nothing was written.
            BackendError: Oxigraph failed; nothing was written.
        """
        return await asyncio.to_thread(self._write_batch, batch)

    def _write_batch(self, batch: GraphBatch) -> GraphWriteResult:
        if not (batch.objects or batch.links or batch.records):
            return GraphWriteResult()
        prepared = wr.prepare_batch(batch)
        shared = self._handle()
        shared.flush_if_due()  # every flush_bytes written, outside the writer lock
        with self._backend_errors("write a batch"), shared.write_lock:
            reader = GraphReader(shared.cache(self._graph_iri), self._graph_iri)
            inserted, existing, lines, marked = self._drive(reader.check_write(prepared))
            text = "\n".join(lines)
            if text:
                # transactional: all triples or none (parsing the text is as fast as taking Quads)
                shared.store.load(text, RdfFormat.N_TRIPLES, to_graph=self._graph)
            reader.cache.apply_write([prepared.items[i] for i in inserted], marked)
        shared.wrote(len(text))
        return GraphWriteResult(inserted_ids=tuple(inserted), existing_ids=tuple(existing))

    async def _record_character(self, character_id: MemoryId) -> MemoryId:
        return await asyncio.to_thread(self._record_character_locked, character_id)

    def _record_character_locked(self, character_id: MemoryId) -> MemoryId:
        shared = self._handle()
        with self._backend_errors("record the character id"), shared.write_lock:
            cache = shared.cache(self._graph_iri)
            found, lines = self._drive(character.record(cache, self._graph_iri, character_id))
            if lines:
                shared.store.load("\n".join(lines), RdfFormat.N_TRIPLES, to_graph=self._graph)
                cache.layout_recorded = True  # recorded now if it was missing
        return found

    async def erase(self, erasure: GraphErasure) -> None:
        """See :meth:`charmem.ports.GraphStore.erase`: one SPARQL update (atomic).

        Runs under the store's writer lock; ids that are already tombstones are skipped. A
        persistent store is then asked to compact (``Store.optimize``), so erased statements leave
        RocksDB's data files.

        Raises:
            BackendError: Oxigraph failed; nothing was erased.
        """
        await asyncio.to_thread(self._erase, erasure)

    def _erase(self, erasure: GraphErasure) -> None:
        if not len(erasure):
            return
        shared = self._handle()
        with self._backend_errors("erase purged memories"), shared.write_lock:
            cache = shared.cache(self._graph_iri)
            update = self._drive(GraphReader(cache, self._graph_iri).erase_update(erasure))
            if update is not None:
                shared.store.update(update)  # one transaction: all of it or nothing
                cache.clear()  # the read cache assumes stored items never change: an erasure breaks that
        if shared.path is not None:
            # Ask RocksDB to compact now, so the erased statements leave the data files rather than
            # waiting for a later compaction (best effort: the erasure is already committed).
            try:
                shared.store.optimize()
            except OSError as exc:
                _log.warning("oxigraph_optimize_failed", collection=self._collection, error=str(exc))

    async def export_graph(self, out: BinaryIO) -> GraphExport:
        """See :meth:`charmem.ports.GraphStore.export_graph`: the named graph as N-Quads.

        Holds the writer lock while writing, so the dump is one consistent state of this store.

        Raises:
            BackendError: Oxigraph failed or ``out`` could not be written.
        """
        return await asyncio.to_thread(self._export_graph, out)

    def _export_graph(self, out: BinaryIO) -> GraphExport:
        shared = self._handle()
        count = 0

        def counted() -> Iterator[Any]:
            nonlocal count
            for quad in shared.store.quads_for_pattern(None, None, None, self._graph):
                count += 1
                yield quad

        with self._backend_errors("export the graph"), shared.write_lock:
            serialize(counted(), out, RdfFormat.N_QUADS)
        return GraphExport(media_type=v.DUMP_MEDIA_TYPE, statements=count)

    async def import_graph(self, source: BinaryIO, media_type: str) -> int:
        """See :meth:`charmem.ports.GraphStore.import_graph`: N-Quads, in one transaction.

        The dump is checked whole first (:func:`charmem_oxigraph._staging.staged_dump`: every quad
        in this collection's named graph, a layout this charmem reads, every node decoding), then
        written, upgraded to the current layout, in one ``Store.extend``.

        Raises:
            CollectionNotEmptyError: the collection holds statements; nothing written.
            BackupFormatError: another media type, invalid N-Quads, another graph, an unknown
                layout version or a node that does not decode; nothing written.
            BackendError: Oxigraph failed; nothing written.
        """
        return await asyncio.to_thread(self._import_graph, source, media_type)

    def _import_graph(self, source: BinaryIO, media_type: str) -> int:
        wr.check_media_type(media_type)
        staged = staged_dump(source, self._graph)
        shared = self._handle()
        with self._backend_errors("import the graph"), shared.write_lock:
            present = self._drive(self._reader().statement_count())
            if present:
                raise CollectionNotEmptyError(
                    f"collection {self._collection!r} already holds {present} graph statements; "
                    "restore into an empty collection (another OXIGRAPH_PATH or collection)",
                    collection=self._collection,
                    counts={"graph statements": present},
                )
            shared.store.extend(staged.quads)  # transactional: all quads or none
            shared.cache(self._graph_iri).clear()  # absent ids may be stored now
        return staged.statements

    # -- layout migration -----------------------------------------------------------------------

    @classmethod
    def migrate_from_settings(cls, settings: Settings, collection: str) -> LayoutMigration:
        """Upgrade the collection at ``OXIGRAPH_PATH`` to the current layout (``charmem migrate``).

        Blocking. One transaction per batch of nodes (old triples out, record literal in), the
        version recorded once every node is rewritten: a crash leaves no node unreadable, running it
        again finishes the job, and on a current store it changes nothing.

        Returns:
            LayoutMigration: what was found and done.

        Raises:
            ConfigurationError: the collection name is not allowed, or the mode is not persistent.
            StoreLayoutError: the store records a newer layout than this charmem knows.
            StoreLockedError: another process holds the store.
            BackendError: Oxigraph failed (batches already rewritten stay so: run it again).
        """
        validate_collection_name(collection)
        if settings.graph_store_mode != "persistent":
            raise ConfigurationError(
                f"charmem migrate upgrades a persistent or service graph store, not GRAPH_STORE_MODE="
                f"{settings.graph_store_mode!r}",
                key="GRAPH_STORE_MODE",
            )
        shared = _registry.acquire(Path(settings.oxigraph_path))
        try:
            store = cls(shared, collection, check_layout=False)
        except BaseException:
            _registry.release(shared)
            raise
        try:
            return store.migrate_layout()
        finally:
            store._close()

    def migrate_layout(self) -> LayoutMigration:
        """Upgrade this collection to the current layout, in place (see :meth:`migrate_from_settings`).

        Raises:
            StoreLayoutError: the store records a newer layout than this charmem knows.
            BackendError: Oxigraph failed.
        """
        started, shared = time.perf_counter(), self._handle()
        with self._backend_errors("migrate the graph layout"), shared.write_lock:
            outcome = self._migrate_locked(shared)
        return lay.migration_report(self._collection, self._where(), outcome, started)

    def _migrate_locked(self, shared: _registry.SharedStore) -> lay.MigrationOutcome:
        """Rewrite every layout-1 node, then record the version (caller holds the writer lock)."""
        outcome = lay.migrate_in_place(
            self._drive,
            shared.store.update,
            self._graph_iri,
            store=self._where(),
            migrate_hint=self._migrate_hint(),
        )
        shared.cache(self._graph_iri).clear()
        return outcome

    async def close(self) -> None:
        """Release this collection's use of the store; the last user flushes and unlocks it.

        Idempotent. Acknowledged writes are already durable.

        Raises:
            BackendError: the final flush failed (the handle is released anyway).
        """
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        shared, self._shared = self._shared, None
        if shared is not None:
            _registry.release(shared)


class PersistentOxigraphGraphStore(OxigraphGraphStore):
    """``GRAPH_STORE_MODE=persistent``: ``pyoxigraph.Store(OXIGRAPH_PATH)`` on disk.

    Entry point ``persistent`` of the group ``charmem.graph_stores``.
    """

    @classmethod
    def from_settings(cls, settings: Settings, collection: str) -> OxigraphGraphStore:
        """Open ``collection`` in the store at ``settings.oxigraph_path`` (blocking).

        Args:
            settings: ``OXIGRAPH_PATH`` (default ``./data/oxigraph``), ``OXIGRAPH_FLUSH_MIB``.
            collection: the collection name, checked before the directory is touched.

        Returns:
            OxigraphGraphStore: an open graph store sharing the process's handle for that path.

        Raises:
            ConfigurationError: the collection name or ``OXIGRAPH_FLUSH_MIB`` is not allowed.
            StoreLockedError: another process holds the store (after a ~1 s bounded retry).
            StoreCorruptedError: the directory holds data but no complete store, or damaged
                files (see :meth:`open`).
            InsufficientStorageError: the disk is full.
            BackendError: the store cannot be opened.
        """
        flushing = _registry.flush_bytes_from_settings(settings.extra)
        return cls.open(collection, path=settings.oxigraph_path, flush_bytes=flushing)

    @classmethod
    def exists_from_settings(cls, settings: Settings, collection: str) -> bool:
        """Whether a store exists at ``OXIGRAPH_PATH`` (opening would create an empty one).

        Args:
            settings: ``OXIGRAPH_PATH``.
            collection: the collection name (checked; every collection shares the store).

        Returns:
            bool: the directory exists and is not empty.

        Raises:
            ConfigurationError: the collection name is not allowed.
        """
        validate_collection_name(collection)
        path = Path(settings.oxigraph_path)
        return path.is_dir() and any(path.iterdir())


class InMemoryOxigraphGraphStore(OxigraphGraphStore):
    """``GRAPH_STORE_MODE=in_memory``: a fresh ``pyoxigraph.Store()`` that lives in memory.

    Entry point ``in_memory`` of the group ``charmem.graph_stores``. Each :meth:`from_settings`
    call opens a new, empty store; use :meth:`for_collection` to put several collections in one.
    """

    @classmethod
    def from_settings(cls, settings: Settings, collection: str) -> OxigraphGraphStore:
        """Open ``collection`` in a new in-memory store.

        Args:
            settings: not read (the mode needs no keys).
            collection: the collection name.

        Returns:
            OxigraphGraphStore: an open, empty graph store.

        Raises:
            ConfigurationError: the collection name is not allowed.
            BackendError: the store cannot be created.
        """
        return cls.open(collection)
