"""Scene recall on the reference stack: roads, the reference time, resolutions, last meetings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import attrs
import pytest

from charmem import (
    AdmissionRoad,
    BeliefAssertion,
    CharacterMemory,
    DerivedMemoryDraft,
    DerivedType,
    DraftValidationError,
    EntityDraft,
    ForgetMemoryDraft,
    KnownAs,
    MemoryId,
    RememberDrafts,
    RememberInput,
    RetrievalContext,
    Scene,
    SceneParticipant,
    SceneResolutionStatus,
    SceneSetting,
)

DAY = timedelta(days=1)
START = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


async def person(memory: CharacterMemory, key: str, name: str) -> MemoryId:
    notion = MemoryId.deterministic("scene-recall", key)
    await memory.remember(
        RememberDrafts(
            entities=[EntityDraft(id=notion, entity_type="person", created_at=START - DAY)],
            derived=[
                DerivedMemoryDraft(
                    DerivedType.RELATIONSHIP_NOTE,
                    f"I know them as {name}.",
                    entity_ids=[notion],
                    assertions=[BeliefAssertion(notion, KnownAs(name))],
                    given_by_application=True,
                    created_at=START - DAY,
                )
            ],
        )
    )
    return notion


async def visit(
    memory: CharacterMemory, text: str, at: datetime, who: MemoryId, setting: str | None = None
) -> MemoryId:
    scene = Scene(
        at=at,
        participants=[SceneParticipant(entity_id=who)],
        setting=SceneSetting(key=setting) if setting else None,
    )
    episode = MemoryId.deterministic("scene-recall", "episode", text)
    await memory.remember(
        RememberInput(
            text, episode_id=episode, occurred_at=at, participant_entity_ids=[who], created_at=at
        ).with_scene(scene)
    )
    return episode


def ids_in(pack: object) -> set[MemoryId]:
    return {item.id for item in pack.items}  # type: ignore[attr-defined]


def texts(pack: object) -> list[str]:
    return [item.text for item in pack.items]  # type: ignore[attr-defined]


async def test_a_scene_with_no_topic_recalls_the_participants_occasions_and_no_later_ones(
    memory: CharacterMemory,
) -> None:
    ann = await person(memory, "ann", "Ann")
    bob = await person(memory, "bob", "Bob")
    await visit(memory, "Ann brought sourdough bread.", START, ann, "kitchen")
    await visit(memory, "Bob fixed the garden gate.", START + DAY, bob, "garden")
    await visit(memory, "Ann planted tomatoes with me.", START + 2 * DAY, ann, "garden")
    await visit(memory, "Ann came back with a cake.", START + 5 * DAY, ann, "kitchen")

    scene = Scene(at=START + 3 * DAY, participants=[SceneParticipant(name="ann")])
    pack = await memory.retrieve(RetrievalContext(scene=scene))

    found = texts(pack)
    assert "Ann brought sourdough bread." in found
    assert "Ann planted tomatoes with me." in found
    assert "Ann came back with a cake." not in found  # after the scene's time
    assert pack.query is None
    [resolution] = pack.scene_resolutions
    assert resolution.status is SceneResolutionStatus.RESOLVED and resolution.entity_ids == (ann,)
    [last] = pack.last_interactions
    assert last.entity_id == ann
    assert last.last_met_at == START + 2 * DAY
    assert last.elapsed == DAY
    by_text = {item.text: item for item in pack.items}
    assert AdmissionRoad.PARTICIPANT in by_text["Ann planted tomatoes with me."].admitted_by
    assert all(item.occurred_at <= scene.at for item in pack.items)


async def test_a_setting_key_recalls_what_happened_there(memory: CharacterMemory) -> None:
    ann = await person(memory, "ann", "Ann")
    bob = await person(memory, "bob", "Bob")
    await visit(memory, "Bob fixed the garden gate.", START, bob, "garden")
    await visit(memory, "Ann read a book in the kitchen.", START + DAY, ann, "kitchen")

    scene = Scene(at=START + 3 * DAY, setting=SceneSetting(key="garden"))
    pack = await memory.retrieve(RetrievalContext(scene=scene))

    by_text = {item.text: item for item in pack.items}
    assert AdmissionRoad.PLACE in by_text["Bob fixed the garden gate."].admitted_by
    kitchen = by_text.get("Ann read a book in the kitchen.")
    assert kitchen is None or AdmissionRoad.PLACE not in kitchen.admitted_by
    assert pack.scene_resolutions == () and pack.last_interactions == ()


async def test_names_resolve_to_every_notion_known_by_them_or_to_none(memory: CharacterMemory) -> None:
    first = await person(memory, "alex-1", "Alex")
    second = await person(memory, "alex-2", "ALEX")
    await visit(memory, "Alex taught me a climbing knot.", START, first)
    await visit(memory, "Alex played piano upstairs.", START + DAY, second)

    scene = Scene(
        at=START + 2 * DAY,
        participants=[
            SceneParticipant(name="alex"),
            SceneParticipant(name="Zed"),
            SceneParticipant(description="a tall man"),
        ],
    )
    pack = await memory.retrieve(RetrievalContext(scene=scene))

    statuses = [(r.participant_index, r.status, r.entity_ids) for r in pack.scene_resolutions]
    assert statuses == [
        (0, SceneResolutionStatus.AMBIGUOUS, tuple(sorted((first, second)))),
        (1, SceneResolutionStatus.UNKNOWN, ()),
        (2, SceneResolutionStatus.UNKNOWN, ()),
    ]
    met = {li.entity_id: li.last_met_at for li in pack.last_interactions}
    assert met == {first: START, second: START + DAY}
    assert {"Alex taught me a climbing knot.", "Alex played piano upstairs."} <= set(texts(pack))


async def test_a_forgotten_occasion_is_neither_recalled_nor_the_last_meeting(memory: CharacterMemory) -> None:
    bob = await person(memory, "bob", "Bob")
    await visit(memory, "Bob brought plum jam.", START, bob)
    quarrel = await visit(memory, "Bob shouted at me about the noise.", START + DAY, bob)
    await memory.forget(
        ForgetMemoryDraft(target_id=quarrel, rationale="asked to forget", recorded_at=START + 2 * DAY)
    )

    pack = await memory.retrieve(
        RetrievalContext(scene=Scene(at=START + 3 * DAY, participants=[SceneParticipant(entity_id=bob)]))
    )

    assert "Bob shouted at me about the noise." not in texts(pack)
    assert "Bob brought plum jam." in texts(pack)
    [last] = pack.last_interactions
    assert last.last_met_at == START


async def test_someone_never_met_has_no_last_meeting(memory: CharacterMemory) -> None:
    dana = await person(memory, "dana", "Dana")
    pack = await memory.retrieve(
        RetrievalContext(scene=Scene(at=START, participants=[SceneParticipant(name="Dana")]))
    )
    [last] = pack.last_interactions
    assert (last.entity_id, last.last_met_at, last.elapsed) == (dana, None, None)


def test_a_context_needs_something_to_recall_from() -> None:
    with pytest.raises(DraftValidationError, match="query, a scene, an activity or a time_range"):
        RetrievalContext()
    with pytest.raises(DraftValidationError, match="starts after it ends"):
        RetrievalContext(time_range=(START + DAY, START))


async def test_a_trace_explains_each_score_and_changes_nothing_else(memory: CharacterMemory) -> None:
    ann = await person(memory, "ann", "Ann")
    await visit(memory, "Ann brought sourdough bread.", START, ann, "kitchen")
    await visit(memory, "Ann planted tomatoes with me.", START + DAY, ann, "garden")
    await memory.remember(RememberInput("The sourdough starter needs feeding.", occurred_at=START + DAY))
    scene = Scene(
        at=START + 3 * DAY, participants=[SceneParticipant(name="Ann")], setting=SceneSetting(key="kitchen")
    )

    for context in (
        RetrievalContext(scene=scene, query="sourdough", recency=timedelta(days=2)),
        RetrievalContext(query="sourdough bread"),
    ):
        plain = await memory.retrieve(context)
        traced = await memory.retrieve(attrs.evolve(context, trace=True))
        assert [attrs.evolve(item, trace=None) for item in traced.items] == list(plain.items)
        assert all(item.trace is None for item in plain.items)
        for item in traced.items:
            trace = item.trace
            assert trace is not None
            assert tuple(road for road, _score in trace.road_scores) == item.admitted_by
            assert trace.combined >= max(score for _road, score in trace.road_scores)
            expected = trace.combined
            for _name, factor in trace.factors:
                expected *= factor
            assert item.score == pytest.approx(expected)
            assert set(trace.cues) == set(item.signals)
        assert traced.to_dict()["items"][0]["trace"]["cues"] == list(traced.items[0].signals)


async def test_the_last_meeting_looks_past_forgotten_ones_and_counts_scenes_listing_the_name(
    memory: CharacterMemory,
) -> None:
    bob = await person(memory, "bob", "Bob")
    await visit(memory, "Bob and I walked the dog.", START, bob)
    for n in range(8):
        quarrel = await visit(memory, f"Bob and I argued, time {n}.", START + (n + 1) * DAY, bob)
        await memory.forget(
            ForgetMemoryDraft(target_id=quarrel, rationale="asked to", recorded_at=START + 20 * DAY)
        )
    pack = await memory.retrieve(
        RetrievalContext(scene=Scene(at=START + 30 * DAY, participants=[SceneParticipant(entity_id=bob)]))
    )
    assert [li.last_met_at for li in pack.last_interactions] == [START]

    by_name = Scene(at=START + 25 * DAY, participants=[SceneParticipant(name="bob")])
    await memory.remember(
        RememberInput("Bob waved from the bus.", created_at=START + 25 * DAY).with_scene(by_name)
    )
    pack = await memory.retrieve(
        RetrievalContext(scene=Scene(at=START + 30 * DAY, participants=[SceneParticipant(entity_id=bob)]))
    )
    assert [li.last_met_at for li in pack.last_interactions] == [START + 25 * DAY]
    assert "Bob waved from the bus." in texts(pack)


async def test_with_a_query_the_topic_keeps_its_weight_beside_the_scene(memory: CharacterMemory) -> None:
    ann = await person(memory, "ann", "Ann")
    for n in range(5):
        await visit(memory, f"Ann talked about her garden, day {n}.", START + n * DAY, ann, "kitchen")
    await memory.remember(RememberInput("The violin lesson moved to Thursday.", occurred_at=START + DAY))

    scene = Scene(
        at=START + 10 * DAY,
        participants=[SceneParticipant(entity_id=ann)],
        setting=SceneSetting(key="kitchen"),
    )
    pack = await memory.retrieve(RetrievalContext(query="When is the violin lesson?", scene=scene))

    assert pack.items[0].text == "The violin lesson moved to Thursday."
    assert pack.items[0].admitted_by == (AdmissionRoad.TOPIC,)
