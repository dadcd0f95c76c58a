"""Write plans obey the time order lifecycle records obey.

A plan may not store a memory or link dated beyond the clock's skew (it could not be forgotten
until the clock reached it, and the default view would recall it while ``as_of=now`` does not),
nor one dated before what it depends on: a successor before what it supersedes, a derived memory
before its sources, an observation before its episode, a caller link before an endpoint. The
rule is one pure function (``charmem.domain.rules.time_order_breach``); ``charmem.admin.check``
reports stored breaches.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from charmem import (
    RECORDED_AT_SKEW,
    CandidateValidationStatus,
    CharacterMemory,
    CorrectionTarget,
    CorrectMemoryDraft,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    EpisodeDraft,
    ForgetMemoryDraft,
    LifecycleErrorKind,
    LifecycleValidationError,
    LinkDraft,
    MemoryId,
    ObservationDraft,
    PlanValidationError,
    Relation,
    RememberDrafts,
    RememberInput,
    RetrievalContext,
    SourceProvenanceReference,
    ThreadDraft,
)
from charmem.admin import GraphProblemKind, check
from charmem.domain.graph import GraphBatch
from charmem.domain.model import DerivedMemory, Episode, MemoryLink, Observation
from charmem.domain.rules import TimeOrderBreach, time_order_breach
from charmem.stats import InMemoryRetrievalStatsStore
from charmem.testing import HashingEmbeddingProvider, ReferenceGraphStore, ReferenceVectorIndex
from charmem.usecases.planning import derive_links
from charmem.usecases.validation import validate

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)
NOW = T0 + timedelta(days=30)
COLLECTION = "plantime"
HOUR = timedelta(hours=1)


class _Clock:
    def now(self) -> datetime:
        return NOW


class Stack:
    """A reference memory whose stores the test keeps (to write past validation)."""

    def __init__(self) -> None:
        embedder = HashingEmbeddingProvider()
        self.graph = ReferenceGraphStore(COLLECTION)
        self.memory = CharacterMemory(
            graph=self.graph,
            vectors=ReferenceVectorIndex(
                COLLECTION, model_id=embedder.model_id, vector_size=embedder.vector_size
            ),
            embedder=embedder,
            stats=InMemoryRetrievalStatsStore(COLLECTION),
            collection=COLLECTION,
            clock=_Clock(),
        )

    async def said(self, text: str, at: datetime = T0) -> tuple[MemoryId, MemoryId]:
        """Remember ``text`` created at ``at``: (episode, observation)."""
        outcome = await self.memory.remember(RememberInput(text, occurred_at=at, created_at=at))
        return outcome.object_ids[0], outcome.object_ids[1]

    async def write_directly(self, *items: DerivedMemory | Observation | Episode | MemoryLink) -> None:
        """Store ``items`` (and the links objects derive) past validation, as an import could."""
        objects = [i for i in items if not isinstance(i, MemoryLink)]
        links = [i for i in items if isinstance(i, MemoryLink)]
        await self.graph.write_batch(
            GraphBatch(objects=objects, links=[*links, *derive_links(COLLECTION, objects)])
        )


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    built = Stack()
    try:
        yield built
    finally:
        await built.memory.close()


def _claim(
    text: str,
    source: MemoryId,
    *,
    at: datetime,
    supersedes: tuple[MemoryId, ...] = (),
    memory_id: MemoryId | None = None,
) -> DerivedMemoryDraft:
    return DerivedMemoryDraft(
        DerivedType.CLAIM,
        text,
        id=memory_id or MemoryId.new(),
        observation_ids=[source],
        supersedes=supersedes,
        created_at=at,
    )


def _reasons(error: PlanValidationError, memory_id: MemoryId) -> list[str]:
    return [r for r in error.reasons[str(memory_id)] if r.startswith("time order")]


# ---------------------------------------------------------------------- the pure rule


def test_time_order_breach_is_the_one_rule_for_dates() -> None:
    a, b = sorted(MemoryId.new() for _ in range(2))
    earlier = {a: T0, b: T0 + HOUR}
    assert time_order_breach(T0 + HOUR, earlier=earlier, now=NOW) is None  # equal instants are in order
    assert time_order_breach(NOW + RECORDED_AT_SKEW, earlier={}, now=NOW) is None
    assert time_order_breach(T0, earlier=earlier, now=NOW) == TimeOrderBreach(
        LifecycleErrorKind.RECORDED_BEFORE_TARGET, T0 + HOUR, b
    )
    late = NOW + RECORDED_AT_SKEW + timedelta(seconds=1)
    assert time_order_breach(late, earlier=earlier, now=NOW) == TimeOrderBreach(
        LifecycleErrorKind.RECORDED_IN_FUTURE, NOW + RECORDED_AT_SKEW
    )
    assert time_order_breach(late, earlier=earlier) is None  # no clock: no future check


# ---------------------------------------------------------------------- the clock's future


async def test_a_memory_dated_in_the_clocks_future_is_refused(stack: Stack) -> None:
    """The review's case: it could not be forgotten until the clock reached its date."""
    future = NOW + timedelta(days=30)
    with pytest.raises(PlanValidationError) as info:
        await stack.memory.remember(RememberInput("My bank PIN is 4321", created_at=future))
    message = str(info.value)
    assert (
        "time order: the episode is dated 2024-07-07T13:56:00+00:00, more than 0:05:00 after the " in message
    )
    assert "pass a created_at up to now, or leave it out; nothing was written" in message
    assert await stack.graph.object_ids() == []
    pack = await stack.memory.retrieve(RetrievalContext(query="bank PIN"))
    assert pack.items == ()


