"""Opening and dropping a charmem collection's points on a Qdrant server, in either layout.

* **Per collection**: the Qdrant collection ``charmem-c`` is created on first open and its
  fingerprint checked (:func:`ensure_collection`); never for a collection that lives as a
  tenant of a shared collection (:class:`~charmem.errors.StoreLayoutError` naming
  ``VECTOR_SERVICE_LAYOUT=shared``: never read as empty).
* **Shared**: the opener first refuses a collection that still has points in the per-collection
  layout (:class:`~charmem.errors.StoreLayoutError` naming ``charmem migrate``: never read as
  empty), then creates or checks the shared collection of its fingerprint, then checks the
  collection's **tenant marker**: a point without vectors or tenant key (so no search, count or
  scroll of a tenant sees it), id ``uuid5(TENANT_MARKER_NAMESPACE, c)``, payload ``{"charmem":
  <the marker document of the embedded shard>}``. A tenant without a marker is new: unless the
  shared collection of another fingerprint holds its marker (then
  :class:`~charmem.errors.EmbedderMismatchError` / :class:`~charmem.errors.DimensionMismatchError`,
  as for the embedded shard), the marker is written.
* **Drop** removes one collection's points whatever its fingerprint: per collection its Qdrant
  collection; shared its tenant (delete by the tenant filter) and marker in every shared
  collection, and a per-collection leftover.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Protocol, TypeVar

import attrs
from qdrant_client import AsyncQdrantClient, models

from charmem.errors import BackendError, StoreLayoutError
from charmem.log import get_logger
from charmem_qdrant._marker import ShardMarker
from charmem_qdrant._service_client import CONNECTION_KEY
from charmem_qdrant._service_collection import (
    METADATA_KEY,
    check_collection,
    create_collection,
    is_local,
    payload_indexes,
)
from charmem_qdrant._service_layout import (
    PER_COLLECTION_LAYOUT,
    SHARED_LAYOUT,
    SHARED_PREFIX,
    ServiceScope,
    service_collection_name,
)
from charmem_qdrant._service_points import ScopedPoints

__all__ = ["Call", "Server", "drop_collection", "ensure_collection", "open_scope"]

_T = TypeVar("_T")

_log = get_logger("charmem_qdrant.service")


class Call(Protocol):
    """Runs one driver call within the time budget (``QdrantServiceVectorIndex._call``)."""

    def __call__(self, action: str, operation: Callable[[], Awaitable[_T]], /) -> Awaitable[_T]:
        """Run ``operation``; ``action`` names it in errors."""
        ...


@attrs.frozen
class Server:
    """A client with its bounded call and how messages name the server."""

    client: AsyncQdrantClient
    call: Call
    endpoint: str

    def where(self, name: str) -> str:
        """A Qdrant collection as messages name it (``charmem-c on http://...``)."""
        return f"{name} on {self.endpoint}"

    async def exists(self, name: str) -> bool:
        """Whether the Qdrant collection ``name`` exists."""
        return await self.call(
            "look up the collection", lambda: self.client.collection_exists(name)
        )

    async def points_of(self, name: str) -> int:
        """The points of the Qdrant collection ``name`` (0 when there is none)."""
        if not await self.exists(name):
            return 0
        counted = await self.call("count points", lambda: self.client.count(name, exact=True))
        return int(counted.count)

    async def shared_collections(self) -> list[str]:
        """The names of every shared collection on the server, sorted."""
        found = await self.call("list the collections", self.client.get_collections)
        return sorted(c.name for c in found.collections if c.name.startswith(SHARED_PREFIX))

    async def tenant_marker(self, name: str, scope: ServiceScope) -> ShardMarker | None:
        """The tenant marker of ``scope``'s collection in the shared collection ``name``."""
        records = await self.call(
            "read the tenant marker",
            lambda: self.client.retrieve(name, [scope.marker_id], with_payload=True),
        )
        if not records:
            return None
        document = (records[0].payload or {}).get(METADATA_KEY)
        where = f"tenant {scope.collection!r} of {self.where(name)}"
        return ShardMarker.from_document(document, where=where, key=CONNECTION_KEY)


async def ensure_collection(
    server: Server, name: str, fingerprint: ShardMarker, *, shared: bool, exists: bool | None = None
) -> models.CollectionInfo:
    """Create the Qdrant collection ``name`` if missing, then check it and complete its indexes.

    ``exists``: whether the caller just found it (``None``: look it up).

    Raises:
        ConfigurationError, DimensionMismatchError, EmbedderMismatchError: see
            :func:`~charmem_qdrant._service_collection.check_collection`.
        BackendError: the server failed.
    """
    client, call = server.client, server.call
    if not (await server.exists(name) if exists is None else exists):
        try:
            await call(
                "create the collection",
                lambda: create_collection(client, name, fingerprint, shared=shared),
            )
        except BackendError:
            # another opener may have created it meanwhile: then adopt theirs, else re-raise
            if not await server.exists(name):
                raise
    info = await call("read the collection", lambda: client.get_collection(name))
    check_collection(info, fingerprint, server.where(name))
    if not (info.config.metadata or {}).get(METADATA_KEY):
        document = {METADATA_KEY: fingerprint.to_document()}
        await call(
            "record the embedder fingerprint",
            lambda: client.update_collection(name, metadata=document),
        )
    if not is_local(client):  # local mode has no payload indexes (and warns)
        for key, schema in payload_indexes(shared=shared):
            if key not in (info.payload_schema or {}):
                index = partial(client.create_payload_index, name, key, field_schema=schema)
                await call(f"index the {key} payload", partial(index, wait=True))
    return info


async def refuse_per_collection(server: Server, scope: ServiceScope) -> None:
    """Refuse a shared opening of a collection whose points are still in ``charmem-c``.

    Raises:
        StoreLayoutError: ``charmem-c`` holds points (``found`` 1, ``expected`` 2).
    """
    legacy = service_collection_name(scope.collection)
    points = await server.points_of(legacy)
    if not points:
        return
    raise StoreLayoutError(
        f"collection {scope.collection!r} keeps its {points} vectors in the Qdrant collection "
        f"{server.where(legacy)} (one Qdrant collection per charmem collection), but "
        f"VECTOR_SERVICE_LAYOUT=shared (the default) keeps them in {scope.qdrant_collection}; "
        f"move them with `charmem migrate --collection {scope.collection}` (the same settings; "
        f"library: await charmem.admin.migrate(settings, {scope.collection!r})), or set "
        "VECTOR_SERVICE_LAYOUT=per_collection to keep the old layout",
        store=f"{server.where(legacy)} (collection {scope.collection!r})",
        found=PER_COLLECTION_LAYOUT,
        expected=SHARED_LAYOUT,
    )


async def refuse_shared_tenant(server: Server, scope: ServiceScope) -> None:
    """Refuse a per-collection opening of a collection that lives as a tenant of a shared one.

    Only asked when ``charmem-c`` does not exist: opening would create it empty and read the
    collection as empty while its points sit in the shared collection.

    Raises:
        StoreLayoutError: a shared collection holds the collection's marker or points
            (``found`` 2, ``expected`` 1); nothing was created.
    """
    for name in await server.shared_collections():
        tenant = ServiceScope(collection=scope.collection, qdrant_collection=name, shared=True)
        points = await server.call(
            "count points", ScopedPoints(server.client, tenant, exact=False).count
        )
        if not points and await server.tenant_marker(name, tenant) is None:
            continue
        raise StoreLayoutError(
            f"collection {scope.collection!r} keeps its {points} vectors as a tenant of the shared "
            f"Qdrant collection {server.where(name)}, but VECTOR_SERVICE_LAYOUT=per_collection "
            f"looks for {scope.qdrant_collection}, which does not exist; nothing was created. "
            "Set VECTOR_SERVICE_LAYOUT=shared (the default) to open it",
            store=f"{server.where(name)} (tenant {scope.collection!r})",
            found=SHARED_LAYOUT,
            expected=PER_COLLECTION_LAYOUT,
        )


async def refuse_other_fingerprints(
    server: Server, scope: ServiceScope, fingerprint: ShardMarker
) -> None:
    """Refuse a tenant whose marker is in the shared collection of another fingerprint.

    Raises:
        DimensionMismatchError, EmbedderMismatchError: the collection's vectors were made by
            another embedder (as :meth:`ShardMarker.check` says).
    """
    for other in await server.shared_collections():
        found = (
            None if other == scope.qdrant_collection else await server.tenant_marker(other, scope)
        )
        if found is not None:
            found.check(
                collection=fingerprint.collection,
                model_id=fingerprint.model_id,
                vector_size=fingerprint.vector_size,
                path=f"tenant {scope.collection!r} of {server.where(other)}",
            )


async def open_tenant(server: Server, scope: ServiceScope, fingerprint: ShardMarker) -> bool:
    """Check the tenant marker of ``scope``, or write it for a new tenant; whether it was new.

    Raises:
        ConfigurationError: the marker is unreadable, or newer than this package.
        DimensionMismatchError, EmbedderMismatchError: the collection's vectors were made by
            another embedder (its marker is in the shared collection of that fingerprint).
        BackendError: the server failed.
    """
    name = scope.qdrant_collection
    where = f"tenant {scope.collection!r} of {server.where(name)}"
    marker = await server.tenant_marker(name, scope)
    if marker is not None:
        marker.check(
            collection=fingerprint.collection,
            model_id=fingerprint.model_id,
            vector_size=fingerprint.vector_size,
            path=where,
        )
        return False
    await refuse_other_fingerprints(server, scope, fingerprint)
    document: dict[str, Any] = {METADATA_KEY: fingerprint.to_document()}
    marker_point = models.PointStruct(id=scope.marker_id, vector={}, payload=document)
    await server.call(
        "record the tenant marker",
        lambda: server.client.upsert(name, [marker_point], wait=True),
    )
    return True


async def open_scope(
    server: Server, scope: ServiceScope, fingerprint: ShardMarker, *, refuse_older: bool = True
) -> dict[str, Any]:
    """Open (creating what is missing) and check the points of ``scope`` on the server.

    Args:
        server: the server.
        scope: the collection's layout.
        fingerprint: the opener's collection, model id and vector size.
        refuse_older: refuse a shared opening while ``charmem-c`` holds points (``False`` for
            ``charmem migrate``, which moves them).

    Returns:
        Fields for the ``vector_collection_opened`` log event.

    Raises:
        StoreLayoutError: see :func:`refuse_per_collection` and :func:`refuse_shared_tenant`.
        ConfigurationError, DimensionMismatchError, EmbedderMismatchError, BackendError: see
            :func:`ensure_collection` and :func:`open_tenant`.
    """
    if not scope.shared:
        exists = await server.exists(scope.qdrant_collection)
        if not exists:
            await refuse_shared_tenant(server, scope)
        info = await ensure_collection(
            server, scope.qdrant_collection, fingerprint, shared=False, exists=exists
        )
        return {"points": info.points_count}
    if refuse_older:
        await refuse_per_collection(server, scope)
    shared = ShardMarker(
        collection=scope.qdrant_collection,
        model_id=fingerprint.model_id,
        vector_size=fingerprint.vector_size,
    )
    exists = await server.exists(scope.qdrant_collection)
    if not exists:  # refuse another embedder's tenant before creating anything
        await refuse_other_fingerprints(server, scope, fingerprint)
    await ensure_collection(server, scope.qdrant_collection, shared, shared=True, exists=exists)
    return {"new_tenant": await open_tenant(server, scope, fingerprint)}


async def drop_collection(server: Server, collection: str, *, shared: bool) -> bool:
    """Remove every point of ``collection`` whatever its fingerprint; whether any was removed.

    Per collection: its Qdrant collection ``charmem-c``. Shared: its tenant (points and marker)
    in every shared collection, and ``charmem-c`` when it is left over; no other tenant is
    touched.

    Raises:
        ConfigurationError: bad collection name.
        BackendError: the server failed.
    """
    legacy = service_collection_name(collection)
    removed = False
    if shared:
        for name in await server.shared_collections():
            scope = ServiceScope(collection=collection, qdrant_collection=name, shared=True)
            points = ScopedPoints(server.client, scope, exact=False)
            held = await server.call("count points", points.count)
            if held or await server.tenant_marker(name, scope) is not None:
                await server.call("drop the tenant", points.erase)
                removed = True
                _log.info("vector_tenant_dropped", collection=collection, qdrant_collection=name)
    if await server.exists(legacy):
        await server.call("drop the collection", lambda: server.client.delete_collection(legacy))
        _log.info("vector_collection_dropped", collection=collection, qdrant_collection=legacy)
        removed = True
    return removed
