"""The graph authority over pyoxigraph: :class:`OxigraphGraphStore` and its two modes."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, Final

from charmem.domain.graph import (
    GraphBatch,
    GraphErasure,
    GraphExport,
    GraphWriteResult,
    LifecycleRecord,
    Tombstone,
)
from charmem.domain.ids import MemoryId
from charmem.domain.model import MemoryLink, MemoryObject, ObjectType, Relation
from charmem.domain.retrieval import CurrencyStatus
from charmem.errors import (
    BackendError,
    BackupFormatError,
    CharmemError,
    CollectionNotEmptyError,
    ConfigurationError,
)
from charmem.log import get_logger
from charmem.ports import EpisodeTurn
from charmem.settings import Settings, validate_collection_name
from pyoxigraph import NamedNode, QuerySolution, QuerySolutions, RdfFormat, parse, serialize

from charmem_oxigraph import _disk, _registry
from charmem_oxigraph import _logic as lg
from charmem_oxigraph import _queries as q
from charmem_oxigraph import _vocab as v
from charmem_oxigraph._cache import GraphCache
from charmem_oxigraph._codec import CorruptNodeError, StoredItem, reference_kinds

__all__ = [
    "CENSUS_MIN_PROBES",
    "ON_LOOP_IDS",
    "InMemoryOxigraphGraphStore",
    "OxigraphGraphStore",
    "PersistentOxigraphGraphStore",
]

#: A read the cache answers entirely runs on the event loop (no worker thread) for up to this
#: many ids: a few milliseconds of dictionary work at most. Larger reads go to a worker thread,
#: which uses the cache too, so the event loop is never blocked for long.
ON_LOOP_IDS: Final = 2048

#: A read that would probe at least this many IRIs (ids of unknown kind, one IRI per kind) may
#: take a census of the collection instead (:meth:`OxigraphGraphStore._take_census`). A census
#: scans at most as many item nodes as the read would probe, so it never costs much more than the
#: probe; once held, the writer keeps it, so a small collection (a new one, or one written in
#: sessions) gets it on its first such read and then answers every later check from memory.
CENSUS_MIN_PROBES: Final = 64

_log = get_logger("charmem_oxigraph.store")


class OxigraphGraphStore:
    """The graph authority of one collection, stored as one named graph in a pyoxigraph store.

    Implements :class:`charmem.ports.GraphStore`. The collection's triples live in the named graph
    ``urn:charmem:collection:<name>``; objects, links and lifecycle records are nodes
    ``urn:charmem:<type>:<uuid>`` described with the vocabulary ``urn:charmem:vocab#`` (see the
    package README). Collections opened on the same path in one process share one pyoxigraph
    handle (reference counted: the last :meth:`close` releases it) and one writer lock.

    Every port method is ``async`` and runs its pyoxigraph work in a worker thread
    (:func:`asyncio.to_thread`); each has a blocking twin ending in ``_sync`` for scripts and
    tools. Each call runs at most one SPARQL query per kind of fact (ids bound with ``VALUES``),
    never one per id.

    Reads go through the collection's :class:`~charmem_oxigraph._cache.GraphCache` (one per
    named graph of the shared handle): decoded objects and links (immutable), ids known absent,
    adjacency, currency facts and names, which the writer keeps in step with every write. A call
    the cache answers entirely returns without a worker thread or a query; otherwise only the
    missing ids are read. Writing to the pyoxigraph store behind this class's back (another
    ``pyoxigraph.Store`` handle) is not supported. Reads of more than :data:`ON_LOOP_IDS` ids
    always run in a worker thread.

    Build with :meth:`from_settings`, :meth:`open` or :meth:`for_collection`.
    """

    def __init__(self, shared: _registry.SharedStore, collection: str) -> None:
        """Bind an open shared handle to a collection (prefer :meth:`open`).

        Args:
            shared: an acquired handle; this graph store releases it on :meth:`close`.
            collection: the collection name (``[a-z0-9][a-z0-9_-]{0,127}``).

        Raises:
            ConfigurationError: the collection name is not allowed.
        """
        self._collection = validate_collection_name(collection)
        self._shared: _registry.SharedStore | None = shared
        self._graph_iri = v.collection_graph(collection)
        self._graph = NamedNode(self._graph_iri)

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        collection: str,
        *,
        path: str | os.PathLike[str] | None = None,
        lock_timeout: float = _registry.DEFAULT_LOCK_TIMEOUT,
    ) -> OxigraphGraphStore:
        """Open the graph store of ``collection`` (blocking; call it off the event loop).

        Args:
            collection: the collection name, checked before any directory is touched.
            path: the store directory (created if missing; shared with every other collection
                opened on it in this process), or ``None`` for a fresh in-memory store.
            lock_timeout: seconds to keep retrying while another process holds the store.

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
        shared = _registry.acquire(None if path is None else Path(path), lock_timeout=lock_timeout)
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
    def collection(self) -> str:
        """The collection name."""
        return self._collection

    @property
    def graph_iri(self) -> str:
        """The collection's named graph, ``urn:charmem:collection:<name>``."""
        return self._graph_iri

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

    def _read_items(self, cache: GraphCache, ids: Sequence[MemoryId]) -> dict[MemoryId, StoredItem]:
        """The stored items among ``ids``: cached ones, the rest in one query (then cached).

        An id of unknown kind is probed under every kind; when that would bind at least
        :data:`CENSUS_MIN_PROBES` IRIs, a census of the collection (:meth:`_take_census`) may
        answer instead.
        """
        found, unknown = cache.items(ids)
        if unknown:
            generation = cache.generation()
            known = cache.kinds(unknown)
            hinted = cache.hints(i for i in unknown if i not in known)
            # IRIs to bind: one per id of known or hinted kind, one per kind for the others
            probes = len(unknown) + (len(unknown) - len(known) - len(hinted)) * (len(lg.STORED_KINDS) - 1)
            if probes >= CENSUS_MIN_PROBES and self._take_census(cache, probes):
                return self._read_items(cache, ids)  # every kind is known now
            iris = lg.node_iris(unknown, {**hinted, **known}, lg.STORED_KINDS)
            nodes, purged = lg.read_lookup(self._select(q.nodes(self._graph_iri, iris)))
            missed = [i for i in hinted if i not in nodes]
            if missed:  # not under the kind a reference suggested: try every other kind
                retry = lg.retry_iris(missed, hinted, lg.STORED_KINDS)
                more, more_purged = lg.read_lookup(self._select(q.nodes(self._graph_iri, retry)))
                nodes.update(more)
                purged |= more_purged
            read = lg.decode_nodes(nodes)
            # Every id not found was read under every kind: absent, unless it is a tombstone.
            absent = [i for i in unknown if i not in read and i not in purged]
            cache.remember_items(generation, read, absent=absent)
            cache.remember_hints(reference_kinds(nodes.values()))
            found.update(read)
        return found

    def _read_lifecycle(self, cache: GraphCache) -> None:
        """Read the collection's lifecycle index into ``cache`` if it wants it (three queries).

        Every ``supersedes`` link and ``suppress`` instant, unless there are more than the cache
        keeps (then currency and the supersedes hop keep reading per id).
        """
        if not cache.wants_lifecycle():
            return
        generation = cache.generation()
        if lg.lifecycle_size(self._select(q.lifecycle_count(self._graph_iri))) > cache.max_entries:
            cache.refuse_lifecycle()
            return
        links, _hints = lg.links_and_hints(self._select(q.superseding_links(self._graph_iri)))
        suppressed = lg.suppress_from_rows(self._select(q.suppress_instants(self._graph_iri)))
        cache.remember_lifecycle(generation, links, suppressed)

    def _take_census(self, cache: GraphCache, probes: int) -> bool:
        """Read the census of the collection (:class:`GraphCache`) instead of ``probes`` lookups.

        Scans at most ``probes`` item nodes (a census costs about as much per node as a probe per
        IRI); a collection holding more is remembered as too large for censuses of that size.

        Returns:
            bool: whether the cache now holds a census.
        """
        limit = cache.census_limit(probes)
        if not limit:
            return False
        generation = cache.generation()
        rows = self._select(q.census(self._graph_iri, limit + 1))
        if len(rows) > limit:
            cache.census_refused(limit)
            return False
        census = lg.census_from_rows(rows)
        early = lg.early_from_rows(self._select(q.early_references(self._graph_iri)))
        return cache.remember_census(generation, census, early)

    def _read_kinds(self, cache: GraphCache, ids: Sequence[MemoryId]) -> dict[MemoryId, str]:
        """The stored kinds among ``ids`` (absent ids are missing)."""
        kinds = cache.kinds(ids)
        rest = [i for i in ids if i not in kinds]
        if rest:
            kinds.update(
                (i, v.KIND_OF_CLASS[type(item)]) for i, item in self._read_items(cache, rest).items()
            )
        return kinds

    # -- blocking implementation --------------------------------------------------------------

    def write_batch_sync(self, batch: GraphBatch) -> GraphWriteResult:
        """Blocking :meth:`write_batch`.

        Args:
            batch: objects, links and lifecycle records to store.

        Returns:
            GraphWriteResult: ids inserted and ids already stored with equal content, in batch
            order (an id repeated in the batch with equal content is listed once).

        Raises:
            PurgedMemoryError: an id of the batch was purged; nothing was written.
            IdConflictError: an id is stored (as any kind) or repeated in the batch with different
                content; nothing was written.
            BackendError: Oxigraph failed; nothing was written.
        """
        if not (batch.objects or batch.links or batch.records):
            return GraphWriteResult()
        prepared = lg.prepare_batch(batch)
        shared = self._handle()
        with self._backend_errors("write a batch"), shared.write_lock:
            cache = shared.cache(self._graph_iri)
            stored = self._read_items(cache, list(prepared.items))
            kinds = {i: v.KIND_OF_CLASS[type(item)] for i, item in stored.items()}
            kinds.update(self._read_kinds(cache, prepared.lookup[len(prepared.items) :]))
            purged = set(self.tombstones_sync(list(prepared.items)))
            inserted, existing, lines = lg.plan_write(prepared, stored, kinds, purged)
            if lines:
                # transactional: all triples or none (parsing the text is as fast as taking Quads)
                shared.store.load("\n".join(lines), RdfFormat.N_TRIPLES, to_graph=self._graph)
            cache.apply_write([prepared.items[i] for i in inserted])
        return GraphWriteResult(inserted_ids=tuple(inserted), existing_ids=tuple(existing))

    def get_objects_sync(self, ids: Sequence[MemoryId]) -> dict[MemoryId, MemoryObject]:
        """Blocking :meth:`get_objects`.

        Args:
            ids: ids to look up.

        Returns:
            dict[MemoryId, MemoryObject]: stored objects by id (in request order); absent ids and
            ids of links or records are missing.

        Raises:
            BackendError: Oxigraph failed or the stored triples are not a valid object.
        """
        wanted = lg.unique(ids)
        with self._backend_errors("read objects"):
            return lg.objects_only(wanted, self._read_items(self._cache(), wanted))

    def get_links_sync(self, ids: Sequence[MemoryId]) -> dict[MemoryId, MemoryLink]:
        """Blocking :meth:`get_links`.

        Args:
            ids: link ids to look up.

        Returns:
            dict[MemoryId, MemoryLink]: stored links by id (in request order); absent ids are
            missing.

        Raises:
            BackendError: Oxigraph failed or the stored triples are not a valid link.
        """
        wanted = lg.unique(ids)
        with self._backend_errors("read links"):
            return lg.links_only(wanted, self._read_items(self._cache(), wanted))

    def get_records_sync(self, target_ids: Sequence[MemoryId]) -> list[LifecycleRecord]:
        """Blocking :meth:`get_records`.

        Args:
            target_ids: the memories whose lifecycle records are wanted.

        Returns:
            list[LifecycleRecord]: records about any of ``target_ids``, ordered by
            (``recorded_at``, ``id``).

        Raises:
            BackendError: Oxigraph failed or a stored record is not valid.
        """
        wanted = lg.unique(target_ids)
        if not wanted:
            return []
        with self._backend_errors("read lifecycle records"):
            rows = self._select(q.records_about(self._graph_iri, lg.iris(wanted, v.NODE_KINDS)))
            return lg.records_from_rows(rows)

    def links_of_sync(
        self, ids: Sequence[MemoryId], *, relations: Sequence[Relation] | None = None
    ) -> list[MemoryLink]:
        """Blocking :meth:`links_of`.

        Args:
            ids: endpoints; a link matches when its ``from_id`` or ``to_id`` is one of them.
            relations: only links of these relations (``None``: every relation).

        Returns:
            list[MemoryLink]: matching links, each once, ordered by link id.

        Raises:
            BackendError: Oxigraph failed or a stored link is not valid.
        """
        wanted = lg.unique(ids)
        if not wanted or (relations is not None and not relations):
            return []
        chosen = None if relations is None else tuple(dict.fromkeys(Relation(r) for r in relations))
        with self._backend_errors("read links"):
            cache = self._cache()
            found, unknown = cache.links_of(wanted, chosen)
            if unknown and chosen == (Relation.SUPERSEDES,):
                self._read_lifecycle(cache)
                found, unknown = cache.links_of(wanted, chosen)
            if unknown:
                generation = cache.generation()
                iris = lg.endpoint_iris(unknown, cache.kinds(unknown), chosen)
                links, hints = lg.links_and_hints(
                    self._select(q.links_of(self._graph_iri, iris, lg.relation_iris(chosen)))
                )
                cache.remember_links_of(generation, unknown, chosen, links)
                cache.remember_hints(hints)
                found.update((link.id, link) for link in links)
            return sorted(found.values(), key=lg.BY_LINK_ID)

    def currency_sync(
        self, ids: Sequence[MemoryId], *, as_of: datetime | None = None
    ) -> dict[MemoryId, CurrencyStatus]:
        """Blocking :meth:`currency`.

        Args:
            ids: memories to classify.
            as_of: record time of the view (timezone-aware); ``None``: now, every record counts.

        Returns:
            dict[MemoryId, CurrencyStatus]: the status of each stored object among ``ids`` (in
            request order); absent ids and ids of links or records are missing.

        Raises:
            ValueError: ``as_of`` is naive.
            BackendError: Oxigraph failed or a stored instant is not valid.
        """
        lg.check_as_of(as_of)
        wanted = lg.unique(ids)
        if not wanted:
            return {}
        with self._backend_errors("read currency"):
            cache = self._cache()
            found, unknown = cache.currency_facts(wanted)
            if unknown:
                self._read_lifecycle(cache)
                more, unknown = cache.currency_facts(unknown)
                found.update(more)
            if unknown:
                generation = cache.generation()
                iris = lg.currency_iris(unknown, cache.kinds(unknown))
                facts = lg.facts_from_rows(unknown, self._select(q.currency(self._graph_iri, iris)))
                cache.remember_currency_facts(generation, facts)
                found.update(facts)
            return lg.currency_from_facts(wanted, found, as_of)

    def episode_turns_sync(self, episode_ids: Sequence[MemoryId]) -> dict[MemoryId, list[EpisodeTurn]]:
        """Blocking :meth:`episode_turns`.

        Args:
            episode_ids: the episodes.

        Returns:
            dict[MemoryId, list[EpisodeTurn]]: turns by episode (episodes without turns missing).

        Raises:
            BackendError: Oxigraph failed or a stored turn is not valid.
        """
        wanted = lg.unique(episode_ids)
        with self._backend_errors("read episode turns"):
            cache = self._cache()
            found, unknown = cache.episode_turns(wanted)
            if unknown:
                generation = cache.generation()
                iris = lg.episode_turn_iris(unknown, cache.kinds(unknown))
                turns = lg.turns_from_rows(self._select(q.episode_turns(self._graph_iri, iris)))
                cache.remember_episode_turns(generation, unknown, turns)
                found.update(turns)
            return {i: found[i] for i in wanted if i in found}

    def statement_count_sync(self) -> int:
        """Blocking :meth:`statement_count`.

        Returns:
            int: the number of triples in the collection's named graph.

        Raises:
            BackendError: Oxigraph failed.
        """
        with self._backend_errors("count statements"):
            rows = self._select(q.statement_count(self._graph_iri))
            return lg.count_from_rows(rows)

    def _typed_ids(self, classes: Sequence[str]) -> list[MemoryId]:
        with self._backend_errors("list node ids"):
            return lg.ids_from_rows(self._select(q.typed_nodes(self._graph_iri, classes)))

    def object_ids_sync(self, object_types: Sequence[ObjectType] | None = None) -> list[MemoryId]:
        """Blocking :meth:`object_ids`.

        Raises:
            BackendError: Oxigraph failed.
        """
        return self._typed_ids(lg.class_iris(object_types))

    def name_assertions_sync(self) -> list[tuple[MemoryId, MemoryId, str]]:
        """Blocking :meth:`name_assertions`.

        Raises:
            BackendError: Oxigraph failed.
        """
        with self._backend_errors("read names"):
            cache = self._cache()
            names = cache.names()
            if names is None:
                generation = cache.generation()
                names = lg.names_from_rows(self._select(q.name_assertions(self._graph_iri)))
                cache.remember_names(generation, names)
            return names

    def link_ids_sync(self) -> list[MemoryId]:
        """Blocking :meth:`link_ids`.

        Raises:
            BackendError: Oxigraph failed.
        """
        return self._typed_ids([v.VOCAB + v.CLASS_OF_KIND["link"]])

    def tombstones_sync(self, ids: Sequence[MemoryId] | None = None) -> dict[MemoryId, Tombstone]:
        """Blocking :meth:`tombstones`.

        Ids the cache knows are not purged (stored, or read as absent) are not looked up.

        Raises:
            BackendError: Oxigraph failed or a tombstone is not valid.
        """
        wanted = None if ids is None else lg.unique(ids)
        if wanted is not None:
            clean = self._cache().unpurged(wanted)
            wanted = [i for i in wanted if i not in clean]
            if not wanted:
                return {}
        iris = None if wanted is None else lg.iris(wanted, v.OBJECT_KINDS)
        with self._backend_errors("read tombstones"):
            found = lg.tombstones_from_rows(self._select(q.tombstones(self._graph_iri, iris)))
        return found if wanted is None else {i: found[i] for i in wanted if i in found}

    def erase_sync(self, erasure: GraphErasure) -> None:
        """Blocking :meth:`erase`.

        Raises:
            BackendError: Oxigraph failed; nothing was erased.
        """
        if not len(erasure):
            return
        shared = self._handle()
        with self._backend_errors("erase purged memories"), shared.write_lock:
            ids = [t.id for t in erasure.tombstones]
            already = set(self.tombstones_sync(ids)) if ids else set()
            update = lg.erase_update(self._graph, erasure, already)
            if update is not None:
                shared.store.update(update)  # one transaction: all of it or nothing
                # the read cache assumes stored items never change: an erasure breaks that
                shared.cache(self._graph_iri).clear()
        if shared.path is not None:
            # Ask RocksDB to compact now, so the erased statements leave the data files rather than
            # waiting for a later compaction (best effort: the erasure is already committed).
            try:
                shared.store.optimize()
            except OSError as exc:
                _log.warning("oxigraph_optimize_failed", collection=self._collection, error=str(exc))

    def export_graph_sync(self, out: BinaryIO) -> GraphExport:
        """Blocking :meth:`export_graph`.

        Raises:
            BackendError: Oxigraph failed or ``out`` could not be written.
        """
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

    def import_graph_sync(self, source: BinaryIO, media_type: str) -> int:
        """Blocking :meth:`import_graph`.

        Raises:
            CollectionNotEmptyError: the collection holds statements; nothing written.
            BackupFormatError: not N-Quads of this collection's graph; nothing written.
            BackendError: Oxigraph failed; nothing written.
        """
        lg.check_media_type(media_type)
        shared = self._handle()
        count = 0

        def counted() -> Iterator[Any]:
            nonlocal count
            for quad in lg.check_dump(parse(source, RdfFormat.N_QUADS), self._graph):
                count += 1
                yield quad

        with self._backend_errors("import the graph"), shared.write_lock:
            present = lg.count_from_rows(self._select(q.statement_count(self._graph_iri)))
            if present:
                raise CollectionNotEmptyError(
                    f"collection {self._collection!r} already holds {present} graph statements; "
                    "restore into an empty collection (another OXIGRAPH_PATH or collection)",
                    collection=self._collection,
                    counts={"graph statements": present},
                )
            try:
                shared.store.extend(counted())  # transactional: all quads or none
                shared.cache(self._graph_iri).clear()  # absent ids may be stored now
            except SyntaxError as exc:
                raise BackupFormatError(f"the graph dump is not valid N-Quads: {exc}") from exc
        return count

    def close_sync(self) -> None:
        """Blocking :meth:`close` (idempotent).

        Raises:
            BackendError: the final flush of a persistent store failed (the handle is released).
        """
        shared, self._shared = self._shared, None
        if shared is not None:
            _registry.release(shared)

    # -- the GraphStore port ------------------------------------------------------------------

    async def write_batch(self, batch: GraphBatch) -> GraphWriteResult:
        """Store a batch atomically, check-then-write under the store's writer lock.

        Each id of the batch is looked up as an object, link or record of any type (one query).
        Equal content (:func:`charmem.domain.rules.content_equal`; records by their canonical
        form) is skipped; any different content refuses the whole batch. New items are written in
        one transactional ``Store.load`` of their N-Triples (literals serialised by pyoxigraph).
        Acknowledged writes survive a process crash (RocksDB write-ahead log); :meth:`close` flushes.

        Args:
            batch: objects, links and lifecycle records.

        Returns:
            GraphWriteResult: ids inserted and ids already stored with equal content, in batch
            order.

        Raises:
            IdConflictError: an id is stored with different content (``ids`` and ``reasons`` name
                them); nothing was written.
            BackendError: Oxigraph failed; nothing was written.
        """
        return await asyncio.to_thread(self.write_batch_sync, batch)

    def hint_object_types(self, types: Mapping[MemoryId, ObjectType]) -> None:
        """Keep the object types candidate recall reported as kind hints (advisory, no I/O).

        Implements :class:`charmem.ports.ObjectTypeHints`: a first read of a hinted id binds its
        one node IRI instead of one per kind; a wrong hint costs a second query, never another
        answer. Ignored once the store is closed.

        Args:
            types: object type by id.
        """
        if not self.closed:
            self._cache().remember_hints(lg.kind_hints(types))

    async def get_objects(self, ids: Sequence[MemoryId]) -> dict[MemoryId, MemoryObject]:
        """Objects stored under ``ids``; absent ids (and ids of links) are missing from the dict.

        Args:
            ids: ids to look up.

        Returns:
            dict[MemoryId, MemoryObject]: equal (``==`` and ``content_equal``) to what was written.

        Raises:
            BackendError: Oxigraph failed or stored triples are not a valid object.
        """
        wanted = lg.unique(ids)
        if len(wanted) <= ON_LOOP_IDS:
            found, unknown = self._cache().items(wanted)
            if not unknown:  # answered by the cache: no worker thread, no query
                return lg.objects_only(wanted, found)
        return await asyncio.to_thread(self.get_objects_sync, wanted)

    async def get_links(self, ids: Sequence[MemoryId]) -> dict[MemoryId, MemoryLink]:
        """Links stored under ``ids``; absent ids are missing from the dict.

        Args:
            ids: link ids to look up.

        Returns:
            dict[MemoryId, MemoryLink]: equal to what was written.

        Raises:
            BackendError: Oxigraph failed or stored triples are not a valid link.
        """
        wanted = lg.unique(ids)
        if len(wanted) <= ON_LOOP_IDS:
            found, unknown = self._cache().items(wanted)
            if not unknown:
                return lg.links_only(wanted, found)
        return await asyncio.to_thread(self.get_links_sync, wanted)

    async def get_records(self, target_ids: Sequence[MemoryId]) -> list[LifecycleRecord]:
        """Lifecycle records about ``target_ids``, ordered by (``recorded_at``, ``id``).

        Args:
            target_ids: the memories whose records are wanted.

        Returns:
            list[LifecycleRecord]: the records.

        Raises:
            BackendError: Oxigraph failed or a stored record is not valid.
        """
        return await asyncio.to_thread(self.get_records_sync, target_ids)

    async def links_of(
        self,
        ids: Sequence[MemoryId],
        *,
        relations: Sequence[Relation] | None = None,
    ) -> list[MemoryLink]:
        """Links whose ``from_id`` or ``to_id`` is in ``ids`` (optionally of ``relations``).

        Args:
            ids: endpoints.
            relations: only these relations (``None``: every relation).

        Returns:
            list[MemoryLink]: each matching link once, ordered by link id.

        Raises:
            BackendError: Oxigraph failed or a stored link is not valid.
        """
        if ((ids and relations is None) or relations) and len(ids) <= ON_LOOP_IDS:
            chosen = None if relations is None else tuple(dict.fromkeys(Relation(r) for r in relations))
            found, unknown = self._cache().links_of(lg.unique(ids), chosen)
            if not unknown:
                return sorted(found.values(), key=lg.BY_LINK_ID)
        return await asyncio.to_thread(self.links_of_sync, ids, relations=relations)

    async def currency(
        self, ids: Sequence[MemoryId], *, as_of: datetime | None = None
    ) -> dict[MemoryId, CurrencyStatus]:
        """Currency of stored objects (DESIGN §4.1): suppressed beats superseded.

        An object is suppressed iff a ``suppress`` lifecycle record targets it, superseded iff a
        ``supersedes`` link points at it; with ``as_of`` only records with ``recorded_at <= as_of``
        and links with ``created_at <= as_of`` count. Implements
        :func:`charmem.domain.rules.is_current`.

        Args:
            ids: memories to classify.
            as_of: record time of the view (timezone-aware), or ``None`` for now.

        Returns:
            dict[MemoryId, CurrencyStatus]: one status per stored object among ``ids``; absent
            ids (and links, records) are missing.

        Raises:
            ValueError: ``as_of`` is naive.
            BackendError: Oxigraph failed.
        """
        lg.check_as_of(as_of)
        wanted = lg.unique(ids)
        if len(wanted) <= ON_LOOP_IDS:
            found, unknown = self._cache().currency_facts(wanted)
            if not unknown:
                return lg.currency_from_facts(wanted, found, as_of)
        return await asyncio.to_thread(self.currency_sync, wanted, as_of=as_of)

    async def episode_turns(self, episode_ids: Sequence[MemoryId]) -> dict[MemoryId, list[EpisodeTurn]]:
        """The turns of each episode (:class:`charmem.ports.EpisodeTurnReader`), in one query.

        Reads only the order fields of the episodes' observations (not whole links and objects)
        and keeps each episode's turns in the cache until a write adds an observation or a
        ``has_observation`` link to it.

        Args:
            episode_ids: the episodes.

        Returns:
            dict[MemoryId, list[EpisodeTurn]]: one turn per ``has_observation`` link from the
            episode to a stored observation of it; episodes without turns are missing.

        Raises:
            BackendError: Oxigraph failed or a stored turn is not valid.
        """
        wanted = lg.unique(episode_ids)
        if len(wanted) <= ON_LOOP_IDS:
            found, unknown = self._cache().episode_turns(wanted)
            if not unknown:
                return found
        return await asyncio.to_thread(self.episode_turns_sync, wanted)

    async def statement_count(self) -> int:
        """Number of triples in the collection's named graph.

        Returns:
            int: a count (other collections of the store are not counted).

        Raises:
            BackendError: Oxigraph failed.
        """
        return await asyncio.to_thread(self.statement_count_sync)

    async def object_ids(self, object_types: Sequence[ObjectType] | None = None) -> list[MemoryId]:
        """Ids of every stored object of the collection (optionally of ``object_types``), sorted.

        For operational tools (rebuilding vectors and stats, checks), never for recall.

        Raises:
            BackendError: Oxigraph failed.
        """
        return await asyncio.to_thread(self.object_ids_sync, object_types)

    async def name_assertions(self) -> list[tuple[MemoryId, MemoryId, str]]:
        """Every stored ``KnownAs`` assertion as ``(belief_id, subject_id, name)``, sorted.

        Raises:
            BackendError: Oxigraph failed.
        """
        names = self._cache().names()
        if names is not None:
            return names
        return await asyncio.to_thread(self.name_assertions_sync)

    async def link_ids(self) -> list[MemoryId]:
        """Ids of every stored link of the collection, sorted.

        Raises:
            BackendError: Oxigraph failed.
        """
        return await asyncio.to_thread(self.link_ids_sync)

    async def tombstones(self, ids: Sequence[MemoryId] | None = None) -> dict[MemoryId, Tombstone]:
        """Tombstones of purged objects among ``ids`` (``None``: all of the collection), by id.

        A tombstone is the node ``urn:charmem:<kind>:<uuid>`` of the purged object, reduced to
        ``rdf:type vocab:Tombstone`` and ``vocab:purgedAt``.

        Returns:
            dict[MemoryId, Tombstone]: in request order (all: sorted by id).

        Raises:
            BackendError: Oxigraph failed or a tombstone is not valid.
        """
        if ids is not None and len(ids) <= ON_LOOP_IDS and len(self._cache().unpurged(ids)) == len(set(ids)):
            return {}  # every id is known stored or absent: no worker thread, no query
        return await asyncio.to_thread(self.tombstones_sync, ids)

    async def erase(self, erasure: GraphErasure) -> None:
        """Remove objects, links and records and write tombstones in one SPARQL update (atomic).

        See :meth:`charmem.ports.GraphStore.erase`. Runs under the store's writer lock; ids that
        are already tombstones are skipped. A persistent store is then asked to compact
        (``Store.optimize``), so erased statements leave RocksDB's data files.

        Raises:
            BackendError: Oxigraph failed; nothing was erased.
        """
        await asyncio.to_thread(self.erase_sync, erasure)

    async def export_graph(self, out: BinaryIO) -> GraphExport:
        """Write the collection's named graph as N-Quads (``application/n-quads``) to ``out``.

        Holds the writer lock while writing, so the dump is one consistent state of this store.

        Returns:
            GraphExport: the media type and the number of quads written.

        Raises:
            BackendError: Oxigraph failed or ``out`` could not be written.
        """
        return await asyncio.to_thread(self.export_graph_sync, out)

    async def import_graph(self, source: BinaryIO, media_type: str) -> int:
        """Load an N-Quads dump of this collection into it while it is empty, in one transaction.

        Every quad must be in this collection's named graph (the dump of a collection of the same
        name); the parse, the check and the write happen in one ``Store.extend``, so a bad line
        leaves nothing behind.

        Returns:
            int: quads loaded.

        Raises:
            CollectionNotEmptyError: the collection holds statements; nothing written.
            BackupFormatError: another media type, invalid N-Quads, or another graph; nothing
                written.
            BackendError: Oxigraph failed; nothing written.
        """
        return await asyncio.to_thread(self.import_graph_sync, source, media_type)

    async def close(self) -> None:
        """Release this collection's use of the store; the last user flushes and unlocks it.

        Idempotent. Acknowledged writes are already durable.

        Raises:
            BackendError: the final flush failed (the handle is released anyway).
        """
        await asyncio.to_thread(self.close_sync)

    async def __aenter__(self) -> OxigraphGraphStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class PersistentOxigraphGraphStore(OxigraphGraphStore):
    """``GRAPH_STORE_MODE=persistent``: ``pyoxigraph.Store(OXIGRAPH_PATH)`` on disk.

    Entry point ``persistent`` of the group ``charmem.graph_stores``.
    """

    @classmethod
    def from_settings(cls, settings: Settings, collection: str) -> OxigraphGraphStore:
        """Open ``collection`` in the store at ``settings.oxigraph_path`` (blocking).

        Args:
            settings: ``OXIGRAPH_PATH`` (default ``./data/oxigraph``).
            collection: the collection name, checked before the directory is touched.

        Returns:
            OxigraphGraphStore: an open graph store sharing the process's handle for that path.

        Raises:
            ConfigurationError: the collection name is not allowed.
            StoreLockedError: another process holds the store (after a ~1 s bounded retry).
            StoreCorruptedError: the directory holds data but no complete store, or damaged
                files (see :meth:`open`).
            InsufficientStorageError: the disk is full.
            BackendError: the store cannot be opened.
        """
        return cls.open(collection, path=settings.oxigraph_path)

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
