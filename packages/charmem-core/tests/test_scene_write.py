"""Scenes on write: time, ``involves`` links, the repeated-participant warning, serialisation."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import attrs
import pytest

from charmem import (
    CandidateValidationStatus,
    CharacterMemory,
    DraftValidationError,
    EntityDraft,
    Episode,
    EpisodeDraft,
    IdConflictError,
    MemoryId,
    PlanValidationError,
    Relation,
    RememberDrafts,
    RememberInput,
    RememberWritePlan,
    Scene,
    SceneParticipant,
    SceneSetting,
    ThreadDraft,
    ValidationWarning,
    WarningKind,
)
from charmem.admin import export_collection, import_collection
from charmem.domain.graph import GraphBatch
from charmem.domain.rules import canonical_content, content_equal
from charmem.domain.write_warnings import repeated_scene_participant
from charmem.testing import HashingEmbeddingProvider, ReferenceGraphStore, stores_of
from charmem_contract import reference_memory

PLUS_TWO = timezone(timedelta(hours=2))
AT = datetime(2026, 3, 4, 18, 30, tzinfo=PLUS_TWO)
RECORDED = datetime(2026, 3, 4, 17, 0, tzinfo=UTC)
EPISODE_ID = MemoryId("0b6f8f3e-3d2b-4c1e-9a57-2f6d1c0a9e11")
MARA_ID = MemoryId("5c3e2a10-7d4b-4f0e-8a1c-9b2d3e4f5a60")

#: The canonical content of this episode as charmem wrote it before episodes had scenes (computed
#: on the commit before the scene field): stored replays compare with it, so it must not change.
CANONICAL_BEFORE_SCENES = (
    '{"created_at": "2026-03-04T17:00:00+00:00", "id": "0b6f8f3e-3d2b-4c1e-9a57-2f6d1c0a9e11", '
    '"kind": "episode", "occurred_at": "2026-03-04T16:30:00+00:00", "participant_entity_ids": '
    '["5c3e2a10-7d4b-4f0e-8a1c-9b2d3e4f5a60"], "raw_ref": "r1", "salience": 0.7, '
    '"schema_version": 1, "summary": "Tea with Mara", "thread_ids": []}'
)
#: A plan of this episode as a format-2 writer wrote it (same origin).
PLAN_FORMAT_2 = (
    '{"collection": "c", "derived_links": [], "format_version": 2, "index_entries": [], "links": [], '
    '"objects": [{"created_at": "2026-03-04T17:00:00+00:00", "id": "0b6f8f3e-3d2b-4c1e-9a57-2f6d1c0a9e11", '
    '"kind": "episode", "occurred_at": "2026-03-04T18:30:00+02:00", "participant_entity_ids": '
    '["5c3e2a10-7d4b-4f0e-8a1c-9b2d3e4f5a60"], "raw_ref": "r1", "salience": 0.7, "schema_version": 1, '
    '"summary": "Tea with Mara", "thread_ids": []}], "prepared_at": "2026-03-04T17:00:00+00:00"}'
)


def _episode(scene: Scene | None = None) -> Episode:
    return Episode(
        id=EPISODE_ID,
        occurred_at=AT,
        summary="Tea with Mara",
        participant_entity_ids=[MARA_ID],
        raw_ref="r1",
        salience=0.7,
        created_at=RECORDED,
        scene=scene,
    )


def _scene(*participants: SceneParticipant, at: datetime = AT) -> Scene:
    return Scene(
        at=at,
        participants=participants or (SceneParticipant(entity_id=MARA_ID), SceneParticipant(name="Jonas")),
        setting=SceneSetting(key="kitchen", words="a small kitchen, rain on the window"),
        custom_values={"activity": "tea", "mood": "quiet"},
    )


# --- time: the scene's at is the episode's occurred_at -------------------------------------------


def test_a_draft_without_occurred_at_takes_the_scene_time_with_its_offset() -> None:
    scene = _scene()
    for occurred in (
        EpisodeDraft(scene=scene).occurred_at,
        RememberInput("hi").with_scene(scene).occurred_at,
    ):
        assert occurred == AT and occurred is not None and occurred.utcoffset() == timedelta(hours=2)
    assert EpisodeDraft(scene=scene, occurred_at=AT).occurred_at == AT  # both given, agreeing


@pytest.mark.parametrize(
    "occurred",
    [AT + timedelta(minutes=1), AT.astimezone(UTC)],  # another instant; the same instant, another offset
    ids=["instant", "offset"],
)
def test_a_disagreeing_time_is_refused_naming_both(occurred: datetime) -> None:
    scene = _scene()
    attempts = [
        lambda: EpisodeDraft(scene=scene, occurred_at=occurred),
        lambda: RememberInput("hi", occurred_at=occurred, scene=scene),
        lambda: RememberInput("hi", occurred_at=occurred).with_scene(scene),
        lambda: attrs.evolve(EpisodeDraft(scene=scene), occurred_at=occurred),
        lambda: attrs.evolve(RememberInput("hi", occurred_at=occurred), scene=scene),
        lambda: attrs.evolve(_episode(scene), occurred_at=occurred),
    ]
    for attempt in attempts:
        with pytest.raises(DraftValidationError) as caught:
            attempt()
        assert occurred.isoformat() in str(caught.value) and AT.isoformat() in str(caught.value)


def test_a_new_scene_moves_a_time_that_came_with_the_old_one() -> None:
    later = AT + timedelta(days=1)
    moved = RememberInput("hi").with_scene(_scene()).with_scene(_scene(at=later))
    assert moved.occurred_at == later and moved.scene is not None and moved.scene.at == later
    with pytest.raises(DraftValidationError):  # a time of the draft's own is kept, and checked
        attrs.evolve(EpisodeDraft(scene=_scene()), scene=_scene(at=later))


def test_a_hand_edited_plan_with_a_disagreeing_time_is_refused() -> None:
    plan = RememberWritePlan(collection="c", prepared_at=RECORDED, objects=(_episode(_scene()),))
    edited = json.loads(plan.to_json())
    edited["objects"][0]["occurred_at"] = "2026-03-04T16:30:00+00:00"  # same instant, offset lost
    with pytest.raises(DraftValidationError) as caught:
        RememberWritePlan.from_json(json.dumps(edited))
    assert "2026-03-04T16:30:00+00:00" in str(caught.value) and AT.isoformat() in str(caught.value)


# --- planning: participants by id are involved ---------------------------------------------------


async def _notions(memory: CharacterMemory, count: int) -> list[MemoryId]:
    ids = [MemoryId.new() for _ in range(count)]
    await memory.remember(RememberDrafts(entities=[EntityDraft(id=i, entity_type="person") for i in ids]))
    return ids


async def test_participants_by_id_are_involved_once_each(memory: CharacterMemory) -> None:
    ana, ben, cleo = await _notions(memory, 3)
    scene = _scene(
        SceneParticipant(entity_id=ana, name="Ana"),
        SceneParticipant(entity_id=cleo),
        SceneParticipant(name="Dora"),
        SceneParticipant(description="a man with a deep voice"),
    )
    item = RememberInput("We had tea.", participant_entity_ids=[ana], speaker_entity_id=ben).with_scene(scene)
    plan = await memory.prepare(item)
    [episode] = [o for o in plan.objects if isinstance(o, Episode)]
    involved = [link.to_id for link in plan.derived_links if link.relation is Relation.INVOLVES]
    assert sorted(involved) == sorted([ana, ben, cleo])
    assert all(
        link.from_id == episode.id for link in plan.derived_links if link.relation is Relation.INVOLVES
    )
    assert episode.participant_entity_ids == tuple(sorted([ana, ben]))  # stored as given
    assert episode.involved_entity_ids == tuple(sorted([ana, ben, cleo]))
    outcome = await memory.commit(plan)
    assert outcome.warnings == ()
    stored = await stores_of(memory).graph.links_of([episode.id], relations=[Relation.INVOLVES])
    assert sorted(link.to_id for link in stored) == sorted([ana, ben, cleo])


async def test_a_scene_participant_must_be_a_notion(memory: CharacterMemory) -> None:
    thread = MemoryId.new()
    await memory.remember(RememberDrafts(threads=[ThreadDraft(id=thread, title="chess")]))
    unknown = MemoryId.new()
    for wrong, why in (
        (unknown, "is neither in the plan nor stored"),
        (thread, "is a thread, not an entity"),
    ):
        plan = await memory.prepare(RememberInput("hi").with_scene(_scene(SceneParticipant(entity_id=wrong))))
        [validation, *_] = await memory.validate_plan(plan)
        assert validation.status is CandidateValidationStatus.INVALID
        assert validation.reasons == (f"scene participant {wrong} {why}",)
        with pytest.raises(PlanValidationError):
            await memory.commit(plan)
    planned = MemoryId.new()  # a notion planned in the same write is fine
    await memory.remember(
        RememberDrafts(
            entities=[EntityDraft(id=planned)],
            episodes=[EpisodeDraft(scene=_scene(SceneParticipant(entity_id=planned)))],
        )
    )


# --- the repeated-participant warning ------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (SceneParticipant(entity_id=MARA_ID), SceneParticipant(entity_id=MARA_ID, name="Mara")),
        (SceneParticipant(name="Mara  Lind"), SceneParticipant(name=" MARA lind")),
        (SceneParticipant(name="Ｍａｒａ"), SceneParticipant(name="mara")),  # NFKC: full-width letters
        (
            SceneParticipant(description="A man, deep voice"),
            SceneParticipant(description="a man,  deep VOICE"),
        ),
        (SceneParticipant(entity_id=MARA_ID, name="Mara"), SceneParticipant(name="mara", description="tall")),
    ],
    ids=["entity_id", "name", "name-width", "description", "mixed"],
)
def test_a_participant_listed_twice_warns(first: SceneParticipant, second: SceneParticipant) -> None:
    episode = _episode(_scene(first, SceneParticipant(name="Jonas"), second))
    assert repeated_scene_participant(episode) == ValidationWarning(
        WarningKind.REPEATED_SCENE_PARTICIPANT, (EPISODE_ID,)
    )


def test_distinct_participants_do_not_warn() -> None:
    distinct = _scene(
        SceneParticipant(entity_id=MARA_ID, name="Mara"),
        SceneParticipant(name="Mara Lind"),  # another name
        SceneParticipant(description="Mara"),  # a name and a description are not compared
        SceneParticipant(entity_id=MemoryId.new()),
    )
    assert repeated_scene_participant(_episode(distinct)) is None
    assert repeated_scene_participant(_episode()) is None


async def test_the_warning_never_refuses_the_write(memory: CharacterMemory) -> None:
    [ana] = await _notions(memory, 1)
    twice = _scene(SceneParticipant(entity_id=ana), SceneParticipant(entity_id=ana, name="Ana"))
    plan = await memory.prepare(RememberInput("hello again", episode_id=EPISODE_ID).with_scene(twice))
    expected = ValidationWarning(WarningKind.REPEATED_SCENE_PARTICIPANT, (EPISODE_ID,))
    [episode_check, *_] = await memory.validate_plan(plan)
    assert episode_check.status is CandidateValidationStatus.VALID and episode_check.warnings == (expected,)
    outcome = await memory.commit(plan)
    assert outcome.warnings == (expected,) and outcome.episode_ids == (EPISODE_ID,)
    assert "lists one participant twice" in str(expected) and str(EPISODE_ID) in str(expected)
    involved = await stores_of(memory).graph.links_of([EPISODE_ID], relations=[Relation.INVOLVES])
    assert [link.to_id for link in involved] == [ana]


# --- serialisation -------------------------------------------------------------------------------


def test_an_episode_without_a_scene_keeps_its_canonical_content() -> None:
    assert canonical_content(_episode()) == CANONICAL_BEFORE_SCENES


def test_the_canonical_content_of_a_scene() -> None:
    data = json.loads(canonical_content(_episode(_scene())))
    assert data["scene"] == {
        "at": "2026-03-04T16:30:00+00:00",  # an instant, normalised like the others
        "participants": [
            {"entity_id": str(MARA_ID), "name": None, "description": None},
            {"entity_id": None, "name": "Jonas", "description": None},
        ],
        "setting": {"key": "kitchen", "words": "a small kitchen, rain on the window"},
        "custom_values": {"activity": "tea", "mood": "quiet"},
    }
    assert {k: v for k, v in data.items() if k != "scene"} == json.loads(CANONICAL_BEFORE_SCENES)
    swapped = _scene(SceneParticipant(name="Jonas"), SceneParticipant(entity_id=MARA_ID))
    assert not content_equal(_episode(_scene()), _episode(swapped))  # participants keep their order
    assert not content_equal(_episode(_scene()), _episode())
    assert content_equal(_episode(_scene()), _episode(_scene()))


def test_plan_json_keeps_a_scene_exactly() -> None:
    episode = _episode(_scene())
    plan = RememberWritePlan(collection="c", prepared_at=RECORDED, objects=(episode, _episode()))
    data = json.loads(plan.to_json())
    assert data["format_version"] == 3
    assert data["objects"][0]["scene"]["at"] == "2026-03-04T18:30:00+02:00"
    assert "scene" not in data["objects"][1]  # an episode without a scene writes no key
    loaded = RememberWritePlan.from_json(plan.to_json())
    assert loaded == plan
    scene = loaded.objects[0].scene  # type: ignore[union-attr]
    assert scene is not None and scene.at.utcoffset() == timedelta(hours=2)
    with pytest.raises(TypeError):
        scene.custom_values["mood"] = "loud"  # type: ignore[index]


def test_plans_of_formats_1_and_2_still_load() -> None:
    expected = RememberWritePlan(collection="c", prepared_at=RECORDED, objects=(_episode(),))
    assert RememberWritePlan.from_json(PLAN_FORMAT_2) == expected
    assert RememberWritePlan.from_json(
        PLAN_FORMAT_2.replace('"format_version": 2', '"format_version": 1')
    ) == (expected)


def test_a_hand_edited_custom_value_must_be_text() -> None:
    plan = RememberWritePlan(collection="c", prepared_at=RECORDED, objects=(_episode(_scene()),))
    edited = json.loads(plan.to_json())
    edited["objects"][0]["scene"]["custom_values"]["mood"] = 5
    with pytest.raises(DraftValidationError, match="custom_values"):
        RememberWritePlan.from_json(json.dumps(edited))


async def test_the_reference_store_dumps_and_loads_a_scene_exactly() -> None:
    source = ReferenceGraphStore("c")
    plan = RememberWritePlan(collection="c", prepared_at=RECORDED, objects=(_episode(_scene()),))
    await source.write_batch(GraphBatch(objects=plan.objects))
    dump = io.BytesIO()
    await source.export_graph(dump)
    target = ReferenceGraphStore("c")
    await target.import_graph(io.BytesIO(dump.getvalue()), "application/vnd.charmem.reference+jsonl")
    assert await target.get_objects([EPISODE_ID]) == {EPISODE_ID: _episode(_scene())}


# --- the facade: remember with a scene, read it back ---------------------------------------------


async def test_remember_with_a_scene_and_read_it_back(memory: CharacterMemory, tmp_path: Path) -> None:
    [mara] = await _notions(memory, 1)
    scene = Scene(
        at=AT,
        participants=[
            SceneParticipant(entity_id=mara, name="Mara"),
            SceneParticipant(description="her cousin"),
        ],
        setting=SceneSetting(words="the garden"),
        custom_values={"activity": "tea"},
    )
    outcome = await memory.remember(
        RememberInput("Mara brought lemon cake.", episode_id=EPISODE_ID).with_scene(scene)
    )
    [episode_id] = outcome.episode_ids
    stored = (await stores_of(memory).graph.get_objects([episode_id]))[episode_id]
    assert isinstance(stored, Episode) and stored.scene == scene and stored.occurred_at == AT
    assert stored.scene.at.utcoffset() == timedelta(hours=2)
    replay = await memory.remember(
        RememberInput("Mara brought lemon cake.", episode_id=EPISODE_ID).with_scene(scene)
    )
    assert (
        replay.warnings
        and replay.warnings[0].kind is WarningKind.ALREADY_STORED
        and episode_id in (replay.warnings[0].ids)
    )
    await export_collection(memory, tmp_path / "backup")
    restored = reference_memory("test", HashingEmbeddingProvider())
    try:
        await import_collection(restored, tmp_path / "backup")
        assert (await stores_of(restored).graph.get_objects([episode_id]))[episode_id] == stored
    finally:
        await restored.close()


async def test_a_replay_with_another_scene_is_an_id_conflict(memory: CharacterMemory) -> None:
    first = RememberInput("We played chess.", episode_id=EPISODE_ID)
    await memory.remember(first.with_scene(_scene(SceneParticipant(name="Jonas"))))
    with pytest.raises(IdConflictError, match="different scene"):
        await memory.remember(first.with_scene(_scene(SceneParticipant(name="Jonas", description="tall"))))
