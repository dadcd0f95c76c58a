"""The graph authority over any SPARQL 1.1 protocol server: :class:`SparqlServiceGraphStore`."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import shlex
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import BinaryIO, Final, TypeVar, cast

import httpx
from charmem.admin import LayoutMigration
from charmem.domain.graph import GraphBatch, GraphErasure, GraphExport, GraphWriteResult
from charmem.domain.ids import MemoryId
from charmem.errors import BackendError, CollectionNotEmptyError, ConfigurationError
from charmem.log import get_logger
from charmem.settings import Settings, SparqlEndpoints, validate_collection_name
from pyoxigraph import (
    NamedNode,
    Quad,
    QuerySolution,
    RdfFormat,
    parse,
    serialize,
)

from charmem_oxigraph import _character as character
from charmem_oxigraph import _http as h
from charmem_oxigraph import _layout as lay
from charmem_oxigraph import _queries as q
from charmem_oxigraph import _vocab as v
from charmem_oxigraph import _writers as wl
from charmem_oxigraph import _writing as wr
from charmem_oxigraph._cache import GraphCache
from charmem_oxigraph._http import BEARER_TOKEN_KEY, DEFAULT_TIMEOUT, PASSWORD_KEY, TIMEOUT_KEY, USERNAME_KEY
from charmem_oxigraph._reads import CachedGraphStore, GraphReader, Plan
from charmem_oxigraph._staging import staged_dump

__all__ = [
    "BEARER_TOKEN_KEY",
    "DEFAULT_TIMEOUT",
    "PASSWORD_KEY",
    "TIMEOUT_KEY",
    "USERNAME_KEY",
    "SparqlServiceGraphStore",
]

_RESULTS_JSON: Final = "application/sparql-results+json"

_log = get_logger("charmem_oxigraph.service")

T = TypeVar("T")


class SparqlServiceGraphStore(CachedGraphStore):
    """The graph authority of one collection on a SPARQL 1.1 protocol server (``service`` mode).

    Implements :class:`charmem.ports.GraphStore` with the same RDF layout, SPARQL reads and
    semantics as the embedded :class:`~charmem_oxigraph.OxigraphGraphStore`: the collection is the
    named graph ``urn:charmem:collection:<name>``; every read is one SPARQL query (built by the
    same code, ids bound with ``VALUES`` inside the ``GRAPH`` group) sent to the query endpoint
    (``POST``, URL-encoded, or as ``application/sparql-query`` once the server names itself
    Oxigraph; answers as SPARQL JSON results parsed by pyoxigraph, refused when the server says
    it cut them at a row cap);
    every :meth:`write_batch` is at most one ``INSERT DATA`` request to the update endpoint,
    which a SPARQL 1.1 server applies atomically. Literals are serialised by pyoxigraph
    (``str(Literal(...))``: N-Triples terms with correct escaping), so memory text is always data.

    Writers: each check-then-write (:meth:`write_batch`, :meth:`erase`, the write path's blocks
    in :meth:`exclusive_writes`) holds this process's writer lock of the collection and its
    *writer lease* on the server (:mod:`charmem_oxigraph._writers`), so any number of processes
    may write one collection and get the errors a single process gives. The lease needs a server
    on which a query sent after an update's answer sees it (one ``oxigraph serve``).

    Failures: a refused or reset connection, a timeout, an HTTP error status or an unparsable
    answer raise :class:`~charmem.errors.BackendError` naming the endpoint (never the credentials),
    with the cause chained. Each request is bounded by ``timeout`` seconds in total (connect,
    send, wait, read); a request that failed before the server answered is sent once more within
    that budget. After the server comes back, the next call succeeds (connections are re-opened
    on demand).

    Args:
        collection: the collection name, ``[a-z0-9][a-z0-9_-]{0,127}``.
        query_endpoint: the SPARQL query endpoint URL (``SPARQL_QUERY_ENDPOINT``). User-info in
            an endpoint URL (``http://user:password@host/query``) is sent as HTTP basic
            authentication, never as part of a requested (and logged) URL.
        update_endpoint: the SPARQL update endpoint URL (``SPARQL_UPDATE_ENDPOINT``; default: the
            query endpoint).
        auth: an ``httpx`` authentication (basic or bearer), or ``None``.
        timeout: seconds per request, > 0.
        client: an ``httpx.AsyncClient`` to use (not closed by :meth:`close`); by default the
            store makes and closes its own.
        placement: the shards of ``SPARQL_ENDPOINTS``, from which :meth:`for_collection` picks
            another collection's server (``None``: the same endpoints).

    Raises:
        ConfigurationError: bad collection name, endpoint or timeout.
    """

    def __init__(
        self,
        collection: str,
        *,
        query_endpoint: str,
        update_endpoint: str | None = None,
        auth: httpx.Auth | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        client: httpx.AsyncClient | None = None,
        placement: SparqlEndpoints | None = None,
    ) -> None:
        self._collection = validate_collection_name(collection)
        self._query_endpoint = h.check_endpoint(query_endpoint, "SPARQL_QUERY_ENDPOINT")
        self._update_endpoint = h.check_endpoint(update_endpoint or query_endpoint, "SPARQL_UPDATE_ENDPOINT")
        if not (isinstance(timeout, int | float) and math.isfinite(timeout) and timeout > 0):
            raise ConfigurationError(f"timeout must be a positive number of seconds, not {timeout!r}")
        self._auth = auth
        self._placement = placement
        self._routes = {
            endpoint: h.route(endpoint, auth) for endpoint in (self._query_endpoint, self._update_endpoint)
        }
        self._timeout = float(timeout)
        self._owns_client = client is None
        self._client: httpx.AsyncClient | None = client or httpx.AsyncClient(
            timeout=httpx.Timeout(self._timeout), follow_redirects=False
        )
        self._graph_iri = v.collection_graph(collection)
        self._graph = NamedNode(self._graph_iri)
        self._leases = wl.WriterLeases(
            select=self._select,
            update=self._update,
            lock=lambda: wl.write_lock(self._update_endpoint, self._graph_iri),
            key=(self._update_endpoint, self._graph_iri),
            timeout=self._timeout,
            collection=self._collection,
        )
        # Only immutable knowledge (decoded items, stored kinds): other processes may write.
        self._cache = GraphCache(coherent=False)
        self._graph_reader = GraphReader(self._cache, self._graph_iri)
        # Queries go URL-encoded until the server names itself one known to take them directly.
        self._direct_queries = False

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def from_settings(cls, settings: Settings, collection: str) -> SparqlServiceGraphStore:
        """Build the store ``GRAPH_STORE_MODE=service`` selects; sends no request.

        Reads the collection's endpoints (``SPARQL_QUERY_ENDPOINT`` and ``SPARQL_UPDATE_ENDPOINT``,
        or its shard of ``SPARQL_ENDPOINTS``: :meth:`charmem.Settings.sparql_shard`) and,
        from ``settings.extra``: ``SPARQL_USERNAME`` + ``SPARQL_PASSWORD`` (HTTP basic) or
        ``SPARQL_BEARER_TOKEN`` (``Authorization: Bearer``), and ``SPARQL_TIMEOUT`` (seconds per
        request, default 10).

        Args:
            settings: the deployment settings.
            collection: the collection name.

        Returns:
            SparqlServiceGraphStore: a store bound to the collection's named graph.

        Raises:
            ConfigurationError: the mode is not ``service``, an endpoint is missing or not an
                http(s) URL, the authentication keys are incomplete or contradictory, or the
                timeout is not a positive number; ``key`` names the setting.
        """
        validate_collection_name(collection)
        shard = settings.sparql_shard(collection)
        return cls(
            collection,
            query_endpoint=shard.query,
            update_endpoint=shard.update,
            auth=h.auth_from_settings(settings.extra),
            timeout=h.timeout_from_settings(settings.extra),
            placement=settings.sparql_endpoints,
        )

    def for_collection(self, collection: str) -> SparqlServiceGraphStore:
        """Another collection (named graph) with the same credentials, on the same server.

        With ``SPARQL_ENDPOINTS`` the other collection goes to the shard that holds it.

        Args:
            collection: the other collection's name.

        Returns:
            SparqlServiceGraphStore: a new store with its own HTTP client; close each one.

        Raises:
            ConfigurationError: the collection name is not allowed.
        """
        shard = None if self._placement is None else self._placement.shard_for(collection)
        return type(self)(
            collection,
            query_endpoint=self._query_endpoint if shard is None else shard.query,
            update_endpoint=self._update_endpoint if shard is None else shard.update,
            auth=self._auth,
            timeout=self._timeout,
            placement=self._placement,
        )

    # -- properties ---------------------------------------------------------------------------

    @property
    def query_endpoint(self) -> str:
        """The query endpoint (user-info removed)."""
        return h.display(self._query_endpoint)

    @property
    def update_endpoint(self) -> str:
        """The update endpoint (user-info removed)."""
        return h.display(self._update_endpoint)

    @property
    def timeout(self) -> float:
        """Seconds one request may take."""
        return self._timeout

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._client is None

    def __repr__(self) -> str:
        state = ", closed" if self._client is None else ""
        return (
            f"{type(self).__name__}(collection={self._collection!r}, query_endpoint={self.query_endpoint!r}, "
            f"update_endpoint={self.update_endpoint!r}, timeout={self._timeout:g}{state})"
        )

    # -- plumbing -----------------------------------------------------------------------------

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            raise BackendError(f"the graph store of collection {self._collection!r} is closed; open it again")
        return self._client

    async def _send(
        self, client: httpx.AsyncClient, endpoint: str, content: bytes, headers: Mapping[str, str]
    ) -> httpx.Response:
        url, auth = self._routes[endpoint]
        if auth is None:
            return await client.post(url, content=content, headers=headers)
        return await client.post(url, content=content, headers=headers, auth=auth)

    async def _post(
        self, endpoint: str, action: str, content: bytes, content_type: str, accept: str
    ) -> bytes:
        """POST one protocol request (see :meth:`_exchange`); the answer's body."""
        return (await self._exchange(endpoint, action, content, content_type, accept)).content

    async def _query(self, query: str, action: str, accept: str) -> httpx.Response:
        """POST one query, in the form the server takes (see :func:`_http.query_request`)."""
        content, content_type = h.query_request(query, direct=self._direct_queries)
        response = await self._exchange(self._query_endpoint, action, content, content_type, accept)
        self._direct_queries = h.takes_direct_queries(response)
        return response

    async def _exchange(
        self, endpoint: str, action: str, content: bytes, content_type: str, accept: str
    ) -> httpx.Response:
        """POST one protocol request, bounded by ``timeout`` seconds; the answer.

        Raises:
            BackendError: no answer in time, unreachable, an error status, or closed.
        """
        request = h.Request(endpoint, {"Content-Type": content_type, "Accept": accept}, content)
        where = f"{action} in collection {self._collection!r}"
        return await h.exchange(functools.partial(self._send, self._http()), request, where, self._timeout)

    async def _select(self, query: str, action: str) -> list[QuerySolution]:
        response = await self._query(query, action, _RESULTS_JSON)
        return h.select_rows(response, f"{action} in collection {self._collection!r}", self.query_endpoint)

    async def _insert(self, lines: Sequence[str], action: str = "write a batch") -> None:
        """One ``INSERT DATA`` request holding every triple (atomic on a SPARQL 1.1 server)."""
        await self._update(q.insert_data(self._graph_iri, lines), action)

    async def _update(self, update: str, action: str) -> None:
        """Send one SPARQL update request (a SPARQL 1.1 server applies a request atomically)."""
        await self._post(
            self._update_endpoint, action, update.encode("utf-8"), "application/sparql-update", "*/*"
        )

    def _corrupt(self, exc: ValueError) -> BackendError:
        return BackendError(
            f"stored data of collection {self._collection!r} at {self.query_endpoint} is not a valid "
            f"charmem graph ({exc}); check the store with charmem's admin tools"
        )

    def _reader(self) -> GraphReader:
        return self._graph_reader

    async def _read(self, action: str, plan: Plan[T], size: int = 0) -> T:
        """Run ``plan``, one query request per query it yields (``size`` is not used)."""
        try:
            query = next(plan)
            while True:
                query = plan.send(await self._select(query, action))
        except StopIteration as done:
            return cast(T, done.value)
        except ValueError as exc:  # stored data that does not decode (CorruptNodeError, an instant)
            raise self._corrupt(exc) from exc

    # -- the GraphStore port: writes and administration ----------------------------------------

    @contextlib.asynccontextmanager
    async def exclusive_writes(self) -> AsyncIterator[None]:
        """See :meth:`charmem.ports.WriterExclusion.exclusive_writes`: lock, then writer lease.

        Three requests to take the lease, one to release it (:mod:`charmem_oxigraph._writers`).
        """
        async with self._leases.writing("write"):
            yield

    async def write_batch(self, batch: GraphBatch) -> GraphWriteResult:
        """See :meth:`charmem.ports.GraphStore.write_batch`: at most one ``INSERT DATA`` request.

        Under the collection's writer lock and lease (:meth:`exclusive_writes`: the running
        block's, else its own), the batch's ids and the ids they reference are looked up (any
        kind, one query); equal content is skipped, any different content refuses the whole
        batch; the new items are sent in one update request, which the server applies entirely or
        not at all. Acknowledged writes are as durable as the server makes them.

        Raises:
            PurgedMemoryError: an id of the batch was purged; nothing was written.
            IdConflictError: an id is stored with different content (``ids`` and ``reasons`` name
                them); nothing was written.
            BackendError: the server failed or the writer lease could not be had; nothing was
                written (or, if the answer was lost after the server applied the update, everything
                was: a replay is equal content). A lease lost meanwhile: stored, check the collection.
        """
        if not (batch.objects or batch.links or batch.records):
            return GraphWriteResult()
        prepared = wr.prepare_batch(batch)
        async with self._leases.writing("write a batch") as lease:
            inserted, existing, lines, _marked = await self._read(
                "write a batch", self._graph_reader.check_write(prepared)
            )
            if lines:
                await self._leases.fenced(lease, q.insert_data(self._graph_iri, lines), "write a batch")
                self._cache.layout_recorded = True  # the write recorded it if it was missing
        _log.debug(
            "sparql_batch_written",
            collection=self._collection,
            inserted=len(inserted),
            existing=len(existing),
        )
        return GraphWriteResult(inserted_ids=tuple(inserted), existing_ids=tuple(existing))

    async def _record_character(self, character_id: MemoryId) -> MemoryId:
        action = "record the character id"
        async with self._leases.writing(action) as lease:
            found, lines = await self._read(
                action, character.record(self._cache, self._graph_iri, character_id)
            )
            if lines:
                await self._leases.fenced(lease, q.insert_data(self._graph_iri, lines), action)
                self._cache.layout_recorded = True
        return found

    async def erase(self, erasure: GraphErasure) -> None:
        """See :meth:`charmem.ports.GraphStore.erase`: one update request.

        Under this process's writer lock of the collection: one query for the ids that are
        tombstones already (skipped), then one SPARQL update request (``DELETE ... ; INSERT
        DATA``), which a SPARQL 1.1 server applies atomically. What the server keeps of deleted
        data (journals, snapshots) is its own matter.

        Raises:
            BackendError: the server failed; nothing was erased (or, if the answer was lost after
                the server applied it, everything was: applying it again is harmless).
        """
        if not len(erasure):
            return
        async with self._leases.writing("erase purged memories") as lease:
            update = await self._read("erase purged memories", self._graph_reader.erase_update(erasure))
            if update is not None:
                await self._leases.fenced(lease, update, "erase purged memories")
                # cached items are assumed never to change: an erasure breaks that. Another
                # process's cache of this graph keeps them until it reopens (see the README).
                self._cache.clear()
        _log.info("sparql_erased", collection=self._collection, items=len(erasure))

    async def raced_writes(self) -> list[MemoryId]:
        """See :meth:`charmem.ports.RacedWrites.raced_writes` (one query)."""
        return [s.id for s in await self._read("find raced writes", self._graph_reader.raced())]

    async def settle_raced_writes(self) -> list[MemoryId]:
        """See :meth:`charmem.ports.RacedWrites.settle_raced_writes`: one delete, under the lease."""
        async with self._leases.writing("settle raced writes") as lease:
            settled = await self._read("settle raced writes", self._graph_reader.raced())
            lines = [line for settlement in settled for line in settlement.delete]
            if lines:
                await self._leases.fenced(lease, q.delete_data(self._graph_iri, lines), "settle raced writes")
                self._cache.clear()  # items cached undecodable or with a loser's content
        return [settlement.id for settlement in settled]

    async def export_graph(self, out: BinaryIO) -> GraphExport:
        """Write the collection's named graph as N-Quads (``application/n-quads``) to ``out``.

        One ``CONSTRUCT`` query answered as N-Triples (held in memory), turned into quads of the
        collection's graph by pyoxigraph. Writers of this process wait meanwhile; writers of other
        processes are not held back (see the class notes). A server may cut a ``CONSTRUCT`` answer
        without saying so (Virtuoso stops at its ``ResultSetMaxRows``), so the statements are
        counted first and an answer holding fewer is refused: nothing is written to ``out``.

        Returns:
            GraphExport: the media type and the number of quads written.

        Raises:
            BackendError: the server failed, answered something that is not N-Triples or fewer
                statements than the graph held, or ``out`` could not be written.
        """
        action = "export the graph"
        async with wl.write_lock(self._update_endpoint, self._graph_iri):
            held = await self.statement_count()
            response = await self._query(q.construct_all(self._graph_iri), action, "application/n-triples")
        try:
            triples = await asyncio.to_thread(lambda: list(parse(response.content, RdfFormat.N_TRIPLES)))
        except (SyntaxError, ValueError) as exc:
            raise BackendError(
                f"could not export collection {self._collection!r} from {self.query_endpoint}: {exc}"
            ) from exc
        if len(triples) < held:
            raise BackendError(
                f"the SPARQL endpoint {self.query_endpoint} answered {len(triples)} of the {held} "
                f"statements of collection {self._collection!r} to {action}, so it cut the answer; "
                f"{h.RAISE_CAP_HINT}, or retry if another process erased memories meanwhile"
            )
        quads = (Quad(t.subject, t.predicate, t.object, self._graph) for t in triples)
        try:
            await asyncio.to_thread(serialize, quads, out, RdfFormat.N_QUADS)
        except (OSError, ValueError) as exc:
            raise BackendError(
                f"could not export collection {self._collection!r} from {self.query_endpoint}: {exc}"
            ) from exc
        return GraphExport(media_type=v.DUMP_MEDIA_TYPE, statements=len(triples))

    async def import_graph(self, source: BinaryIO, media_type: str) -> int:
        """Load an N-Quads dump of this collection into it while it is empty: one ``INSERT DATA``.

        The whole dump is checked first (:func:`charmem_oxigraph._staging.staged_dump`: every quad
        in this collection's named graph, a layout this charmem reads, every node decoding) and
        upgraded to the current layout, then sent as one update request, which a SPARQL 1.1
        server applies atomically; a very large collection needs a server that accepts a request
        of the dump's size.

        Returns:
            int: statements the dump held.

        Raises:
            CollectionNotEmptyError: the collection holds statements; nothing written.
            BackupFormatError: another media type, invalid N-Quads, another graph, an unknown
                layout version or a node that does not decode; nothing written.
            BackendError: the server failed; nothing written.
        """
        wr.check_media_type(media_type)
        staged = await asyncio.to_thread(staged_dump, source, self._graph)
        quads = staged.quads
        async with wl.write_lock(self._update_endpoint, self._graph_iri):
            present = await self.statement_count()
            if present:
                raise CollectionNotEmptyError(
                    f"collection {self._collection!r} already holds {present} graph statements on "
                    f"{self.query_endpoint}; restore into an empty collection",
                    collection=self._collection,
                    counts={"graph statements": present},
                )
            if quads:
                await self._insert([f"{quad.triple} ." for quad in quads], "import the graph")
                self._cache.clear()  # ids cached as absent may be stored now
        return staged.statements

    # -- layout ---------------------------------------------------------------------------------

    @classmethod
    async def from_settings_async(cls, settings: Settings, collection: str) -> SparqlServiceGraphStore:
        """:meth:`from_settings`, then :meth:`check_layout` (what the ``service`` factory opens).

        Raises:
            ConfigurationError: see :meth:`from_settings`.
            StoreLayoutError: the collection holds data of an older or unknown layout.
            BackendError: the server failed.
        """
        store = cls.from_settings(settings, collection)
        try:
            await store.check_layout()
        except BaseException:
            await store.close()
            raise
        return store

    async def check_layout(self) -> None:
        """Refuse a collection whose graph is not in the current layout (one or two queries).

        Raises:
            StoreLayoutError: the graph holds layout-1 data or records an unknown layout.
            BackendError: the server failed.
        """
        state = await self._read("read the layout version", self._graph_reader.layout())
        lay.check_layout(state, store=self._where(), migrate_hint=self._migrate_hint())

    def _where(self) -> str:
        return f"the SPARQL service at {self.query_endpoint} (collection {self._collection!r})"

    def _migrate_hint(self) -> str:
        if self._placement is not None:  # the same SPARQL_ENDPOINTS finds the shard again
            return (
                "GRAPH_STORE_MODE=service SPARQL_ENDPOINTS=... "
                f"charmem migrate --collection {self._collection}"
            )
        return (
            f"GRAPH_STORE_MODE=service SPARQL_QUERY_ENDPOINT={shlex.quote(self.query_endpoint)} "
            f"SPARQL_UPDATE_ENDPOINT={shlex.quote(self._update_endpoint)} "
            f"charmem migrate --collection {self._collection}"
        )

    @classmethod
    async def migrate_from_settings_async(cls, settings: Settings, collection: str) -> LayoutMigration:
        """Upgrade the collection on the server to the current layout (``charmem migrate``).

        Same promise as :meth:`charmem_oxigraph.OxigraphGraphStore.migrate_from_settings`: one
        update request per batch of nodes (atomic on a SPARQL 1.1 server), the version recorded
        last. Run it while no other process writes to the collection.

        Raises:
            ConfigurationError: see :meth:`from_settings`.
            StoreLayoutError: the collection records a newer layout than this charmem knows.
            BackendError: the server failed (batches already rewritten stay so: run it again).
        """
        store = cls.from_settings(settings, collection)
        try:
            return await store.migrate_layout()
        finally:
            await store.close()

    async def migrate_layout(self) -> LayoutMigration:
        """Upgrade this collection to the current layout (see :meth:`migrate_from_settings_async`)."""
        started = time.perf_counter()
        async with wl.write_lock(self._update_endpoint, self._graph_iri):
            outcome = await self._migrate_locked()
        return lay.migration_report(self._collection, self._where(), outcome, started)

    async def _migrate_locked(self) -> tuple[int | None, int, tuple[str, ...]]:
        """Rewrite layout-1 nodes, mark links, record the version (as ``_layout.migrate_in_place``)."""
        action, graph = "migrate the graph layout", self._graph_iri
        state = await self._read(action, lay.layout_state(graph))
        if state.current:
            return state.found, 0, ()
        if not lay.migratable(state):
            lay.check_layout(state, store=self._where(), migrate_hint=self._migrate_hint())
        count, unreadable = 0, list[str]()
        pending = await self._read(action, lay.pending(graph)) if state.found is None else []
        for batch in lay.batches(pending):
            step = await self._read(action, lay.migration_step(graph, batch))
            if step.update is not None:
                await self._update(step.update, action)  # one request per batch: atomic
            count += step.rewritten
            unreadable.extend(step.unreadable)
        marks = await self._read(action, lay.endpoint_marks(graph))
        if marks:
            await self._insert(marks, action)
        await self._update(lay.version_update(graph), action)
        self._cache.clear()
        return state.found, count or lay.marked_links(marks), tuple(unreadable)

    async def ping(self) -> None:
        """Send one trivial query (``ASK {}``) to check that the query endpoint answers.

        Raises:
            BackendError: the server is unreachable, slow or refuses the request.
        """
        await self._query("ASK {}", "check the server", _RESULTS_JSON)

    async def close(self) -> None:
        """Close the HTTP client (idempotent). Acknowledged writes are already on the server."""
        client, self._client = self._client, None
        if client is not None and self._owns_client:
            try:
                await client.aclose()
            except (httpx.HTTPError, OSError, RuntimeError) as exc:  # a client of a closed loop
                _log.debug(
                    "sparql_client_close_failed", collection=self._collection, error=type(exc).__name__
                )
