"""The service vector index: a charmem collection's points on a Qdrant server.

The driver of :mod:`charmem_qdrant._recall` over gRPC. Where the points live (a tenant of a shared
collection, or a collection of their own) is :mod:`charmem_qdrant._service_layout`; the data
calls, each scoped to the collection, :mod:`charmem_qdrant._service_points`; opening and dropping,
:mod:`charmem_qdrant._service_open`; the connection, its time budget and its retries,
:mod:`charmem_qdrant._service_client`.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from qdrant_client import AsyncQdrantClient

from charmem.admin import VectorLayoutMigration
from charmem.domain.ids import MemoryId
from charmem.errors import BackendError, ConfigurationError
from charmem.log import get_logger
from charmem.ports import VectorPoint, VectorQuery, VectorSearchResult, VectorSurface
from charmem.settings import validate_collection_name
from charmem_qdrant._fusion import DEFAULT_FUSION_WEIGHTS
from charmem_qdrant._recall import QdrantRecall, point_ids_of
from charmem_qdrant._service_client import (
    DEFAULT_TIMEOUT,
    TIMEOUT_KEY,
    call_bounded,
    client_from_settings,
    run_blocking,
    timeout_from_settings,
)
from charmem_qdrant._service_collection import METADATA_KEY, is_local
from charmem_qdrant._service_layout import (
    COLLECTION_PREFIX,
    PER_COLLECTION,
    SHARED,
    SHARED_PREFIX,
    TENANT_KEY,
    ServiceScope,
    service_collection_name,
    shared_collection_name,
)
from charmem_qdrant._service_migrate import migrate_to_shared
from charmem_qdrant._service_open import Server, drop_collection, open_scope
from charmem_qdrant._service_points import ScopedPoints, sparse, surface_condition

if TYPE_CHECKING:
    from charmem.settings import Settings

__all__ = [
    "COLLECTION_PREFIX",
    "DEFAULT_TIMEOUT",
    "METADATA_KEY",
    "SHARED_PREFIX",
    "TENANT_KEY",
    "TIMEOUT_KEY",
    "QdrantServiceVectorIndex",
    "service_collection_name",
    "shared_collection_name",
]

_T = TypeVar("_T")

_log = get_logger("charmem_qdrant.service")


def _checked_layout(layout: str) -> str:
    """``layout`` if it is ``shared`` or ``per_collection``.

    Raises:
        ConfigurationError: another value (naming ``VECTOR_SERVICE_LAYOUT``).
    """
    if layout not in (SHARED, PER_COLLECTION):
        raise ConfigurationError(
            f"layout must be {SHARED!r} or {PER_COLLECTION!r}, not {layout!r}",
            key="VECTOR_SERVICE_LAYOUT",
        )
    return layout


class QdrantServiceVectorIndex(QdrantRecall):
    """Candidate recall on a Qdrant server over gRPC (the ``service`` vector index).

    The same contract, points, search stages and fusion as
    :class:`~charmem_qdrant.EdgeVectorIndex` (:mod:`charmem_qdrant._recall`), on a server:

    * **Layout** (``layout``, ``VECTOR_SERVICE_LAYOUT``): ``shared`` (the default), a tenant of
      the Qdrant collection of its embedder fingerprint (:func:`shared_collection_name`), every
      data call filtered by the tenant key; or ``per_collection``, the Qdrant collection
      ``charmem-c`` (:func:`service_collection_name`). See :mod:`charmem_qdrant._service_layout`
      and, for the collections' configuration, :mod:`charmem_qdrant._service_collection`.
    * **Fingerprint**: the marker document of the embedded shard (collection, model id, vector
      size, schema version) is stored in the collection's **metadata** under ``"charmem"`` and,
      shared, in the tenant's marker point. Another size raises
      :class:`~charmem.errors.DimensionMismatchError`, another model of the same size
      :class:`~charmem.errors.EmbedderMismatchError`; a collection without the marker is adopted
      when empty and refused (``ConfigurationError``) when it holds points. A shared opening of a
      collection still holding points in ``charmem-c`` raises
      :class:`~charmem.errors.StoreLayoutError` (``charmem migrate`` moves them).
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
        layout: ``"shared"`` (the default) or ``"per_collection"``.
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
        layout: str = SHARED,
    ) -> None:
        self._scope = ServiceScope.of(
            collection, model_id=model_id, vector_size=vector_size, layout=_checked_layout(layout)
        )
        self._name = self._scope.qdrant_collection
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
        layout: str = SHARED,
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
            StoreLayoutError: ``layout`` is shared and ``charmem-<collection>`` holds points.
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
            layout=layout,
        )
        await index._prepare()
        return index

    @classmethod
    async def from_settings_async(
        cls, settings: Settings, collection: str, *, model_id: str, vector_size: int
    ) -> QdrantServiceVectorIndex:
        """Connect to ``QDRANT_CONNECTION_STRING`` over gRPC and open the collection.

        Reads ``QDRANT_CONNECTION_STRING`` (``http(s)://host:grpc-port``, port default 6334),
        ``QDRANT_API_KEY`` (optional), ``VECTOR_SERVICE_LAYOUT`` and, from ``settings.extra``,
        ``QDRANT_TIMEOUT`` (seconds
        per call, default 5), ``VECTOR_LEXICAL_CUE`` (default true) and ``VECTOR_LEXICAL_WEIGHT``
        (the lexical stage's RRF weight, default 1.0).

        Raises:
            ConfigurationError, DimensionMismatchError, EmbedderMismatchError, StoreLayoutError,
                BackendError: as :meth:`open`; ``ConfigurationError`` also for a malformed
                setting.
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
            ConfigurationError, DimensionMismatchError, EmbedderMismatchError, StoreLayoutError,
                BackendError: as :meth:`from_settings_async`.
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
            layout=settings.vector_service_layout,
        )

    @classmethod
    async def drop_async(
        cls,
        client: AsyncQdrantClient,
        collection: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,  # noqa: ASYNC109 - the budget of each call
        endpoint: str = "the Qdrant server",
        layout: str = SHARED,
    ) -> bool:
        """Delete the points of ``collection`` (and its fingerprint), whatever its fingerprint.

        For ``rebuild_vector_index()`` with another embedder: drop, then open with the new
        fingerprint and re-upsert from the graph. Per collection, the Qdrant collection
        ``charmem-<collection>`` is deleted; shared, the collection's tenant (points and marker)
        in every shared collection, by the tenant filter (other tenants are not touched), and a
        ``charmem-<collection>`` left over. Unlike the embedded shard there is no lock: an index
        of this collection still open elsewhere fails (or finds nothing) on its next call.

        Returns:
            True if any point or collection was deleted, False if there was none.

        Raises:
            ConfigurationError: bad collection name or layout.
            BackendError: the server is unreachable, too slow, or failed.
        """
        index = cls(
            client,
            collection,
            model_id="drop",
            vector_size=1,
            timeout=timeout,
            endpoint=endpoint,
            layout=layout,
        )
        return await drop_collection(index._server(client), collection, shared=layout == SHARED)

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
            return await cls.drop_async(
                client,
                collection,
                timeout=timeout,
                endpoint=endpoint,
                layout=settings.vector_service_layout,
            )
        finally:
            await client.close()

    @classmethod
    def drop_from_settings(cls, settings: Settings, collection: str) -> bool:
        """Blocking :meth:`drop_from_settings_async`.

        Raises:
            ConfigurationError, BackendError: as :meth:`drop_async`, or a malformed setting.
        """
        return run_blocking(lambda: cls.drop_from_settings_async(settings, collection))

    @classmethod
    async def migrate_async(
        cls,
        client: AsyncQdrantClient,
        collection: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,  # noqa: ASYNC109 - the budget of each call
        endpoint: str = "the Qdrant server",
    ) -> VectorLayoutMigration:
        """Move the points of ``collection`` from ``charmem-<collection>`` into the shared layout.

        ``charmem migrate`` runs it (:func:`charmem.admin.migrate`): the points are copied with
        their vectors and payload into the tenant of the shared collection of their fingerprint,
        counted, then ``charmem-<collection>`` is deleted. Resumable and idempotent: run it again
        after an interruption; with nothing left to move it reports 0 points.

        Returns:
            What was moved.

        Raises:
            ConfigurationError: bad collection name, or ``charmem-<collection>`` is not a charmem
                collection.
            DimensionMismatchError, EmbedderMismatchError: the collection already has vectors of
                another embedder in the shared layout.
            BackendError: the server failed, or a process still writes to the old collection;
                run it again.
        """
        index = cls(
            client,
            collection,
            model_id="migrate",
            vector_size=1,
            timeout=timeout,
            endpoint=endpoint,
            layout=PER_COLLECTION,
        )
        return await migrate_to_shared(index._server(client), collection)

    @classmethod
    async def migrate_from_settings_async(
        cls, settings: Settings, collection: str
    ) -> VectorLayoutMigration:
        """:meth:`migrate_async` on the server of ``QDRANT_CONNECTION_STRING``.

        With ``VECTOR_SERVICE_LAYOUT=per_collection`` nothing moves (``source`` ``None``, layout
        ``per_collection``).

        Raises:
            ConfigurationError, DimensionMismatchError, EmbedderMismatchError, BackendError: as
                :meth:`migrate_async`, or a malformed setting.
        """
        validate_collection_name(collection)
        if settings.vector_service_layout != SHARED:
            return VectorLayoutMigration(
                collection=collection,
                source=None,
                target=None,
                layout=settings.vector_service_layout,
                points=0,
                seconds=0.0,
            )
        timeout = timeout_from_settings(settings.extra)
        client, endpoint = client_from_settings(settings, timeout)
        try:
            return await cls.migrate_async(client, collection, timeout=timeout, endpoint=endpoint)
        finally:
            await client.close()

    async def _prepare(self) -> None:
        """Open (or create) the Qdrant collection and check it; close the index if that fails."""
        try:
            await self._open_collection()
        except BaseException:
            await self.close()
            raise

    async def _open_collection(self) -> None:
        client = self._live("open the collection")
        opened = await open_scope(self._server(client), self._scope, self._fingerprint())
        _log.info(
            "vector_collection_opened",
            collection=self._collection,
            qdrant_collection=self._name,
            shared=self._scope.shared,
            lexical=self._lexical,
            **opened,
        )

    # ------------------------------------------------------------------ properties

    @property
    def qdrant_collection(self) -> str:
        """The Qdrant collection: shared, ``charmem-shared.<size>.<hash>``; else ``charmem-<c>``."""
        return self._name

    @property
    def layout(self) -> str:
        """``"shared"`` or ``"per_collection"``."""
        return SHARED if self._scope.shared else PER_COLLECTION

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

    def _server(self, client: AsyncQdrantClient) -> Server:
        """``client`` with this index's bounded call, for opening and dropping."""
        return Server(client, self._call, self._endpoint)

    def _points(self, action: str) -> ScopedPoints:
        """The collection's points (every data call goes through them), or fail when closed."""
        client = self._live(action)
        return ScopedPoints(client, self._scope, exact=not is_local(client))

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
        scoped = self._points("upsert points")
        parts = self._point_parts(points)
        if not parts:
            return
        await self._call(
            "upsert points", lambda: scoped.upsert(parts, lambda part: part.named_vectors(sparse))
        )
        _log.debug("vector_points_upserted", collection=self._collection, count=len(parts))

    async def delete(self, ids: Sequence[MemoryId]) -> None:
        """See ``VectorIndex.delete``: every surface's point, applied before it returns.

        Raises:
            BackendError: the index is closed, or the server failed.
        """
        scoped = self._points("delete points")
        point_ids = point_ids_of(ids)  # every surface's (the scope maps them to its tenant's)
        if not point_ids:
            return
        await self._call("delete points", lambda: scoped.delete(point_ids))
        _log.debug("vector_points_deleted", collection=self._collection, count=len(ids))

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
        scoped = self._points("search")
        plan = self._plan(query)
        scanned, ranked, ranks = await self._call("search", lambda: scoped.ranked(plan))
        where = f"the Qdrant collection {self._name}"
        scored = self._scored(ranked, ranks, plan)
        return self._result(scored, scanned, where=where, approximate=False)

    async def point_ids(self, surface: VectorSurface = VectorSurface.CONTENT) -> set[MemoryId]:
        """See ``VectorIndex.point_ids`` (scrolled in pages of 1024).

        Raises:
            BackendError: the index is closed, or the server failed.
        """
        scoped = self._points("list point ids")
        value = _surface_value(surface)
        found = await self._call("list point ids", lambda: scoped.memory_ids(value))
        return {MemoryId(memory_id) for memory_id in found}

    async def count(self, surface: VectorSurface = VectorSurface.CONTENT) -> int:
        """Number of the collection's points on ``surface`` (an exact count; shared: its tenant's).

        Raises:
            BackendError: the index is closed, or the server failed.
        """
        scoped = self._points("count points")
        condition = surface_condition(_surface_value(surface))
        return await self._call("count points", lambda: scoped.count([condition]))

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


def _surface_value(surface: VectorSurface) -> str | None:
    """The ``surface`` payload value of a surface's points (None: content, which has none)."""
    surface = VectorSurface(surface)
    return None if surface is VectorSurface.CONTENT else surface.value
