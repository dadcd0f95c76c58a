"""Hung embedders, cancelled writes and close(): nothing acknowledged carries a marker it should not,
and nothing half-done goes unreported.

* Every embedding call is bounded by ``EMBEDDING_TIMEOUT_S``: a provider that never answers turns
  into a ``VectorMaintenance`` repair marker on a write's outcome, and into
  ``EmbeddingTimeoutError`` for a retrieval or a vector rebuild.
* A write cancelled after its graph batch leaves what it did not write visible to
  ``charmem.admin.check`` (missing vectors, orphan vectors, stats drift), and a replay repairs it.
* ``close()`` refuses new operations at once, waits for the ones in flight (so their outcomes carry
  no marker caused by the close), and cancels those that outlast its timeout with a clear error.

The stores are gated proxies around the reference adapters: a gated method waits until the test
releases it (or forever), and a closed proxy fails every later call, as a real store does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

import pytest

from charmem import (
    BackendError,
    CharacterMemory,
    CharmemError,
    ConfigurationError,
    CorrectionTarget,
    CorrectMemoryDraft,
    DerivedMemoryDraft,
    DerivedType,
    EmbeddingTimeoutError,
    ForgetMemoryDraft,
    LinkDraft,
    MemoryId,
    Relation,
    RememberInput,
    RememberOutcome,
    RepairMarker,
    ReplacementDerivedMemoryDraft,
    Settings,
    VectorOperation,
)
from charmem.admin import CheckReport
from charmem.admin._check import check_stores
from charmem.stats import InMemoryRetrievalStatsStore
from charmem.testing import HashingEmbeddingProvider, ReferenceGraphStore, ReferenceVectorIndex

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)
#: Only stops a regression from hanging the suite; no assertion depends on it.
GUARD_S = 30


class Gated:
    """Forwards every attribute to ``inner``; ``method`` waits until :attr:`release` is set.

    After ``close()`` every call raises ``BackendError``, as a closed real store does.
    """

    def __init__(self, inner: Any, method: str | None = None) -> None:
        self.inner = inner
        self.method = method
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.closed = False

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.inner, name)
        if not callable(attribute) or not asyncio.iscoroutinefunction(attribute):
            return attribute

        async def call(*args: Any, **kwargs: Any) -> Any:
            if self.closed:
                raise BackendError(f"{type(self.inner).__name__} is closed")
            if name == "close":
                self.closed = True
            if name == self.method:
                self.entered.set()
                await self.release.wait()
            return await attribute(*args, **kwargs)

        return call


class Stack:
    """A memory on gated reference stores, with the stores kept for ``check``."""

    def __init__(self, gate: str | None = None, **memory_kwargs: Any) -> None:
        embedder = HashingEmbeddingProvider()
        self.graph = ReferenceGraphStore("faults")
        self.vectors_inner = ReferenceVectorIndex(
            "faults", model_id=embedder.model_id, vector_size=embedder.vector_size
        )
        self.stats_inner = InMemoryRetrievalStatsStore("faults")
        self.embedder = Gated(embedder)
        self.vectors = Gated(self.vectors_inner)
        self.stats = Gated(self.stats_inner)
        self.gate = self.embedder
        if gate is not None:
            self.arm(gate)
        self.memory = CharacterMemory(
            graph=self.graph,
            vectors=self.vectors,  # type: ignore[arg-type]
            embedder=self.embedder,  # type: ignore[arg-type]
            stats=self.stats,  # type: ignore[arg-type]
            collection="faults",
            **memory_kwargs,
        )

    async def check(self) -> CheckReport:
        return await check_stores(self.graph, self.vectors_inner, self.stats_inner)

    def arm(self, gate: str) -> None:
        """Gate ``port.method`` (``embedder``, ``vectors`` or ``stats``) from now on."""
        port, _, method = gate.partition(".")
        self.gate = {"embedder": self.embedder, "vectors": self.vectors, "stats": self.stats}[port]
        self.gate.method = method

    def open_gate(self) -> None:
        self.gate.release.set()


def _input(text: str) -> RememberInput:
    return RememberInput(text, occurred_at=T0, created_at=T0).with_derived_memory(
        DerivedMemoryDraft(DerivedType.CLAIM, f"Believed: {text}", created_at=T0)
    )


def _correction(target: MemoryId) -> CorrectMemoryDraft:
    return CorrectMemoryDraft(
        CorrectionTarget.derived_memory(target), "The user said otherwise.", recorded_at=T0
    ).with_replacement(ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "Believed: the tea is green."))


async def _guarded(awaitable: Awaitable[Any]) -> Any:
    async with asyncio.timeout(GUARD_S):
        return await awaitable


# ---------------------------------------------------------------- the embedding timeout


async def test_a_hung_provider_becomes_a_vector_marker_and_a_replay_repairs_it() -> None:
    stack = Stack("embedder.embed_documents", embedding_timeout_s=0.05)
    plan = await stack.memory.prepare(_input("The tea is black."))

    outcome: RememberOutcome = await _guarded(stack.memory.commit(plan))

    [marker] = outcome.repair_markers
    assert isinstance(marker, RepairMarker.VectorMaintenance)
    assert marker.operation is VectorOperation.UPSERT
    assert set(marker.ids) == {entry.id for entry in plan.index_entries}
    assert marker.cause.startswith("EmbeddingTimeoutError: the embedding provider")
    assert "did not answer within 0.05 s" in marker.cause
    assert "EMBEDDING_TIMEOUT_S" in marker.cause
    report = await stack.check()
    assert set(report.missing_vectors) == set(marker.ids)
    assert report.stats_consistent  # the stats were written after the timed-out call

    stack.open_gate()
    assert (await _guarded(stack.memory.commit(plan))).repair_markers == ()
    assert (await stack.check()).consistent


async def test_a_hung_provider_times_out_in_a_correction_too() -> None:
    stack = Stack(embedding_timeout_s=0.05)
    first = await stack.memory.remember(_input("The tea is black."))
    target = first.object_ids[-1]  # the claim
    stack.arm("embedder.embed_documents")  # from now on the provider hangs

    outcome = await _guarded(stack.memory.correct(_correction(target)))

    [marker] = outcome.repair_markers
    assert isinstance(marker, RepairMarker.VectorMaintenance)
    assert marker.ids == outcome.replacement_ids
    assert "EmbeddingTimeoutError" in marker.cause


async def test_retrieval_and_rebuild_raise_an_embedding_timeout_error() -> None:
    stack = Stack(embedding_timeout_s=0.05)
    await stack.memory.remember(_input("The tea is black."))
    stack.arm("embedder.embed_query")
    with pytest.raises(EmbeddingTimeoutError, match=r"did not answer within 0\.05 s on a query") as info:
        await _guarded(stack.memory.retrieve("tea"))
    assert isinstance(info.value, BackendError)
    assert isinstance(info.value, TimeoutError)
    assert info.value.timeout_s == 0.05
    stack.arm("embedder.embed_documents")
    with pytest.raises(EmbeddingTimeoutError, match="on 2 text"):
        await _guarded(stack.memory.rebuild_vector_index())


def test_the_embedding_timeout_is_a_setting_with_a_default_of_a_minute() -> None:
    assert Settings.from_mapping({}).embedding_timeout_s == 60.0
    assert Settings.from_mapping({"EMBEDDING_TIMEOUT_S": "2.5"}).embedding_timeout_s == 2.5
    for bad in ("0", "-1", "soon", "inf", "nan"):
        with pytest.raises(ConfigurationError, match="positive number of seconds") as info:
            Settings.from_mapping({"EMBEDDING_TIMEOUT_S": bad})
        assert info.value.key == "EMBEDDING_TIMEOUT_S"


async def test_open_passes_the_embedding_timeout_setting_to_the_memory() -> None:
    settings = Settings.from_mapping(
        {
            "GRAPH_STORE_MODE": "reference",
            "VECTOR_STORE_MODE": "in_memory",
            "RETRIEVAL_STATS_STORE_MODE": "in_memory",
            "EMBEDDING_TIMEOUT_S": "2.5",
        }
    )
    async with CharacterMemory.open(settings, "c", embedding_provider=HashingEmbeddingProvider()) as memory:
        assert memory.embedding_timeout_s == 2.5
        assert memory.close_timeout_s == 30.0


@pytest.mark.parametrize("argument", ["embedding_timeout_s", "close_timeout_s"])
@pytest.mark.parametrize("value", [0, -1.0, float("inf"), "60", True])
def test_the_constructor_refuses_a_timeout_that_is_not_positive_seconds(argument: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=f"{argument} must be a positive number of seconds"):
        Stack(None, **{argument: value})


# ---------------------------------------------------------------- cancellation


async def _remember_setup(stack: Stack) -> Callable[[], Coroutine[Any, Any, Any]]:
    plan = await stack.memory.prepare(_input("The tea is black."))
    return lambda: stack.memory.commit(plan)


async def _correct_setup(stack: Stack) -> Callable[[], Coroutine[Any, Any, Any]]:
    first = await stack.memory.remember(_input("The tea is black."))
    target = first.object_ids[-1]
    return lambda: stack.memory.correct(_correction(target))


async def _forget_setup(stack: Stack) -> Callable[[], Coroutine[Any, Any, Any]]:
    first = await stack.memory.remember(_input("The tea is black."))
    draft = ForgetMemoryDraft.suppress(first.object_ids[-1], "Asked to forget it.", recorded_at=T0)
    return lambda: stack.memory.forget(draft)


async def _link_setup(stack: Stack) -> Callable[[], Coroutine[Any, Any, Any]]:
    first = await stack.memory.remember(_input("The tea is black."))
    second = await stack.memory.remember(_input("The cup is blue."))
    draft = LinkDraft(first.object_ids[-1], Relation.ASSOCIATED_WITH, second.object_ids[-1], recorded_at=T0)
    return lambda: stack.memory.link(draft)


@pytest.mark.parametrize(
    ("gate", "setup", "left_behind"),
    [
        ("embedder.embed_documents", _remember_setup, {"missing_vectors", "stats"}),
        ("embedder.embed_documents", _correct_setup, {"missing_vectors", "orphan_vectors", "stats"}),
    ],
    ids=["remember", "correct"],
)
async def test_a_write_cancelled_after_its_graph_batch_is_reported_by_check_and_a_replay_repairs_it(
    gate: str,
    setup: Callable[[Stack], Awaitable[Callable[[], Coroutine[Any, Any, Any]]]],
    left_behind: set[str],
) -> None:
    stack = Stack()
    operation = await setup(stack)
    assert (await stack.check()).consistent
    stack.arm(gate)

    task = asyncio.create_task(operation())
    await _guarded(stack.gate.entered.wait())  # the graph batch is written by now
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    report = await stack.check()
    assert report.graph_consistent
    found = {
        "missing_vectors": bool(report.missing_vectors),
        "orphan_vectors": bool(report.orphan_vectors),
        "stats": not report.stats_consistent,
    }
    assert {name for name, differs in found.items() if differs} == left_behind
    assert report.repairable

    stack.open_gate()
    outcome = await _guarded(operation())
    assert outcome.repair_markers == ()
    assert (await stack.check()).consistent


@pytest.mark.parametrize(
    ("gate", "setup", "left_behind"),
    [
        ("vectors.delete", _forget_setup, {"stats"}),
        ("stats.record", _link_setup, set()),
    ],
    ids=["forget", "link"],
)
async def test_a_write_cancelled_while_a_store_write_runs_ends_once_that_write_has_ended(
    gate: str,
    setup: Callable[[Stack], Awaitable[Callable[[], Coroutine[Any, Any, Any]]]],
    left_behind: set[str],
) -> None:
    """A store write cannot be stopped (it runs in a worker thread): the cancelled operation
    holds the writer lock until it has ended, so no later write is validated without it."""
    stack = Stack()
    operation = await setup(stack)
    stack.arm(gate)

    task = asyncio.create_task(operation())
    await _guarded(stack.gate.entered.wait())  # the graph batch is written; the gated write runs
    task.cancel()
    await asyncio.sleep(0.05)
    assert not task.done()
    stack.open_gate()
    with pytest.raises(asyncio.CancelledError):
        await _guarded(task)

    report = await stack.check()
    assert report.graph_consistent
    found = {"orphan_vectors": bool(report.orphan_vectors), "stats": not report.stats_consistent}
    assert {name for name, differs in found.items() if differs} == left_behind
    outcome = await _guarded(operation())
    assert outcome.repair_markers == ()
    assert (await stack.check()).consistent


# ---------------------------------------------------------------- close


async def test_close_waits_for_a_remember_in_flight_and_refuses_new_operations() -> None:
    stack = Stack("embedder.embed_documents")
    remember = asyncio.create_task(stack.memory.remember(_input("The tea is black.")))
    await _guarded(stack.embedder.entered.wait())

    closing = asyncio.create_task(stack.memory.close())
    await asyncio.sleep(0)  # close starts: from here new operations are refused
    with pytest.raises(CharmemError, match="memory 'faults' is closed; open it again"):
        await stack.memory.retrieve("tea")
    with pytest.raises(CharmemError, match="is closed"):
        await stack.memory.remember(_input("The cup is blue."))
    assert not closing.done()
    assert not stack.vectors.closed and not stack.stats.closed

    stack.open_gate()
    outcome = await _guarded(remember)
    assert outcome.repair_markers == ()  # the stores were still open for its vectors and stats
    await _guarded(closing)
    assert stack.vectors.closed and stack.stats.closed
    await stack.memory.close()  # idempotent
    report = await stack.check()
    assert report.consistent
    assert report.objects == len(outcome.object_ids)


async def test_close_cancels_an_operation_that_outlasts_its_timeout_with_a_clear_error() -> None:
    stack = Stack("embedder.embed_documents")  # never released: the provider hangs
    remember = asyncio.create_task(stack.memory.remember(_input("The tea is black.")))
    await _guarded(stack.embedder.entered.wait())

    await _guarded(stack.memory.close(timeout_s=0.01))

    assert stack.vectors.closed and stack.stats.closed
    assert remember.done() and not remember.cancelled()
    with pytest.raises(CharmemError, match="was closed while this remember ran") as info:
        remember.result()
    assert "charmem.admin.check" in str(info.value)
    assert "close waited 0.01 s" in str(info.value)  # the wait it was given, not the default
    report = await stack.check()  # its graph batch was written: check says what is missing
    assert report.missing_vectors and not report.stats_consistent and report.graph_consistent


async def test_a_retrieval_cancelled_by_close_says_nothing_was_written() -> None:
    stack = Stack()
    await stack.memory.remember(_input("The tea is black."))
    stack.arm("embedder.embed_query")  # the query embedding hangs
    retrieve = asyncio.create_task(stack.memory.retrieve("tea"))
    await _guarded(stack.embedder.entered.wait())
    await _guarded(stack.memory.close(timeout_s=0.01))
    with pytest.raises(CharmemError, match="was closed while this retrieve ran") as info:
        retrieve.result()
    assert "nothing was written" in str(info.value)
    assert "graph write" not in str(info.value)


async def test_an_exclusive_block_finishes_its_work_while_close_waits_for_it() -> None:
    stack = Stack()
    await stack.memory.remember(_input("The tea is black."))
    async with stack.memory.exclusive():
        closing = asyncio.create_task(stack.memory.close())
        await asyncio.sleep(0)
        other = asyncio.create_task(stack.memory.retrieve("tea"))
        with pytest.raises(CharmemError, match="is closed"):
            await other
        pack = await stack.memory.retrieve("tea")  # part of the block in flight
        assert pack.items
        assert not closing.done()
    await _guarded(closing)
    assert stack.vectors.closed


async def test_close_inside_an_exclusive_block_does_not_wait_for_that_block() -> None:
    stack = Stack()
    async with stack.memory.exclusive():
        await _guarded(stack.memory.close(timeout_s=GUARD_S))
    assert stack.vectors.closed
