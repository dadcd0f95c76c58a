"""The service vector index: one Qdrant server collection per charmem collection (DESIGN §7)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import operator
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar
from urllib.parse import urlsplit

import qdrant_edge as qe
import tenacity
from qdrant_client import AsyncQdrantClient, models

from charmem.domain.ids import MemoryId
from charmem.domain.model import ObjectType
from charmem.domain.retrieval import CompletenessKind, VectorRecallCompleteness
from charmem.errors import BackendError, CharmemError, ConfigurationError
from charmem.log import get_logger
from charmem.ports import VectorHit, VectorPoint, VectorQuery, VectorSearchResult
from charmem.settings import validate_collection_name
from charmem_qdrant._edge import (
    _PAYLOAD_ID,
    _PAYLOAD_TYPE,
    _SCROLL_PAGE,
    DENSE_VECTOR,
    LEXICAL_CUE_KEY,
    LEXICAL_VECTOR,
    _checked_vector,
    _checked_weights,
    _weights_from_settings,
)
from charmem_qdrant._fusion import (
    DEFAULT_FUSION_WEIGHTS,
    RRF_K,
    StageRanker,
    rrf_fuse,
    stage_size,
)
from charmem_qdrant._hnsw import bool_setting
from charmem_qdrant._marker import ShardMarker

if TYPE_CHECKING:
    from charmem.settings import Settings

__all__ = [
    "COLLECTION_PREFIX",
    "DEFAULT_TIMEOUT",
    "METADATA_KEY",
    "TIMEOUT_KEY",
    "QdrantServiceVectorIndex",
    "service_collection_name",
]

_T = TypeVar("_T")

#: The Qdrant collection of charmem collection ``c`` is ``charmem-c``.
COLLECTION_PREFIX: Final = "charmem-"
#: The key of the collection metadata holding the embedder fingerprint (the marker document).
METADATA_KEY: Final = "charmem"
#: Seconds one call (including its retries) may take before it fails with ``BackendError``.
DEFAULT_TIMEOUT: Final = 5.0
#: Settings key (read from ``Settings.extra``) overriding :data:`DEFAULT_TIMEOUT`, in seconds.
TIMEOUT_KEY: Final = "QDRANT_TIMEOUT"

_CONNECTION_KEY: Final = "QDRANT_CONNECTION_STRING"
_ATTEMPTS: Final = 3  # a call refused as UNAVAILABLE (server down or restarting) is tried 3 times
_RETRY_WAIT: Final = 0.2  # seconds before the first retry (doubled before the second)
# gRPC reconnects a broken channel with exponential back-off (default up to 120 s); keep it short
# so that the first call after the server is back finds the channel reconnected.
_GRPC_OPTIONS: Final[dict[str, Any]] = {
    "grpc.initial_reconnect_backoff_ms": 100,
    "grpc.min_reconnect_backoff_ms": 100,
    "grpc.max_reconnect_backoff_ms": 1000,
}

_log = get_logger("charmem_qdrant.service")


def service_collection_name(collection: str) -> str:
    """The Qdrant collection holding charmem collection ``collection``: ``charmem-<collection>``.

    Raises:
        ConfigurationError: the collection name is not allowed.
    """
    return COLLECTION_PREFIX + validate_collection_name(collection)


def _type_filter(
    object_types: Sequence[ObjectType], within: Sequence[MemoryId] | None = None
) -> models.Filter | None:
    """Scope by object type and, with ``within``, to those point ids (``VectorQuery``)."""
    must: list[models.Condition] = []
    if object_types:
        values = sorted({ObjectType(t).value for t in object_types})
        must.append(models.FieldCondition(key=_PAYLOAD_TYPE, match=models.MatchAny(any=values)))
    if within is not None:
        must.append(models.HasIdCondition(has_id=sorted(str(MemoryId(i)) for i in within)))
    return models.Filter(must=must) if must else None


def _point_key(point: models.ScoredPoint) -> tuple[str, float]:
    """A scored point's (id, score), the input of the canonical ranking and of the fusion."""
    return str(point.id), float(point.score)


def _point_id(point: models.ScoredPoint) -> str:
    """A scored point's id as the canonical ranking compares it."""
    return str(point.id)


#: A scored point's stage score.
_point_score: Final = operator.attrgetter("score")


