"""Cancelling a write on the embedded stores (persistent Oxigraph, Qdrant Edge, SQLite stats).

A store write runs in a worker thread that a cancellation cannot stop. A commit cancelled while
its graph batch is being written therefore keeps the writer lock until that write has ended:
a rival write superseding the same memory is validated against the graph with the batch in it
and refused, so no memory gains successors in two writes. A cancellation while no write runs
(the embedder is slow) still ends the call at once.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from charmem import (
    CharacterMemory,
    CorrectionTarget,
    CorrectMemoryDraft,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    EpisodeDraft,
    LifecycleErrorKind,
    LifecycleValidationError,
    MemoryId,
    ObservationDraft,
    PlanSequenceError,
    PlanValidationError,
    RememberDrafts,
    RememberWritePlan,
    ReplacementDerivedMemoryDraft,
    Settings,
)
from charmem.admin import check, repair
from charmem.domain.graph import GraphBatch, GraphWriteResult
from charmem.testing import HashingEmbeddingProvider, stores_of

T0 = datetime(2024, 6, 1, 12, tzinfo=UTC)
ENTITY = MemoryId.deterministic("cancel-test", "entity")
TARGET = MemoryId.deterministic("cancel-test", "black tea")
SEED_EPISODE = MemoryId.deterministic("cancel-test", "seed")
SEED_TURN = MemoryId.deterministic("cancel-test", "seed", "turn")


class HeldGraph:
    """A real graph store whose next ``write_batch`` (once :meth:`hold_next` is called) runs in a
    worker thread that waits for :attr:`release` before writing: the write cannot be cancelled,
    exactly like an adapter's ``asyncio.to_thread`` write."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.started = threading.Event()
        self.release = threading.Event()
        self._hold = False

    def hold_next(self) -> None:
        self._hold = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def write_batch(self, batch: GraphBatch) -> GraphWriteResult:
        if not self._hold:
            result: GraphWriteResult = await self.inner.write_batch(batch)
            return result
        self._hold = False
        loop = asyncio.get_running_loop()

        def held_write() -> GraphWriteResult:
            self.started.set()
            assert self.release.wait(30), "the test never released the held write"
            return asyncio.run_coroutine_threadsafe(self.inner.write_batch(batch), loop).result()

        return await asyncio.to_thread(held_write)


class HeldEmbedder(HashingEmbeddingProvider):
    """The hashing embedder; once :attr:`hold` is set, ``embed_documents`` waits (cancellably)."""

    def __init__(self) -> None:
        super().__init__(64)
        self.hold = False
        self.started = asyncio.Event()

    async def embed_documents(self, texts: Any) -> list[list[float]]:
        if self.hold:
            self.started.set()
            await asyncio.Event().wait()  # until cancelled
        return await super().embed_documents(texts)


@pytest.fixture
async def held(embedded_settings: Settings) -> AsyncIterator[tuple[CharacterMemory, HeldGraph, HeldEmbedder]]:
    embedder = HeldEmbedder()
    opened = await CharacterMemory.open(embedded_settings, "cancel", embedding_provider=embedder)
    stores = stores_of(opened)
    graph = HeldGraph(stores.graph)
    memory = CharacterMemory(
        graph=graph,  # type: ignore[arg-type]  # forwards every port method
        vectors=stores.vectors,
        embedder=embedder,
        stats=stores.stats,
        collection=opened.collection,
    )
    try:
        await memory.commit(
            await memory.prepare(
                RememberDrafts(
                    entities=[EntityDraft(id=ENTITY, created_at=T0)],
                    episodes=[EpisodeDraft(id=SEED_EPISODE, occurred_at=T0, created_at=T0)],
                    observations=[
                        ObservationDraft(
                            id=SEED_TURN,
                            text="I drink black tea",
                            episode_id=SEED_EPISODE,
                            observed_at=T0,
                            created_at=T0,
                        )
                    ],
                    derived=[
                        DerivedMemoryDraft(
                            DerivedType.CLAIM,
                            "likes black tea",
                            id=TARGET,
                            entity_ids=[ENTITY],
                            observation_ids=[SEED_TURN],
                            created_at=T0,
                        )
                    ],
                )
            )
        )
        yield memory, graph, embedder
    finally:
        graph.release.set()
        await memory.close()  # closes the real adapters


