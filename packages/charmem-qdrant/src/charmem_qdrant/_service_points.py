"""The data calls of the service index, each scoped to one charmem collection.

:class:`ScopedPoints` is the only code that reads or writes points on the server: every count,
scroll, query, upsert and delete takes its filter from :meth:`ServiceScope.filter
<charmem_qdrant._service_layout.ServiceScope.filter>` (the tenant condition in a shared
collection), and its point ids and payload from the same scope. The service index holds no other
way to reach points, so no call path can leave its tenant.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from qdrant_client import AsyncQdrantClient, models

from charmem.ports import VectorSurface
from charmem_qdrant._recall import (
    PAYLOAD_ID,
    PAYLOAD_SURFACE,
    PAYLOAD_TYPE,
    SCROLL_PAGE,
    Found,
    PointParts,
    surface_point_id,
)
from charmem_qdrant._service_layout import ServiceScope

if TYPE_CHECKING:
    import qdrant_edge as qe

    from charmem_qdrant._recall import SearchPlan

__all__ = ["ScopedPoints", "sparse", "surface_condition"]

_SCORE: Final = operator.attrgetter("score")


def sparse(vector: qe.SparseVector) -> models.SparseVector:
    """A BM25 vector of ``qdrant_edge`` as qdrant-client sends it."""
    return models.SparseVector(indices=list(vector.indices), values=list(vector.values))


def surface_condition(surface: str | None) -> models.Condition:
    """The points of one surface: those without a ``surface`` payload (content, None) or with it."""
    if surface is None:
        return models.IsEmptyCondition(is_empty=models.PayloadField(key=PAYLOAD_SURFACE))
    return models.FieldCondition(key=PAYLOAD_SURFACE, match=models.MatchValue(value=surface))


class ScopedPoints:
    """The points of one charmem collection on a Qdrant server (one :class:`ServiceScope`).

    Driver calls only: the caller bounds them in time and turns driver errors into
    ``BackendError`` (``QdrantServiceVectorIndex._call``).

    Args:
        client: an open ``AsyncQdrantClient``.
        scope: the collection's Qdrant collection and tenant.
        exact: send ``SearchParams(exact=True)`` with the dense stage (not to local mode, which
            always scans exactly and warns about search params).
    """

    def __init__(self, client: AsyncQdrantClient, scope: ServiceScope, *, exact: bool) -> None:
        self._client = client
        self._scope = scope
        self._name = scope.qdrant_collection
        self._exact = models.SearchParams(exact=True) if exact else None

    async def count(self, conditions: Sequence[models.Condition] = ()) -> int:
        """The exact number of the collection's points matching ``conditions``."""
        counted = await self._client.count(
            self._name, count_filter=self._scope.filter(conditions), exact=True
        )
        return int(counted.count)

    async def memory_ids(self, surface: str | None = None) -> set[str]:
        """The memory ids of the points of one surface (None: content), in pages of 1024."""
        ids: set[str] = set()
        offset: models.ExtendedPointId | None = None
        with_payload = [PAYLOAD_ID] if self._scope.shared or surface is not None else False
        while True:
            records, offset = await self._client.scroll(
                self._name,
                scroll_filter=self._scope.filter([surface_condition(surface)]),
                limit=SCROLL_PAGE,
                offset=offset,
                with_payload=with_payload,
                with_vectors=False,
            )
            ids.update(self._scope.memory_id(record.id, record.payload) for record in records)
            if offset is None:
                return ids

    async def upsert(
        self, parts: Sequence[PointParts], vectors: Callable[[PointParts], Any]
    ) -> None:
        """Write ``parts`` (applied on return), ``vectors`` giving each point's named vectors."""
        prepared = [
            models.PointStruct(
                id=self._scope.point_id(part.id),
                vector=vectors(part),
                payload=self._scope.payload(part.payload),
            )
            for part in parts
        ]
        await self._write(prepared)

    async def page(
        self, offset: models.ExtendedPointId | None
    ) -> tuple[list[tuple[str, models.Record]], models.ExtendedPointId | None]:
        """One page of whole points with their layout-free ids, and the next page's offset.

        A point's layout-free id is its memory id, or for a scene surface's point
        ``uuid5(memory_id, surface)`` (:func:`~charmem_qdrant._recall.surface_point_id`): what
        :meth:`copy` maps to the target scope's point id, so an object's surfaces stay apart.

        Returns:
            ((layout-free id, record with vectors and payload) per point, the next offset or
            ``None`` after the last page).
        """
        records, following = await self._client.scroll(
            self._name,
            scroll_filter=self._scope.filter(),
            limit=SCROLL_PAGE,
            offset=offset,
            with_payload=True,
            with_vectors=True,
        )
        return [(self._point_key(r), r) for r in records], following

    def _point_key(self, record: models.Record) -> str:
        memory_id = self._scope.memory_id(record.id, record.payload)
        surface = (record.payload or {}).get(PAYLOAD_SURFACE)
        return memory_id if surface is None else surface_point_id(memory_id, VectorSurface(surface))

    async def copy(self, points: Sequence[tuple[str, models.Record]]) -> int:
        """Write whole points read from another scope (:meth:`page`), then count them here.

        Returns:
            How many of them the collection holds once written (``len(points)`` when all are).
        """
        prepared = [
            models.PointStruct(
                id=self._scope.point_id(key),
                vector=record.vector or {},  # type: ignore[arg-type]
                payload=self._scope.payload({PAYLOAD_ID: key, **(record.payload or {})}),
            )
            for key, record in points
        ]
        await self._write(prepared)
        written = [key for key, _ in points]
        return await self.count([models.HasIdCondition(has_id=self._scope.point_ids(written))])

    async def _write(self, prepared: list[models.PointStruct]) -> None:
        """Upsert ``prepared``; shared, an existing point is replaced only if it is the tenant's.

        The tenant filter goes as the upsert's ``update_filter`` (Qdrant's conditional update):
        point ids are the tenant's own already (``uuid5(memory_id, collection)``), and even an id
        another tenant held would be left as it is. Per collection, a plain upsert as before.
        """
        update_filter = self._scope.filter() if self._scope.shared else None
        if update_filter is None:
            await self._client.upsert(self._name, prepared, wait=True)
        else:
            await self._client.upsert(self._name, prepared, wait=True, update_filter=update_filter)

    async def delete(self, memory_ids: Sequence[str]) -> None:
        """Delete the points of ``memory_ids`` (applied on return; absent ids are ignored)."""
        selector = self._scope.selector(memory_ids)
        await self._client.delete(self._name, selector, wait=True)

    async def clear(self) -> None:
        """Delete every point of the collection's tenant, keeping its marker (shared only).

        Raises:
            ValueError: a per-collection layout (its whole Qdrant collection is dropped instead).
        """
        await self._client.delete(self._name, self._scope.selector(), wait=True)

    async def erase(self) -> None:
        """Delete every point of the collection's tenant, then its marker (shared only).

        Raises:
            ValueError: a per-collection layout (its whole Qdrant collection is dropped instead).
        """
        await self.clear()
        marker = models.PointIdsList(points=[self._scope.marker_id])
        await self._client.delete(self._name, marker, wait=True)

    async def ranked(self, plan: SearchPlan) -> tuple[int, list[list[Found]], list[list[int]]]:
        """Count the candidates, then run the stage rounds: (scanned, ranked stages, ranks)."""
        conditions: list[models.Condition] = [surface_condition(plan.surface)]
        if plan.types:
            conditions.append(
                models.FieldCondition(key=PAYLOAD_TYPE, match=models.MatchAny(any=plan.types))
            )
        if plan.within is not None:
            within = sorted(self._scope.point_ids(plan.within))
            conditions.append(models.HasIdCondition(has_id=within))
        scanned = await self.count(conditions)
        ranker = plan.ranker(scanned, _SCORE, self._found)
        if ranker is None:
            return scanned, [], []
        queries = [
            (name, sparse(v) if stage else v) for stage, (name, v) in enumerate(plan.queries)
        ]
        query_filter = self._scope.filter(conditions)
        while ranker.pending:
            requests = [
                models.QueryRequest(
                    query=queries[stage][1],
                    using=queries[stage][0],
                    filter=query_filter,
                    params=None if stage else self._exact,  # ``exact`` concerns the dense stage
                    score_threshold=plan.threshold(stage),
                    limit=n,
                    with_payload=True,
                )
                for stage, n in ranker.pending
            ]
            responses = await self._client.query_batch_points(self._name, requests=requests)
            ranker.accept([response.points for response in responses])
        return scanned, ranker.ranked(), ranker.ranks()

    def _found(self, point: models.ScoredPoint) -> Found:
        """A scored point as the search keeps it: (memory id, stage score, ``object_type``)."""
        payload: Mapping[str, object] = point.payload or {}
        memory_id = self._scope.memory_id(point.id, payload)
        return memory_id, float(point.score), payload.get(PAYLOAD_TYPE)
