"""How the embedded index asks Qdrant Edge for a search's points and reads what it answers.

The search itself (stages, tie widening, fusion) is :mod:`charmem_qdrant._recall`'s; these are
the Qdrant Edge side of it: the filter of a search plan, and the readers that turn Qdrant Edge's
scored points into :data:`~charmem_qdrant._recall.Found` tuples, reading as little as each kind
of search needs.
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Mapping
from typing import Final

import qdrant_edge as qe

from charmem.domain.ids import MemoryId
from charmem.errors import BackendError
from charmem.ports import VectorSurface
from charmem_qdrant._recall import (
    PAYLOAD_ID,
    PAYLOAD_SURFACE,
    PAYLOAD_TYPE,
    SCROLL_PAGE,
    Found,
    SearchPlan,
)

__all__ = [
    "SCORE",
    "count_surface",
    "found",
    "found_with_payload",
    "ids_only",
    "plan_filter",
    "scope_key",
    "surface_condition",
    "surface_ids",
    "typed",
]


def surface_condition(surface: str | None) -> qe.FieldCondition | qe.IsEmptyCondition:
    """The points of one surface: those without a ``surface`` payload (content, None) or with it."""
    if surface is None:
        return qe.IsEmptyCondition(PAYLOAD_SURFACE)
    return qe.FieldCondition(PAYLOAD_SURFACE, match=qe.MatchValue(surface))


def plan_filter(plan: SearchPlan, *, scene_points: bool) -> qe.Filter | None:
    """Scope by object type, with ``within`` to those point ids, and to the plan's surface.

    ``scene_points``: whether the shard holds any scene surface's point; without, a content
    search needs no surface condition (every point is content), so its filter is that of a
    shard before scene surfaces existed.
    """
    must: list[
        qe.FieldCondition
        | qe.IsEmptyCondition
        | qe.IsNullCondition
        | qe.HasIdCondition
        | qe.HasVectorCondition
        | qe.NestedCondition
        | qe.Filter
    ] = [surface_condition(plan.surface)] if scene_points or plan.surface is not None else []
    if plan.types:
        must.append(qe.FieldCondition(PAYLOAD_TYPE, match=qe.MatchAny(plan.types)))
    if plan.within is not None:
        must.append(qe.HasIdCondition(set(plan.within)))
    return qe.Filter(must=must) if must else None


def scope_key(plan: SearchPlan) -> tuple[str, ...] | None:
    """The key of the plan's cached candidate count: surface and types (None with ``within``)."""
    return None if plan.within is not None else (plan.surface or "", *plan.types)


def ids_only(plan: SearchPlan) -> bool:
    """Whether the stages may read point ids only: a fused search of content.

    A content point's id is its memory id; a scene surface's is not, so its stages read the
    ``memory_id`` payload.
    """
    return plan.stages > 1 and plan.surface is None


def surface_ids(shard: qe.EdgeShard, surface: VectorSurface) -> set[MemoryId]:
    """The memory ids of the shard's points on ``surface`` (scrolled in pages of 1024)."""
    content = surface is VectorSurface.CONTENT
    only = qe.Filter(must=[surface_condition(None if content else surface.value)])
    with_payload: bool | list[str] = False if content else [PAYLOAD_ID]
    ids: set[MemoryId] = set()
    offset: qe.PointId | None = None
    while True:
        page = qe.ScrollRequest(
            offset=offset,
            limit=SCROLL_PAGE,
            filter=only,
            with_payload=with_payload,
            with_vector=False,
        )
        records, offset = shard.scroll(page)
        ids.update(
            MemoryId(str(r.id if content else (r.payload or {}).get(PAYLOAD_ID))) for r in records
        )
        if offset is None:
            return ids


def count_surface(shard: qe.EdgeShard, surface: VectorSurface) -> int:
    """The exact number of the shard's points on ``surface``."""
    value = None if surface is VectorSurface.CONTENT else surface.value
    return shard.count(
        qe.CountRequest(exact=True, filter=qe.Filter(must=[surface_condition(value)]))
    )


#: A scored point's stage score (an ``operator`` getter: the stage sorts call it in C).
SCORE: Final = operator.attrgetter("score")


def found(point: qe.ScoredPoint) -> Found:
    """A point of a fused search's stage: (the id's integer, stage score, type unread).

    The stages of a fused search run without payload (Qdrant Edge reads the on-disk payload of
    every point it returns, about 1 µs each, measured); the types of the hits alone are read
    afterwards (:func:`typed`). The id's integer orders as its string and costs no formatting
    (``str`` of a UUID took about 1 µs a point, measured).
    """
    point_id = point.id
    if not isinstance(point_id, uuid.UUID):
        raise BackendError(
            f"point {point_id} in a charmem vector shard has no UUID id; it was written by "
            "something else. Rebuild it with rebuild_vector_index()"
        )
    return point_id.int, point.score, None


def found_with_payload(point: qe.ScoredPoint) -> Found:
    """A point of a dense-only search, read with its payload: (id, score, ``object_type``).

    One stage fetches hardly more points than it returns, so its payload costs less than a
    ``retrieve`` of the hits' types would (measured); the id is the ``memory_id`` payload (the
    same UUID string as the point id, read without building a ``uuid.UUID``).
    """
    payload: Mapping[str, object] = point.payload or {}
    point_id = payload.get(PAYLOAD_ID)
    return (
        point_id if isinstance(point_id, str) else str(point.id),
        point.score,
        payload.get(PAYLOAD_TYPE),
    )


def typed(shard: qe.EdgeShard, scored: list[tuple[Found, float]]) -> list[tuple[Found, float]]:
    """The hits with their ids as ``uuid.UUID`` and their ``object_type`` payload values.

    The types are read in one ``retrieve``; a hit whose point has no such payload keeps None
    (:meth:`QdrantRecall._result` refuses it).
    """
    if not scored:
        return scored
    ids: list[qe.PointId] = [uuid.UUID(int=int(found[0])) for found, _ in scored]
    records = shard.retrieve(ids, with_payload=[PAYLOAD_TYPE], with_vector=False)
    types = {_int_id(record.id): (record.payload or {}).get(PAYLOAD_TYPE) for record in records}
    return [
        ((point_id, found[1], types.get(int(found[0]))), score)
        for point_id, (found, score) in zip(ids, scored, strict=True)
    ]


def _int_id(point_id: qe.PointId) -> int | None:
    """A retrieved point's id as the stages key it (None for an id that is no UUID)."""
    return point_id.int if isinstance(point_id, uuid.UUID) else None
