"""The recall algorithm of both Qdrant indexes: points, search stages, fusion and hits.

The embedded index (:mod:`charmem_qdrant._edge`, a Qdrant Edge shard) and the service index
(:mod:`charmem_qdrant._service`, a Qdrant server over gRPC) store the same points and answer a
search the same way; they differ only in how they reach Qdrant. What they share lives here:

* **Points**: id = the MemoryId UUID for a content point, ``uuid5(memory_id, surface)`` for a
  scene surface's (:func:`surface_point_id`); a dense cosine vector ``"dense"`` (``vector_size``
  floats), a BM25 sparse vector ``"lexical"`` of the point's text (``Bm25.embed_document``,
  computed locally, so both transports hold identical vectors) when the text has BM25 terms, and
  the payload ``{"object_type": ..., "memory_id": ...}``, plus ``"surface"`` on a scene surface's
  point (:meth:`QdrantRecall._point_parts`). A search keeps to its surface by a payload
  condition (:func:`surface_condition`): a content search matches the points without
  ``"surface"``.
* **Search plan**: the checked query vector, the BM25 query of the cue text when the lexical cue
  is on, and how many points each stage contributes (:class:`SearchPlan`).
* **Staged search**: each stage ranked canonically (score descending, id ascending, fetching more
  while a cut is tied) by :class:`~charmem_qdrant._fusion.StageRanker`.
* **Fusion and hits**: one stage gives its points as they are; two are fused by the rule of
  :mod:`charmem_qdrant._fusion` (reciprocal rank fusion with tied stage scores sharing a rank),
  then mapped to :class:`~charmem.ports.VectorHit` (:meth:`QdrantRecall._result`).

A transport's driver turns :class:`PointParts` and :class:`SearchPlan` into its own request
types, runs the stage rounds, and hands back each stage's points as :data:`Found` tuples.
"""

from __future__ import annotations

import math
import operator
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeVar

import qdrant_edge as qe

from charmem.domain.ids import MemoryId
from charmem.domain.model import ObjectType
from charmem.domain.retrieval import CompletenessKind, VectorRecallCompleteness
from charmem.errors import BackendError, ConfigurationError, DimensionMismatchError
from charmem.ports import VectorHit, VectorPoint, VectorQuery, VectorSearchResult, VectorSurface
from charmem_qdrant._fusion import (
    DEFAULT_FUSION_WEIGHTS,
    RRF_K,
    StageRanker,
    check_weights,
    fuse_ranked,
    stage_size,
)
from charmem_qdrant._hnsw import bool_setting
from charmem_qdrant._marker import ShardMarker

if TYPE_CHECKING:
    from charmem.settings import Settings

__all__ = [
    "DENSE_VECTOR",
    "FOUND_ID",
    "FOUND_SCORE",
    "LEXICAL_CUE_KEY",
    "LEXICAL_VECTOR",
    "LEXICAL_WEIGHT_KEY",
    "PAYLOAD_ID",
    "PAYLOAD_SURFACE",
    "PAYLOAD_TYPE",
    "SCROLL_PAGE",
    "Found",
    "PointParts",
    "QdrantRecall",
    "SearchPlan",
    "checked_vector",
    "checked_weights",
    "point_ids_of",
    "positive_setting",
    "surface_point_id",
    "type_values",
    "weights_from_settings",
]

