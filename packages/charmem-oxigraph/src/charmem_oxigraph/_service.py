"""The graph authority over any SPARQL 1.1 protocol server: :class:`SparqlServiceGraphStore`."""

from __future__ import annotations

import asyncio
import math
import weakref
from collections.abc import Generator, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import BinaryIO, Final
from urllib.parse import unquote, urlsplit, urlunsplit

import httpx
import tenacity
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
from charmem.errors import BackendError, BackupFormatError, CollectionNotEmptyError, ConfigurationError
from charmem.log import get_logger
from charmem.ports import EpisodeTurn
from charmem.settings import Settings, validate_collection_name
from pyoxigraph import (
    NamedNode,
    Quad,
    QueryResultsFormat,
    QuerySolution,
    QuerySolutions,
    RdfFormat,
    parse,
    parse_query_results,
    serialize,
)

from charmem_oxigraph import _logic as lg
from charmem_oxigraph import _queries as q
from charmem_oxigraph import _vocab as v
from charmem_oxigraph._cache import GraphCache
from charmem_oxigraph._codec import CorruptNodeError, StoredItem, reference_kinds

__all__ = [
    "BEARER_TOKEN_KEY",
    "DEFAULT_TIMEOUT",
    "PASSWORD_KEY",
    "TIMEOUT_KEY",
    "USERNAME_KEY",
    "SparqlServiceGraphStore",
]

#: Seconds one request (connect, send, answer) may take before it fails with ``BackendError``.
DEFAULT_TIMEOUT: Final = 10.0
#: Settings keys read from ``Settings.extra`` (never logged, never in a repr or an error).
USERNAME_KEY: Final = "SPARQL_USERNAME"
PASSWORD_KEY: Final = "SPARQL_PASSWORD"  # noqa: S105 - the name of a setting, not a secret
BEARER_TOKEN_KEY: Final = "SPARQL_BEARER_TOKEN"  # noqa: S105 - the name of a setting
TIMEOUT_KEY: Final = "SPARQL_TIMEOUT"

_RESULTS_JSON: Final = "application/sparql-results+json"
_ATTEMPTS: Final = 2  # a request failing before any answer (connection refused or reset) is sent twice
_RETRY_WAIT: Final = 0.05  # seconds between the two attempts

_log = get_logger("charmem_oxigraph.service")

# One writer lock per (event loop, update endpoint, graph): every store object of a collection in
# this process serialises its check-then-write on it. asyncio locks belong to one loop.
_WRITE_LOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], asyncio.Lock]] = (
    weakref.WeakKeyDictionary()
)


def _write_lock(update_endpoint: str, graph: str) -> asyncio.Lock:
    locks = _WRITE_LOCKS.setdefault(asyncio.get_running_loop(), {})
    return locks.setdefault((update_endpoint, graph), asyncio.Lock())


def _display(endpoint: str) -> str:
    """The endpoint without any user-info (``user:password@``) it may carry."""
    parts = urlsplit(endpoint)
    if "@" not in parts.netloc:
        return endpoint
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _route(endpoint: str, auth: httpx.Auth | None) -> tuple[str, httpx.Auth | None]:
    """The URL to request and the authentication to send with it.

    User-info in an endpoint URL (``http://user:password@host/query``) becomes HTTP basic
    authentication (percent-decoded; an explicit ``auth`` wins) and is removed from the URL that is
    requested, so it never reaches a log line (``httpx`` logs every request URL at INFO).
    """
    parts = urlsplit(endpoint)
    if "@" not in parts.netloc:
        return endpoint, auth
    if auth is None:
        auth = httpx.BasicAuth(unquote(parts.username or ""), unquote(parts.password or ""))
    return _display(endpoint), auth


def _check_endpoint(endpoint: str, key: str) -> str:
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigurationError(
            f"{key}={_display(endpoint)!r} is not an http(s) URL; give the SPARQL endpoint's full URL, "
            "e.g. http://127.0.0.1:7878/query",
            key=key,
        )
    return endpoint


