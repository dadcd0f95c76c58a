"""``ShelfVectorIndex``: a charmem vector index over *Shelf*, a made-up store.

Shelf keeps one JSON file per collection. This is the worked example of the
charmem-contract-tests README, small on purpose: an exact cosine scan, the embedder fingerprint
kept in the file, a lock file so one opener at a time, writes made durable by an atomic replace.
A point is identified by its object's id and its surface (content, or a scene surface).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path

from charmem import MemoryId, ObjectType, Settings
from charmem.domain.retrieval import CompletenessKind, VectorRecallCompleteness, score_step
from charmem.errors import (
    BackendError,
    DimensionMismatchError,
    EmbedderMismatchError,
    StoreLockedError,
)
from charmem.ports import VectorHit, VectorPoint, VectorQuery, VectorSearchResult, VectorSurface
from charmem.settings import validate_collection_name


class ShelfVectorIndex:
    """Candidate recall for one collection, stored in ``<root>/<collection>.json``.

    Args:
        root: the Shelf directory (created if missing).
        collection: the collection name (checked before any file is touched).
        model_id, vector_size: the embedder fingerprint; a collection created with another one
            is refused with DimensionMismatchError or EmbedderMismatchError.

    Raises:
        StoreLockedError: another opener holds the collection.
    """

    def __init__(self, root: str | os.PathLike[str], collection: str, *, model_id: str, vector_size: int):
        self.collection = validate_collection_name(collection)
        self._path = Path(root) / f"{collection}.json"
        self._lock = Path(root) / f"{collection}.lock"
        self._model_id, self._size = model_id, vector_size
        self._points: dict[tuple[MemoryId, VectorSurface], tuple[ObjectType, list[float]]] = {}
        self._path.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.close(os.open(self._lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError as exc:
            raise StoreLockedError(f"{self._path} is open elsewhere; close that index first") from exc
        self.closed = False
        try:
            self._load()
        except BaseException:
            self._lock.unlink()
            raise

    @classmethod
    def from_settings(
        cls, settings: Settings, collection: str, *, model_id: str, vector_size: int
    ) -> ShelfVectorIndex:
        """Entry point ``charmem.vector_indexes`` -> ``shelf``: the root is ``SHELF_PATH``."""
        root = settings.extra.get("SHELF_PATH", "./data/shelf")
        return cls(root, collection, model_id=model_id, vector_size=vector_size)

    @property
    def model_id(self) -> str:
        """The embedder fingerprint's model id."""
        return self._model_id

    @property
    def vector_size(self) -> int:
        """The embedder fingerprint's dimensions."""
        return self._size

    def _load(self) -> None:
        if not self._path.exists():
            return self._save()
        stored = json.loads(self._path.read_text(encoding="utf-8"))
        if stored["vector_size"] != self._size:
            raise DimensionMismatchError(
                f"{self._path} holds {stored['vector_size']}-dimensional vectors, not {self._size}",
                expected=stored["vector_size"],
                actual=self._size,
            )
        if stored["model_id"] != self._model_id:
            raise EmbedderMismatchError(f"{self._path} was indexed by {stored['model_id']!r}; rebuild it")
        self._points = {
            (MemoryId(k), VectorSurface(s)): (ObjectType(t), v) for k, s, t, v in stored["points"]
        }

    def _save(self) -> None:
        document = {
            "model_id": self._model_id,
            "vector_size": self._size,
            "points": [[str(k), s.value, t.value, v] for (k, s), (t, v) in self._points.items()],
        }
        temporary = self._path.with_suffix(".tmp")
        with temporary.open("w", encoding="utf-8") as out:
            json.dump(document, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, self._path)  # atomic: the old file or the new one, never half

    def _check(self, vector: Sequence[float]) -> list[float]:
        if self.closed:
            raise BackendError(f"the Shelf index of {self.collection!r} is closed")
        if len(vector) != self._size:
            raise DimensionMismatchError(
                f"a vector of {len(vector)} dimensions; this index holds {self._size}",
                expected=self._size,
                actual=len(vector),
            )
        values = [float(x) for x in vector]
        if not all(math.isfinite(x) for x in values):
            raise BackendError("a vector holds NaN or infinity; the embedding provider is faulty")
        norm = math.sqrt(sum(x * x for x in values)) or 1.0
        return [x / norm for x in values]

    async def upsert(self, points: Sequence[VectorPoint]) -> None:
        """Insert or replace points (by id and surface); every point is checked before any is written."""
        checked = [
            ((p.id, VectorSurface(p.surface)), ObjectType(p.object_type), self._check(p.vector))
            for p in points
        ]
        for key, kind, vector in checked:
            self._points[key] = (kind, vector)
        await asyncio.to_thread(self._save)

    async def delete(self, ids: Sequence[MemoryId]) -> None:
        """Remove the points of ``ids`` on every surface; absent ids are ignored."""
        self._check([0.0] * self._size)
        gone = set(ids)
        self._points = {key: value for key, value in self._points.items() if key[0] not in gone}
        await asyncio.to_thread(self._save)

    async def search(self, query: VectorQuery) -> VectorSearchResult:
        """Exact cosine scan: score descending (in steps of ``SCORE_RESOLUTION``), ties by id ascending.

        Searches ``query.surface`` only, and honours the type scope, ``within`` (only those ids)
        and ``min_score`` (a cosine floor), all applied before the limit.
        """
        vector = self._check(query.vector)
        scope = set(query.object_types)
        within = None if query.within is None else set(query.within)
        in_scope = [
            VectorHit(memory_id, kind, sum(a * b for a, b in zip(vector, stored, strict=True)))
            for (memory_id, surface), (kind, stored) in self._points.items()
            if surface is query.surface
            and (not scope or kind in scope)
            and (within is None or memory_id in within)
        ]
        floor = query.min_score
        hits = sorted(
            (hit for hit in in_scope if floor is None or hit.score >= floor),
            key=lambda hit: (-score_step(hit.score), hit.id),
        )
        kept = tuple(hits[: max(query.limit, 0)])
        completeness = VectorRecallCompleteness(
            CompletenessKind.EXHAUSTIVE, scanned=len(in_scope), fetched=len(kept)
        )
        return VectorSearchResult(hits=kept, completeness=completeness)

    async def point_ids(self, surface: VectorSurface = VectorSurface.CONTENT) -> set[MemoryId]:
        """The ids with a point on ``surface``."""
        return {memory_id for memory_id, on in self._points if on is surface}

    async def count(self, surface: VectorSurface = VectorSurface.CONTENT) -> int:
        """Number of points on ``surface``."""
        return len(await self.point_ids(surface))

    async def close(self) -> None:
        """Release the lock (idempotent); writes are already durable."""
        if not self.closed:
            self.closed = True
            self._lock.unlink(missing_ok=True)