#: Name of the dense (cosine) vector of every point.
DENSE_VECTOR: Final = "dense"
#: Name of the sparse BM25 vector (IDF modifier) of every point with text.
LEXICAL_VECTOR: Final = "lexical"
#: Settings key (read from ``Settings.extra``) that turns the lexical cue off or on:
#: ``true`` (the default: a BM25 stage beside the dense one) or ``false``.
LEXICAL_CUE_KEY: Final = "VECTOR_LEXICAL_CUE"
#: Settings key (read from ``Settings.extra``): the RRF weight of the lexical stage, a finite
#: number > 0 (default 1.0; the dense stage weighs 1.5).
LEXICAL_WEIGHT_KEY: Final = "VECTOR_LEXICAL_WEIGHT"
#: Payload key of a point's object type (a keyword index serves the type filter).
PAYLOAD_TYPE: Final = "object_type"
#: Payload key of a point's id, the same UUID string as the point id.
PAYLOAD_ID: Final = "memory_id"
#: Payload key of a scene surface's point: the surface (``"setting_words"``,
#: ``"person_words"``); content points have none, so their payload is that of schema 1.
PAYLOAD_SURFACE: Final = "surface"
#: Points per page when listing every point id (count).
SCROLL_PAGE: Final = 1024

#: A stage's point as the search keeps it: (id, stage score, ``object_type`` payload value, or
#: None where the driver reads the types of the hits only). The id is the canonical UUID string,
#: or in a stage its integer (:data:`charmem_qdrant._fusion.Key`: the same order), and a hit's the
#: string or the ``uuid.UUID``. Each driver reads them once per point from its own scored-point
#: type.
Found = tuple[str | int | uuid.UUID, float, object]
#: A point of a driver's own stage answers.
A = TypeVar("A")
#: A found point's id and score (``operator`` getters: the stage sorts call them in C).
FOUND_ID: Final = operator.itemgetter(0)
FOUND_SCORE: Final = operator.itemgetter(1)


def positive_setting(extra: Mapping[str, str], key: str, default: float, must: str) -> float:
    """The setting ``key`` of ``extra`` as a finite number > 0; ``default`` when unset or blank.

    Raises:
        ConfigurationError: ``"{key}={raw!r} must be {must}"``, naming ``key``.
    """
    raw = extra.get(key)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ConfigurationError(f"{key}={raw!r} must be {must}", key=key)
    return value


def weights_from_settings(settings: Settings) -> tuple[float, float]:
    """The fusion weights (dense 1.5, lexical ``VECTOR_LEXICAL_WEIGHT`` or 1.0).

    Raises:
        ConfigurationError: ``VECTOR_LEXICAL_WEIGHT`` is not a finite number > 0.
    """
    weight = positive_setting(
        settings.extra,
        LEXICAL_WEIGHT_KEY,
        DEFAULT_FUSION_WEIGHTS[1],
        f"a finite number > 0 (the RRF weight of the lexical stage; set {LEXICAL_CUE_KEY}=false "
        "to turn the cue off)",
    )
    return (DEFAULT_FUSION_WEIGHTS[0], weight)


def checked_weights(weights: Sequence[float]) -> tuple[float, float]:
    """Constructor ``fusion_weights`` as (dense, lexical) floats.

    Raises:
        ConfigurationError: not two finite numbers > 0.
    """
    try:
        dense, lexical = check_weights(weights, 2)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(
            f"fusion_weights must be (dense, lexical), two finite numbers > 0: {exc}",
            key="fusion_weights",
        ) from exc
    return dense, lexical


def checked_vector(
    vector: Sequence[float], what: str, size: int, collection: str, model_id: str
) -> list[float]:
    """``vector`` as ``size`` finite numbers, for a point or a query of ``collection``.

    A list (what core's checked embeddings are: plain floats) is used as it is when one C-level
    sum of it succeeds and is finite (a NaN or an infinity makes the sum non-finite; overflow
    alone can too, so a non-finite sum is checked element by element); the driver converts the
    numbers. Anything else, or a list whose sum fails (an element that is not a number), is
    converted element by element with ``float``. Scanning the element types of every vector took
    a quarter of the Edge upsert's own time (~25 µs per 1,536 floats, measured), for lists core
    had already checked.

    Raises:
        DimensionMismatchError: the vector has another length than ``size``.
        BackendError: the vector holds NaN or infinity.
        TypeError, ValueError: an element is not a number (``float`` refuses it).
    """
    values: list[float] = vector if type(vector) is list else [float(x) for x in vector]
    if len(values) != size:
        raise DimensionMismatchError(
            f"{what} has {len(values)} dimensions but collection {collection!r} "
            f"stores {size} (model {model_id!r})",
            expected=size,
            actual=len(values),
        )
    try:
        total = float(sum(values))
    except (TypeError, ValueError, OverflowError):
        values = [float(x) for x in values]
        total = sum(values)
    if not math.isfinite(total) and not all(map(math.isfinite, values)):
        raise BackendError(
            f"{what} contains NaN or infinite values; embedders must return finite floats"
        )
    return values


