"""The reference vector index: exact cosine in pure Python, the vector port's specification."""

from __future__ import annotations

import math
from collections.abc import Sequence

from charmem.domain.ids import MemoryId
from charmem.domain.model import ObjectType
from charmem.domain.retrieval import CompletenessKind, VectorRecallCompleteness, score_step
from charmem.errors import BackendError, DimensionMismatchError
from charmem.ports import VectorHit, VectorPoint, VectorQuery, VectorSearchResult, VectorSurface
from charmem.settings import Settings, validate_collection_name

__all__ = ["ReferenceVectorIndex"]


def _normalised(vector: Sequence[float], size: int) -> tuple[float, ...]:
    if len(vector) != size:
        raise DimensionMismatchError(
            f"vector has {len(vector)} dimensions, the index holds {size}; use a provider of "
            f"size {size} or rebuild the index",
            expected=size,
            actual=len(vector),
        )
    values = tuple(float(v) for v in vector)
    if not all(math.isfinite(v) for v in values):
        raise BackendError("vector holds NaN or infinite values; the embedding provider is faulty")
    norm = math.sqrt(sum(v * v for v in values))
    return values if norm == 0.0 else tuple(v / norm for v in values)


class ReferenceVectorIndex:
    """Exact cosine search over a dict (``VECTOR_STORE_MODE=in_memory``); no lexical cue."""

    def __init__(self, collection: str, *, model_id: str, vector_size: int) -> None:
        """Args: collection: validated name; model_id, vector_size: the embedder fingerprint."""
        self.collection = validate_collection_name(collection)
        self._model_id = model_id
        self._size = vector_size
        # one dict per surface: a point is identified by (id, surface)
        self._points: dict[VectorSurface, dict[MemoryId, tuple[ObjectType, tuple[float, ...]]]] = {
            surface: {} for surface in VectorSurface
        }

    @classmethod
    def from_settings(
        cls, settings: Settings, collection: str, *, model_id: str, vector_size: int
    ) -> ReferenceVectorIndex:
        """Build from settings (nothing is read)."""
        del settings
        return cls(collection, model_id=model_id, vector_size=vector_size)

    @property
    def vector_size(self) -> int:
        """Dimensions of every vector."""
        return self._size

    @property
    def model_id(self) -> str:
        """The embedder fingerprint's model id."""
        return self._model_id

    async def upsert(self, points: Sequence[VectorPoint]) -> None:
        """Insert or replace points (all validated before any is stored)."""
        staged = [
            (p.id, p.object_type, VectorSurface(p.surface), _normalised(p.vector, self._size)) for p in points
        ]
        for memory_id, object_type, surface, vector in staged:
            self._points[surface][memory_id] = (object_type, vector)

    async def delete(self, ids: Sequence[MemoryId]) -> None:
        """Remove the points of ``ids`` on every surface; absent ids are ignored."""
        for memory_id in ids:
            for points in self._points.values():
                points.pop(memory_id, None)

    async def search(self, query: VectorQuery) -> VectorSearchResult:
        """Exact cosine; score (in steps of ``SCORE_RESOLUTION``) desc, id asc."""
        vector = _normalised(query.vector, self._size)
        scope = set(query.object_types)
        within = None if query.within is None else set(query.within)
        scored = [
            VectorHit(memory_id, object_type, sum(a * b for a, b in zip(vector, stored, strict=True)))
            for memory_id, (object_type, stored) in self._points[query.surface].items()
            if (not scope or object_type in scope) and (within is None or memory_id in within)
        ]
        in_scope = len(scored)
        if query.min_score is not None:
            scored = [hit for hit in scored if hit.score >= query.min_score]
        scored.sort(key=lambda hit: (-score_step(hit.score), hit.id))
        hits = tuple(scored[: query.limit])
        return VectorSearchResult(
            hits=hits,
            completeness=VectorRecallCompleteness(
                CompletenessKind.EXHAUSTIVE, scanned=in_scope, fetched=len(hits)
            ),
        )

    async def point_ids(self, surface: VectorSurface = VectorSurface.CONTENT) -> set[MemoryId]:
        """The ids with a point on ``surface``."""
        return set(self._points[surface])

    async def count(self, surface: VectorSurface = VectorSurface.CONTENT) -> int:
        """Number of points on ``surface``."""
        return len(self._points[surface])

    async def close(self) -> None:
        """Nothing to release."""
