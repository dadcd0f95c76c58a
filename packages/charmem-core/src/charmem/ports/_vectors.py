"""The candidate-recall port: a rebuildable vector index over graph authority."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import attrs

from charmem.domain.ids import MemoryId
from charmem.domain.model import ObjectType
from charmem.domain.retrieval import VectorRecallCompleteness
from charmem.domain.surfaces import VectorSurface

__all__ = ["VectorHit", "VectorIndex", "VectorPoint", "VectorQuery", "VectorSearchResult", "VectorSurface"]


@attrs.frozen(kw_only=True)
class VectorPoint:
    """One candidate-recall entry: an object's id, type, surface, vector and the text it embeds.

    A point is identified by ``(id, surface)``: an episode with a scene may hold a content point
    and a point per scene surface (:class:`~charmem.domain.surfaces.VectorSurface`).
    """

    id: MemoryId
    object_type: ObjectType
    vector: Sequence[float]
    text: str = ""
    surface: VectorSurface = VectorSurface.CONTENT


@attrs.frozen(kw_only=True)
class VectorQuery:
    """A candidate-recall request.

    Attributes:
        vector: the query vector (``vector_size`` floats).
        limit: most hits returned (count).
        object_types: only points of these types (empty: all types).
        text: the cue text, for a lexical cue where the index supports one.
        within: only these points (``None``: every point); ids without a point are ignored.
            Retrieval uses it to rank the members of a notion against the query.
        min_score: a floor on the dense similarity (cosine): a point less similar than this to
            ``vector`` is not a dense candidate; a lexical cue may still propose it when its text
            shares a term with ``text``. ``None``: no floor.
        surface: the surface searched; points of every other surface are never candidates,
            for the dense and the lexical cue alike (default: content).
    """

    vector: Sequence[float]
    limit: int
    object_types: tuple[ObjectType, ...] = ()
    text: str | None = None
    within: tuple[MemoryId, ...] | None = None
    min_score: float | None = None
    surface: VectorSurface = VectorSurface.CONTENT


@attrs.frozen
class VectorHit:
    """One candidate: the object's id, its type and the similarity score (cosine, higher is closer).

    The id is the object's, whichever surface was searched.
    """

    id: MemoryId
    object_type: ObjectType
    score: float


@attrs.frozen(kw_only=True)
class VectorSearchResult:
    """Hits ordered by score descending, ties by id ascending; and how complete the scan was.

    Scores of one :func:`~charmem.domain.retrieval.score_step` are ties.
    """

    hits: tuple[VectorHit, ...]
    completeness: VectorRecallCompleteness


class VectorIndex(Protocol):
    """Candidate recall for one collection: a rebuildable index over graph authority.

    Contract:
        * Bound at open to an embedder fingerprint (``model_id``, ``vector_size``): another size
          raises :class:`~charmem.errors.DimensionMismatchError`, another model of the same size
          :class:`~charmem.errors.EmbedderMismatchError`.
        * A point is identified by ``(id, surface)``
          (:class:`~charmem.domain.surfaces.VectorSurface`): ``upsert`` replaces the point with
          the same id and surface, and leaves the object's other surfaces as they are;
          ``delete`` removes every surface of the ids; an absent id is a no-op.
        * Surfaces are kept apart: ``search`` considers the points of ``query.surface`` only (its
          dense and lexical cues, its ``scanned`` count), so a content search never meets a
          scene surface's text.
        * ``point_ids(surface)`` and ``count(surface)`` list and count one surface (content by
          default: the objects with a content point); consistency checks ask for each surface.
        * ``search`` orders by score descending, ties by id ascending, and reports completeness;
          scores of one :func:`~charmem.domain.retrieval.score_step` (float noise below
          ``SCORE_RESOLUTION``) are ties, so a cut at ``limit`` keeps the same candidates whether
          the index computes in float32 or float64.
        * An embedded store held by another opener raises :class:`~charmem.errors.StoreLockedError`.
        * Driver failures raise :class:`~charmem.errors.BackendError`.
    """

    @property
    def vector_size(self) -> int:
        """Dimensions of the collection's vectors (the embedder fingerprint)."""
        ...

    @property
    def model_id(self) -> str:
        """Model id of the embedder fingerprint."""
        ...

    async def upsert(self, points: Sequence[VectorPoint]) -> None:
        """Insert or replace points (vectors of ``vector_size`` finite floats)."""
        ...

    async def delete(self, ids: Sequence[MemoryId]) -> None:
        """Remove the points of ``ids``, every surface; absent ids are ignored."""
        ...

    async def search(self, query: VectorQuery) -> VectorSearchResult:
        """Nearest points of ``query.surface`` to ``query.vector`` among ``query.object_types``."""
        ...

    async def point_ids(self, surface: VectorSurface = VectorSurface.CONTENT) -> set[MemoryId]:
        """The ids of the objects with a point on ``surface`` (for consistency checks and tests)."""
        ...

    async def count(self, surface: VectorSurface = VectorSurface.CONTENT) -> int:
        """Number of points on ``surface`` in the collection."""
        ...

    async def close(self) -> None:
        """Release resources (and the store lock)."""
        ...