def surface_point_id(memory_id: str, surface: VectorSurface) -> str:
    """The point id of one surface of an object: the memory id, or ``uuid5(memory_id, surface)``.

    Deterministic, so a replayed upsert replaces the point and a delete finds it without a read.
    """
    if surface is VectorSurface.CONTENT:
        return memory_id
    return str(uuid.uuid5(uuid.UUID(memory_id), surface.value))


def point_ids_of(memory_ids: Sequence[MemoryId]) -> list[str]:
    """The point ids of every surface of ``memory_ids`` (what a delete removes), in id order."""
    return [
        surface_point_id(str(MemoryId(i)), surface) for i in memory_ids for surface in VectorSurface
    ]


def type_values(object_types: Sequence[ObjectType]) -> list[str]:
    """The ``object_type`` payload values a type filter matches, sorted (none: no filter)."""
    return sorted({ObjectType(t).value for t in object_types})


class PointParts(NamedTuple):
    """One point ready for a driver: its id, vectors and payload, checked and embedded."""

    id: str
    dense: list[float]
    sparse: qe.SparseVector | None  # BM25 of the text; None without text or terms
    payload: dict[str, str]

    def named_vectors(self, sparse: Callable[[qe.SparseVector], Any] = lambda s: s) -> Any:
        """``{"dense": ..., "lexical": ...}`` (the sparse one converted by ``sparse``)."""
        vectors: dict[str, Any] = {DENSE_VECTOR: self.dense}
        if self.sparse is not None:
            vectors[LEXICAL_VECTOR] = sparse(self.sparse)
        return vectors


class SearchPlan(NamedTuple):
    """What one search asks of Qdrant, whatever the transport.

    Attributes:
        vector: the checked dense query vector (``vector_size`` floats).
        sparse: the BM25 query of the cue text, or None (a dense-only search).
        limit: the hits wanted (count).
        min_score: the cosine floor of the dense stage, or None.
        types: the ``object_type`` payload values to match, sorted (none: every type).
        within: the point ids (of ``surface``) to search among, or None (every point).
        surface: the ``surface`` payload value to match, or None for content (no such payload).
    """

    vector: list[float]
    sparse: qe.SparseVector | None
    limit: int
    min_score: float | None
    types: list[str]
    within: list[str] | None
    surface: str | None = None

    @property
    def queries(self) -> list[tuple[str, Any]]:
        """Each stage's (vector name, query vector): dense, then lexical when it runs."""
        if self.sparse is None:
            return [(DENSE_VECTOR, self.vector)]
        return [(DENSE_VECTOR, self.vector), (LEXICAL_VECTOR, self.sparse)]

    @property
    def stages(self) -> int:
        """How many stages run: 1 (dense) or 2 (dense and lexical, fused)."""
        return 1 if self.sparse is None else 2

    def threshold(self, stage: int) -> float | None:
        """The score floor of ``stage``: the cosine floor on the dense stage only."""
        return self.min_score if stage == 0 else None

    def ranker(
        self, scanned: int, score_of: Callable[[A], float], convert: Callable[[A], Found]
    ) -> StageRanker[A, Found] | None:
        """The stage ranker over ``scanned`` candidate points; None when nothing is searched.

        Args:
            scanned: the points matching the filter (count).
            score_of: a point of the driver's answers -> its stage score.
            convert: a point of the driver's answers -> :data:`Found` (read only for the points
                that can make a stage's cut).
        """
        if self.limit <= 0 or scanned == 0:
            return None
        want = self.limit if self.sparse is None else stage_size(self.limit)
        # BM25 scores tie often (texts with the same matched words and length)
        ties_likely = [stage == 1 for stage in range(self.stages)]
        return StageRanker([want] * self.stages, scanned, FOUND_ID, score_of, convert, ties_likely)