async def test_every_kind_of_draft_dated_in_the_future_is_refused(stack: Stack) -> None:
    episode, observation = await stack.said("We met at the harbour.")
    future = NOW + RECORDED_AT_SKEW + timedelta(minutes=1)
    drafts = RememberDrafts(
        episodes=[EpisodeDraft(id=MemoryId.new(), occurred_at=T0, created_at=future)],
        observations=[
            ObservationDraft(text="Hello.", episode_id=episode, id=MemoryId.new(), created_at=future)
        ],
        derived=[_claim("They met.", observation, at=future)],
        threads=[ThreadDraft(title="harbour", id=MemoryId.new(), created_at=future)],
        entities=[EntityDraft(id=MemoryId.new(), entity_type="person", created_at=future)],
        links=[
            LinkDraft(episode, Relation.ASSOCIATED_WITH, observation, id=MemoryId.new(), recorded_at=future)
        ],
    )
    validations = await stack.memory.validate_plan(await stack.memory.prepare(drafts))
    assert [v.status for v in validations] == [CandidateValidationStatus.INVALID] * 6
    for validation in validations:
        [reason] = validation.reasons
        field = "recorded_at" if validation.kind == "link" else "created_at"
        assert reason.startswith("time order: the ") and f"pass a {field} up to now" in reason


async def test_a_date_within_the_skew_is_accepted(stack: Stack) -> None:
    soon = NOW + RECORDED_AT_SKEW
    outcome = await stack.memory.remember(RememberInput("The ferry leaves soon.", created_at=soon))
    assert outcome.object_ids


async def test_validate_without_a_clock_keeps_its_old_signature(stack: Stack) -> None:
    plan = await stack.memory.prepare(RememberInput("Later.", created_at=NOW + timedelta(days=3)))
    assert [v.reasons for v in await validate(plan, stack.graph)] == [(), ()]
    assert all(v.reasons for v in await validate(plan, stack.graph, NOW))


async def test_a_stored_memory_replayed_is_not_judged_again(stack: Stack) -> None:
    """An object stored with a then-valid date is accepted when its plan is replayed."""
    plan = await stack.memory.prepare(RememberInput("A note from a clock ahead.", created_at=NOW + 2 * HOUR))
    await stack.graph.write_batch(GraphBatch(objects=plan.objects, links=plan.derived_links))
    outcome = await stack.memory.commit(plan)
    assert outcome.warnings  # already stored with equal content


# ---------------------------------------------------------------------- order between memories


