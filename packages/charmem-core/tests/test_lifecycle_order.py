"""Supersession is acyclic, successors come in one write, lifecycle records are in time order.

The pure rules (``charmem.domain.rules``), plan validation against stored links a plan cannot
reach through the facade (written straight to the graph port, as an older version or an import
may have left them), and ``charmem.admin.check`` reporting stored breaches.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone

import pytest

from charmem import (
    RECORDED_AT_SKEW,
    CharacterMemory,
    CorrectionTarget,
    CorrectMemoryDraft,
    DerivedMemoryDraft,
    DerivedType,
    LifecycleErrorKind,
    LifecycleValidationError,
    MemoryId,
    PlanValidationError,
    RememberDrafts,
    RememberInput,
    ReplacementDerivedMemoryDraft,
)
from charmem.admin import CheckReport, GraphProblemKind, check
from charmem.domain.graph import GraphBatch
from charmem.domain.model import DerivedMemory
from charmem.domain.rules import conflicting_successors, recorded_in_order, supersession_cycles
from charmem.stats import InMemoryRetrievalStatsStore
from charmem.testing import HashingEmbeddingProvider, ReferenceGraphStore, ReferenceVectorIndex
from charmem.usecases.planning import derive_links

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)
COLLECTION = "order"


def _ids(n: int) -> list[MemoryId]:
    return sorted(MemoryId.new() for _ in range(n))


# ---------------------------------------------------------------------- pure rules


def test_acyclic_supersession_has_no_cycle() -> None:
    a, b, c, d, e = _ids(5)
    chain = [(b, a), (c, b)]
    split = [(d, c), (e, c)]
    merge = [(a, d), (a, e)]  # a supersedes d and e: a diamond, still acyclic
    assert supersession_cycles([]) == []
    assert supersession_cycles([*chain, *split]) == []
    assert supersession_cycles([(d, a), (e, a), (d, b), (e, b), (c, d), (c, e)]) == []
    assert supersession_cycles([*merge, (d, b), (e, b)]) == []


def test_each_cycle_is_named_once_from_its_smallest_id_in_supersedes_order() -> None:
    a, b, c, d, e, f = _ids(6)
    assert supersession_cycles([(a, b), (b, a)]) == [(a, b)]
    assert supersession_cycles([(c, a), (a, b), (b, c)]) == [(a, b, c)]
    assert supersession_cycles([(d, d)]) == [(d,)]
    # two rings and a memory hanging off one of them: one cycle per ring, sorted by first id
    found = supersession_cycles([(e, f), (f, e), (b, c), (c, b), (a, b)])
    assert found == [(b, c), (e, f)]
    # a ring with a chord: the shortest cycle through the smallest id
    assert supersession_cycles([(a, b), (b, c), (c, d), (d, a), (c, a)]) == [(a, b, c)]


def test_a_long_chain_closed_into_a_ring_is_found_without_recursion() -> None:
    ids = _ids(20_000)
    edges = [(ids[n + 1], ids[n]) for n in range(len(ids) - 1)]
    assert supersession_cycles(edges) == []
    [cycle] = supersession_cycles([*edges, (ids[0], ids[-1])])
    assert len(cycle) == len(ids)
    assert cycle[0] == ids[0]


def test_a_memory_gains_successors_in_one_write() -> None:
    a, b, c = _ids(3)
    assert conflicting_successors(set(), {a}) == ()  # first successor
    assert conflicting_successors(set(), {a, b}) == ()  # a split
    assert conflicting_successors({a}, {a}) == ()  # a replay
    assert conflicting_successors({a, b}, {b}) == ()  # a replay of one draft of a split
    assert conflicting_successors({a}, {b}) == (a,)  # a second write
    assert conflicting_successors({a}, {a, b}) == (a,)  # a replay that adds a sibling
    assert conflicting_successors({b, a}, {c}) == (a, b)


def test_records_are_in_time_order_with_a_small_skew_ahead_of_the_clock() -> None:
    target, other = _ids(2)
    created = {target: T0, other: T0 + timedelta(hours=1)}
    now = T0 + timedelta(days=1)
    assert recorded_in_order(
        T0 + timedelta(hours=1), targets=created, now=now, what="link"
    ) == T0 + timedelta(hours=1)
    assert recorded_in_order(now, targets=created, now=now, what="link") == now
    within = now + RECORDED_AT_SKEW - timedelta(seconds=1)
    assert recorded_in_order(within, targets=created, now=now, what="link") == now
    assert recorded_in_order(now + RECORDED_AT_SKEW, targets=created, now=now, what="link") == now
    with pytest.raises(LifecycleValidationError) as future:
        recorded_in_order(
            now + RECORDED_AT_SKEW + timedelta(seconds=1), targets=created, now=now, what="link"
        )
    assert future.value.kind is LifecycleErrorKind.RECORDED_IN_FUTURE
    assert "after the clock's now" in str(future.value)
    with pytest.raises(LifecycleValidationError) as before:
        recorded_in_order(T0 + timedelta(minutes=30), targets=created, now=now, what="link")
    assert before.value.kind is LifecycleErrorKind.RECORDED_BEFORE_TARGET
    assert str(other) in str(before.value)
    assert "pass a recorded_at at or after" in str(before.value)
    # another offset, the same instant: in order
    plus_two = T0.astimezone(timezone(timedelta(hours=2)))
    assert recorded_in_order(plus_two, targets={target: T0}, now=now, what="forget") == plus_two


def test_the_skew_is_five_minutes() -> None:
    assert timedelta(minutes=5) == RECORDED_AT_SKEW


# ---------------------------------------------------------------------- stores


class Stack:
    """A reference memory whose stores the test keeps (to write past validation)."""

    def __init__(self) -> None:
        embedder = HashingEmbeddingProvider()
        self.graph = ReferenceGraphStore(COLLECTION)
        self.vectors = ReferenceVectorIndex(
            COLLECTION, model_id=embedder.model_id, vector_size=embedder.vector_size
        )
        self.stats = InMemoryRetrievalStatsStore(COLLECTION)
        self.memory = CharacterMemory(
            graph=self.graph,
            vectors=self.vectors,
            embedder=embedder,
            stats=self.stats,
            collection=COLLECTION,
            clock=_Clock(),
        )

    async def check(self) -> CheckReport:
        return await check(self.memory)

    async def source(self, text: str = "We talked.") -> MemoryId:
        outcome = await self.memory.remember(RememberInput(text, occurred_at=T0, created_at=T0))
        observation: MemoryId = outcome.object_ids[1]
        return observation

    async def write_directly(self, *beliefs: DerivedMemory) -> None:
        """Store ``beliefs`` and their derived links past validation, as an old version could."""
        await self.graph.write_batch(GraphBatch(objects=beliefs, links=derive_links(COLLECTION, beliefs)))


class _Clock:
    def now(self) -> datetime:
        return T0 + timedelta(days=30)


def _belief(
    memory_id: MemoryId,
    source: MemoryId,
    *,
    supersedes: tuple[MemoryId, ...] = (),
    created_at: datetime = T0,
) -> DerivedMemory:
    return DerivedMemory(
        id=memory_id,
        derived_type=DerivedType.CLAIM,
        text=f"belief {memory_id}",
        observation_ids=(source,),
        supersedes=supersedes,
        salience=0.5,
        created_at=created_at,
    )


def _draft(
    memory_id: MemoryId, source: MemoryId, *, supersedes: tuple[MemoryId, ...] = ()
) -> DerivedMemoryDraft:
    return DerivedMemoryDraft(
        DerivedType.CLAIM,
        f"belief {memory_id}",
        id=memory_id,
        observation_ids=[source],
        supersedes=supersedes,
        created_at=T0,
    )


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    built = Stack()
    try:
        yield built
    finally:
        await built.memory.close()


def _problems(report: CheckReport, kind: GraphProblemKind) -> list[tuple[MemoryId, tuple[MemoryId, ...]]]:
    return [(p.id, p.related_ids) for p in report.graph_problems if p.kind is kind]


# ---------------------------------------------------------------------- validation with stored links


async def test_a_plan_closing_a_cycle_with_stored_links_is_refused(stack: Stack) -> None:
    source = await stack.source()
    stored, new = _ids(2)
    # a stored link to an id that was not stored yet (left by an import or an older version)
    await stack.write_directly(_belief(stored, source, supersedes=(new,)))
    with pytest.raises(PlanValidationError, match="supersession cycle") as info:
        await stack.memory.remember(RememberDrafts(derived=[_draft(new, source, supersedes=(stored,))]))
    [reason] = [r for r in info.value.reasons[str(new)] if "cycle" in r]
    assert f"{stored} supersedes {new} supersedes {stored}" in reason or (
        f"{new} supersedes {stored} supersedes {new}" in reason
    )
    assert not await stack.graph.get_objects([new])


async def test_a_longer_cycle_through_stored_history_is_refused(stack: Stack) -> None:
    source = await stack.source()
    a, b, c, d = _ids(4)
    # stored history a <- b <- c (c supersedes b supersedes a), and a dangling a -> d
    await stack.write_directly(_belief(a, source, supersedes=(d,)))
    await stack.write_directly(_belief(b, source, supersedes=(a,)))
    await stack.write_directly(_belief(c, source, supersedes=(b,)))
    plan = await stack.memory.prepare(RememberDrafts(derived=[_draft(d, source, supersedes=(c,))]))
    [validation] = await stack.memory.validate_plan(plan)
    assert any(
        "supersession cycle" in r and all(str(i) in r for i in (a, b, c, d)) for r in validation.reasons
    )


async def test_validation_of_a_plain_plan_reads_supersedes_links_once(stack: Stack) -> None:
    """The component walk runs only when a stored link points at one of the plan's successors."""
    source = await stack.source()
    history = _ids(6)
    for n, memory_id in enumerate(history):
        await stack.memory.remember(
            RememberDrafts(derived=[_draft(memory_id, source, supersedes=tuple(history[n - 1 : n]))])
        )
    calls: list[int] = []
    links_of = stack.graph.links_of

    async def counting(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return await links_of(*args, **kwargs)  # type: ignore[arg-type]

    stack.graph.links_of = counting  # type: ignore[method-assign]
    plan = await stack.memory.prepare(
        RememberDrafts(derived=[_draft(MemoryId.new(), source, supersedes=(history[-1],))])
    )
    validations = await stack.memory.validate_plan(plan)
    assert [v.reasons for v in validations] == [()]
    assert len(calls) == 1


# ---------------------------------------------------------------------- check


async def test_check_reports_a_stored_cycle(stack: Stack) -> None:
    source = await stack.source()
    a, b, c = _ids(3)
    await stack.write_directly(_belief(a, source, supersedes=(b,)), _belief(b, source, supersedes=(a,)))
    await stack.write_directly(_belief(c, source, supersedes=(c,)))
    report = await stack.check()
    assert _problems(report, GraphProblemKind.SUPERSESSION_CYCLE) == [(a, (a, b)), (c, (c,))]
    assert not report.consistent
    [problem] = [p for p in report.graph_problems if p.id == a]
    assert f"{a} supersedes {b} supersedes {a}" in problem.detail
    assert {p["kind"] for p in report.to_dict()["graph"]["problems"]} == {"supersession_cycle"}


async def test_check_reports_successors_written_by_two_plans(stack: Stack) -> None:
    source = await stack.source()
    old, first, second = _ids(3)
    await stack.write_directly(_belief(old, source))
    await stack.memory.remember(RememberDrafts(derived=[_draft(first, source, supersedes=(old,))]))
    # an older version accepted this second plan; its successor has its own created_at
    await stack.write_directly(_belief(second, source, supersedes=(old,), created_at=T0 + timedelta(days=1)))
    report = await stack.check()
    assert _problems(report, GraphProblemKind.SECOND_SUCCESSOR) == [(old, tuple(sorted((first, second))))]
    assert "2 different instants" in report.graph_problems[0].detail


async def test_check_reports_a_plan_successor_beside_a_correction(stack: Stack) -> None:
    source = await stack.source()
    target, sibling = _ids(2)
    await stack.write_directly(_belief(target, source))
    outcome = await stack.memory.correct(
        CorrectMemoryDraft(
            CorrectionTarget.derived_memory(target), "It changed.", recorded_at=T0
        ).with_replacement(ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "the corrected belief"))
    )
    [replacement] = outcome.replacement_ids
    # same instant as the replacement: only the correct record tells the writes apart
    await stack.write_directly(_belief(sibling, source, supersedes=(target,), created_at=T0))
    report = await stack.check()
    assert _problems(report, GraphProblemKind.SECOND_SUCCESSOR) == [
        (target, tuple(sorted((replacement, sibling))))
    ]
    assert "correction" in report.graph_problems[0].detail


