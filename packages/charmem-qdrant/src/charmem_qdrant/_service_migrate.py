"""``charmem migrate`` for the service index: move a collection's points into the shared layout.

A collection whose points are in ``charmem-c`` (the per-collection layout) is refused by a
shared opening (:func:`charmem_qdrant._service_open.refuse_per_collection`). Its move:

1. read the embedder fingerprint of ``charmem-c`` (its metadata; the collection's own vector
   size is authoritative);
2. open the collection's tenant in the shared collection of that fingerprint (created if
   missing; refused when the collection already has vectors of another embedder there);
3. when ``charmem-c`` holds points (so no shared opening could write the tenant), clear the
   tenant's points (by the tenant filter; its marker stays): what an interrupted run copied may
   since have been purged or forgotten in ``charmem-c``, and must not come back; an empty
   ``charmem-c`` is only deleted (the tenant may be in use in the shared layout);
4. copy every point, a scroll page of 1024 at a time, with its vectors and payload, under its
   tenant id and key; after each page, count the copies (a page whose copies are not all there
   fails);
5. count ``charmem-c`` again and the tenant (a writer still using either fails the move: the
   tenant must hold exactly the points copied), then delete ``charmem-c``.

Each run copies the source whole, so a run that was interrupted is finished by running it again
(whatever ``charmem-c`` went through meanwhile); ``charmem-c`` is deleted only after a complete,
counted copy, and once it is gone a run moves nothing.
"""

from __future__ import annotations

import time
from functools import partial

from qdrant_client import models

from charmem.admin import VectorLayoutMigration
from charmem.errors import BackendError
from charmem.log import get_logger
from charmem_qdrant._marker import ShardMarker
from charmem_qdrant._recall import DENSE_VECTOR
from charmem_qdrant._service_client import CONNECTION_KEY
from charmem_qdrant._service_collection import METADATA_KEY, check_collection
from charmem_qdrant._service_layout import SHARED, ServiceScope, service_collection_name
from charmem_qdrant._service_open import Server, open_scope
from charmem_qdrant._service_points import ScopedPoints

__all__ = ["migrate_to_shared"]

_log = get_logger("charmem_qdrant.service")


def _fingerprint(info: models.CollectionInfo, collection: str, where: str) -> ShardMarker | None:
    """The fingerprint of a per-collection collection (``None``: empty and unmarked).

    Raises:
        ConfigurationError: not a charmem collection, points without a marker, or a marker
            naming another collection.
    """
    document = (info.config.metadata or {}).get(METADATA_KEY)
    if document is None and not info.points_count:
        return None
    # ``check_collection`` refuses a collection with points but no marker, or of another name
    offered = (
        ShardMarker(collection=collection, model_id="unknown", vector_size=1)
        if document is None
        else ShardMarker.from_document(document, where=where, key=CONNECTION_KEY)
    )
    vectors = info.config.params.vectors
    dense = vectors.get(DENSE_VECTOR) if isinstance(vectors, dict) else None
    size = dense.size if dense is not None else offered.vector_size
    marker = ShardMarker(collection=collection, model_id=offered.model_id, vector_size=size)
    check_collection(info, marker, where)
    return marker


async def _copy(server: Server, source: ScopedPoints, target: ScopedPoints, where: str) -> int:
    """Copy every point of ``source`` into ``target``, page by page; the points copied.

    Raises:
        BackendError: a page's copies are not all found in ``target``, or the server failed.
    """
    moved = 0
    offset: models.ExtendedPointId | None = None
    while True:
        page, offset = await server.call("read points to move", partial(source.page, offset))
        if page:
            found = await server.call("copy points", partial(target.copy, page))
            if found != len(page):
                raise BackendError(
                    f"{found} of {len(page)} points copied to {where} are there; nothing was "
                    "deleted: run `charmem migrate` again"
                )
            moved += len(page)
        if offset is None:
            return moved


async def _copy_whole(
    server: Server, source: ScopedPoints, target: ScopedPoints, where: str
) -> int:
    """Clear the tenant, copy ``source`` into it, and check both counts; the points copied.

    Raises:
        BackendError: the server failed, or ``source`` or the tenant does not hold exactly the
            points copied afterwards (a writer still uses the collection); nothing was deleted.
    """
    await server.call("clear the tenant", target.clear)
    moved = await _copy(server, source, target, where)
    left = await server.call("count points", source.count)
    held = await server.call("count points", target.count)
    if not left == held == moved:
        raise BackendError(
            f"the old collection held {left} points and the tenant in {where} {held} after {moved} "
            "were copied: a process still writes to the collection; nothing was deleted. Stop "
            "the writers (or set VECTOR_SERVICE_LAYOUT=shared on them), then run `charmem "
            "migrate` again"
        )
    return moved


async def migrate_to_shared(server: Server, collection: str) -> VectorLayoutMigration:
    """Move the points of ``collection`` from ``charmem-c`` into its shared collection.

    When ``charmem-c`` holds points the tenant is cleared first, so it ends holding exactly the
    points of ``charmem-c`` (``points`` counts them); an empty ``charmem-c`` is only deleted.

    Returns:
        What was moved (``source`` ``None``: there was no ``charmem-c``, nothing to move).

    Raises:
        ConfigurationError: ``charmem-c`` is not a charmem collection (see :func:`_fingerprint`).
        DimensionMismatchError, EmbedderMismatchError: the collection already has a tenant made
            by another embedder in the shared layout.
        BackendError: the server failed, or ``charmem-c`` changed during the move (its writers
            must stop first); run it again.
    """
    start = time.perf_counter()
    legacy = service_collection_name(collection)
    if not await server.exists(legacy):
        return VectorLayoutMigration(
            collection=collection, source=None, target=None, layout=SHARED, points=0, seconds=0.0
        )
    info = await server.call("read the collection", lambda: server.client.get_collection(legacy))
    fingerprint = _fingerprint(info, collection, server.where(legacy))
    target_name = None
    moved = 0
    if fingerprint is not None:
        scope = ServiceScope.of(
            collection,
            model_id=fingerprint.model_id,
            vector_size=fingerprint.vector_size,
            layout=SHARED,
        )
        await open_scope(server, scope, fingerprint, refuse_older=False)
        target_name = server.where(scope.qdrant_collection)
        old = ServiceScope(collection=collection, qdrant_collection=legacy, shared=False)
        source = ScopedPoints(server.client, old, exact=False)
        target = ScopedPoints(server.client, scope, exact=False)
        if await server.call("count points", source.count):
            moved = await _copy_whole(server, source, target, target_name)
    await server.call("drop the collection", lambda: server.client.delete_collection(legacy))
    _log.info("vector_collection_migrated", collection=collection, source=legacy, points=moved)
    return VectorLayoutMigration(
        collection=collection,
        source=server.where(legacy),
        target=target_name,
        layout=SHARED,
        points=moved,
        seconds=time.perf_counter() - start,
    )
