"""``charmem.admin.check`` / ``repair`` and episodes forgotten before forgets reached their parts.

Such a store holds a suppression record of the episode (and of the derived memories grounded on
it) but not of its observations: they stay recallable. Check reports it; repair appends the
missing suppressions at the original forget's time, with the ids a forget derives.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta

import attrs
import pytest

from charmem import (
    CharacterMemory,
    DerivedMemoryDraft,
    DerivedType,
    EpisodeDraft,
    ForgetMemoryDraft,
    MemoryId,
    ObservationDraft,
    RememberDrafts,
)
from charmem.admin import GraphProblemKind, check, repair
from charmem.domain.graph import GraphBatch, LifecycleAction, LifecycleRecord
from charmem.domain.retrieval import CurrencyStatus
from charmem.stats import InMemoryRetrievalStatsStore
from charmem.testing import HashingEmbeddingProvider, ReferenceGraphStore, ReferenceVectorIndex

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)
FORGOTTEN_AT = T0 + timedelta(hours=3)
RATIONALE = "The user asked to forget the call."
COLLECTION = "old-forgets"


class LaterClock:
    def now(self) -> datetime:
        return T0 + timedelta(days=30)


@attrs.define
class Stack:
    memory: CharacterMemory
    graph: ReferenceGraphStore
    vectors: ReferenceVectorIndex
    stats: InMemoryRetrievalStatsStore


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    embedder = HashingEmbeddingProvider()
    graph = ReferenceGraphStore(COLLECTION)
    vectors = ReferenceVectorIndex(COLLECTION, model_id=embedder.model_id, vector_size=embedder.vector_size)
    stats = InMemoryRetrievalStatsStore(COLLECTION)
    memory = CharacterMemory(
        graph=graph,
        vectors=vectors,
        embedder=embedder,
        stats=stats,
        collection=COLLECTION,
        clock=LaterClock(),
    )
    try:
        yield Stack(memory, graph, vectors, stats)
    finally:
        await memory.close()


async def _call(stack: Stack) -> dict[str, MemoryId]:
    """An episode, two turns, a note grounded on the episode and one grounded on the first turn."""
    ids = {name: MemoryId.new() for name in ("episode", "first", "second", "on_episode", "on_turn")}
    await stack.memory.remember(
        RememberDrafts(
            episodes=[EpisodeDraft(id=ids["episode"], occurred_at=T0, summary="evening call", created_at=T0)],
            observations=[
                ObservationDraft(
                    id=ids["first"], text="I lost my job.", episode_id=ids["episode"], created_at=T0
                ),
                ObservationDraft(
                    id=ids["second"], text="Talk tomorrow.", episode_id=ids["episode"], created_at=T0
                ),
            ],
            derived=[
                DerivedMemoryDraft(
                    DerivedType.REFLECTION,
                    "A hard evening.",
                    id=ids["on_episode"],
                    episode_ids=[ids["episode"]],
                    created_at=T0,
                ),
                DerivedMemoryDraft(
                    DerivedType.CLAIM,
                    "Lost their job.",
                    id=ids["on_turn"],
                    observation_ids=[ids["first"]],
                    created_at=T0,
                ),
            ],
        )
    )
    return ids


async def _forget_the_old_way(stack: Stack, episode: MemoryId, cascaded: Sequence[MemoryId]) -> None:
    """What a forget of an episode wrote before it reached the parts: the episode's record and the
    records of the derived memories grounded on it (their vectors and stats then follow)."""
    records = [
        LifecycleRecord(
            id=MemoryId.deterministic(COLLECTION, "suppress", memory_id, episode, RATIONALE),
            target_id=memory_id,
            action=LifecycleAction.SUPPRESS,
            rationale=RATIONALE,
            recorded_at=FORGOTTEN_AT,
            related_ids=() if memory_id == episode else (episode,),
        )
        for memory_id in (episode, *cascaded)
    ]
    await stack.graph.write_batch(GraphBatch(records=records))
    await stack.memory.rebuild_vector_index()
    await stack.memory.rebuild_stats()


async def test_an_old_episode_forget_is_reported_and_repaired_at_its_original_time(stack: Stack) -> None:
    ids = await _call(stack)
    await _forget_the_old_way(stack, ids["episode"], [ids["on_episode"]])
    report = await check(stack.memory)
    [problem] = report.graph_problems
    assert problem.kind is GraphProblemKind.EPISODE_PARTS_NOT_FORGOTTEN
    assert problem.id == ids["episode"]
    assert set(problem.related_ids) == {ids["first"], ids["second"], ids["on_turn"]}
    assert report.vectors_consistent and report.stats_consistent
    assert report.repairable and not report.consistent
    assert any("appends the suppressions" in line for line in report.describe())
    assert report.to_dict()["graph"]["problems"][0]["kind"] == "episode_parts_not_forgotten"

    outcome = await repair(stack.memory, report)
    assert set(outcome.suppressed_ids) == {ids["first"], ids["second"], ids["on_turn"]}
    currency = await stack.graph.currency(list(ids.values()))
    assert set(currency.values()) == {CurrencyStatus.SUPPRESSED}
    assert {ids["first"], ids["second"], ids["on_turn"]}.isdisjoint(await stack.vectors.point_ids())
    appended = [
        r for r in await stack.graph.get_records(list(ids.values())) if r.target_id in outcome.suppressed_ids
    ]
    assert {r.recorded_at for r in appended} == {FORGOTTEN_AT}
    assert {r.related_ids for r in appended} == {(ids["episode"],)}
    assert {r.id for r in appended} == {
        MemoryId.deterministic(COLLECTION, "suppress", i, ids["episode"], RATIONALE)
        for i in outcome.suppressed_ids
    }
    assert (await check(stack.memory)).consistent

    count = await stack.graph.statement_count()
    again = await repair(stack.memory, report)
    assert again.suppressed_ids == ()
    # replaying the original forget now names the records the repair wrote
    await stack.memory.forget(ForgetMemoryDraft.suppress(ids["episode"], RATIONALE))
    assert await stack.graph.statement_count() == count


async def test_an_old_forget_without_the_derived_cascade_stays_without_it(stack: Stack) -> None:
    ids = await _call(stack)
    await _forget_the_old_way(stack, ids["episode"], [])  # apply_to_derived_from_target=False then
    report = await check(stack.memory)
    [problem] = report.graph_problems
    assert set(problem.related_ids) == {ids["first"], ids["second"]}
    await repair(stack.memory, report)
    currency = await stack.graph.currency([ids["on_episode"], ids["on_turn"]])
    assert set(currency.values()) == {CurrencyStatus.CURRENT}


async def test_an_already_forgotten_observation_is_not_written_again(stack: Stack) -> None:
    ids = await _call(stack)
    await stack.memory.forget(
        ForgetMemoryDraft.suppress(ids["first"], "Only that sentence.", recorded_at=T0 + timedelta(hours=1))
    )
    await _forget_the_old_way(stack, ids["episode"], [ids["on_episode"]])
    [problem] = (await check(stack.memory)).graph_problems
    assert problem.related_ids == (ids["second"],)


@pytest.mark.parametrize(
    "options",
    [{}, {"apply_to_episode_observations": False}, {"apply_to_derived_from_target": False}],
)
async def test_forgets_of_this_version_are_never_reported(stack: Stack, options: dict[str, bool]) -> None:
    ids = await _call(stack)
    await stack.memory.forget(
        ForgetMemoryDraft.suppress(ids["episode"], RATIONALE, recorded_at=FORGOTTEN_AT, **options)
    )
    report = await check(stack.memory)
    assert report.consistent, report.describe()