def _is_unavailable(exc: BaseException) -> bool:
    """A gRPC ``UNAVAILABLE`` (server down, restarting, or channel reconnecting): worth a retry.

    Every call of the index is idempotent (reads, upserts of whole points, deletes by id), so
    sending it again is safe.
    """
    code = getattr(exc, "code", None)
    if callable(code):
        try:
            name = getattr(code(), "name", "")
        except Exception:  # not a gRPC error after all
            return False
        return bool(name == "UNAVAILABLE")
    return False


def _describe(exc: BaseException) -> str:
    """A one-line description of a driver error (a gRPC error as ``CODE: details``)."""
    code, details = getattr(exc, "code", None), getattr(exc, "details", None)
    if callable(code) and callable(details):
        try:
            return f"gRPC {getattr(code(), 'name', code())}: {details()}"
        except Exception:  # noqa: S110 - fall back to the plain form below
            pass
    return f"{type(exc).__name__}: {exc}"


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


def _client_from_settings(settings: Settings, timeout: float) -> tuple[AsyncQdrantClient, str]:
    """An ``AsyncQdrantClient`` speaking gRPC to ``QDRANT_CONNECTION_STRING``, and its endpoint.

    Raises:
        ConfigurationError: the connection string is missing or not an http(s) URL with a host.
    """
    raw = settings.qdrant_connection_string
    if settings.vector_store_mode != "service" or not raw:
        raise ConfigurationError(
            "QdrantServiceVectorIndex needs VECTOR_STORE_MODE=service and QDRANT_CONNECTION_STRING "
            "(the gRPC endpoint, e.g. http://127.0.0.1:6334)",
            key=_CONNECTION_KEY,
        )
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"{_CONNECTION_KEY} must be an http(s) URL of the gRPC endpoint, e.g. "
            "http://127.0.0.1:6334",
            key=_CONNECTION_KEY,
        )
    try:
        port = parts.port or 6334
    except ValueError as exc:
        raise ConfigurationError(
            f"{_CONNECTION_KEY} has an invalid port", key=_CONNECTION_KEY
        ) from exc
    endpoint = f"{parts.scheme}://{parts.hostname}:{port}"
    client = AsyncQdrantClient(
        host=parts.hostname,
        grpc_port=port,
        prefer_grpc=True,
        https=parts.scheme == "https",
        api_key=settings.qdrant_api_key,
        timeout=max(1, math.ceil(timeout)),
        grpc_options=dict(_GRPC_OPTIONS),
        check_compatibility=False,  # it would send a REST request from the constructor
    )
    return client, endpoint


def _run_blocking(factory: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """Run a coroutine to completion on a private event loop in a helper thread.

    For the blocking ``from_settings`` / ``drop_from_settings``, which may be called from a thread
    that already runs a loop.
    """
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="charmem-qdrant") as pool:
        return pool.submit(asyncio.run, factory()).result()