async def test_a_successor_dated_before_what_it_supersedes_is_refused(stack: Stack) -> None:
    _, source = await stack.said("Ana lives in Porto.")
    old = MemoryId.new()
    await stack.memory.remember(
        RememberDrafts(derived=[_claim("Ana lives in Porto.", source, at=T0 + 2 * HOUR, memory_id=old)])
    )
    new = MemoryId.new()
    successor = _claim("Ana lives in Lisbon.", source, at=T0 + HOUR, supersedes=(old,), memory_id=new)
    with pytest.raises(PlanValidationError) as info:
        await stack.memory.remember(RememberDrafts(derived=[successor]))
    assert _reasons(info.value, new) == [
        "time order: the derived memory is dated 2024-05-08T14:56:00+00:00, before its superseded memory "
        f"{old} was created (2024-05-08T15:56:00+00:00); a derived memory cannot predate its superseded "
        "memory: pass a created_at at or after 2024-05-08T15:56:00+00:00"
    ]
    # in one plan too; at the same instant it is in order
    first, second = MemoryId.new(), MemoryId.new()
    in_plan = [
        _claim("Ana likes figs.", source, at=T0 + 2 * HOUR, memory_id=first),
        _claim("Ana likes plums.", source, at=T0 + HOUR, supersedes=(first,), memory_id=second),
    ]
    with pytest.raises(PlanValidationError, match="before its superseded memory"):
        await stack.memory.remember(RememberDrafts(derived=in_plan))
    await stack.memory.remember(
        RememberDrafts(derived=[_claim("Ana lives in Faro.", source, at=T0 + 2 * HOUR, supersedes=(old,))])
    )


async def test_a_derived_memory_dated_before_its_sources_is_refused(stack: Stack) -> None:
    episode, observation = await stack.said("Bo adopted a cat.", at=T0 + HOUR)
    early = DerivedMemoryDraft(
        DerivedType.CLAIM, "Bo has a cat.", id=MemoryId.new(), episode_ids=[episode], created_at=T0
    )
    with pytest.raises(PlanValidationError, match=f"before its source episode {episode} was created"):
        await stack.memory.remember(RememberDrafts(derived=[early]))
    with pytest.raises(PlanValidationError, match=f"before its source observation {observation} was created"):
        await stack.memory.remember(RememberDrafts(derived=[_claim("Bo has a cat.", observation, at=T0)]))


async def test_an_observation_dated_before_its_episode_is_refused(stack: Stack) -> None:
    episode, _ = await stack.said("Cy sang.", at=T0 + HOUR)
    stored = ObservationDraft(text="La la.", episode_id=episode, id=MemoryId.new(), created_at=T0)
    with pytest.raises(PlanValidationError, match=f"before its episode {episode} was created"):
        await stack.memory.remember(RememberDrafts(observations=[stored]))
    planned = MemoryId.new()
    drafts = RememberDrafts(
        episodes=[EpisodeDraft(id=planned, occurred_at=T0, created_at=T0 + HOUR)],
        observations=[ObservationDraft(text="Hum.", episode_id=planned, id=MemoryId.new(), created_at=T0)],
    )
    with pytest.raises(PlanValidationError, match=f"before its episode {planned} was created"):
        await stack.memory.remember(drafts)


async def test_a_caller_link_dated_before_an_endpoint_is_refused(stack: Stack) -> None:
    _, early = await stack.said("Di planted roses.")
    _, late = await stack.said("The roses bloomed.", at=T0 + HOUR)
    link = LinkDraft(early, Relation.SUPPORTS, late, id=MemoryId.new(), recorded_at=T0)
    with pytest.raises(PlanValidationError) as info:
        await stack.memory.remember(RememberDrafts(links=[link]))
    assert _reasons(info.value, link.id or MemoryId.new()) == [
        "time order: the link is dated 2024-05-08T13:56:00+00:00, before its link target "
        f"{late} was created (2024-05-08T14:56:00+00:00); a link cannot predate its link target: pass a "
        "recorded_at at or after 2024-05-08T14:56:00+00:00"
    ]
    await stack.memory.remember(
        RememberDrafts(links=[LinkDraft(early, Relation.SUPPORTS, late, recorded_at=T0 + HOUR)])
    )


