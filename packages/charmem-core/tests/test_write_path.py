"""The write path on the reference stack: prepare, validate_plan, commit, remember (spec "Write path")."""

from __future__ import annotations

from datetime import UTC, datetime

import attrs
import pytest

from charmem import (
    BeliefAssertion,
    CandidateValidationStatus,
    CharacterMemory,
    CommitOptions,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    EpisodeDraft,
    IdConflictError,
    KnownAs,
    LinkDraft,
    MemoryId,
    ObjectType,
    ObservationDraft,
    PlanValidationError,
    Relation,
    RememberDrafts,
    RememberInput,
    RememberWritePlan,
    RepairMarker,
    VectorOperation,
)
from charmem.ports import VectorPoint
from charmem.testing import (
    EmbeddingFault,
    FaultyEmbeddingProvider,
    FaultyStatsStore,
    FaultyVectorIndex,
    stores_of,
)

WHEN = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


async def counts(memory: CharacterMemory) -> tuple[int, int, int]:
    return (
        await stores_of(memory).graph.statement_count(),
        await stores_of(memory).vectors.count(),
        await stores_of(memory).stats.row_count(),
    )


async def test_prepare_and_validate_write_nothing(memory: CharacterMemory) -> None:
    await memory.remember(RememberInput("seed so the stores are not empty", occurred_at=WHEN))
    before = await counts(memory)
    plan = await memory.prepare(RememberInput("a new memory", occurred_at=WHEN))
    validations = await memory.validate_plan(plan)
    assert all(v.status is CandidateValidationStatus.VALID for v in validations)
    assert await counts(memory) == before
    outcome = await memory.commit(plan)
    graph, points, rows = await counts(memory)
    assert graph > before[0]
    assert points == before[1] + 1
    assert rows > before[2]
    assert set(outcome.object_ids) == set(plan.object_ids)


async def test_replaying_a_plan_is_idempotent(memory: CharacterMemory) -> None:
    plan = await memory.prepare(RememberInput("replay me", occurred_at=WHEN))
    first = await memory.commit(plan)
    after_first = await counts(memory)
    second = await memory.commit(plan)
    assert await counts(memory) == after_first
    assert second.object_ids == first.object_ids
    assert second.link_ids == first.link_ids
    assert second.warnings  # says the items already existed


async def test_id_reused_with_other_content_conflicts_and_changes_nothing(memory: CharacterMemory) -> None:
    episode = MemoryId.new()
    await memory.remember(RememberInput("original", episode_id=episode, occurred_at=WHEN))
    before = await counts(memory)
    with pytest.raises(IdConflictError) as info:
        await memory.remember(
            RememberInput("different", summary="other", episode_id=episode, occurred_at=WHEN)
        )
    assert str(episode) in info.value.ids
    assert await counts(memory) == before


async def test_an_id_used_by_another_object_type_conflicts(memory: CharacterMemory) -> None:
    shared = MemoryId.new()
    await memory.remember(RememberDrafts(entities=[EntityDraft(id=shared, created_at=WHEN)]))
    with pytest.raises(IdConflictError):
        await memory.remember(RememberInput("x", observation_id=shared, occurred_at=WHEN))


async def test_given_belief_rules(memory: CharacterMemory) -> None:
    notion = MemoryId.new()
    await memory.remember(RememberDrafts(entities=[EntityDraft(id=notion, entity_type="person")]))
    named = DerivedMemoryDraft(
        DerivedType.REFLECTION,
        "I know this notion as Bob.",
        entity_ids=[notion],
        assertions=[BeliefAssertion(notion, KnownAs("Bob"))],
        given_by_application=True,
    )
    # convenience path does not attach its episode as a source to a given belief
    plan = await memory.prepare(RememberInput("The app names Bob.").with_derived_memory(named))
    derived = next(o for o in plan.objects if o.object_type is ObjectType.DERIVED)
    assert derived.source_ids == ()  # type: ignore[union-attr]
    await memory.commit(plan)

    no_subject = attrs.evolve(named, entity_ids=[], assertions=[], id=None)
    with pytest.raises(PlanValidationError, match="notion"):
        await memory.remember(RememberDrafts(derived=[no_subject]))
    ungrounded = DerivedMemoryDraft(DerivedType.CLAIM, "floating belief", entity_ids=[notion])
    with pytest.raises(PlanValidationError, match="source"):
        await memory.remember(RememberDrafts(derived=[ungrounded]))
    wrong_subject = attrs.evolve(named, id=None, assertions=[BeliefAssertion(MemoryId.new(), KnownAs("Al"))])
    with pytest.raises(PlanValidationError, match="invalid belief"):
        await memory.remember(RememberDrafts(derived=[wrong_subject]))