class QdrantServiceVectorIndex:
    """Candidate recall on a Qdrant server over gRPC (the ``service`` vector index).

    The same contract, layout and ordering as :class:`~charmem_qdrant.EdgeVectorIndex`, on a
    server:

    * **Collection**: charmem collection ``c`` is the Qdrant collection ``charmem-c``
      (:func:`service_collection_name`), created on first open with a dense cosine vector
      ``"dense"`` (``vector_size`` floats), a sparse vector ``"lexical"`` (``Modifier.IDF``),
      indexing threshold 0 (no HNSW: every search is an exact scan) and a keyword index on
      ``object_type``.
    * **Points**: id = the MemoryId UUID; payload ``{"object_type": ..., "memory_id": ...}``; the
      sparse vector is ``qdrant_edge.Bm25().embed_document(text)``, computed locally exactly as the
      embedded shard does, so both hold identical vectors.
    * **Fingerprint**: the marker document of the embedded shard (collection, model id, vector
      size, schema version) is stored in the collection's **metadata** under ``"charmem"``. Another
      size raises :class:`~charmem.errors.DimensionMismatchError`, another model of the same size
      :class:`~charmem.errors.EmbedderMismatchError`; a collection without the marker is adopted
      when empty and refused (``ConfigurationError``) when it holds points.
    * **Search**: exact dense search, or with the lexical cue the same two filtered stages as
      the embedded shard (exact dense cosine and BM25, each its best ``max(4 * limit, 64)``
      points) run as plain queries in one ``query_batch_points`` request, each ranked by score
      descending, id ascending (fetching more while a cut is tied), and fused client-side by the
      shared rule of :mod:`charmem_qdrant._fusion`: reciprocal rank fusion as Qdrant defines it
      (``k`` = 60, 0-based ranks, ``fusion_weights``) except that points with equal stage scores
      share the rank of the first of their tie group. Qdrant's ``RrfQuery`` is not used: it ranks
      equal stage scores by where the points are stored, an order set by the insertion order
      (measured on qdrant-client's local mode and Qdrant Edge), so identical points got different
      fused scores and hits depended on the insertion order, against DESIGN §6.6. Hits are ordered
      by score descending, ties by id ascending; completeness ``exhaustive`` with ``scanned`` = the
      exact filtered count.
    * **Failures**: every call is bounded by ``timeout`` seconds in total; a call refused as
      ``UNAVAILABLE`` (server down or restarting) is tried up to 3 times within that budget (every
      call is idempotent). Anything else from the driver, or running out of time, raises
      :class:`~charmem.errors.BackendError` naming the endpoint; the API key never appears in a
      repr, a log line or an error.

    Build with :meth:`open` (any ``AsyncQdrantClient``, e.g. ``AsyncQdrantClient(":memory:")``),
    :meth:`from_settings_async` or :meth:`from_settings`.

    Args:
        client: an open ``AsyncQdrantClient``.
        collection: the charmem collection name.
        model_id: the embedder fingerprint's model id.
        vector_size: the embedder fingerprint's dimension, >= 1.
        lexical: fuse the BM25 lexical cue into searches that have cue text.
        timeout: seconds one call may take, > 0.
        endpoint: how to name the server in messages (never holding credentials).
        owns_client: close ``client`` on :meth:`close`.
        api_key: a secret to scrub from error messages (the client's API key).
        fusion_weights: the RRF weights of the (dense, lexical) stages, finite and > 0;
            ``DEFAULT_FUSION_WEIGHTS`` (1.5, 1.0) by default (as
            :class:`~charmem_qdrant.EdgeVectorIndex`).
    """

    def __init__(
        self,
        client: AsyncQdrantClient,
        collection: str,
        *,
        model_id: str,
        vector_size: int,
        lexical: bool = False,
        timeout: float = DEFAULT_TIMEOUT,
        endpoint: str = "the Qdrant server",
        owns_client: bool = False,
        api_key: str | None = None,
        fusion_weights: tuple[float, float] = DEFAULT_FUSION_WEIGHTS,
    ) -> None:
        self._name = service_collection_name(collection)
        weights = _checked_weights(fusion_weights)
        if not isinstance(model_id, str) or not model_id.strip():
            raise ConfigurationError("model_id must be a non-empty string", key="model_id")
        if isinstance(vector_size, bool) or not isinstance(vector_size, int) or vector_size < 1:
            raise ConfigurationError(
                f"vector_size must be a positive int, not {vector_size!r}", key="vector_size"
            )
        if not (isinstance(timeout, int | float) and math.isfinite(timeout) and timeout > 0):
            raise ConfigurationError(
                f"timeout must be a positive number of seconds, not {timeout!r}"
            )
        self._client: AsyncQdrantClient | None = client
        self._collection = collection
        self._model_id = model_id
        self._vector_size = vector_size
        self._lexical = lexical
        self._weights = weights
        self._timeout = float(timeout)
        self._endpoint = endpoint
        self._owns_client = owns_client
        self._secret = api_key
        self._bm25 = qe.Bm25()

    # ------------------------------------------------------------------ construction

    @classmethod
    async def open(
        cls,
        client: AsyncQdrantClient,
        collection: str,
        *,
        model_id: str,
        vector_size: int,
        lexical: bool = False,
        timeout: float = DEFAULT_TIMEOUT,  # noqa: ASYNC109 - the budget of each later call
        endpoint: str = "the Qdrant server",
        owns_client: bool = False,
        api_key: str | None = None,
        fusion_weights: tuple[float, float] = DEFAULT_FUSION_WEIGHTS,
    ) -> QdrantServiceVectorIndex:
        """Open (or create) the collection's Qdrant collection and check its fingerprint.

        Args:
            client: an ``AsyncQdrantClient`` (remote over gRPC, or ``location=":memory:"``).
            collection: the charmem collection name.
            model_id: the embedding provider's model id.
            vector_size: the embedding provider's dimension.
            lexical: fuse the BM25 lexical cue into searches that have cue text.
            timeout: seconds one call may take.
            endpoint: how to name the server in messages.
            owns_client: close ``client`` when the index is closed (also on a failed open).
            api_key: a secret to scrub from error messages.
            fusion_weights: the RRF weights of the (dense, lexical) stages, finite and > 0.

        Returns:
            QdrantServiceVectorIndex: an open index.

        Raises:
            ConfigurationError: bad name, model id, size, timeout or fusion weights; a collection
                holding points but no charmem marker; or a marker naming another collection.
            DimensionMismatchError: the collection stores vectors of another size.
            EmbedderMismatchError: the collection was indexed with another model of that size.
            BackendError: the server is unreachable, too slow, or failed.
        """
        index = cls(
            client,
            collection,
            model_id=model_id,
            vector_size=vector_size,
            lexical=lexical,
            timeout=timeout,
            endpoint=endpoint,
            owns_client=owns_client,
            api_key=api_key,
            fusion_weights=fusion_weights,
        )
        try:
            await index._prepare()
        except BaseException:
            await index.close()
            raise
        return index

    @classmethod
    async def from_settings_async(
        cls, settings: Settings, collection: str, *, model_id: str, vector_size: int
    ) -> QdrantServiceVectorIndex:
        """Connect to ``QDRANT_CONNECTION_STRING`` over gRPC and open the collection.

        Reads ``QDRANT_CONNECTION_STRING`` (``http(s)://host:grpc-port``, port default 6334),
        ``QDRANT_API_KEY`` (optional) and, from ``settings.extra``, ``QDRANT_TIMEOUT`` (seconds
        per call, default 5), ``VECTOR_LEXICAL_CUE`` (default true) and ``VECTOR_LEXICAL_WEIGHT``
        (the lexical stage's RRF weight, default 1.0).

        Raises:
            ConfigurationError, DimensionMismatchError, EmbedderMismatchError, BackendError: as
                :meth:`open`; ``ConfigurationError`` also for a malformed setting.
        """
        validate_collection_name(collection)
        lexical = bool_setting(settings, LEXICAL_CUE_KEY, default=True)
        weights = _weights_from_settings(settings)
        timeout = _timeout_from_settings(settings.extra)
        client, endpoint = _client_from_settings(settings, timeout)
        return await cls.open(
            client,
            collection,
            model_id=model_id,
            vector_size=vector_size,
            lexical=lexical,
            timeout=timeout,
            endpoint=endpoint,
            owns_client=True,
            api_key=settings.qdrant_api_key,
            fusion_weights=weights,
        )

    @classmethod
    def from_settings(
        cls, settings: Settings, collection: str, *, model_id: str, vector_size: int
    ) -> QdrantServiceVectorIndex:
        """Blocking :meth:`from_settings_async` (for callers without an event loop).

        The collection is opened and checked on a private event loop with a short-lived client;
        the returned index holds a new client whose gRPC channel is made on first use in the
        caller's loop (an ``asyncio`` gRPC channel belongs to one loop). ``CharacterMemory.open``
        uses :meth:`from_settings_async` instead.

        Raises:
            ConfigurationError, DimensionMismatchError, EmbedderMismatchError, BackendError: as
                :meth:`from_settings_async`.
        """

        async def check() -> None:
            opened = await cls.from_settings_async(
                settings, collection, model_id=model_id, vector_size=vector_size
            )
            await opened.close()

        _run_blocking(check)
        timeout = _timeout_from_settings(settings.extra)
        client, endpoint = _client_from_settings(settings, timeout)
        return cls(
            client,
            collection,
            model_id=model_id,
            vector_size=vector_size,
            lexical=bool_setting(settings, LEXICAL_CUE_KEY, default=True),
            timeout=timeout,
            endpoint=endpoint,
            owns_client=True,
            api_key=settings.qdrant_api_key,
            fusion_weights=_weights_from_settings(settings),
        )

    @classmethod
    async def drop_async(
        cls,
        client: AsyncQdrantClient,
        collection: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,  # noqa: ASYNC109 - the budget of each call
        endpoint: str = "the Qdrant server",
    ) -> bool:
        """Delete the Qdrant collection of ``collection`` (points and fingerprint), if any.

        For ``rebuild_vector_index()`` with another embedder: drop, then open with the new
        fingerprint and re-upsert from the graph. Unlike the embedded shard there is no lock: an
        index of this collection still open elsewhere fails on its next call.

        Returns:
            True if a collection was deleted, False if there was none.

        Raises:
            ConfigurationError: bad collection name.
            BackendError: the server is unreachable, too slow, or failed.
        """
        name = service_collection_name(collection)
        index = cls(
            client, collection, model_id="drop", vector_size=1, timeout=timeout, endpoint=endpoint
        )
        if not await index._call("look up the collection", lambda: client.collection_exists(name)):
            return False
        await index._call("drop the collection", lambda: client.delete_collection(name))
        _log.info("vector_collection_dropped", collection=collection, qdrant_collection=name)
        return True

    @classmethod
    async def drop_from_settings_async(cls, settings: Settings, collection: str) -> bool:
        """:meth:`drop_async` on the server of ``QDRANT_CONNECTION_STRING``.

        Raises:
            ConfigurationError, BackendError: as :meth:`drop_async`, or a malformed setting.
        """
        validate_collection_name(collection)
        timeout = _timeout_from_settings(settings.extra)
        client, endpoint = _client_from_settings(settings, timeout)
        try:
            return await cls.drop_async(client, collection, timeout=timeout, endpoint=endpoint)
        finally:
            await client.close()

    @classmethod
    def drop_from_settings(cls, settings: Settings, collection: str) -> bool:
        """Blocking :meth:`drop_from_settings_async`.

        Raises:
            ConfigurationError, BackendError: as :meth:`drop_async`, or a malformed setting.
        """
        return _run_blocking(lambda: cls.drop_from_settings_async(settings, collection))

    async def _prepare(self) -> None:
        client = self._live("open the collection")
        name = self._name
        exists = await self._call("look up the collection", lambda: client.collection_exists(name))
        if not exists:
            try:
                await self._call("create the collection", self._create)
            except BackendError:
                # another opener may have created it meanwhile: then adopt theirs, else re-raise
                if not await self._call(
                    "look up the collection", lambda: client.collection_exists(name)
                ):
                    raise
        info = await self._call("read the collection", lambda: client.get_collection(name))
        self._check_info(info)
        if not (info.config.metadata or {}).get(METADATA_KEY):
            marker = self._marker()
            await self._call(
                "record the embedder fingerprint",
                lambda: client.update_collection(
                    name, metadata={METADATA_KEY: marker.to_document()}
                ),
            )
        if _PAYLOAD_TYPE not in (info.payload_schema or {}) and not self._is_local():
            await self._call(
                "index the object_type payload",
                lambda: client.create_payload_index(
                    name, _PAYLOAD_TYPE, field_schema=models.PayloadSchemaType.KEYWORD, wait=True
                ),
            )
        _log.info(
            "vector_collection_opened",
            collection=self._collection,
            qdrant_collection=name,
            created=not exists,
            points=info.points_count,
            lexical=self._lexical,
        )

    def _is_local(self) -> bool:
        """Whether the client is qdrant-client's local mode (payload indexes do nothing there)."""
        return type(getattr(self._client, "_client", None)).__name__ == "AsyncQdrantLocal"

    def _marker(self) -> ShardMarker:
        return ShardMarker(
            collection=self._collection, model_id=self._model_id, vector_size=self._vector_size
        )

    async def _create(self) -> bool:
        client = self._live("create the collection")
        return await client.create_collection(
            self._name,
            vectors_config={
                DENSE_VECTOR: models.VectorParams(
                    size=self._vector_size, distance=models.Distance.COSINE
                )
            },
            sparse_vectors_config={
                LEXICAL_VECTOR: models.SparseVectorParams(modifier=models.Modifier.IDF)
            },
            optimizers_config=models.OptimizersConfigDiff(indexing_threshold=0),
            metadata={METADATA_KEY: self._marker().to_document()},
        )

    def _check_info(self, info: models.CollectionInfo) -> None:
        """Check the collection's layout and fingerprint against this opener.

        Raises:
            ConfigurationError: not a charmem collection, or holding points without a marker.
            DimensionMismatchError: another vector size.
            EmbedderMismatchError: another model of the same size.
        """
        where = f"{self._name} on {self._endpoint}"
        vectors = info.config.params.vectors
        dense = vectors.get(DENSE_VECTOR) if isinstance(vectors, dict) else None
        if dense is None:
            raise ConfigurationError(
                f"the Qdrant collection {where} has no dense vector named {DENSE_VECTOR!r}, so "
                "it was not made by charmem-qdrant; delete or rename it, then rebuild the "
                "vectors with rebuild_vector_index()",
                key=_CONNECTION_KEY,
            )
        document = (info.config.metadata or {}).get(METADATA_KEY)
        if document is None:
            if info.points_count:
                raise ConfigurationError(
                    f"the Qdrant collection {where} holds {info.points_count} points but no "
                    "charmem fingerprint in its metadata, so its embedder is unknown; delete it "
                    "and rebuild the vectors with rebuild_vector_index()",
                    key=_CONNECTION_KEY,
                )
            marker = ShardMarker(
                collection=self._collection, model_id=self._model_id, vector_size=dense.size
            )
        else:
            marker = ShardMarker.from_document(document, where=where, key=_CONNECTION_KEY)
        if marker.collection != self._collection:
            raise ConfigurationError(
                f"the Qdrant collection {where} belongs to charmem collection "
                f"{marker.collection!r}, not {self._collection!r}; delete it or choose another "
                "collection name",
                key=_CONNECTION_KEY,
            )
        if dense.size != marker.vector_size:  # the collection's own config is authoritative
            marker = ShardMarker(
                collection=marker.collection, model_id=marker.model_id, vector_size=dense.size
            )
        marker.check(
            collection=self._collection,
            model_id=self._model_id,
            vector_size=self._vector_size,
            path=where,
        )

    # ------------------------------------------------------------------ properties

    @property
    def collection(self) -> str:
        """The charmem collection this index serves."""
        return self._collection

    @property
    def qdrant_collection(self) -> str:
        """The Qdrant collection, ``charmem-<collection>``."""
        return self._name

    @property
    def model_id(self) -> str:
        """The embedding model id of the fingerprint."""
        return self._model_id

    @property
    def vector_size(self) -> int:
        """The dense vector dimension of the fingerprint."""
        return self._vector_size

    @property
    def lexical(self) -> bool:
        """Whether :meth:`search` fuses the BM25 lexical cue when a query has text."""
        return self._lexical

    @property
    def fusion_weights(self) -> tuple[float, float]:
        """The RRF weights of the (dense, lexical) stages of a fused search."""
        return self._weights

    @property
    def timeout(self) -> float:
        """Seconds one call may take."""
        return self._timeout

    @property
    def endpoint(self) -> str:
        """The server as named in messages."""
        return self._endpoint

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has run."""
        return self._client is None

    def __repr__(self) -> str:
        state = "closed" if self._client is None else "open"
        return (
            f"QdrantServiceVectorIndex(collection={self._collection!r}, "
            f"qdrant_collection={self._name!r}, endpoint={self._endpoint!r}, "
            f"model_id={self._model_id!r}, vector_size={self._vector_size}, "
            f"lexical={self._lexical}, fusion_weights={self._weights}, "
            f"timeout={self._timeout:g}, {state})"
        )

    # ------------------------------------------------------------------ plumbing

    def _live(self, action: str) -> AsyncQdrantClient:
        if self._client is None:
            raise BackendError(
                f"cannot {action}: the vector index of collection {self._collection!r} is closed; "
                "open a new one"
            )
        return self._client

    def _scrub(self, text: str) -> str:
        if self._secret:
            text = text.replace(self._secret, "***")
        return text

    async def _call(self, action: str, operation: Callable[[], Awaitable[_T]]) -> _T:
        """Run one driver call, bounded by ``timeout`` seconds, retrying ``UNAVAILABLE``.

        Raises:
            BackendError: out of time, or any driver failure (cause chained, API key scrubbed).
        """
        retrying = tenacity.AsyncRetrying(
            retry=tenacity.retry_if_exception(_is_unavailable),
            stop=tenacity.stop_after_attempt(_ATTEMPTS),
            wait=tenacity.wait_exponential(multiplier=_RETRY_WAIT, min=_RETRY_WAIT),
            reraise=True,
        )
        where = f"collection {self._collection!r} ({self._name} on {self._endpoint})"
        try:
            async with asyncio.timeout(self._timeout):
                async for attempt in retrying:
                    with attempt:
                        return await operation()
        except CharmemError:
            raise
        except TimeoutError as exc:
            raise BackendError(
                f"Qdrant at {self._endpoint} did not answer within {self._timeout:g} s while "
                f"trying to {action} for {where}; check that the server is up and reachable"
            ) from exc
        except Exception as exc:
            detail = self._scrub(_describe(exc))
            if len(detail) > 500:
                detail = detail[:500] + "..."
            raise BackendError(
                f"Qdrant at {self._endpoint} failed to {action} for {where}: {detail}"
            ) from exc
        raise AssertionError("unreachable")  # pragma: no cover - tenacity returns or raises

    def _checked_vector(self, vector: Sequence[float], what: str) -> list[float]:
        return _checked_vector(vector, what, self._vector_size, self._collection, self._model_id)

    # ------------------------------------------------------------------ writes

    async def upsert(self, points: Sequence[VectorPoint]) -> None:
        """Insert or replace points (one request, applied before it returns: ``wait=True``).

        Every point is checked before anything is sent. A point with non-blank ``text`` also gets
        the BM25 sparse vector ``qdrant_edge.Bm25().embed_document(text)``.

        Raises:
            DimensionMismatchError: a vector has another length than ``vector_size``; nothing is
                written.
            BackendError: a vector holds NaN or infinity (nothing is written), the index is closed,
                or the server failed.
        """
        client = self._live("upsert points")
        prepared: list[models.PointStruct] = []
        for point in points:
            vector = self._checked_vector(point.vector, f"the vector of {point.id}")
            vectors: dict[str, Any] = {DENSE_VECTOR: vector}
            if point.text and point.text.strip():
                sparse = self._bm25.embed_document(point.text)
                if sparse.indices:
                    vectors[LEXICAL_VECTOR] = models.SparseVector(
                        indices=list(sparse.indices), values=list(sparse.values)
                    )
            payload = {
                _PAYLOAD_TYPE: ObjectType(point.object_type).value,
                _PAYLOAD_ID: str(point.id),
            }
            prepared.append(models.PointStruct(id=str(point.id), vector=vectors, payload=payload))
        if not prepared:
            return
        await self._call("upsert points", lambda: client.upsert(self._name, prepared, wait=True))
        _log.debug("vector_points_upserted", collection=self._collection, count=len(prepared))

    async def delete(self, ids: Sequence[MemoryId]) -> None:
        """Remove points by id (applied before it returns); absent ids are ignored.

        Raises:
            BackendError: the index is closed, or the server failed.
        """
        client = self._live("delete points")
        point_ids: list[models.ExtendedPointId] = [str(MemoryId(i)) for i in ids]
        if not point_ids:
            return
        selector = models.PointIdsList(points=point_ids)
        await self._call("delete points", lambda: client.delete(self._name, selector, wait=True))
        _log.debug("vector_points_deleted", collection=self._collection, count=len(point_ids))

    # ------------------------------------------------------------------ reads

    async def search(self, query: VectorQuery) -> VectorSearchResult:
        """Nearest points to ``query.vector`` among ``query.object_types`` (all when empty).

        Exactly :meth:`EdgeVectorIndex.search <charmem_qdrant.EdgeVectorIndex.search>`: an exact
        cosine scan, or with the lexical cue and a cue text with BM25 terms the dense and sparse
        stages (each its best ``max(4 * limit, 64)`` filtered points by score descending, id
        ascending) as one ``query_batch_points`` request, fused client-side by reciprocal rank
        fusion with ``k`` = 60 and tied stage scores sharing a rank; ordered by score
        descending, ties by id ascending.

        Returns:
            At most ``query.limit`` hits and ``exhaustive`` completeness (``scanned`` = points
            matching the type filter, ``fetched`` = hits).

        Raises:
            DimensionMismatchError: the query vector has another length than ``vector_size``.
            BackendError: the query vector is not finite, the index is closed, or the server
                failed.
        """
        client = self._live("search")
        vector = self._checked_vector(query.vector, "the query vector")
        limit = query.limit
        type_filter = _type_filter(query.object_types, query.within)
        # local mode always scans exactly (and warns that search params have no effect there)
        exact = None if self._is_local() else models.SearchParams(exact=True)
        stages: list[tuple[Any, str, models.SearchParams | None]] = [(vector, DENSE_VECTOR, exact)]
        if self._lexical and query.text and query.text.strip():
            sparse = self._bm25.embed_query(query.text)
            if sparse.indices:
                lexical = models.SparseVector(
                    indices=list(sparse.indices), values=list(sparse.values)
                )
                stages.append((lexical, LEXICAL_VECTOR, None))  # ``exact`` concerns dense only
        name = self._name

        def request(stage: int, n: int) -> models.QueryRequest:
            stage_query, using, params = stages[stage]
            return models.QueryRequest(
                query=stage_query,
                using=using,
                filter=type_filter,
                params=params,
                score_threshold=query.min_score if stage == 0 else None,  # a cosine floor
                limit=n,
                with_payload=True,
            )

        async def run() -> tuple[int, list[list[models.ScoredPoint]]]:
            counted = await client.count(name, count_filter=type_filter, exact=True)
            scanned = counted.count
            if limit <= 0 or scanned == 0:
                return scanned, []
            want = limit if len(stages) == 1 else stage_size(limit)
            ranker = StageRanker([want] * len(stages), scanned, _point_id, _point_score)
            while ranker.pending:
                responses = await client.query_batch_points(
                    name, requests=[request(s, n) for s, n in ranker.pending]
                )
                ranker.accept([list(response.points) for response in responses])
            return scanned, ranker.ranked()

        scanned, ranked = await self._call("search", run)
        if len(ranked) <= 1:
            hits = tuple(self._hit(point, point.score) for stage in ranked for point in stage)
        else:
            by_id = {str(point.id): point for stage in ranked for point in stage}
            fused = rrf_fuse(
                [[_point_key(point) for point in stage] for stage in ranked],
                k=RRF_K,
                weights=self._weights,
            )
            hits = tuple(self._hit(by_id[point_id], score) for point_id, score in fused[:limit])
        return VectorSearchResult(
            hits=hits,
            completeness=VectorRecallCompleteness(
                CompletenessKind.EXHAUSTIVE, scanned=scanned, fetched=len(hits)
            ),
        )

    def _hit(self, point: models.ScoredPoint, score: float) -> VectorHit:
        payload: Mapping[str, object] = point.payload or {}
        try:
            object_type = ObjectType(payload[_PAYLOAD_TYPE])
            memory_id = MemoryId(str(point.id))
        except (KeyError, ValueError) as exc:
            raise BackendError(
                f"point {point.id} in the Qdrant collection {self._name} has no valid "
                f"{_PAYLOAD_TYPE!r} payload or id; it was written by something else. Rebuild it "
                "with rebuild_vector_index()"
            ) from exc
        return VectorHit(memory_id, object_type, float(score))

    async def point_ids(self) -> set[MemoryId]:
        """Every point id of the collection (scrolled in pages of 1024).

        Raises:
            BackendError: the index is closed, or the server failed.
        """
        client = self._live("list point ids")

        async def run() -> set[MemoryId]:
            ids: set[MemoryId] = set()
            offset: models.ExtendedPointId | None = None
            while True:
                records, offset = await client.scroll(
                    self._name,
                    limit=_SCROLL_PAGE,
                    offset=offset,
                    with_payload=False,
                    with_vectors=False,
                )
                ids.update(MemoryId(str(record.id)) for record in records)
                if offset is None:
                    return ids

        return await self._call("list point ids", run)

    async def count(self) -> int:
        """Number of points in the collection (an exact count).

        Raises:
            BackendError: the index is closed, or the server failed.
        """
        client = self._live("count points")
        result = await self._call("count points", lambda: client.count(self._name, exact=True))
        return int(result.count)

    # ------------------------------------------------------------------ lifecycle

    async def close(self) -> None:
        """Close the client if the index owns it; idempotent. Acknowledged writes are applied.

        Raises:
            BackendError: the client failed to close.
        """
        client, self._client = self._client, None
        if client is None or not self._owns_client:
            return
        try:
            await client.close()
        except Exception as exc:
            raise BackendError(
                f"could not close the Qdrant client of {self._endpoint}: {self._scrub(str(exc))}"
            ) from exc
