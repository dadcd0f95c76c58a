"""Which scene surfaces an episode gets, and how planning, rebuilds and check count them."""

from __future__ import annotations

from datetime import UTC, datetime

from charmem import Scene, SceneParticipant, SceneSetting
from charmem.domain.ids import MemoryId
from charmem.domain.model import Episode, Observation
from charmem.domain.plan import IndexEntry, RememberWritePlan
from charmem.domain.retrieval import CurrencyStatus
from charmem.domain.surfaces import VectorSurface, scene_surface_texts
from charmem.usecases.maintenance import current_index_entries
from charmem.usecases.planning import index_entries

AT = datetime(2024, 5, 8, 14, 0, tzinfo=UTC)
CONTENT, SETTING, PERSON = VectorSurface.CONTENT, VectorSurface.SETTING_WORDS, VectorSurface.PERSON_WORDS


def _episode(scene: Scene | None, summary: str = "We mended the sail.") -> Episode:
    return Episode(id=MemoryId.new(), occurred_at=AT, summary=summary, scene=scene, created_at=AT)


def test_setting_words_and_participants_words_each_get_a_surface() -> None:
    scene = Scene(
        at=AT,
        participants=(
            SceneParticipant(entity_id=MemoryId.new()),
            SceneParticipant(name="Mara", description="a tall woman"),
            SceneParticipant(description="a man with a deep voice"),
        ),
        setting=SceneSetting(key="harbour", words="a rainy harbour"),
    )
    assert scene_surface_texts(_episode(scene)) == {
        SETTING: "a rainy harbour",
        PERSON: "Mara\na tall woman\na man with a deep voice",
    }


def test_ids_keys_and_no_scene_give_no_surface() -> None:
    assert scene_surface_texts(_episode(None)) == {}
    only_keys = Scene(
        at=AT, participants=(SceneParticipant(entity_id=MemoryId.new()),), setting=SceneSetting(key="k")
    )
    assert scene_surface_texts(_episode(only_keys)) == {}


def test_surfaces_follow_the_content_entry_and_survive_an_echoed_summary() -> None:
    scene = Scene(
        at=AT, participants=(SceneParticipant(name="Mara"),), setting=SceneSetting(words="a kitchen")
    )
    episode = _episode(scene, summary="The kettle sang.")
    echo = Observation(
        id=MemoryId.new(), episode_id=episode.id, text="The kettle sang.", observed_at=AT, created_at=AT
    )
    planned = index_entries([episode, echo])
    assert [(e.id, e.surface) for e in planned] == [
        (episode.id, SETTING),
        (episode.id, PERSON),
        (echo.id, CONTENT),
    ]
    assert all(e.text != "The kettle sang." for e in planned if e.surface is not CONTENT)
    current = dict.fromkeys([episode.id, echo.id], CurrencyStatus.CURRENT)
    rebuilt, _ = current_index_entries([episode, echo], current)
    assert sorted(rebuilt, key=lambda e: (e.id, e.surface.value)) == sorted(
        planned, key=lambda e: (e.id, e.surface.value)
    )
    suppressed = {episode.id: CurrencyStatus.SUPPRESSED, echo.id: CurrencyStatus.CURRENT}
    assert [e.id for e in current_index_entries([episode, echo], suppressed)[0]] == [echo.id]


def test_a_plan_carries_each_entrys_surface_through_json() -> None:
    memory_id = MemoryId.new()
    entries = (
        IndexEntry(id=memory_id, object_type="episode", text="x"),
        IndexEntry(id=memory_id, object_type="episode", text="a kitchen", surface="setting_words"),
    )
    plan = RememberWritePlan(collection="c", prepared_at=AT, index_entries=entries)
    again = RememberWritePlan.from_json(plan.to_json())
    assert again.index_entries == entries and again.index_entries[1].surface is SETTING