class QdrantRecall:
    """The fingerprint, the settings and the recall algorithm both Qdrant indexes share.

    Args:
        collection: the charmem collection name (checked by the subclass).
        model_id: the embedding model's stable name, non-empty.
        vector_size: the dense vector dimension, >= 1.
        lexical: fuse the BM25 lexical cue into searches that have cue text.
        fusion_weights: the RRF weights of the (dense, lexical) stages, finite and > 0.

    Raises:
        ConfigurationError: a bad ``model_id``, ``vector_size`` or ``fusion_weights``.
    """

    def __init__(
        self,
        collection: str,
        model_id: str,
        vector_size: int,
        lexical: bool,
        fusion_weights: tuple[float, float],
    ) -> None:
        weights = checked_weights(fusion_weights)
        if not isinstance(model_id, str) or not model_id.strip():
            raise ConfigurationError("model_id must be a non-empty string", key="model_id")
        if isinstance(vector_size, bool) or not isinstance(vector_size, int) or vector_size < 1:
            raise ConfigurationError(
                f"vector_size must be a positive int, not {vector_size!r}", key="vector_size"
            )
        self._collection = collection
        self._model_id = model_id
        self._vector_size = vector_size
        self._lexical = lexical
        self._weights = weights
        self._bm25 = qe.Bm25()

    @staticmethod
    def _cue_from_settings(settings: Settings) -> tuple[bool, tuple[float, float]]:
        """``VECTOR_LEXICAL_CUE`` (default true) and the fusion weights of ``settings.extra``.

        Raises:
            ConfigurationError: a malformed ``VECTOR_LEXICAL_CUE`` or ``VECTOR_LEXICAL_WEIGHT``.
        """
        return bool_setting(settings, LEXICAL_CUE_KEY, default=True), weights_from_settings(
            settings
        )

    @property
    def collection(self) -> str:
        """The charmem collection this index serves."""
        return self._collection

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

    def _fingerprint(self) -> ShardMarker:
        """The marker this opener expects: its collection, model id and vector size."""
        return ShardMarker(
            collection=self._collection, model_id=self._model_id, vector_size=self._vector_size
        )

    if TYPE_CHECKING:

        @property
        def closed(self) -> bool:
            """Whether the index was closed (each transport says how)."""

    def _describe(self, where: str, extra: str = "") -> str:
        """The repr: the class, collection, ``where`` the store is, fingerprint, ``extra``."""
        state = "closed" if self.closed else "open"
        return (
            f"{type(self).__name__}(collection={self._collection!r}, {where}, "
            f"model_id={self._model_id!r}, vector_size={self._vector_size}, "
            f"lexical={self._lexical}, fusion_weights={self._weights}{extra}, {state})"
        )

    def _checked_vector(self, vector: Sequence[float], what: str) -> list[float]:
        return checked_vector(vector, what, self._vector_size, self._collection, self._model_id)

    def _point_parts(self, points: Sequence[VectorPoint]) -> list[PointParts]:
        """Every point checked and embedded, before anything is written.

        Raises:
            DimensionMismatchError: a vector has another length than ``vector_size``.
            BackendError: a vector holds NaN or infinity.
        """
        parts: list[PointParts] = []
        for point in points:
            vector = self._checked_vector(point.vector, f"the vector of {point.id}")
            sparse = None
            if point.text and point.text.strip():
                embedded = self._bm25.embed_document(point.text)
                sparse = embedded if embedded.indices else None
            memory_id = str(point.id)
            surface = VectorSurface(point.surface)
            payload = {PAYLOAD_TYPE: ObjectType(point.object_type).value, PAYLOAD_ID: memory_id}
            if surface is not VectorSurface.CONTENT:
                payload[PAYLOAD_SURFACE] = surface.value
            parts.append(PointParts(surface_point_id(memory_id, surface), vector, sparse, payload))
        return parts

    def _plan(self, query: VectorQuery) -> SearchPlan:
        """The dense vector, checked, and the BM25 query when the lexical cue applies.

        Raises:
            DimensionMismatchError: the query vector has another length than ``vector_size``.
            BackendError: the query vector holds NaN or infinity.
        """
        vector = self._checked_vector(query.vector, "the query vector")
        sparse = None
        if self._lexical and query.text and query.text.strip():
            embedded = self._bm25.embed_query(query.text)
            sparse = embedded if embedded.indices else None
        types = type_values(query.object_types)
        surface = VectorSurface(query.surface)
        within = None
        if query.within is not None:
            within = [surface_point_id(str(MemoryId(i)), surface) for i in query.within]
        value = None if surface is VectorSurface.CONTENT else surface.value
        return SearchPlan(vector, sparse, query.limit, query.min_score, types, within, value)

    def _scored(
        self, ranked: list[list[Found]], ranks: list[list[int]], plan: SearchPlan
    ) -> list[tuple[Found, float]]:
        """The hits of the ranked stages with their scores: one stage as it is, two fused.

        Args:
            ranked: each stage's points, canonically ranked (empty: nothing was searched).
            ranks: each stage's competition ranks of those points (``StageRanker.ranks``).
            plan: the search plan.

        Returns:
            At most ``plan.limit`` (point, hit score) pairs in canonical order.
        """
        if len(ranked) <= 1:
            return [(found, found[1]) for stage in ranked for found in stage]
        by_id = {found[0]: found for stage in ranked for found in stage}
        fused = fuse_ranked(
            [
                (list(map(FOUND_ID, stage)), stage_ranks)
                for stage, stage_ranks in zip(ranked, ranks, strict=True)
            ],
            k=RRF_K,
            weights=self._weights,
            limit=plan.limit,
        )
        return [(by_id[point_id], score) for point_id, score in fused]

    def _result(
        self,
        scored: list[tuple[Found, float]],
        scanned: int,
        *,
        where: str,
        approximate: bool,
    ) -> VectorSearchResult:
        """The search result of :meth:`_scored`'s hits, their types read.

        Args:
            scored: the (point, hit score) pairs, canonical order, each with its type.
            scanned: the points matching the type filter (count).
            where: the store in messages (``the vector shard of collection 'c'``).
            approximate: whether an HNSW graph answered the dense stage.

        Raises:
            BackendError: a point lacks a valid ``object_type`` payload or id.
        """
        hits = tuple(_hit(found, score, where) for found, score in scored)
        kind = CompletenessKind.APPROXIMATE if approximate else CompletenessKind.EXHAUSTIVE
        return VectorSearchResult(
            hits=hits,
            completeness=VectorRecallCompleteness(kind, scanned=scanned, fetched=len(hits)),
        )


#: The object types by payload value (a dict read costs a tenth of an ``ObjectType`` call).
_OBJECT_TYPES: Final = {object_type.value: object_type for object_type in ObjectType}


def _hit(found: Found, score: float, where: str) -> VectorHit:
    point_id, _score, raw_type = found
    try:
        object_type = _OBJECT_TYPES.get(raw_type) if isinstance(raw_type, str) else None
        if object_type is None:
            object_type = ObjectType(raw_type)
        memory_id = MemoryId(point_id)
    except ValueError as exc:
        raise BackendError(
            f"point {point_id} in {where} has no valid {PAYLOAD_TYPE!r} payload or id; it was "
            "written by something else. Rebuild it with rebuild_vector_index()"
        ) from exc
    return VectorHit(memory_id, object_type, float(score))