def _preference(text: str, *, hours: int = 0, **fields: Any) -> DerivedMemoryDraft:
    return DerivedMemoryDraft(
        DerivedType.USER_PREFERENCE,
        text,
        entity_ids=[ENTITY],
        given_by_application=True,
        created_at=T0 + timedelta(hours=hours),
        **fields,
    )


async def _successor_plan(memory: CharacterMemory, turns: int = 40) -> RememberWritePlan:
    """A session whose derived memory supersedes :data:`TARGET`, with texts to embed."""
    episode = MemoryId.new()
    return await memory.prepare(
        RememberDrafts(
            episodes=[EpisodeDraft(id=episode, occurred_at=T0, created_at=T0)],
            observations=[
                ObservationDraft(
                    text=f"turn {i}: oolong",
                    episode_id=episode,
                    observed_at=T0 + timedelta(seconds=i),
                    created_at=T0,
                )
                for i in range(turns)
            ],
            derived=[_preference("likes oolong tea", hours=1, supersedes=[TARGET])],
        )
    )


def _rival_correction() -> CorrectMemoryDraft:
    return CorrectMemoryDraft(CorrectionTarget.derived_memory(TARGET), "they switched").with_replacement(
        ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "likes rooibos tea")
    )


WRITES: dict[str, Callable[[CharacterMemory, RememberWritePlan], Awaitable[object]]] = {
    "commit": lambda memory, plan: memory.commit(plan),
    "commit_many": lambda memory, plan: memory.commit_many([plan]),
}


@pytest.mark.parametrize("write", sorted(WRITES))
async def test_a_write_cancelled_mid_graph_batch_holds_the_lock_until_the_batch_ends(
    held: tuple[CharacterMemory, HeldGraph, HeldEmbedder], write: str
) -> None:
    memory, graph, _embedder = held
    plan = await _successor_plan(memory)
    graph.hold_next()
    cancelled = asyncio.ensure_future(WRITES[write](memory, plan))
    assert await asyncio.to_thread(graph.started.wait, 10)
    cancelled.cancel()
    rival = asyncio.ensure_future(memory.correct(_rival_correction()))
    await asyncio.sleep(0.2)
    assert not cancelled.done(), "the cancelled write let go while its graph batch was being written"
    assert not rival.done(), "a rival write ran while a graph batch was being written"

    graph.release.set()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    with pytest.raises(LifecycleValidationError) as refused:
        await rival
    assert refused.value.kind is LifecycleErrorKind.ALREADY_SUPERSEDED
    rival_plan = await memory.prepare(
        RememberDrafts(derived=[_preference("likes mint tea", hours=2, supersedes=[TARGET])])
    )
    with pytest.raises(PlanSequenceError) as refused_plan:
        await memory.commit_many([rival_plan])
    assert isinstance(refused_plan.value.error, PlanValidationError)

    # the batch landed whole; only its vectors and stats are pending, which repair applies
    report = await check(memory)
    assert report.graph_consistent, report.graph_problems
    assert set(plan.object_ids) - {TARGET} >= set(report.missing_vectors) > set()
    await repair(memory, report)
    assert (await check(memory)).consistent


async def test_a_write_cancelled_while_embedding_ends_at_once(
    held: tuple[CharacterMemory, HeldGraph, HeldEmbedder],
) -> None:
    memory, _graph, embedder = held
    plan = await _successor_plan(memory)
    embedder.hold = True
    cancelled = asyncio.ensure_future(memory.commit_many([plan]))
    async with asyncio.timeout(10):
        await embedder.started.wait()
    cancelled.cancel()
    async with asyncio.timeout(1):  # no store write runs: nothing to wait for
        with pytest.raises(asyncio.CancelledError):
            await cancelled
    embedder.hold = False
    with pytest.raises(LifecycleValidationError) as refused:
        await memory.correct(_rival_correction())
    assert refused.value.kind is LifecycleErrorKind.ALREADY_SUPERSEDED
    report = await check(memory)
    assert report.graph_consistent and report.repairable
    await repair(memory, report)
    assert (await check(memory)).consistent
