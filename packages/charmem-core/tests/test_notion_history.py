"""Beliefs about a notion that are no longer current stay reachable from the notion.

They left candidate recall, so the graph reaches them from focus entities and named notions:
omissions by default, items with the include flags, current items in an ``as_of`` view from
before they stopped being current. Bounded like the notion's current members.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from charmem import (
    BeliefAssertion,
    CharacterMemory,
    CorrectionTarget,
    CorrectMemoryDraft,
    CurrencyStatus,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    ForgetMemoryDraft,
    GraphLimits,
    KnownAs,
    MemoryId,
    ObjectType,
    RememberDrafts,
    RememberInput,
    ReplacementDerivedMemoryDraft,
    RetrievalContext,
)
from charmem.stats import InMemoryRetrievalStatsStore
from charmem.testing import HashingEmbeddingProvider, ReferenceGraphStore, ReferenceVectorIndex

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)


class LaterClock:
    def now(self) -> datetime:
        return T0 + timedelta(days=60)


@pytest.fixture
async def memory() -> AsyncIterator[CharacterMemory]:
    embedder = HashingEmbeddingProvider()
    mem = CharacterMemory(
        graph=ReferenceGraphStore("history"),
        vectors=ReferenceVectorIndex("history", model_id=embedder.model_id, vector_size=embedder.vector_size),
        embedder=embedder,
        stats=InMemoryRetrievalStatsStore("history"),
        collection="history",
        clock=LaterClock(),
    )
    try:
        yield mem
    finally:
        await mem.close()


async def _notion(memory: CharacterMemory, name: str) -> MemoryId:
    notion, belief = MemoryId.new(), MemoryId.new()
    await memory.remember(
        RememberDrafts(
            entities=[EntityDraft(id=notion, entity_type="person", created_at=T0)],
            derived=[
                DerivedMemoryDraft(
                    DerivedType.REFLECTION,
                    f"I know her as {name}.",
                    id=belief,
                    entity_ids=[notion],
                    assertions=[BeliefAssertion(notion, KnownAs(name))],
                    given_by_application=True,
                    created_at=T0,
                )
            ],
        )
    )
    return notion


async def _belief(memory: CharacterMemory, notion: MemoryId, text: str, day: int) -> MemoryId:
    outcome = await memory.remember(
        RememberInput(text, occurred_at=T0, created_at=T0 + timedelta(days=day)).with_derived_memory(
            DerivedMemoryDraft(
                DerivedType.USER_PREFERENCE, text, entity_ids=[notion], created_at=T0 + timedelta(days=day)
            )
        )
    )
    return outcome.derived_ids[0]


async def test_an_as_of_view_finds_a_belief_current_then_though_it_left_candidate_recall(
    memory: CharacterMemory,
) -> None:
    ana = await _notion(memory, "Ana")
    jazz = await _belief(memory, ana, "Ana loves jazz.", day=1)
    corrected = await memory.correct(
        CorrectMemoryDraft(
            CorrectionTarget.derived_memory(jazz),
            "She changed her taste.",
            recorded_at=T0 + timedelta(days=10),
        ).with_replacement(ReplacementDerivedMemoryDraft(DerivedType.USER_PREFERENCE, "Ana loves opera."))
    )
    [opera] = corrected.replacement_ids
    await memory.forget(ForgetMemoryDraft.suppress(opera, "Private.", recorded_at=T0 + timedelta(days=20)))
    then = await memory.retrieve(
        RetrievalContext(query="music taste", focus_entity_ids=[ana], as_of=T0 + timedelta(days=5))
    )
    statuses = {item.id: item.status for item in then.items}
    assert statuses.get(jazz) is CurrencyStatus.CURRENT
    assert opera not in statuses  # not yet recorded then
    now = await memory.retrieve(RetrievalContext(query="music taste", focus_entity_ids=[ana]))
    assert {o.id: o.reason for o in now.omissions}.get(jazz) == "superseded"


async def test_forgotten_beliefs_of_a_notion_are_bounded_by_its_fanout_newest_first(
    memory: CharacterMemory,
) -> None:
    ana = await _notion(memory, "Ana")
    beliefs = [await _belief(memory, ana, f"Ana likes dish number {n}.", day=n + 1) for n in range(5)]
    for belief in beliefs:
        await memory.forget(ForgetMemoryDraft.suppress(belief, "Private."))
    pack = await memory.retrieve(
        RetrievalContext(query="food", focus_entity_ids=[ana], graph_limits=GraphLimits(per_node_fanout=2))
    )
    omitted = {o.id: o.reason for o in pack.omissions}
    assert {i: omitted.get(i) for i in beliefs} == {
        **dict.fromkeys(beliefs[:3]),
        **dict.fromkeys(beliefs[3:], "suppressed"),
    }


async def test_only_the_vector_scope_types_are_reached(memory: CharacterMemory) -> None:
    ana, belief = await _notion(memory, "Ana"), MemoryId.new()
    given = DerivedMemoryDraft(
        DerivedType.USER_PREFERENCE, "Likes tea.", id=belief, entity_ids=[ana], given_by_application=True
    )
    await memory.remember(RememberDrafts(derived=[given]))
    await memory.forget(ForgetMemoryDraft.suppress(belief, "Private."))
    scoped = await memory.retrieve(
        RetrievalContext(query="Ana", object_type_defaults=(ObjectType.OBSERVATION,), include_suppressed=True)
    )
    assert belief not in {item.id for item in scoped.items} | {o.id for o in scoped.omissions}
    named = await memory.retrieve(RetrievalContext(query="What does Ana drink?", include_suppressed=True))
    [item] = [item for item in named.items if item.id == belief]
    assert (item.status, "named_notion" in item.signals) == (CurrencyStatus.SUPPRESSED, True)


async def test_a_forgotten_utterance_mentioning_a_notion_is_an_omission(memory: CharacterMemory) -> None:
    ana = await _notion(memory, "Ana")
    said = await memory.remember(
        RememberInput("Ana told me about her divorce.", occurred_at=T0, mentioned_entity_ids=[ana])
    )
    [episode] = said.episode_ids
    await memory.forget(ForgetMemoryDraft.suppress(episode, "Not ours to keep."))
    pack = await memory.retrieve(RetrievalContext(query="news", focus_entity_ids=[ana]))
    omitted = {o.id: o.reason for o in pack.omissions}
    assert omitted.get(said.observation_ids[0]) == "suppressed"