class _BearerAuth(httpx.Auth):
    """``Authorization: Bearer <token>``; the token never appears in a repr."""

    def __init__(self, token: str) -> None:
        self._token = token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self._token}"
        yield request

    def __repr__(self) -> str:
        return "_BearerAuth(token=***)"


def _auth_from_settings(extra: Mapping[str, str]) -> httpx.Auth | None:
    def value(key: str) -> str | None:
        raw = extra.get(key)
        return raw.strip() if raw is not None and raw.strip() else None

    username, password, token = value(USERNAME_KEY), value(PASSWORD_KEY), value(BEARER_TOKEN_KEY)
    if token is not None and (username is not None or password is not None):
        raise ConfigurationError(
            f"set either {BEARER_TOKEN_KEY} or {USERNAME_KEY}/{PASSWORD_KEY}, not both",
            key=BEARER_TOKEN_KEY,
        )
    if token is not None:
        return _BearerAuth(token)
    if (username is None) != (password is None):
        missing = PASSWORD_KEY if password is None else USERNAME_KEY
        raise ConfigurationError(
            f"{missing} is required with {USERNAME_KEY if missing == PASSWORD_KEY else PASSWORD_KEY} "
            "(HTTP basic authentication)",
            key=missing,
        )
    if username is not None and password is not None:
        return httpx.BasicAuth(username, password)
    return None


def _timeout_from_settings(extra: Mapping[str, str]) -> float:
    raw = extra.get(TIMEOUT_KEY)
    if raw is None or not raw.strip():
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ConfigurationError(
            f"{TIMEOUT_KEY}={raw!r} must be a positive number of seconds", key=TIMEOUT_KEY
        )
    return value


def _retryable(exc: BaseException) -> bool:
    """A failure before the server answered anything (refused, reset): safe to send again.

    Reads are idempotent and an ``INSERT DATA`` of the same quads is too (RDF graphs are sets),
    so both may be sent twice. Timeouts are not retried: the time budget is spent.
    """
    return isinstance(exc, httpx.TransportError) and not isinstance(exc, httpx.TimeoutException)