async def test_caller_supersedes_links_are_rejected(memory: CharacterMemory) -> None:
    a = await memory.remember(RememberInput("a", occurred_at=WHEN))
    b = await memory.remember(RememberInput("b", occurred_at=WHEN))
    link = LinkDraft(a.object_ids[1], Relation.SUPERSEDES, b.object_ids[1])
    plan = await memory.prepare(RememberDrafts(links=[link]))
    [verdict] = await memory.validate_plan(plan)
    assert verdict.status is CandidateValidationStatus.INVALID
    assert "supersedes" in verdict.reasons[0]
    with pytest.raises(PlanValidationError):
        await memory.commit(plan)


async def test_references_must_exist(memory: CharacterMemory) -> None:
    orphan = ObservationDraft(text="no episode", episode_id=MemoryId.new())
    with pytest.raises(PlanValidationError, match="neither in the plan nor stored"):
        await memory.remember(RememberDrafts(observations=[orphan]))
    assert await stores_of(memory).graph.statement_count() == 0


async def test_a_commit_changes_stats_rows_but_prepare_does_not(memory: CharacterMemory) -> None:
    plan = await memory.prepare(RememberInput("stats please", occurred_at=WHEN))
    await memory.validate_plan(plan)
    assert await stores_of(memory).stats.row_count() == 0
    await memory.commit(plan)
    summary = await stores_of(memory).stats.summary()
    assert summary.objects == {"episode": 1, "observation": 1}
    assert summary.links == {"has_observation": 1}


async def test_vector_failure_is_a_repair_marker_and_replay_repairs(memory: CharacterMemory) -> None:
    faulty = FaultyVectorIndex(stores_of(memory).vectors)
    memory._vectors = faulty  # type: ignore[assignment]
    faulty.fail("upsert", on_call=1)
    plan = await memory.prepare(RememberInput("fragile", occurred_at=WHEN))
    outcome = await memory.commit(plan)
    [marker] = outcome.repair_markers
    assert isinstance(marker, RepairMarker.VectorMaintenance)
    assert marker.operation is VectorOperation.UPSERT
    assert await stores_of(memory).vectors.count() == 0
    repaired = await memory.commit(plan)
    assert repaired.repair_markers == ()
    assert await stores_of(memory).vectors.count() == 1


async def test_stats_failure_is_a_repair_marker(memory: CharacterMemory) -> None:
    faulty = FaultyStatsStore(stores_of(memory).stats)
    memory._stats = faulty  # type: ignore[assignment]
    faulty.fail("record", on_call=1)
    plan = await memory.prepare(RememberInput("count me", occurred_at=WHEN))
    outcome = await memory.commit(plan)
    assert [type(m) for m in outcome.repair_markers] == [RepairMarker.StatsMaintenance]
    assert (await memory.commit(plan)).repair_markers == ()
    assert await stores_of(memory).stats.row_count() == 3


async def test_supersession_removes_the_old_vector(memory: CharacterMemory) -> None:
    notion = MemoryId.new()
    old = MemoryId.new()
    await memory.remember(RememberDrafts(entities=[EntityDraft(id=notion)]))
    base = DerivedMemoryDraft(
        DerivedType.REFLECTION,
        "known as Al",
        id=old,
        entity_ids=[notion],
        assertions=[BeliefAssertion(notion, KnownAs("Al"))],
        given_by_application=True,
    )
    await memory.remember(RememberDrafts(derived=[base]))
    renamed = DerivedMemoryDraft(
        DerivedType.REFLECTION,
        "known as Bob",
        entity_ids=[notion],
        assertions=[BeliefAssertion(notion, KnownAs("Bob"))],
        given_by_application=True,
        supersedes=[old],
    )
    await memory.remember(RememberDrafts(derived=[renamed]))
    assert old not in await stores_of(memory).vectors.point_ids()
    summary = await stores_of(memory).stats.summary()
    assert summary.objects["derived"] == 2
    assert summary.current_objects["derived"] == 1


async def test_graph_authority_omits_vectors_the_graph_does_not_hold(memory: CharacterMemory) -> None:
    await memory.remember(RememberInput("green tea with honey", occurred_at=WHEN))
    ghost = MemoryId.new()
    vector = await memory.embedder.embed_query("green tea with honey")
    await stores_of(memory).vectors.upsert(
        [VectorPoint(id=ghost, object_type=ObjectType.OBSERVATION, vector=vector)]
    )
    pack = await memory.retrieve("green tea with honey")
    assert ghost not in {item.id for item in pack.items}
    assert [(o.id, o.reason) for o in pack.omissions] == [(ghost, "not_in_graph")]
    assert pack.items


