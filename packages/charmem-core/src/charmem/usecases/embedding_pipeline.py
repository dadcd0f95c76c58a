"""Embedding overlapped with writes, in calls of the provider's efficient size.

An embedding provider answers a few large calls much faster than many small ones (a local model
sorts a call's texts by length and pads less; a remote one pays one round trip per call). Two
writers gather texts across what they write and embed while the stores work:

* :class:`VectorPipeline`: the vector-index work of a sequence of commits
  (:func:`~charmem.usecases.commit.commit_plans`). Each plan's work (:class:`VectorWork`) is
  submitted once its graph batch is written; a background task embeds the texts of consecutive
  plans in calls of ``batch_size`` and applies upserts and deletes in plan order, while the next
  plans' graph batches are written;
* :func:`embed_and_upsert_chunks`: a vector rebuild, which embeds its next chunk while the
  current one is upserted.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Final

import attrs

from charmem.domain.ids import MemoryId
from charmem.domain.plan import IndexEntry, RepairMarker, RepairMarkerType, VectorOperation
from charmem.errors import excerpt
from charmem.log import get_logger
from charmem.ports import EmbeddingProvider, GraphStore, VectorIndex, VectorPoint
from charmem.usecases.embedding import embed_texts
from charmem.usecases.names import embedding_texts
from charmem.usecases.store_writes import finish_write, wait_until_done

__all__ = ["UPSERT_POINTS", "VectorPipeline", "VectorWork", "embed_and_upsert_chunks"]

log = get_logger("charmem.maintenance")

#: About the most points one ``VectorIndex.upsert`` call of a commit carries (a whole number of
#: embedding batches, at least one):
#: each upsert is durable on return, so fewer, larger calls write faster (bounded memory: 512
#: vectors of 1,536 floats are about 25 MB of Python floats).
UPSERT_POINTS: Final = 512


@attrs.frozen(kw_only=True)
class VectorWork:
    """The vector-index changes one write implies, read from graph currency right after it.

    Attributes:
        upserts: current entries to embed and upsert, in entry order.
        texts: the text embedded for each of ``upserts`` (one per entry).
        deletes: ids whose points must go (no longer current), sorted.
        markers: repair markers of graph reads that failed (their entries are left out).
    """

    upserts: tuple[IndexEntry, ...] = ()
    texts: tuple[str, ...] = ()
    deletes: tuple[MemoryId, ...] = ()
    markers: tuple[RepairMarkerType, ...] = ()


def _point(entry: IndexEntry, text: str, vector: Sequence[float]) -> VectorPoint:
    """The point of an index entry (its surface kept), embedding ``text`` as ``vector``."""
    return VectorPoint(
        id=entry.id, object_type=entry.object_type, vector=vector, text=text, surface=entry.surface
    )


@attrs.frozen
class _Pending:
    """One text waiting to be embedded, with the position of the plan it belongs to."""

    plan: int
    entry: IndexEntry
    text: str


def _markers_by_plan(
    operation: VectorOperation, items: Sequence[tuple[int, MemoryId]], exc: BaseException
) -> dict[int, RepairMarkerType]:
    """One marker per plan for a failed call over ``items`` ((plan position, id) pairs)."""
    ids: dict[int, dict[MemoryId, None]] = {}
    for plan, memory_id in items:  # an episode's surfaces share its id: named once
        ids.setdefault(plan, {})[memory_id] = None
    cause = excerpt(f"{type(exc).__name__}: {exc}")
    log.warning(f"vector_{operation.value}_failed", ids=len(items), error=type(exc).__name__)
    return {plan: RepairMarker.VectorMaintenance(operation, tuple(i), cause) for plan, i in ids.items()}


class VectorPipeline:
    """Applies the :class:`VectorWork` of consecutive plans in order, embedding across plans.

    Texts are embedded ``batch_size`` at a time, a call taking texts of as many consecutive plans
    as it needs; points are upserted about :data:`UPSERT_POINTS` at a time. A plan's deletes are
    applied after every upsert submitted before them, so an id superseded by a later plan never
    comes back. Like ``maintain_vectors`` it never raises: a failed embedding, upsert or delete
    call becomes one repair marker per plan it concerned.

    Use: create it inside a running event loop, :meth:`submit` each plan's work in plan order,
    then await :meth:`finish` (or :meth:`cancel`).

    Args:
        vectors: the collection's vector index.
        embedder: the embedding provider.
        batch_size: texts per ``embed_documents`` call (count, >= 1).
        embed_timeout_s: seconds one call may take (``EMBEDDING_TIMEOUT_S``).
    """

    def __init__(
        self, *, vectors: VectorIndex, embedder: EmbeddingProvider, batch_size: int, embed_timeout_s: float
    ) -> None:
        self._vectors = vectors
        self._embedder = embedder
        self._batch_size = batch_size
        self._embed_timeout_s = embed_timeout_s
        self._upsert_points = batch_size * max(1, UPSERT_POINTS // batch_size)
        self._queue: asyncio.Queue[tuple[int, VectorWork] | None] = asyncio.Queue()
        self._markers: dict[int, list[RepairMarkerType]] = {}
        self._pending: list[_Pending] = []
        self._points: list[tuple[int, VectorPoint]] = []
        self._task = asyncio.ensure_future(self._run())

    def submit(self, plan: int, work: VectorWork) -> None:
        """Queue the work of the plan at position ``plan`` (positions increase; never blocks)."""
        self._markers.setdefault(plan, []).extend(work.markers)
        self._queue.put_nowait((plan, work))

    async def finish(self) -> dict[int, list[RepairMarkerType]]:
        """Apply everything submitted, then stop.

        Returns:
            dict[int, list[RepairMarkerType]]: the repair markers of each submitted plan, by
            position (an empty list when all its vector work was applied).
        """
        self._queue.put_nowait(None)
        await self._task
        return self._markers

    async def cancel(self) -> None:
        """Stop; work not yet applied is lost (``charmem.admin.check`` reports it).

        Stops at once unless an upsert or delete runs: that one ends first, even if the caller is
        cancelled again meanwhile, so no vector write outlives the commit that started it.
        """
        self._task.cancel()
        await wait_until_done(self._task)
        with contextlib.suppress(asyncio.CancelledError):
            self._task.result()

    async def _run(self) -> None:
        while (job := await self._queue.get()) is not None:
            plan, work = job
            self._pending += [_Pending(plan, e, t) for e, t in zip(work.upserts, work.texts, strict=True)]
            await self._embed(whole_batches_only=not work.deletes)
            if work.deletes:
                await self._upsert()
                await self._delete(plan, work.deletes)
            elif len(self._points) >= self._upsert_points:
                await self._upsert()
        await self._embed(whole_batches_only=False)
        await self._upsert()

    async def _embed(self, *, whole_batches_only: bool) -> None:
        """Embed the pending texts in calls of ``batch_size`` (the remainder too, unless told)."""
        size = self._batch_size
        while self._pending and (len(self._pending) >= size or not whole_batches_only):
            chunk, self._pending = self._pending[:size], self._pending[size:]
            try:
                rows = await embed_texts(
                    self._embedder, [p.text for p in chunk], timeout_s=self._embed_timeout_s
                )
            except Exception as exc:  # noqa: BLE001 - repairable write
                self._add(
                    _markers_by_plan(VectorOperation.UPSERT, [(p.plan, p.entry.id) for p in chunk], exc)
                )
                continue
            self._points += [
                (p.plan, _point(p.entry, p.text, row)) for p, row in zip(chunk, rows, strict=True)
            ]
            if len(self._points) >= self._upsert_points:
                await self._upsert()

    async def _upsert(self) -> None:
        points, self._points = self._points, []
        if not points:
            return
        try:
            await finish_write(self._vectors.upsert([point for _plan, point in points]))
        except Exception as exc:  # noqa: BLE001 - repairable write
            self._add(_markers_by_plan(VectorOperation.UPSERT, [(plan, p.id) for plan, p in points], exc))

    async def _delete(self, plan: int, ids: Sequence[MemoryId]) -> None:
        try:
            await finish_write(self._vectors.delete(ids))
        except Exception as exc:  # noqa: BLE001 - repairable write
            self._add(_markers_by_plan(VectorOperation.DELETE, [(plan, i) for i in ids], exc))

    def _add(self, markers: dict[int, RepairMarkerType]) -> None:
        for plan, marker in markers.items():
            self._markers.setdefault(plan, []).append(marker)


async def embed_and_upsert_chunks(
    chunks: Sequence[Sequence[IndexEntry]],
    graph: GraphStore,
    vectors: VectorIndex,
    embedder: EmbeddingProvider,
    on_progress: Callable[[int, int], object] | None,
    embed_timeout_s: float,
) -> None:
    """Embed and upsert each chunk of entries, embedding the next chunk during each upsert.

    Args:
        chunks: index entries, one embedding call (and one upsert) per chunk.
        graph: the graph the entries' embedding texts are read from.
        vectors: the vector index.
        embedder: the embedding provider.
        on_progress: ``on_progress(done, total)``, entries upserted so far and in all: once
            before the first chunk and after each.
        embed_timeout_s: seconds one embedding call may take.

    Raises:
        BackendError: a store or the embedder failed (the chunk being embedded is cancelled).
    """

    async def points_of(chunk: Sequence[IndexEntry]) -> list[VectorPoint]:
        texts = await embedding_texts(chunk, graph)
        rows = await embed_texts(embedder, texts, timeout_s=embed_timeout_s)
        return [_point(entry, text, row) for entry, text, row in zip(chunk, texts, rows, strict=True)]

    total = sum(map(len, chunks))
    if on_progress is not None:
        on_progress(0, total)
    done = 0
    upcoming = asyncio.ensure_future(points_of(chunks[0])) if chunks else None
    try:
        for index, chunk in enumerate(chunks):
            assert upcoming is not None
            points = await upcoming
            upcoming = (
                asyncio.ensure_future(points_of(chunks[index + 1])) if index + 1 < len(chunks) else None
            )
            await finish_write(vectors.upsert(points))
            done += len(chunk)
            if on_progress is not None:
                on_progress(done, total)
    finally:
        if upcoming is not None and not upcoming.done():
            upcoming.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await upcoming
