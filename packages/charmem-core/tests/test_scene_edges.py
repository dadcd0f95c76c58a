"""Scene recall at its edges: forgotten occasions, settlements after the scene, as_of, back-fills."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from charmem import (
    Actor,
    AdmissionRoad,
    BeliefAssertion,
    CharacterMemory,
    Counterpart,
    DerivedMemoryDraft,
    DerivedType,
    DraftValidationError,
    EntityDraft,
    EpisodeDraft,
    ForgetMemoryDraft,
    KnownAs,
    LinkDraft,
    MemoryId,
    Relation,
    RememberDrafts,
    RememberInput,
    RetrievalContext,
    Scene,
    SceneParticipant,
    SceneSetting,
)

DAY = timedelta(days=1)
MARCH = datetime(2024, 3, 1, 18, tzinfo=UTC)
NOA = MemoryId.deterministic("scene-edges", "noa")


async def noa(memory: CharacterMemory) -> None:
    await memory.remember(
        RememberDrafts(entities=[EntityDraft(id=NOA, entity_type="person", created_at=MARCH - DAY)])
    )


async def walk(memory: CharacterMemory, n: int) -> MemoryId:
    at = MARCH + n * DAY
    scene = Scene(at=at, participants=[SceneParticipant(entity_id=NOA)], setting=SceneSetting(key="river"))
    outcome = await memory.remember(RememberInput(f"Walk {n} with Noa.", created_at=at).with_scene(scene))
    return outcome.episode_ids[0]


def texts(pack: object) -> set[str]:
    return {item.text for item in pack.items}  # type: ignore[attr-defined]


async def test_forgetting_the_latest_occasions_never_hides_the_earlier_ones(memory: CharacterMemory) -> None:
    await noa(memory)
    episodes = [await walk(memory, n) for n in range(10)]
    for episode in episodes[4:]:
        await memory.forget(
            ForgetMemoryDraft(target_id=episode, rationale="forget", recorded_at=MARCH + 20 * DAY)
        )
    at = MARCH + 12 * DAY

    by_person = await memory.retrieve(
        RetrievalContext(scene=Scene(at=at, participants=[SceneParticipant(entity_id=NOA)]))
    )
    by_place = await memory.retrieve(RetrievalContext(scene=Scene(at=at, setting=SceneSetting(key="river"))))
    by_range = await memory.retrieve(RetrievalContext(scene=Scene(at=at), time_range=(MARCH, at)))

    kept = {f"Walk {n} with Noa." for n in range(4)}
    for pack in (by_person, by_place, by_range):
        assert kept <= texts(pack) and not texts(pack) & {f"Walk {n} with Noa." for n in range(4, 10)}
    assert [li.last_met_at for li in by_person.last_interactions] == [MARCH + 3 * DAY]


async def test_a_settlement_after_the_scene_leaves_the_promise_open_on_the_scenes_day(
    memory: CharacterMemory,
) -> None:
    await noa(memory)
    promise = MemoryId.deterministic("scene-edges", "umbrella")
    await memory.remember(
        RememberInput("I borrowed Noa's umbrella.", occurred_at=MARCH, created_at=MARCH).with_derived_memory(
            DerivedMemoryDraft(
                DerivedType.COMMITMENT,
                "Return Noa's umbrella.",
                id=promise,
                entity_ids=[NOA],
                assertions=[BeliefAssertion(NOA, Counterpart())],
            )
        )
    )
    kept = await memory.remember(
        RememberInput(
            "I gave Noa her umbrella back.", occurred_at=MARCH + 9 * DAY, created_at=MARCH + 9 * DAY
        )
    )
    await memory.link(LinkDraft(kept.object_ids[0], Relation.FULFILLS_COMMITMENT, promise))

    def scene(day: int) -> RetrievalContext:
        return RetrievalContext(
            scene=Scene(at=MARCH + day * DAY, participants=[SceneParticipant(entity_id=NOA)])
        )

    before, after = await memory.retrieve(scene(4)), await memory.retrieve(scene(10))

    [open_promise] = [i for i in before.items if i.id == promise]
    assert open_promise.resolved_by == () and promise in before.sections["commitments"]
    [settled] = [i for i in after.items if i.id == promise]
    assert settled.resolved_by and promise not in after.sections.get("commitments", ())


async def test_with_as_of_a_meeting_recorded_later_is_not_a_meeting(memory: CharacterMemory) -> None:
    await noa(memory)
    late = MARCH + 60 * DAY
    scene = Scene(at=MARCH + 11 * DAY, participants=[SceneParticipant(entity_id=NOA)])
    await memory.remember(
        RememberInput("Noa and I fed the ducks.", created_at=late).with_scene(
            attrs_at(scene, MARCH + 10 * DAY)
        )
    )

    then = await memory.retrieve(RetrievalContext(scene=scene, as_of=MARCH + 50 * DAY))
    now = await memory.retrieve(RetrievalContext(scene=scene))

    assert [li.last_met_at for li in then.last_interactions] == [None] and then.items == ()
    assert [li.last_met_at for li in now.last_interactions] == [MARCH + 10 * DAY]


def attrs_at(scene: Scene, at: datetime) -> Scene:
    import attrs

    return attrs.evolve(scene, at=at)


async def test_a_back_filled_input_records_its_beliefs_then(memory: CharacterMemory) -> None:
    await noa(memory)
    past = MARCH + 2 * DAY
    me = MemoryId.deterministic("scene-edges", "me")
    await memory.remember(
        RememberDrafts(entities=[EntityDraft(id=me, entity_type="person", created_at=MARCH)])
    )
    entry = RememberInput("I promised Noa to fix her bike.", created_at=past).with_scene(
        Scene(at=past, participants=[SceneParticipant(entity_id=NOA)])
    )
    await memory.remember(
        entry.with_derived_memory(
            DerivedMemoryDraft(
                DerivedType.COMMITMENT,
                "Fix Noa's bike.",
                entity_ids=[NOA, me],
                assertions=[BeliefAssertion(me, Actor()), BeliefAssertion(NOA, Counterpart())],
            )
        )
    )
    pack = await memory.retrieve(
        RetrievalContext(scene=Scene(at=past + DAY, participants=[SceneParticipant(entity_id=NOA)]))
    )
    assert "Fix Noa's bike." in texts(pack)


async def test_a_leap_days_anniversary_comes_on_the_28th_in_other_years(memory: CharacterMemory) -> None:
    leap = datetime(2024, 2, 29, 12, tzinfo=UTC)
    await memory.remember(
        RememberInput("We skated on the frozen lake.", created_at=leap).with_scene(Scene(at=leap))
    )
    pack = await memory.retrieve(RetrievalContext(scene=Scene(at=datetime(2025, 2, 28, 12, tzinfo=UTC))))
    [item] = [i for i in pack.items if i.text == "We skated on the frozen lake."]
    assert AdmissionRoad.ANNIVERSARY in item.admitted_by


async def test_an_activity_that_is_no_thread_or_loop_is_refused_saying_so(memory: CharacterMemory) -> None:
    with pytest.raises(DraftValidationError, match="names no stored thread or open loop"):
        await memory.retrieve(RetrievalContext(activity=MemoryId.new()))


async def test_an_episode_summary_given_as_none_is_no_summary(memory: CharacterMemory) -> None:
    outcome = await memory.remember(RememberDrafts(episodes=[EpisodeDraft(summary=None, occurred_at=MARCH)]))  # type: ignore[arg-type]
    assert outcome.episode_ids


async def named(memory: CharacterMemory, key: str, name: str, at: datetime) -> MemoryId:
    notion = MemoryId.deterministic("scene-edges", key)
    await memory.remember(
        RememberDrafts(
            entities=[EntityDraft(id=notion, entity_type="person", created_at=at)],
            derived=[
                DerivedMemoryDraft(
                    DerivedType.RELATIONSHIP_NOTE,
                    f"This is {name} ({key}).",
                    id=MemoryId.deterministic("scene-edges", key, name),
                    entity_ids=[notion],
                    assertions=[BeliefAssertion(notion, KnownAs(name))],
                    given_by_application=True,
                    created_at=at,
                )
            ],
        )
    )
    return notion


async def test_a_meeting_listed_by_name_stays_theirs_when_someone_takes_the_name_later(
    memory: CharacterMemory,
) -> None:
    bea = await named(memory, "bea", "Bea", MARCH - DAY)
    heard = Scene(at=MARCH, participants=[SceneParticipant(name="Bea")])
    await memory.remember(RememberInput("Bea lent me a drill.", created_at=MARCH).with_scene(heard))
    await named(memory, "carl", "Bea", MARCH + 5 * DAY)  # another person, later known as Bea too

    pack = await memory.retrieve(
        RetrievalContext(scene=Scene(at=MARCH + 10 * DAY, participants=[SceneParticipant(entity_id=bea)]))
    )

    assert [li.last_met_at for li in pack.last_interactions] == [MARCH]
    [drill] = [i for i in pack.items if i.text == "Bea lent me a drill."]
    assert AdmissionRoad.PARTICIPANT in drill.admitted_by


async def test_an_open_promise_to_the_person_present_leads_even_with_a_query(memory: CharacterMemory) -> None:
    await noa(memory)
    for n in range(6):
        await memory.remember(
            RememberDrafts(
                derived=[
                    DerivedMemoryDraft(
                        DerivedType.RELATIONSHIP_NOTE,
                        f"Noa enjoys jazz record number {n}.",
                        entity_ids=[NOA],
                        given_by_application=True,
                        created_at=MARCH + n * DAY,
                    )
                ]
            )
        )
    promise = MemoryId.deterministic("scene-edges", "ladder")
    await memory.remember(
        RememberDrafts(
            derived=[
                DerivedMemoryDraft(
                    DerivedType.OPEN_LOOP,
                    "I still have to return Noa's ladder.",
                    id=promise,
                    entity_ids=[NOA],
                    assertions=[BeliefAssertion(NOA, Counterpart())],
                    given_by_application=True,
                    created_at=MARCH - DAY,
                )
            ]
        )
    )
    scene = Scene(at=MARCH + 10 * DAY, participants=[SceneParticipant(entity_id=NOA)])
    pack = await memory.retrieve(RetrievalContext(query="What about Noa?", scene=scene, trace=True))

    beliefs_about_noa = [i.id for i in pack.items if NOA in i.entity_ids]
    assert beliefs_about_noa[0] == promise
    [item] = [i for i in pack.items if i.id == promise]
    assert item.trace is not None and ("obligation", 1.5) in item.trace.factors
