"""Write warnings are typed values (``ValidationWarning``) and never refuse a write."""

from __future__ import annotations

from datetime import UTC, datetime

from charmem import (
    CandidateValidationStatus,
    CharacterMemory,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    EpisodeDraft,
    LinkDraft,
    MemoryId,
    ObservationDraft,
    Relation,
    RememberDrafts,
    RememberInput,
    Scene,
    SceneParticipant,
    ValidationWarning,
    WarningKind,
)

WHEN = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


async def test_a_replay_names_what_was_already_stored(memory: CharacterMemory) -> None:
    plan = await memory.prepare(RememberInput("replay me", occurred_at=WHEN))
    first = await memory.commit(plan)
    assert first.warnings == ()
    replay = await memory.commit(plan)
    [warning] = replay.warnings
    assert warning.kind is WarningKind.ALREADY_STORED
    assert set(plan.object_ids) <= set(warning.ids)
    validations = await memory.validate_plan(plan)
    assert all(v.status is CandidateValidationStatus.VALID for v in validations)
    assert validations[0].warnings == (ValidationWarning(WarningKind.ALREADY_STORED, (plan.object_ids[0],)),)
    assert "already stored" in str(warning) and str(plan.object_ids[0]) in str(warning)


async def test_an_observation_repeating_its_episode_summary_warns(memory: CharacterMemory) -> None:
    episode, echo, other = MemoryId.new(), MemoryId.new(), MemoryId.new()
    plan = await memory.prepare(
        RememberDrafts(
            episodes=[
                EpisodeDraft(id=episode, summary="We met at the  Café by the river.", occurred_at=WHEN)
            ],
            observations=[
                ObservationDraft(text="we met at the café by the river.", episode_id=episode, id=echo),
                ObservationDraft(text="The coffee was cold.", episode_id=episode, id=other),
            ],
        )
    )
    by_id = {v.candidate_id: v for v in await memory.validate_plan(plan)}
    expected = ValidationWarning(WarningKind.DUPLICATE_OBSERVATION_ECHO, (echo, episode))
    assert by_id[echo].warnings == (expected,)
    assert by_id[other].warnings == () and by_id[episode].warnings == ()
    outcome = await memory.commit(plan)  # a warning never refuses the write
    assert outcome.warnings == (expected,)
    assert echo in outcome.observation_ids


async def test_remember_without_a_summary_is_no_echo(memory: CharacterMemory) -> None:
    outcome = await memory.remember(RememberInput("Nothing repeated here.", occurred_at=WHEN))
    assert outcome.warnings == ()


async def test_a_resolver_sharing_no_notion_or_thread_with_its_matter_warns(memory: CharacterMemory) -> None:
    ana, ben = (
        EntityDraft(id=MemoryId.new(), entity_type="person"),
        EntityDraft(id=MemoryId.new(), entity_type="person"),
    )
    loop, stranger, kin = MemoryId.new(), MemoryId.new(), MemoryId.new()
    seed = await memory.remember(RememberInput("Ana asked me to return her book.", occurred_at=WHEN))
    source = seed.observation_ids[0]

    def belief(
        memory_id: MemoryId, derived_type: DerivedType, text: str, who: MemoryId
    ) -> DerivedMemoryDraft:
        return DerivedMemoryDraft(
            derived_type, text, id=memory_id, entity_ids=[who], observation_ids=[source]
        )

    plan = await memory.prepare(
        RememberDrafts(
            entities=[ana, ben],
            derived=[
                belief(loop, DerivedType.OPEN_LOOP, "Return Ana's book.", ana.id),
                belief(stranger, DerivedType.REFLECTION, "Ben fixed his bike.", ben.id),
                belief(kin, DerivedType.REFLECTION, "I gave Ana her book back.", ana.id),
            ],
            links=[
                LinkDraft(stranger, Relation.RESOLVES, loop, id=MemoryId.new()),
                LinkDraft(kin, Relation.RESOLVES, loop, id=MemoryId.new()),
            ],
        )
    )
    wrong, right = plan.links
    by_id = {v.candidate_id: v for v in await memory.validate_plan(plan)}
    expected = ValidationWarning(
        WarningKind.RESOLVER_WITHOUT_SHARED_SUBJECT_OR_THREAD, (wrong.id, stranger, loop)
    )
    assert by_id[wrong.id].warnings == (expected,)
    assert by_id[right.id].warnings == ()
    outcome = await memory.commit(plan)
    assert outcome.warnings == (expected,)
    assert {wrong.id, right.id} <= set(outcome.link_ids)


async def test_an_utterance_in_a_scene_with_the_person_shares_their_matters(memory: CharacterMemory) -> None:
    ana = EntityDraft(id=MemoryId.new(), entity_type="person", created_at=WHEN)
    promise = MemoryId.new()
    await memory.remember(
        RememberDrafts(
            entities=[ana],
            derived=[
                DerivedMemoryDraft(
                    DerivedType.COMMITMENT,
                    "Return Ana's book.",
                    id=promise,
                    entity_ids=[ana.id],
                    given_by_application=True,
                    created_at=WHEN,
                )
            ],
        )
    )
    kept = await memory.remember(
        RememberInput("Here it is, thanks for lending it.", created_at=WHEN).with_scene(
            Scene(at=WHEN, participants=[SceneParticipant(entity_id=ana.id)])
        )
    )
    plan = await memory.prepare(
        RememberDrafts(links=[LinkDraft(kept.observation_ids[0], Relation.FULFILLS_COMMITMENT, promise)])
    )
    [validation] = await memory.validate_plan(plan)
    assert validation.warnings == ()