async def test_plan_from_json_commits_to_the_same_ids(memory: CharacterMemory) -> None:
    plan = await memory.prepare(RememberInput("persist the plan", occurred_at=WHEN))
    loaded = RememberWritePlan.from_json(plan.to_json())
    outcome = await memory.commit(loaded)
    assert outcome.object_ids == plan.object_ids


async def test_explicit_session_with_deterministic_ids_is_idempotent_across_prepares(
    memory: CharacterMemory,
) -> None:
    episode = MemoryId.deterministic("conv", "S1")
    speaker = MemoryId.deterministic("conv", "speaker", "A")
    drafts = RememberDrafts(
        entities=[EntityDraft(id=speaker, entity_type="person", created_at=WHEN)],
        episodes=[EpisodeDraft(id=episode, summary="session one", occurred_at=WHEN, created_at=WHEN)],
        observations=[
            ObservationDraft(
                id=MemoryId.deterministic("conv", f"D1:{i}"),
                text=f"turn {i}",
                episode_id=episode,
                speaker_entity_id=speaker,
                created_at=WHEN,
            )
            for i in range(3)
        ],
    )
    await memory.remember(drafts)
    before = await counts(memory)
    await memory.remember(drafts)
    assert await counts(memory) == before


async def test_a_failed_currency_lookup_is_a_vector_repair_cause(memory: CharacterMemory) -> None:
    from charmem.testing import FaultyGraphStore

    faulty = FaultyGraphStore(stores_of(memory).graph)
    memory._graph = faulty  # type: ignore[assignment]
    faulty.fail("currency", on_call=1)
    plan = await memory.prepare(RememberInput("currency check", occurred_at=WHEN))
    outcome = await memory.commit(plan)
    [marker] = outcome.repair_markers
    assert isinstance(marker, RepairMarker.VectorMaintenance)
    assert "currency lookup failed" in marker.cause
    assert await stores_of(memory).vectors.count() == 0
    assert (await memory.commit(plan)).repair_markers == ()
    assert await stores_of(memory).vectors.count() == 1


def _utterances(count: int) -> RememberDrafts:
    episode = MemoryId.new()
    return RememberDrafts(
        episodes=[EpisodeDraft(id=episode, occurred_at=WHEN)],
        observations=[
            ObservationDraft(text=f"utterance {n} about topic {n % 7}", episode_id=episode, observed_at=WHEN)
            for n in range(count)
        ],
    )


async def test_vectors_are_upserted_in_groups_of_whole_embedding_batches(
    memory: CharacterMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from charmem.usecases import maintenance as maintenance_module

    monkeypatch.setattr(maintenance_module, "UPSERT_POINTS", 20)  # groups of 2 batches of 8
    faulty = FaultyVectorIndex(stores_of(memory).vectors)
    memory._vectors = faulty  # type: ignore[assignment]
    faulty.fail("upsert", on_call=2)  # the second group (observations 16-31) fails
    plan = await memory.prepare(_utterances(40))
    entries = [e.id for e in plan.index_entries]
    assert len(entries) == 40
    outcome = await memory.commit(plan, CommitOptions(embed_batch_size=8))
    assert faulty.calls["upsert"] == 3  # 16 + 16 + 8 points, not 5 calls of 8
    [marker] = outcome.repair_markers
    assert isinstance(marker, RepairMarker.VectorMaintenance)
    assert marker.operation is VectorOperation.UPSERT
    assert marker.ids == tuple(entries[16:32])
    assert sorted(await stores_of(memory).vectors.point_ids()) == sorted([*entries[:16], *entries[32:]])
    assert (await memory.commit(plan)).repair_markers == ()
    assert await stores_of(memory).vectors.count() == 40


async def test_a_failed_embedding_batch_leaves_the_rest_of_its_group_upserted(
    memory: CharacterMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from charmem.usecases import maintenance as maintenance_module

    monkeypatch.setattr(maintenance_module, "UPSERT_POINTS", 20)
    embedder = FaultyEmbeddingProvider(memory.embedder)
    memory.embedder = embedder
    plan = await memory.prepare(_utterances(24))
    entries = [e.id for e in plan.index_entries]
    embedder.fail(EmbeddingFault.NAN, on_call=2)  # the second batch of 8 (observations 8-15)
    outcome = await memory.commit(plan, CommitOptions(embed_batch_size=8))
    [marker] = outcome.repair_markers
    assert isinstance(marker, RepairMarker.VectorMaintenance)
    assert marker.ids == tuple(entries[8:16])
    assert "NaN" in marker.cause
    assert sorted(await stores_of(memory).vectors.point_ids()) == sorted([*entries[:8], *entries[16:]])
