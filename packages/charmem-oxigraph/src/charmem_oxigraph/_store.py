"""The graph authority over pyoxigraph: :class:`OxigraphGraphStore` and its two modes."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Final

from charmem.domain.graph import GraphBatch, GraphWriteResult, LifecycleRecord
from charmem.domain.ids import MemoryId
from charmem.domain.model import MemoryLink, MemoryObject, ObjectType, Relation
from charmem.domain.retrieval import CurrencyStatus
from charmem.domain.rules import content_equal, is_current
from charmem.errors import BackendError, CharmemError, ConfigurationError, IdConflictError
from charmem.settings import Settings, validate_collection_name
from pyoxigraph import NamedNode, QuerySolution, QuerySolutions

from charmem_oxigraph import _queries as q
from charmem_oxigraph import _registry
from charmem_oxigraph import _vocab as v
from charmem_oxigraph._codec import (
    CorruptNodeError,
    NodeTriples,
    StoredItem,
    decode_item,
    encode_item,
    kind_of_node,
    normalise_for_comparison,
    record_canonical,
    referenced_ids,
)

__all__ = ["InMemoryOxigraphGraphStore", "OxigraphGraphStore", "PersistentOxigraphGraphStore"]

#: Kinds an id of a batch item may already be stored as (ids are unique across all of them).
_STORED_KINDS: Final = (*v.OBJECT_KINDS, "link", "record")
_OBJECT_CLASSES: Final = frozenset(iri for iri, kind in v.ITEM_CLASSES.items() if kind in v.OBJECT_KINDS)


def _unique(ids: Iterable[MemoryId]) -> list[MemoryId]:
    return list(dict.fromkeys(ids))


def _iris(ids: Iterable[MemoryId], kinds: Sequence[str]) -> list[str]:
    return [v.node_iri(kind, memory_id) for memory_id in ids for kind in kinds]


def _same_content(stored: StoredItem, new: StoredItem) -> bool:
    if type(stored) is not type(new):
        return False
    if isinstance(stored, LifecycleRecord) or isinstance(new, LifecycleRecord):
        return (
            isinstance(stored, LifecycleRecord)
            and isinstance(new, LifecycleRecord)
            and record_canonical(stored) == record_canonical(new)
        )
    return content_equal(normalise_for_comparison(stored), normalise_for_comparison(new))


def _kind(item: StoredItem) -> str:
    return v.KIND_OF_CLASS[type(item)]


class OxigraphGraphStore:
    """The graph authority of one collection, stored as one named graph in a pyoxigraph store.

    Implements :class:`charmem.ports.GraphStore`. The collection's triples live in the named graph
    ``urn:charmem:collection:<name>``; objects, links and lifecycle records are nodes
    ``urn:charmem:<type>:<uuid>`` described with the vocabulary ``urn:charmem:vocab#`` (see the
    package README). Collections opened on the same path in one process share one pyoxigraph
    handle (reference counted: the last :meth:`close` releases it) and one writer lock.

    Every port method is ``async`` and runs its pyoxigraph work in a worker thread
    (:func:`asyncio.to_thread`); each has a blocking twin ending in ``_sync`` for scripts and
    tools. Each call runs one SPARQL query (ids bound with ``VALUES``), never one per id.

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
            raise BackendError(
                f"Oxigraph failed to {action} in collection {self._collection!r}: {exc}"
            ) from exc

    def _select(self, query: str) -> list[QuerySolution]:
        solutions = self._handle().store.query(query)
        if not isinstance(solutions, QuerySolutions):  # pragma: no cover - every query is a SELECT
            raise TypeError("expected SELECT solutions")
        return list(solutions)

    def _fetch_nodes(self, ids: Sequence[MemoryId], kinds: Sequence[str]) -> dict[MemoryId, NodeTriples]:
        """The stored nodes among ``ids`` (under any of ``kinds``), one query."""
        if not ids:
            return {}
        by_iri: dict[str, NodeTriples] = {}
        # Rows are (?root, ?a, ?p, ?o); positional access is several times faster than by name.
        for root_term, assertion, predicate, obj in self._select(q.nodes(self._graph_iri, _iris(ids, kinds))):
            root = root_term.value
            node = by_iri.get(root)
            if node is None:
                node = by_iri[root] = NodeTriples(root)
            if assertion is None:
                node.add(predicate.value, obj)
            else:
                node.add_assertion(assertion.value, predicate.value, obj)
        found: dict[MemoryId, NodeTriples] = {}
        for iri, node in by_iri.items():
            if kind_of_node(node) is None:  # only edge triples from a not-yet-stored id
                continue
            memory_id = v.memory_id_of(iri)
            if memory_id in found:
                raise CorruptNodeError(f"id {memory_id} is stored under two kinds")
            found[memory_id] = node
        return found

    def _group(self, rows: Iterable[QuerySolution]) -> list[NodeTriples]:
        nodes: dict[str, NodeTriples] = {}
        for subject_term, predicate, obj in rows:  # rows are (?subject, ?p, ?o)
            iri = subject_term.value
            node = nodes.get(iri)
            if node is None:
                node = nodes[iri] = NodeTriples(iri)
            node.add(predicate.value, obj)
        return list(nodes.values())

    # -- blocking implementation --------------------------------------------------------------

    def write_batch_sync(self, batch: GraphBatch) -> GraphWriteResult:
        """Blocking :meth:`write_batch`.

        Args:
            batch: objects, links and lifecycle records to store.

        Returns:
            GraphWriteResult: ids inserted and ids already stored with equal content, in batch
            order (an id repeated in the batch with equal content is listed once).

        Raises:
            IdConflictError: an id is stored (as any kind) or repeated in the batch with different
                content; nothing was written.
            BackendError: Oxigraph failed; nothing was written.
        """
        items: list[StoredItem] = [*batch.objects, *batch.links, *batch.records]
        if not items:
            return GraphWriteResult()
        reasons: dict[str, list[str]] = {}
        unique: dict[MemoryId, StoredItem] = {}
        for item in items:
            first = unique.setdefault(item.id, item)
            if first is not item and not _same_content(first, item):
                reasons.setdefault(str(item.id), []).append(
                    "the batch holds this id twice with different content"
                )
        references = {ref for item in unique.values() for ref in referenced_ids(item)} - unique.keys()
        shared = self._handle()
        with self._backend_errors("write a batch"), shared.write_lock:
            stored = self._fetch_nodes([*unique, *sorted(references)], _STORED_KINDS)
            stored_kinds = {memory_id: kind_of_node(node) for memory_id, node in stored.items()}
            inserted: list[MemoryId] = []
            existing: list[MemoryId] = []
            for memory_id, item in unique.items():
                node = stored.get(memory_id)
                if node is None:
                    inserted.append(memory_id)
                    continue
                old = decode_item(node)
                if _same_content(old, item):
                    existing.append(memory_id)
                elif _kind(old) != _kind(item):
                    reasons.setdefault(str(memory_id), []).append(
                        f"id {memory_id} is already stored as a {_kind(old)}, not a {_kind(item)}; "
                        "ids are unique across objects, links and records"
                    )
                else:
                    reasons.setdefault(str(memory_id), []).append(
                        f"{_kind(item)} {memory_id} is already stored with different content"
                    )
            if reasons:
                raise IdConflictError(
                    f"{len(reasons)} id(s) of the batch are already stored with different content; "
                    "nothing was written. Use new ids, or replay exactly the stored content",
                    ids=sorted(reasons),
                    reasons=reasons,
                )
            known = {memory_id: _kind(item) for memory_id, item in unique.items()}

            def resolve(memory_id: MemoryId, declared: str | None) -> str:
                kind = known.get(memory_id) or stored_kinds.get(memory_id) or declared or "object"
                return v.node_iri(kind, memory_id)

            quads = [
                quad
                for memory_id in inserted
                for quad in encode_item(unique[memory_id], self._graph, resolve)
            ]
            if quads:
                shared.store.extend(quads)  # transactional: all quads or none
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
        wanted = _unique(ids)
        with self._backend_errors("read objects"):
            nodes = self._fetch_nodes(wanted, v.OBJECT_KINDS)
            decoded = {memory_id: decode_item(nodes[memory_id]) for memory_id in wanted if memory_id in nodes}
        return {
            memory_id: item
            for memory_id, item in decoded.items()
            if not isinstance(item, (MemoryLink, LifecycleRecord))
        }

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
        wanted = _unique(ids)
        with self._backend_errors("read links"):
            nodes = self._fetch_nodes(wanted, ("link",))
            decoded = {memory_id: decode_item(nodes[memory_id]) for memory_id in wanted if memory_id in nodes}
        return {memory_id: item for memory_id, item in decoded.items() if isinstance(item, MemoryLink)}

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
        wanted = _unique(target_ids)
        if not wanted:
            return []
        with self._backend_errors("read lifecycle records"):
            rows = self._select(q.records_about(self._graph_iri, _iris(wanted, v.NODE_KINDS)))
            items = [decode_item(node) for node in self._group(rows)]
        records = [item for item in items if isinstance(item, LifecycleRecord)]
        return sorted(records, key=lambda record: (record.recorded_at, record.id))

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
        wanted = _unique(ids)
        if not wanted or (relations is not None and not relations):
            return []
        relation_iris = None
        if relations is not None:
            relation_iris = [v.relation_iri(Relation(relation)) for relation in dict.fromkeys(relations)]
        with self._backend_errors("read links"):
            rows = self._select(q.links_of(self._graph_iri, _iris(wanted, v.NODE_KINDS), relation_iris))
            items = [decode_item(node) for node in self._group(rows)]
        links = [item for item in items if isinstance(item, MemoryLink)]
        return sorted(links, key=lambda link: link.id)

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
        if as_of is not None and as_of.utcoffset() is None:
            raise ValueError("as_of must be a timezone-aware datetime")
        wanted = _unique(ids)
        if not wanted:
            return {}
        stored: set[MemoryId] = set()
        suppressed: set[MemoryId] = set()
        superseded: set[MemoryId] = set()
        with self._backend_errors("read currency"):
            for row in self._select(q.currency(self._graph_iri, _iris(wanted, v.NODE_KINDS))):
                memory_id = v.memory_id_of(row["x"].value)
                cls, recorded, created = row["c"], row["rt"], row["lt"]
                if cls is not None:
                    if cls.value in _OBJECT_CLASSES:
                        stored.add(memory_id)
                elif recorded is not None:
                    if as_of is None or datetime.fromisoformat(recorded.value) <= as_of:
                        suppressed.add(memory_id)
                elif created is not None and (
                    as_of is None or datetime.fromisoformat(created.value) <= as_of
                ):
                    superseded.add(memory_id)
        statuses: dict[MemoryId, CurrencyStatus] = {}
        for memory_id in wanted:
            if memory_id not in stored:
                continue
            is_suppressed, is_superseded = memory_id in suppressed, memory_id in superseded
            if is_current(suppressed=is_suppressed, superseded=is_superseded):
                statuses[memory_id] = CurrencyStatus.CURRENT
            elif is_suppressed:  # suppressed beats superseded
                statuses[memory_id] = CurrencyStatus.SUPPRESSED
            else:
                statuses[memory_id] = CurrencyStatus.SUPERSEDED
        return statuses

    def statement_count_sync(self) -> int:
        """Blocking :meth:`statement_count`.

        Returns:
            int: the number of triples in the collection's named graph.

        Raises:
            BackendError: Oxigraph failed.
        """
        with self._backend_errors("count statements"):
            rows = self._select(q.statement_count(self._graph_iri))
            return int(rows[0]["n"].value) if rows else 0

    def _typed_ids(self, kinds: Sequence[str]) -> list[MemoryId]:
        classes = [v.VOCAB + v.CLASS_OF_KIND[kind] for kind in kinds]
        with self._backend_errors("list node ids"):
            rows = self._select(q.typed_nodes(self._graph_iri, classes))
            return sorted({v.memory_id_of(row["x"].value) for row in rows})

    def object_ids_sync(self, object_types: Sequence[ObjectType] | None = None) -> list[MemoryId]:
        """Blocking :meth:`object_ids`.

        Raises:
            BackendError: Oxigraph failed.
        """
        kinds = v.OBJECT_KINDS if object_types is None else [ObjectType(t).value for t in object_types]
        return self._typed_ids(kinds)

    def name_assertions_sync(self) -> list[tuple[MemoryId, MemoryId, str]]:
        """Blocking :meth:`name_assertions`.

        Raises:
            BackendError: Oxigraph failed.
        """
        with self._backend_errors("read names"):
            rows = self._select(q.name_assertions(self._graph_iri))
            return sorted(
                (v.memory_id_of(row["d"].value), v.memory_id_of(row["s"].value), str(row["name"].value))
                for row in rows
            )

    def link_ids_sync(self) -> list[MemoryId]:
        """Blocking :meth:`link_ids`.

        Raises:
            BackendError: Oxigraph failed.
        """
        return self._typed_ids(["link"])

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
        one transactional ``Store.extend``. Acknowledged writes survive a process crash (RocksDB
        write-ahead log); :meth:`close` flushes.

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

    async def get_objects(self, ids: Sequence[MemoryId]) -> dict[MemoryId, MemoryObject]:
        """Objects stored under ``ids``; absent ids (and ids of links) are missing from the dict.

        Args:
            ids: ids to look up.

        Returns:
            dict[MemoryId, MemoryObject]: equal (``==`` and ``content_equal``) to what was written.

        Raises:
            BackendError: Oxigraph failed or stored triples are not a valid object.
        """
        return await asyncio.to_thread(self.get_objects_sync, ids)

    async def get_links(self, ids: Sequence[MemoryId]) -> dict[MemoryId, MemoryLink]:
        """Links stored under ``ids``; absent ids are missing from the dict.

        Args:
            ids: link ids to look up.

        Returns:
            dict[MemoryId, MemoryLink]: equal to what was written.

        Raises:
            BackendError: Oxigraph failed or stored triples are not a valid link.
        """
        return await asyncio.to_thread(self.get_links_sync, ids)

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
        return await asyncio.to_thread(self.currency_sync, ids, as_of=as_of)

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
        return await asyncio.to_thread(self.name_assertions_sync)

    async def link_ids(self) -> list[MemoryId]:
        """Ids of every stored link of the collection, sorted.

        Raises:
            BackendError: Oxigraph failed.
        """
        return await asyncio.to_thread(self.link_ids_sync)

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
            BackendError: the store cannot be opened.
        """
        return cls.open(collection, path=settings.oxigraph_path)


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