async def test_back_filled_history_with_notions_known_later_is_accepted(stack: Stack) -> None:
    """Notions and threads are referred to, not depended on: an episode may name a person first
    known later, as an import of old conversations does when the notions are created now."""
    person = MemoryId.new()
    drafts = RememberDrafts(
        entities=[EntityDraft(id=person, entity_type="person")],  # created at the clock's now
        episodes=[
            EpisodeDraft(
                id=(episode := MemoryId.new()), occurred_at=T0, participant_entity_ids=[person], created_at=T0
            )
        ],
        observations=[
            ObservationDraft(text="Hi.", episode_id=episode, speaker_entity_id=person, created_at=T0)
        ],
    )
    await stack.memory.remember(drafts)
    report = await check(stack.memory)
    assert report.consistent, report.describe()


# ---------------------------------------------------------------------- lifecycle and check


async def test_a_correction_is_not_recorded_before_its_origin(stack: Stack) -> None:
    _, source = await stack.said("Eve works at a bakery.")
    claim = MemoryId.new()
    await stack.memory.remember(
        RememberDrafts(derived=[_claim("Eve bakes.", source, at=T0, memory_id=claim)])
    )
    _, origin = await stack.said("Eve quit the bakery.", at=T0 + 2 * HOUR)
    draft = CorrectMemoryDraft(
        CorrectionTarget.derived_memory(claim),
        "She quit.",
        correction_origin=SourceProvenanceReference(observation_ids=(origin,)),
        recorded_at=T0 + HOUR,
    )
    with pytest.raises(LifecycleValidationError, match=f"before {origin} was created") as info:
        await stack.memory.correct(draft)
    assert info.value.kind is LifecycleErrorKind.RECORDED_BEFORE_TARGET
    await stack.memory.forget(ForgetMemoryDraft.suppress(claim, "Private."))  # still forgettable


async def test_check_reports_stored_memories_out_of_time_order(stack: Stack) -> None:
    episode, observation = await stack.said("Fay moved.", at=T0 + HOUR)
    old = DerivedMemory(
        id=MemoryId.new(),
        derived_type=DerivedType.CLAIM,
        text="Fay lives here.",
        observation_ids=(observation,),
        salience=0.5,
        created_at=T0 + 3 * HOUR,
    )
    successor = DerivedMemory(
        id=MemoryId.new(),
        derived_type=DerivedType.CLAIM,
        text="Fay lives there.",
        observation_ids=(observation,),
        supersedes=(old.id,),
        salience=0.5,
        created_at=T0 + 2 * HOUR,
    )
    ungrounded = DerivedMemory(
        id=MemoryId.new(),
        derived_type=DerivedType.CLAIM,
        text="Fay moves a lot.",
        episode_ids=(episode,),
        salience=0.5,
        created_at=T0,
    )
    early_turn = Observation(
        id=MemoryId.new(), episode_id=episode, text="Bye.", observed_at=T0, salience=0.5, created_at=T0
    )
    link = MemoryLink(
        id=MemoryId.new(),
        from_id=observation,
        relation=Relation.SUPPORTS,
        to_id=old.id,
        created_at=T0 + 2 * HOUR,
    )
    await stack.write_directly(old, successor, ungrounded, early_turn, link)
    report = await check(stack.memory)
    found = {p.id: p for p in report.graph_problems if p.kind is GraphProblemKind.OUT_OF_TIME_ORDER}
    assert set(found) == {successor.id, ungrounded.id, early_turn.id, link.id}
    assert found[successor.id].related_ids == (old.id,)
    assert found[successor.id].detail.startswith(
        "the derived memory is dated 2024-05-08T15:56:00+00:00, before its superseded memory "
        f"{old.id} was created (2024-05-08T16:56:00+00:00)"
    )
    assert f"before its source episode {episode}" in found[ungrounded.id].detail
    assert f"before its episode {episode}" in found[early_turn.id].detail
    assert f"before its link target {old.id}" in found[link.id].detail
    assert not report.consistent
    assert not report.repairable
    assert {p["kind"] for p in report.to_dict()["graph"]["problems"]} == {"out_of_time_order"}
