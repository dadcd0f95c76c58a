"""Forgetting what was said: episode forgets reach their parts; outcomes name ids by role.

On the reference stack, with the test's own references to the stores (never the facade's).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import attrs
import pytest

from charmem import (
    CharacterMemory,
    CurrencyStatus,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    EpisodeDraft,
    ForgetMemoryDraft,
    LinkDraft,
    MemoryId,
    ObservationDraft,
    Relation,
    RememberDrafts,
    RememberInput,
    ThreadDraft,
)
from charmem.domain.graph import LifecycleAction
from charmem.domain.model import DerivedMemory, Episode, MemoryThread, Observation
from charmem.stats import InMemoryRetrievalStatsStore
from charmem.testing import HashingEmbeddingProvider, ReferenceGraphStore, ReferenceVectorIndex
from charmem.usecases.forgetting import ForgetReach, forget_plan

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)


class FixedClock:
    """A clock a day after :data:`T0`."""

    def now(self) -> datetime:
        return T0 + timedelta(days=1)


@attrs.define
class Stack:
    memory: CharacterMemory
    graph: ReferenceGraphStore
    vectors: ReferenceVectorIndex


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    embedder = HashingEmbeddingProvider()
    graph = ReferenceGraphStore("forgetting")
    vectors = ReferenceVectorIndex("forgetting", model_id=embedder.model_id, vector_size=embedder.vector_size)
    memory = CharacterMemory(
        graph=graph,
        vectors=vectors,
        embedder=embedder,
        stats=InMemoryRetrievalStatsStore("forgetting"),
        collection="forgetting",
        clock=FixedClock(),
    )
    try:
        yield Stack(memory, graph, vectors)
    finally:
        await memory.close()


async def _episode_with_parts(stack: Stack) -> dict[str, MemoryId]:
    """An episode with a summary and two turns; a note on the episode and one on the first turn."""
    episode, first, second, on_episode, on_turn = (MemoryId.new() for _ in range(5))
    await stack.memory.remember(
        RememberDrafts(
            episodes=[EpisodeDraft(id=episode, occurred_at=T0, summary="evening call", created_at=T0)],
            observations=[
                ObservationDraft(id=first, text="I lost my job today.", episode_id=episode, created_at=T0),
                ObservationDraft(id=second, text="Let us talk tomorrow.", episode_id=episode, created_at=T0),
            ],
            derived=[
                DerivedMemoryDraft(
                    DerivedType.REFLECTION,
                    "A hard evening.",
                    id=on_episode,
                    episode_ids=[episode],
                    created_at=T0,
                ),
                DerivedMemoryDraft(
                    DerivedType.CLAIM, "Lost their job.", id=on_turn, observation_ids=[first], created_at=T0
                ),
            ],
        )
    )
    return {
        "episode": episode,
        "first": first,
        "second": second,
        "on_episode": on_episode,
        "on_turn": on_turn,
    }


async def test_forgetting_an_episode_suppresses_its_parts_and_their_beliefs(stack: Stack) -> None:
    ids = await _episode_with_parts(stack)
    later = T0 + timedelta(hours=2)
    outcome = await stack.memory.forget(
        ForgetMemoryDraft.suppress(ids["episode"], "The user asked to forget the call.", recorded_at=later)
    )
    assert set(outcome.graph_mutated_object_ids) == set(ids.values())
    currency = await stack.graph.currency(list(ids.values()))
    assert set(currency.values()) == {CurrencyStatus.SUPPRESSED}
    assert set(ids.values()).isdisjoint(await stack.vectors.point_ids())
    records = await stack.graph.get_records(list(ids.values()))
    assert {r.recorded_at for r in records} == {later}
    cascaded = [r for r in records if r.target_id != ids["episode"]]
    assert {r.related_ids for r in cascaded} == {(ids["episode"],)}
    pack = await stack.memory.retrieve("I lost my job today.")
    assert set(ids.values()).isdisjoint({item.id for item in pack.items})


async def test_replaying_an_episode_forget_writes_nothing_new(stack: Stack) -> None:
    ids = await _episode_with_parts(stack)
    draft = ForgetMemoryDraft.suppress(ids["episode"], "Forget it.")
    await stack.memory.forget(draft)
    count = await stack.graph.statement_count()
    await stack.memory.forget(attrs.evolve(draft, recorded_at=T0 + timedelta(days=1)))
    assert await stack.graph.statement_count() == count


@pytest.mark.parametrize(
    ("options", "suppressed"),
    [
        ({}, {"episode", "first", "second", "on_episode", "on_turn"}),
        ({"apply_to_derived_from_target": False}, {"episode", "first", "second"}),
        ({"apply_to_episode_observations": False}, {"episode", "on_episode"}),
        ({"apply_to_episode_observations": False, "apply_to_derived_from_target": False}, {"episode"}),
    ],
)
async def test_each_switch_of_an_episode_forget(
    stack: Stack, options: dict[str, bool], suppressed: set[str]
) -> None:
    ids = await _episode_with_parts(stack)
    await stack.memory.forget(ForgetMemoryDraft.suppress(ids["episode"], "Forget it.", **options))
    currency = await stack.graph.currency(list(ids.values()))
    got = {name for name, i in ids.items() if currency[i] is CurrencyStatus.SUPPRESSED}
    assert got == suppressed
    points = await stack.vectors.point_ids()
    assert {name for name, i in ids.items() if i in points} == set(ids) - suppressed


def test_the_forget_plan_by_target_kind() -> None:
    episode = Episode(id=MemoryId.new(), occurred_at=T0, created_at=T0)
    observation = Observation(
        id=MemoryId.new(), episode_id=episode.id, text="x", observed_at=T0, created_at=T0
    )
    thread = MemoryThread(id=MemoryId.new(), title="t", created_at=T0)
    belief = DerivedMemory(
        id=MemoryId.new(),
        derived_type=DerivedType.CLAIM,
        text="y",
        observation_ids=[observation.id],
        created_at=T0,
    )
    a, b, c, d = sorted(MemoryId.new() for _ in range(4))
    reach = ForgetReach(parts=[a], grounded_on_target=[b, a], grounded_on_parts=[c, b], members=[d])
    suppress = LifecycleAction.SUPPRESS
    plan = forget_plan(episode, ForgetMemoryDraft.suppress(episode.id, "r"), reach)
    assert plan == [(episode.id, suppress), (a, suppress), (b, suppress), (c, suppress)]
    kept = ForgetMemoryDraft.suppress(episode.id, "r", apply_to_episode_observations=False)
    assert forget_plan(episode, kept, reach) == [(episode.id, suppress), (a, suppress), (b, suppress)]
    # an observation has no parts: what is grounded on "parts" never applies to it
    assert forget_plan(observation, ForgetMemoryDraft.suppress(observation.id, "r"), reach)[-1] == (
        b,
        suppress,
    )
    assert forget_plan(belief, ForgetMemoryDraft.suppress(belief.id, "r"), reach) == [(belief.id, suppress)]
    members = ForgetMemoryDraft.suppress(thread.id, "r", apply_to_thread_members=True)
    assert forget_plan(thread, members, reach) == [(thread.id, LifecycleAction.FORGET_NOTED), (d, suppress)]
    assert forget_plan(thread, ForgetMemoryDraft.suppress(thread.id, "r"), reach) == [
        (thread.id, LifecycleAction.FORGET_NOTED)
    ]


async def test_a_thread_forget_never_reaches_its_episodes_or_their_parts(stack: Stack) -> None:
    thread, episode, turn, note = (MemoryId.new() for _ in range(4))
    await stack.memory.remember(
        RememberDrafts(
            threads=[ThreadDraft(id=thread, title="Work", created_at=T0)],
            episodes=[EpisodeDraft(id=episode, occurred_at=T0, thread_ids=[thread], created_at=T0)],
            observations=[ObservationDraft(id=turn, text="New job!", episode_id=episode, created_at=T0)],
            derived=[
                DerivedMemoryDraft(
                    DerivedType.CLAIM, "Has a new job.", id=note, episode_ids=[episode], thread_ids=[thread]
                )
            ],
        )
    )
    outcome = await stack.memory.forget(ForgetMemoryDraft.suppress(thread, "r", apply_to_thread_members=True))
    assert set(outcome.graph_mutated_object_ids) == {thread, note}
    currency = await stack.graph.currency([episode, turn])
    assert set(currency.values()) == {CurrencyStatus.CURRENT}


async def test_remember_outcomes_name_ids_by_role(stack: Stack) -> None:
    said = await stack.memory.remember(
        RememberInput("We adopted a dog.", occurred_at=T0, summary="adoption day").with_derived_memory(
            DerivedMemoryDraft(DerivedType.CLAIM, "They have a dog.")
        )
    )
    assert said.object_ids == (*said.episode_ids, *said.observation_ids, *said.derived_ids)
    assert len(said.episode_ids) == len(said.observation_ids) == len(said.derived_ids) == 1
    assert said.entity_ids == said.thread_ids == ()
    person, thread = MemoryId.new(), MemoryId.new()
    drafts = RememberDrafts(
        entities=[EntityDraft(id=person, entity_type="person")],
        threads=[ThreadDraft(id=thread, title="Dog")],
        links=[LinkDraft(said.derived_ids[0], Relation.PART_OF_THREAD, thread)],
    )
    outcome = await stack.memory.remember(drafts)
    assert (outcome.entity_ids, outcome.thread_ids) == ((person,), (thread,))
    assert outcome.episode_ids == outcome.observation_ids == outcome.derived_ids == ()
    assert len(outcome.link_ids) == 1
