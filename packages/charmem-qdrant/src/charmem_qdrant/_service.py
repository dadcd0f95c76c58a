"""The service vector index: one Qdrant server collection per charmem collection.

The driver of :mod:`charmem_qdrant._recall` over gRPC; the connection, its time budget and its
retries are in :mod:`charmem_qdrant._service_client`.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Final, TypeVar

from qdrant_client import AsyncQdrantClient, models

from charmem.domain.ids import MemoryId
from charmem.errors import BackendError, ConfigurationError
from charmem.log import get_logger
from charmem.ports import VectorPoint, VectorQuery, VectorSearchResult
from charmem.settings import validate_collection_name
from charmem_qdrant._fusion import DEFAULT_FUSION_WEIGHTS
from charmem_qdrant._recall import (
    PAYLOAD_TYPE,
    SCROLL_PAGE,
    Found,
    QdrantRecall,
    SearchPlan,
)
from charmem_qdrant._service_client import (
    DEFAULT_TIMEOUT,
    TIMEOUT_KEY,
    call_bounded,
    client_from_settings,
    run_blocking,
    timeout_from_settings,
)
from charmem_qdrant._service_collection import (
    METADATA_KEY,
    check_collection,
    create_collection,
    is_local,
)

if TYPE_CHECKING:
    import qdrant_edge as qe

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

_log = get_logger("charmem_qdrant.service")


def service_collection_name(collection: str) -> str:
    """The Qdrant collection holding charmem collection ``collection``: ``charmem-<collection>``.

    Raises:
        ConfigurationError: the collection name is not allowed.
    """
    return COLLECTION_PREFIX + validate_collection_name(collection)


def _type_filter(plan: SearchPlan) -> models.Filter | None:
    """Scope by object type and, with ``within``, to those point ids (``VectorQuery``)."""
    must: list[models.Condition] = []
    if plan.types:
        must.append(models.FieldCondition(key=PAYLOAD_TYPE, match=models.MatchAny(any=plan.types)))
    if plan.within is not None:
        must.append(models.HasIdCondition(has_id=sorted(plan.within)))
    return models.Filter(must=must) if must else None


def _sparse(vector: qe.SparseVector) -> models.SparseVector:
    """A BM25 vector of ``qdrant_edge`` as qdrant-client sends it."""
    return models.SparseVector(indices=list(vector.indices), values=list(vector.values))


_SCORE: Final = operator.attrgetter("score")


def _found(point: models.ScoredPoint) -> Found:
    """A scored point as the search keeps it: (id, stage score, ``object_type`` payload)."""
    payload: Mapping[str, object] = point.payload or {}
    return str(point.id), float(point.score), payload.get(PAYLOAD_TYPE)


class QdrantServiceVectorIndex(QdrantRecall):
    """Candidate recall on a Qdrant server over gRPC (the ``service`` vector index).

    The same contract, points, search stages and fusion as
    :class:`~charmem_qdrant.EdgeVectorIndex` (:mod:`charmem_qdrant._recall`), on a server:

    * **Collection**: charmem collection ``c`` is the Qdrant collection ``charmem-c``
      (:func:`service_collection_name`; its layout: :mod:`charmem_qdrant._service_collection`),
      with a keyword index on ``object_type``.
    * **Fingerprint**: the marker document of the embedded shard (collection, model id, vector
      size, schema version) is stored in the collection's **metadata** under ``"charmem"``. Another
      size raises :class:`~charmem.errors.DimensionMismatchError`, another model of the same size
      :class:`~charmem.errors.EmbedderMismatchError`; a collection without the marker is adopted
      when empty and refused (``ConfigurationError``) when it holds points.
    * **Search**: the stages of a search run as plain queries in one ``query_batch_points``
      request, fused client-side (not by Qdrant's ``RrfQuery``, which ranks equal stage scores
      by insertion order); completeness ``exhaustive`` with ``scanned`` = the exact filtered
      count.
    * **Failures**: every call is bounded by ``timeout`` seconds in total and retried while the
      server is ``UNAVAILABLE`` (:mod:`charmem_qdrant._service_client`); the API key never
      appears in a repr, a log line or an error.

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
        super().__init__(collection, model_id, vector_size, lexical, fusion_weights)
        if not (isinstance(timeout, int | float) and math.isfinite(timeout) and timeout > 0):
            raise ConfigurationError(
                f"timeout must be a positive number of seconds, not {timeout!r}"
            )
        self._client: AsyncQdrantClient | None = client
        self._timeout = float(timeout)
        self._endpoint = endpoint
        self._owns_client = owns_client
        self._secret = api_key

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

        Args: as the class; ``owns_client`` also closes ``client`` when the open fails.

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
        await index._prepare()
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
        index = cls._unopened(settings, collection, model_id=model_id, vector_size=vector_size)
        await index._prepare()
        return index

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

        run_blocking(check)
        return cls._unopened(settings, collection, model_id=model_id, vector_size=vector_size)

    @classmethod
    def _unopened(
        cls, settings: Settings, collection: str, *, model_id: str, vector_size: int
    ) -> QdrantServiceVectorIndex:
        """An index built from ``settings`` whose collection is not opened (see ``_prepare``)."""
        validate_collection_name(collection)
        lexical, weights = cls._cue_from_settings(settings)
        timeout = timeout_from_settings(settings.extra)
        client, endpoint = client_from_settings(settings, timeout)
        return cls(
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
        timeout = timeout_from_settings(settings.extra)
        client, endpoint = client_from_settings(settings, timeout)
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
        return run_blocking(lambda: cls.drop_from_settings_async(settings, collection))

    async def _prepare(self) -> None:
        """Open (or create) the Qdrant collection and check it; close the index if that fails."""
        try:
            await self._open_collection()
        except BaseException:
            await self.close()
            raise

    async def _open_collection(self) -> None:
        client = self._live("open the collection")
        name = self._name
        exists = await self._call("look up the collection", lambda: client.collection_exists(name))
        if not exists:
            try:
                fingerprint = self._fingerprint()
                await self._call(
                    "create the collection", lambda: create_collection(client, name, fingerprint)
                )
            except BackendError:
                # another opener may have created it meanwhile: then adopt theirs, else re-raise
                if not await self._call(
                    "look up the collection", lambda: client.collection_exists(name)
                ):
                    raise
        info = await self._call("read the collection", lambda: client.get_collection(name))
        check_collection(info, self._fingerprint(), f"{name} on {self._endpoint}")
        if not (info.config.metadata or {}).get(METADATA_KEY):
            marker = self._fingerprint()
            await self._call(
                "record the embedder fingerprint",
                lambda: client.update_collection(
                    name, metadata={METADATA_KEY: marker.to_document()}
                ),
            )
        if PAYLOAD_TYPE not in (info.payload_schema or {}) and not is_local(self._client):
            await self._call(
                "index the object_type payload",
                lambda: client.create_payload_index(
                    name, PAYLOAD_TYPE, field_schema=models.PayloadSchemaType.KEYWORD, wait=True
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

    # ------------------------------------------------------------------ properties

    @property
    def qdrant_collection(self) -> str:
        """The Qdrant collection, ``charmem-<collection>``."""
        return self._name

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
        return self._describe(
            f"qdrant_collection={self._name!r}, endpoint={self._endpoint!r}",
            f", timeout={self._timeout:g}",
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
        """Run one driver call within the time budget (:func:`call_bounded`)."""
        return await call_bounded(
            action,
            operation,
            timeout=self._timeout,
            endpoint=self._endpoint,
            where=f"collection {self._collection!r} ({self._name} on {self._endpoint})",
            scrub=self._scrub,
        )

    # ------------------------------------------------------------------ writes

    async def upsert(self, points: Sequence[VectorPoint]) -> None:
        """See ``VectorIndex.upsert``: one request, applied before it returns (``wait=True``).

        Raises:
            DimensionMismatchError: a vector has another length than ``vector_size``; nothing is
                written.
            BackendError: a vector holds NaN or infinity (nothing is written), the index is closed,
                or the server failed.
        """
        client = self._live("upsert points")
        prepared = [
            models.PointStruct(
                id=parts.id, vector=parts.named_vectors(_sparse), payload=parts.payload
            )
            for parts in self._point_parts(points)
        ]
        if not prepared:
            return
        await self._call("upsert points", lambda: client.upsert(self._name, prepared, wait=True))
        _log.debug("vector_points_upserted", collection=self._collection, count=len(prepared))

    async def delete(self, ids: Sequence[MemoryId]) -> None:
        """See ``VectorIndex.delete``: applied before it returns; absent ids are ignored.

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
        """See ``VectorIndex.search``; the stages and fusion of :mod:`charmem_qdrant._recall`.

        An exact cosine scan, or with the lexical cue and a cue text with BM25 terms the dense
        and sparse stages as one ``query_batch_points`` request, fused client-side.

        Returns:
            At most ``query.limit`` hits and ``exhaustive`` completeness (``scanned`` = points
            matching the type filter, ``fetched`` = hits).

        Raises:
            DimensionMismatchError: the query vector has another length than ``vector_size``.
            BackendError: the query vector is not finite, the index is closed, or the server
                failed.
        """
        client = self._live("search")
        plan = self._plan(query)
        type_filter = _type_filter(plan)
        scanned, ranked = await self._call(
            "search", lambda: self._ranked(client, plan, type_filter)
        )
        where = f"the Qdrant collection {self._name}"
        scored = self._scored(ranked, plan)
        return self._result(scored, scanned, where=where, approximate=False)

    async def _ranked(
        self, client: AsyncQdrantClient, plan: SearchPlan, type_filter: models.Filter | None
    ) -> tuple[int, list[list[Found]]]:
        """Count the candidates, then run the stage rounds: (scanned, ranked stages)."""
        counted = await client.count(self._name, count_filter=type_filter, exact=True)
        ranker = plan.ranker(counted.count, _SCORE, _found)
        if ranker is None:
            return counted.count, []
        # local mode always scans exactly (and warns that search params have no effect there)
        exact = None if is_local(self._client) else models.SearchParams(exact=True)
        queries = [
            (name, _sparse(v) if stage else v) for stage, (name, v) in enumerate(plan.queries)
        ]
        while ranker.pending:
            requests = [
                models.QueryRequest(
                    query=queries[stage][1],
                    using=queries[stage][0],
                    filter=type_filter,
                    params=None if stage else exact,  # ``exact`` concerns the dense stage only
                    score_threshold=plan.threshold(stage),
                    limit=n,
                    with_payload=True,
                )
                for stage, n in ranker.pending
            ]
            responses = await client.query_batch_points(self._name, requests=requests)
            ranker.accept([response.points for response in responses])
        return counted.count, ranker.ranked()

    async def point_ids(self) -> set[MemoryId]:
        """See ``VectorIndex.point_ids`` (scrolled in pages of 1024).

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
                    limit=SCROLL_PAGE,
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