class SparqlServiceGraphStore:
    """The graph authority of one collection on a SPARQL 1.1 protocol server (``service`` mode).

    Implements :class:`charmem.ports.GraphStore` with the same RDF layout, SPARQL reads and
    semantics as the embedded :class:`~charmem_oxigraph.OxigraphGraphStore`: the collection is the
    named graph ``urn:charmem:collection:<name>``; every read is one SPARQL query (built by the
    same code, ids bound with ``VALUES`` inside the ``GRAPH`` group) sent to the query endpoint
    (``POST``, ``application/sparql-query``, answers as SPARQL JSON results parsed by pyoxigraph);
    every :meth:`write_batch` is at most one ``INSERT DATA`` request to the update endpoint,
    which a SPARQL 1.1 server applies atomically. Literals are serialised by pyoxigraph
    (``str(Literal(...))``: N-Triples terms with correct escaping), so memory text is always data.

    Writers: the check-then-write of :meth:`write_batch` is serialised per (update endpoint,
    collection) by an :class:`asyncio.Lock` in this process. Writers in *other processes* against
    the same server are not isolated from it (SPARQL 1.1 has no conditional update that could
    express "insert unless stored with other content"): run one writing process per collection.

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
    ) -> None:
        self._collection = validate_collection_name(collection)
        self._query_endpoint = _check_endpoint(query_endpoint, "SPARQL_QUERY_ENDPOINT")
        self._update_endpoint = _check_endpoint(update_endpoint or query_endpoint, "SPARQL_UPDATE_ENDPOINT")
        if not (isinstance(timeout, int | float) and math.isfinite(timeout) and timeout > 0):
            raise ConfigurationError(f"timeout must be a positive number of seconds, not {timeout!r}")
        self._auth = auth
        self._routes = {
            endpoint: _route(endpoint, auth) for endpoint in (self._query_endpoint, self._update_endpoint)
        }
        self._timeout = float(timeout)
        self._owns_client = client is None
        self._client: httpx.AsyncClient | None = client or httpx.AsyncClient(
            timeout=httpx.Timeout(self._timeout), follow_redirects=False
        )
        self._graph_iri = v.collection_graph(collection)
        self._graph = NamedNode(self._graph_iri)
        # Only immutable knowledge (decoded items, stored kinds): other processes may write.
        self._cache = GraphCache(coherent=False)

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def from_settings(cls, settings: Settings, collection: str) -> SparqlServiceGraphStore:
        """Build the store ``GRAPH_STORE_MODE=service`` selects; sends no request.

        Reads ``SPARQL_QUERY_ENDPOINT`` and ``SPARQL_UPDATE_ENDPOINT`` (validated by core) and,
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
        if settings.graph_store_mode != "service" or not settings.sparql_query_endpoint:
            raise ConfigurationError(
                "SparqlServiceGraphStore needs GRAPH_STORE_MODE=service and SPARQL_QUERY_ENDPOINT",
                key="SPARQL_QUERY_ENDPOINT",
            )
        return cls(
            collection,
            query_endpoint=settings.sparql_query_endpoint,
            update_endpoint=settings.sparql_update_endpoint,
            auth=_auth_from_settings(settings.extra),
            timeout=_timeout_from_settings(settings.extra),
        )

    def for_collection(self, collection: str) -> SparqlServiceGraphStore:
        """Another collection (named graph) on the same server, endpoints and credentials.

        Args:
            collection: the other collection's name.

        Returns:
            SparqlServiceGraphStore: a new store with its own HTTP client; close each one.

        Raises:
            ConfigurationError: the collection name is not allowed.
        """
        return type(self)(
            collection,
            query_endpoint=self._query_endpoint,
            update_endpoint=self._update_endpoint,
            auth=self._auth,
            timeout=self._timeout,
        )

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
    def query_endpoint(self) -> str:
        """The query endpoint (user-info removed)."""
        return _display(self._query_endpoint)

    @property
    def update_endpoint(self) -> str:
        """The update endpoint (user-info removed)."""
        return _display(self._update_endpoint)

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
        self, client: httpx.AsyncClient, endpoint: str, content: bytes, headers: dict[str, str]
    ) -> httpx.Response:
        url, auth = self._routes[endpoint]
        if auth is None:
            return await client.post(url, content=content, headers=headers)
        return await client.post(url, content=content, headers=headers, auth=auth)

    async def _post(
        self, endpoint: str, action: str, content: bytes, content_type: str, accept: str
    ) -> bytes:
        """POST one protocol request, bounded by ``timeout`` seconds; the answer's body.

        Raises:
            BackendError: no answer in time, unreachable, an error status, or closed.
        """
        client = self._http()
        shown = _display(endpoint)
        headers = {"Content-Type": content_type, "Accept": accept}
        retrying = tenacity.AsyncRetrying(
            retry=tenacity.retry_if_exception(_retryable),
            stop=tenacity.stop_after_attempt(_ATTEMPTS),
            wait=tenacity.wait_fixed(_RETRY_WAIT),
            reraise=True,
        )
        try:
            async with asyncio.timeout(self._timeout):
                async for attempt in retrying:
                    with attempt:
                        response = await self._send(client, endpoint, content, headers)
        except TimeoutError as exc:
            raise BackendError(
                f"the SPARQL endpoint {shown} did not answer within {self._timeout:g} s while trying to "
                f"{action} in collection {self._collection!r}; check that the server is up and reachable"
            ) from exc
        except httpx.TimeoutException as exc:
            raise BackendError(
                f"the SPARQL endpoint {shown} did not answer within {self._timeout:g} s while trying to "
                f"{action} in collection {self._collection!r} ({type(exc).__name__}); check that the "
                "server is up and reachable"
            ) from exc
        except httpx.HTTPError as exc:
            raise BackendError(
                f"could not reach the SPARQL endpoint {shown} to {action} in collection "
                f"{self._collection!r}: {type(exc).__name__}: {exc}; check that the server is up and the "
                "URL is right"
            ) from exc
        if response.status_code >= 300:
            body = response.text[:300].strip()
            raise BackendError(
                f"the SPARQL endpoint {shown} refused to {action} in collection {self._collection!r}: "
                f"HTTP {response.status_code} {response.reason_phrase}"
                + (f": {body}" if body else "")
                + (
                    "; check SPARQL_USERNAME/SPARQL_PASSWORD or SPARQL_BEARER_TOKEN"
                    if response.status_code in (401, 403)
                    else ""
                )
            )
        return response.content

    async def _select(self, query: str, action: str) -> list[QuerySolution]:
        body = await self._post(
            self._query_endpoint, action, query.encode("utf-8"), "application/sparql-query", _RESULTS_JSON
        )
        try:
            solutions = parse_query_results(body, QueryResultsFormat.JSON)
            if not isinstance(solutions, QuerySolutions):
                raise TypeError("expected SELECT solutions, got a boolean")
            return list(solutions)
        except (SyntaxError, ValueError, TypeError) as exc:
            raise BackendError(
                f"the SPARQL endpoint {self.query_endpoint} answered a query to {action} in collection "
                f"{self._collection!r} with something that is not SPARQL JSON results: {exc}"
            ) from exc

    async def _insert(self, lines: Sequence[str], action: str = "write a batch") -> None:
        """One ``INSERT DATA`` request holding every triple (atomic on a SPARQL 1.1 server)."""
        await self._update(q.insert_data(self._graph_iri, lines), action)

    async def _update(self, update: str, action: str) -> None:
        """Send one SPARQL update request (a SPARQL 1.1 server applies a request atomically)."""
        await self._post(
            self._update_endpoint, action, update.encode("utf-8"), "application/sparql-update", "*/*"
        )

    def _corrupt(self, exc: CorruptNodeError) -> BackendError:
        return BackendError(
            f"stored data of collection {self._collection!r} at {self.query_endpoint} is not a valid "
            f"charmem graph ({exc}); check the store with charmem's admin tools"
        )

    async def _read_items(
        self, ids: Sequence[MemoryId], kinds: Sequence[str], action: str
    ) -> dict[MemoryId, StoredItem]:
        """The stored items among ``ids`` (stored as one of ``kinds``): cached, the rest in one query."""
        found, unknown = self._cache.items(ids)
        if unknown:
            known = self._cache.kinds(unknown)
            hinted = self._cache.hints(i for i in unknown if i not in known)
            iris = lg.node_iris(unknown, {**hinted, **known}, kinds)
            try:
                nodes = lg.nodes_from_rows(await self._select(q.nodes(self._graph_iri, iris), action))
                missed = [i for i in hinted if i not in nodes]
                if missed:  # not under the kind a reference suggested: try every other kind
                    retry = q.nodes(self._graph_iri, lg.retry_iris(missed, hinted, kinds))
                    nodes.update(lg.nodes_from_rows(await self._select(retry, action)))
                read = lg.decode_nodes(nodes)
            except CorruptNodeError as exc:
                raise self._corrupt(exc) from exc
            self._cache.remember_items(self._cache.generation(), read)
            self._cache.remember_hints(reference_kinds(nodes.values()))
            found.update(read)
        return found

    # -- the GraphStore port ------------------------------------------------------------------

    async def write_batch(self, batch: GraphBatch) -> GraphWriteResult:
        """Store a batch atomically: check, then at most one ``INSERT DATA`` request.

        Under this process's writer lock of the collection, each id of the batch is looked up as
        an object, link or record of any type (one query); equal content is skipped, any
        different content refuses the whole batch; the new items are sent in one update request,
        which the server applies entirely or not at all. Acknowledged writes are as durable as
        the server makes them.

        Args:
            batch: objects, links and lifecycle records.

        Returns:
            GraphWriteResult: ids inserted and ids already stored with equal content, in batch
            order.

        Raises:
            PurgedMemoryError: an id of the batch was purged; nothing was written.
            IdConflictError: an id is stored with different content (``ids`` and ``reasons`` name
                them); nothing was written.
            BackendError: the server failed or is unreachable; nothing was written (or, if the
                answer was lost after the server applied the update, everything was: replaying the
                batch is then accepted as equal content).
        """
        if not (batch.objects or batch.links or batch.records):
            return GraphWriteResult()
        prepared = lg.prepare_batch(batch)
        async with _write_lock(self._update_endpoint, self._graph_iri):
            found = await self._read_items(prepared.lookup, lg.STORED_KINDS, "write a batch")
            stored = {i: found[i] for i in prepared.items if i in found}
            kinds = {i: v.KIND_OF_CLASS[type(item)] for i, item in found.items()}
            purged = set(await self.tombstones(list(prepared.items)))
            inserted, existing, lines = lg.plan_write(prepared, stored, kinds, purged)
            if lines:
                await self._insert(lines)
        _log.debug(
            "sparql_batch_written",
            collection=self._collection,
            inserted=len(inserted),
            existing=len(existing),
        )
        return GraphWriteResult(inserted_ids=tuple(inserted), existing_ids=tuple(existing))

    def hint_object_types(self, types: Mapping[MemoryId, ObjectType]) -> None:
        """As :meth:`charmem_oxigraph.OxigraphGraphStore.hint_object_types` (no request is sent).

        Args:
            types: object type by id.
        """
        if not self.closed:
            self._cache.remember_hints(lg.kind_hints(types))

    async def get_objects(self, ids: Sequence[MemoryId]) -> dict[MemoryId, MemoryObject]:
        """Objects stored under ``ids``; absent ids (and ids of links) are missing from the dict.

        Args:
            ids: ids to look up.

        Returns:
            dict[MemoryId, MemoryObject]: equal to what was written, in request order.

        Raises:
            BackendError: the server failed or stored triples are not a valid object.
        """
        wanted = lg.unique(ids)
        return lg.objects_only(wanted, await self._read_items(wanted, v.OBJECT_KINDS, "read objects"))

    async def get_links(self, ids: Sequence[MemoryId]) -> dict[MemoryId, MemoryLink]:
        """Links stored under ``ids``; absent ids are missing from the dict.

        Raises:
            BackendError: the server failed or stored triples are not a valid link.
        """
        wanted = lg.unique(ids)
        return lg.links_only(wanted, await self._read_items(wanted, ("link",), "read links"))

    async def get_records(self, target_ids: Sequence[MemoryId]) -> list[LifecycleRecord]:
        """Lifecycle records about ``target_ids``, ordered by (``recorded_at``, ``id``).

        Raises:
            BackendError: the server failed or a stored record is not valid.
        """
        wanted = lg.unique(target_ids)
        if not wanted:
            return []
        query = q.records_about(self._graph_iri, lg.iris(wanted, v.NODE_KINDS))
        rows = await self._select(query, "read lifecycle records")
        try:
            return lg.records_from_rows(rows)
        except CorruptNodeError as exc:
            raise self._corrupt(exc) from exc

    async def links_of(
        self,
        ids: Sequence[MemoryId],
        *,
        relations: Sequence[Relation] | None = None,
    ) -> list[MemoryLink]:
        """Links whose ``from_id`` or ``to_id`` is in ``ids`` (optionally of ``relations``).

        Returns:
            list[MemoryLink]: each matching link once, ordered by link id.

        Raises:
            BackendError: the server failed or a stored link is not valid.
        """
        wanted = lg.unique(ids)
        if not wanted or (relations is not None and not relations):
            return []
        chosen = None if relations is None else tuple(dict.fromkeys(Relation(r) for r in relations))
        iris = lg.endpoint_iris(wanted, self._cache.kinds(wanted), chosen)
        rows = await self._select(q.links_of(self._graph_iri, iris, lg.relation_iris(chosen)), "read links")
        try:
            links, hints = lg.links_and_hints(rows)
        except CorruptNodeError as exc:
            raise self._corrupt(exc) from exc
        self._cache.remember_items(self._cache.generation(), {link.id: link for link in links})
        self._cache.remember_hints(hints)
        return links

    async def currency(
        self, ids: Sequence[MemoryId], *, as_of: datetime | None = None
    ) -> dict[MemoryId, CurrencyStatus]:
        """Currency of stored objects (DESIGN §4.1): suppressed beats superseded.

        Args:
            ids: memories to classify.
            as_of: record time of the view (timezone-aware), or ``None`` for now.

        Returns:
            dict[MemoryId, CurrencyStatus]: one status per stored object among ``ids``.

        Raises:
            ValueError: ``as_of`` is naive.
            BackendError: the server failed or a stored instant is not valid.
        """
        lg.check_as_of(as_of)
        wanted = lg.unique(ids)
        if not wanted:
            return {}
        iris = lg.currency_iris(wanted, self._cache.kinds(wanted))
        rows = await self._select(q.currency(self._graph_iri, iris), "read currency")
        try:
            return lg.currency_from_facts(wanted, lg.facts_from_rows(wanted, rows), as_of)
        except ValueError as exc:
            raise BackendError(
                f"a stored instant of collection {self._collection!r} is not valid: {exc}"
            ) from exc

    async def episode_turns(self, episode_ids: Sequence[MemoryId]) -> dict[MemoryId, list[EpisodeTurn]]:
        """The turns of each episode (:class:`charmem.ports.EpisodeTurnReader`), in one query.

        Reads only the order fields of the episodes' observations (never cached: other processes
        may add turns).

        Returns:
            dict[MemoryId, list[EpisodeTurn]]: one turn per ``has_observation`` link from the
            episode to a stored observation of it; episodes without turns are missing.

        Raises:
            BackendError: the server failed or a stored turn is not valid.
        """
        wanted = lg.unique(episode_ids)
        if not wanted:
            return {}
        iris = lg.episode_turn_iris(wanted, self._cache.kinds(wanted))
        rows = await self._select(q.episode_turns(self._graph_iri, iris), "read episode turns")
        try:
            return lg.turns_from_rows(rows)
        except CorruptNodeError as exc:
            raise self._corrupt(exc) from exc

    async def statement_count(self) -> int:
        """Number of triples in the collection's named graph.

        Raises:
            BackendError: the server failed.
        """
        return lg.count_from_rows(await self._select(q.statement_count(self._graph_iri), "count statements"))

    async def object_ids(self, object_types: Sequence[ObjectType] | None = None) -> list[MemoryId]:
        """Ids of every stored object (optionally of ``object_types``), sorted (operational tools).

        Raises:
            BackendError: the server failed.
        """
        query = q.typed_nodes(self._graph_iri, lg.class_iris(object_types))
        return lg.ids_from_rows(await self._select(query, "list object ids"))

    async def link_ids(self) -> list[MemoryId]:
        """Ids of every stored link, sorted (operational tools).

        Raises:
            BackendError: the server failed.
        """
        query = q.typed_nodes(self._graph_iri, [v.VOCAB + v.CLASS_OF_KIND["link"]])
        return lg.ids_from_rows(await self._select(query, "list link ids"))

    async def name_assertions(self) -> list[tuple[MemoryId, MemoryId, str]]:
        """Every stored ``KnownAs`` assertion as ``(belief_id, subject_id, name)``, sorted.

        Raises:
            BackendError: the server failed.
        """
        return lg.names_from_rows(await self._select(q.name_assertions(self._graph_iri), "read names"))

    async def tombstones(self, ids: Sequence[MemoryId] | None = None) -> dict[MemoryId, Tombstone]:
        """Tombstones of purged objects among ``ids`` (``None``: all of the collection), by id.

        Returns:
            dict[MemoryId, Tombstone]: in request order (all: sorted by id).

        Raises:
            BackendError: the server failed or a tombstone is not valid.
        """
        wanted = None if ids is None else lg.unique(ids)
        if wanted is not None and not wanted:
            return {}
        iris = None if wanted is None else lg.iris(wanted, v.OBJECT_KINDS)
        rows = await self._select(q.tombstones(self._graph_iri, iris), "read tombstones")
        try:
            found = lg.tombstones_from_rows(rows)
        except CorruptNodeError as exc:
            raise self._corrupt(exc) from exc
        return found if wanted is None else {i: found[i] for i in wanted if i in found}

    async def erase(self, erasure: GraphErasure) -> None:
        """Remove objects, links and records and write tombstones in one update request.

        See :meth:`charmem.ports.GraphStore.erase`. Under this process's writer lock of the
        collection: one query for the ids that are tombstones already (skipped), then one SPARQL
        update request (``DELETE ... ; INSERT DATA``), which a SPARQL 1.1 server applies
        atomically. What the server keeps of deleted data (journals, snapshots) is its own matter.

        Raises:
            BackendError: the server failed; nothing was erased (or, if the answer was lost after
                the server applied it, everything was: applying it again is harmless).
        """
        if not len(erasure):
            return
        async with _write_lock(self._update_endpoint, self._graph_iri):
            ids = [t.id for t in erasure.tombstones]
            already = set(await self.tombstones(ids)) if ids else set()
            update = lg.erase_update(self._graph, erasure, already)
            if update is not None:
                await self._update(update, "erase purged memories")
                # cached items are assumed never to change: an erasure breaks that. Another
                # process's cache of this graph keeps them until it reopens (see the README).
                self._cache.clear()
        _log.info("sparql_erased", collection=self._collection, items=len(erasure))

    async def export_graph(self, out: BinaryIO) -> GraphExport:
        """Write the collection's named graph as N-Quads (``application/n-quads``) to ``out``.

        One ``CONSTRUCT`` query answered as N-Triples (held in memory), turned into quads of the
        collection's graph by pyoxigraph. Writers of this process wait meanwhile; writers of other
        processes are not held back (see the class notes).

        Returns:
            GraphExport: the media type and the number of quads written.

        Raises:
            BackendError: the server failed, answered something that is not N-Triples, or ``out``
                could not be written.
        """
        async with _write_lock(self._update_endpoint, self._graph_iri):
            body = await self._post(
                self._query_endpoint,
                "export the graph",
                q.construct_all(self._graph_iri).encode("utf-8"),
                "application/sparql-query",
                "application/n-triples",
            )
        count = 0

        def quads() -> Generator[Quad, None, None]:
            nonlocal count
            for triple in parse(body, RdfFormat.N_TRIPLES):
                count += 1
                yield Quad(triple.subject, triple.predicate, triple.object, self._graph)

        try:
            await asyncio.to_thread(serialize, quads(), out, RdfFormat.N_QUADS)
        except (SyntaxError, OSError, ValueError) as exc:
            raise BackendError(
                f"could not export collection {self._collection!r} from {self.query_endpoint}: {exc}"
            ) from exc
        return GraphExport(media_type=v.DUMP_MEDIA_TYPE, statements=count)

    async def import_graph(self, source: BinaryIO, media_type: str) -> int:
        """Load an N-Quads dump of this collection into it while it is empty: one ``INSERT DATA``.

        The whole dump is parsed and checked (every quad in this collection's named graph) before
        the one update request is sent, which a SPARQL 1.1 server applies atomically; a very large
        collection needs a server that accepts a request of the dump's size.

        Returns:
            int: quads loaded.

        Raises:
            CollectionNotEmptyError: the collection holds statements; nothing written.
            BackupFormatError: another media type, invalid N-Quads, or another graph; nothing
                written.
            BackendError: the server failed; nothing written.
        """
        lg.check_media_type(media_type)
        try:
            quads = await asyncio.to_thread(
                lambda: list(lg.check_dump(parse(source, RdfFormat.N_QUADS), self._graph))
            )
        except SyntaxError as exc:
            raise BackupFormatError(f"the graph dump is not valid N-Quads: {exc}") from exc
        async with _write_lock(self._update_endpoint, self._graph_iri):
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
        return len(quads)

    async def ping(self) -> None:
        """Send one trivial query (``ASK {}``) to check that the query endpoint answers.

        Raises:
            BackendError: the server is unreachable, slow or refuses the request.
        """
        await self._post(
            self._query_endpoint, "check the server", b"ASK {}", "application/sparql-query", _RESULTS_JSON
        )

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

    async def __aenter__(self) -> SparqlServiceGraphStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