async def test_check_accepts_splits_merges_and_correction_chains(stack: Stack) -> None:
    source = await stack.source()
    x, y, z, left, right, merged = _ids(6)
    await stack.memory.remember(
        RememberDrafts(derived=[_draft(x, source), _draft(y, source), _draft(z, source)])
    )
    await stack.memory.remember(
        RememberDrafts(
            derived=[
                _draft(left, source, supersedes=(x,)),
                _draft(right, source, supersedes=(x,)),
                _draft(merged, source, supersedes=(y, z)),
            ]
        )
    )
    corrected = await stack.memory.correct(
        CorrectMemoryDraft(CorrectionTarget.derived_memory(left), "Then this.").with_replacement(
            ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "the left half, corrected")
        )
    )
    await stack.memory.correct(
        CorrectMemoryDraft(CorrectionTarget.derived_memory(corrected.replacement_ids[0]), "And this.")
    )
    report = await stack.check()
    assert report.graph_problems == (), report.describe()


async def test_check_cannot_tell_two_plans_of_one_instant_from_a_split(stack: Stack) -> None:
    """The documented limit: successors written by two plans at the same instant look like a split."""
    source = await stack.source()
    old, first, second = _ids(3)
    await stack.write_directly(_belief(old, source))
    await stack.write_directly(_belief(first, source, supersedes=(old,)))
    await stack.write_directly(_belief(second, source, supersedes=(old,)))
    report = await stack.check()
    assert _problems(report, GraphProblemKind.SECOND_SUCCESSOR) == []


# ---------------------------------------------------------------------- lifecycle on this clock


async def test_default_recorded_at_is_refused_for_a_target_created_after_the_clock(stack: Stack) -> None:
    """A target created after the clock's now cannot be corrected at the clock's now."""
    source = await stack.source()
    future = MemoryId.new()
    await stack.write_directly(_belief(future, source, created_at=T0 + timedelta(days=60)))
    with pytest.raises(LifecycleValidationError) as info:
        await stack.memory.correct(CorrectMemoryDraft(CorrectionTarget.derived_memory(future), "Wrong."))
    assert info.value.kind is LifecycleErrorKind.RECORDED_BEFORE_TARGET
    assert await stack.graph.get_records([future]) == []
