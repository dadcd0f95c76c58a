"""An episode's scene surfaces on whole stacks: written, checked, rebuilt, forgotten.

The embedded stack (Oxigraph + Qdrant Edge + SQLite) and the reference stack (in-memory stores)
remember an episode whose scene has setting words and participants' words: each becomes a point
of its own surface beside the content point, ``check`` counts every surface, forgetting the
episode removes them all, and a shard of the older schema (simulated through its marker) is
dropped and rebuilt from the graph when the collection opens, with progress reported.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import attrs
import pytest

from charmem import (
    CharacterMemory,
    EpisodeDraft,
    ForgetMemoryDraft,
    MemoryId,
    ObservationDraft,
    RememberDrafts,
    Scene,
    SceneParticipant,
    SceneSetting,
    Settings,
)
from charmem.admin import check, repair
from charmem.domain.model import Episode, ObjectType
from charmem.domain.plan import RememberWritePlan
from charmem.errors import StoreLayoutError
from charmem.ports import VectorPoint, VectorQuery, VectorSurface
from charmem.testing import HashingEmbeddingProvider, stores_of
from charmem.usecases.planning import index_entries
from charmem_qdrant import MARKER_FILE_NAME, SCHEMA_VERSION, EdgeVectorIndex

AT = datetime(2024, 5, 8, 14, 0, tzinfo=UTC)
SCENE = Scene(
    at=AT,
    participants=(
        SceneParticipant(name="Mara", description="a tall woman with a red scarf"),
        SceneParticipant(description="a man with a deep voice"),
    ),
    setting=SceneSetting(key="harbour", words="a rainy harbour at dusk"),
)
SETTING, PERSON = VectorSurface.SETTING_WORDS, VectorSurface.PERSON_WORDS


def _embedded(root: Path) -> Settings:
    return Settings.from_mapping(
        {
            "GRAPH_STORE_MODE": "persistent",
            "OXIGRAPH_PATH": str(root / "oxigraph"),
            "VECTOR_STORE_MODE": "embedded",
            "VECTOR_STORE_PATH": str(root / "vectors"),
            "RETRIEVAL_STATS_STORE_MODE": "sqlite",
            "RETRIEVAL_STATS_PATH": str(root / "stats.sqlite3"),
            "EMBEDDING_PROVIDER": "hashing",
        }
    )


REFERENCE = Settings.from_mapping(
    {
        "GRAPH_STORE_MODE": "in_memory",
        "VECTOR_STORE_MODE": "in_memory",
        "RETRIEVAL_STATS_STORE_MODE": "in_memory",
        "EMBEDDING_PROVIDER": "hashing",
    }
)


@pytest.fixture(params=["embedded", "reference"])
async def stack(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[Settings, CharacterMemory]]:
    settings = _embedded(tmp_path) if request.param == "embedded" else REFERENCE
    memory = await CharacterMemory.open(settings, "scenes", embedding_provider=HashingEmbeddingProvider())
    try:
        yield settings, memory
    finally:
        await memory.close()


async def _scene_plan(memory: CharacterMemory) -> RememberWritePlan:
    """A plan of an episode with :data:`SCENE` (and an observation), its index entries planned from it.

    The plan's episode is given its scene here, so this test does not depend on how a draft's
    scene reaches the episode.
    """
    episode = MemoryId.new()
    drafts = RememberDrafts(
        episodes=(
            EpisodeDraft(id=episode, summary="We mended the boat's sail.", occurred_at=AT, scene=SCENE),
        ),
        observations=(
            ObservationDraft(text="The sail is torn along the seam.", episode_id=episode, observed_at=AT),
        ),
    )
    plan = await memory.prepare(drafts)
    objects = tuple(attrs.evolve(o, scene=SCENE) if isinstance(o, Episode) else o for o in plan.objects)
    return attrs.evolve(plan, objects=objects, index_entries=index_entries(objects))


async def _remember_scene(memory: CharacterMemory) -> RememberWritePlan:
    plan = await _scene_plan(memory)
    outcome = await memory.commit(plan)
    assert not outcome.repair_markers
    return plan


async def _graph_keeps_scenes(memory: CharacterMemory, episode_id: object) -> bool:
    stored = (await stores_of(memory).graph.get_objects([episode_id]))[episode_id]  # type: ignore[list-item,index]
    return isinstance(stored, Episode) and stored.scene == SCENE


async def test_scene_surfaces_are_points_of_their_own(stack: tuple[Settings, CharacterMemory]) -> None:
    _settings, memory = stack
    plan = await _remember_scene(memory)
    episode = plan.objects[0].id
    vectors = stores_of(memory).vectors
    assert [e.surface for e in plan.index_entries if e.id == episode] == [
        VectorSurface.CONTENT,
        SETTING,
        PERSON,
    ]
    person = next(e.text for e in plan.index_entries if e.surface is PERSON)
    assert person == "Mara\na tall woman with a red scarf\na man with a deep voice"
    assert await vectors.count() == 2 and await vectors.point_ids(SETTING) == {episode}
    assert await vectors.point_ids(PERSON) == {episode}
    probe = (await memory.embedder.embed_documents(["a rainy harbour at dusk"]))[0]
    content = await vectors.search(VectorQuery(vector=probe, limit=5, text="harbour rainy dusk"))
    assert all(hit.score < 0.99 for hit in content.hits), "a content search met the setting words"
    setting = await vectors.search(VectorQuery(vector=probe, limit=5, surface=SETTING))
    assert [hit.id for hit in setting.hits] == [episode] and setting.hits[0].score > 0.99
    report = await check(memory)
    assert report.consistent, report.describe()
    if await _graph_keeps_scenes(memory, episode):  # once the graph stores scenes
        assert [(s.surface, s.expected, s.points) for s in report.surfaces] == [
            (SETTING, 1, 1),
            (PERSON, 1, 1),
        ]
        await memory.rebuild_vector_index()
        assert await vectors.point_ids(SETTING) == await vectors.point_ids(PERSON) == {episode}
        assert (await check(memory)).consistent


async def test_forgetting_the_episode_removes_its_surface_points(
    stack: tuple[Settings, CharacterMemory],
) -> None:
    _settings, memory = stack
    plan = await _remember_scene(memory)
    episode = plan.objects[0].id
    outcome = await memory.forget(ForgetMemoryDraft.suppress(episode, "Never happened."))
    assert not outcome.repair_markers
    vectors = stores_of(memory).vectors
    for surface in VectorSurface:
        assert episode not in await vectors.point_ids(surface), f"its {surface.value} point stayed"
    report = await check(memory)
    assert report.consistent, report.describe()


def _age_marker(settings: Settings, collection: str) -> Path:
    marker = Path(settings.vector_store_path) / collection / MARKER_FILE_NAME
    document = json.loads(marker.read_text(encoding="utf-8"))
    assert document["schema_version"] == SCHEMA_VERSION == 2
    marker.write_text(json.dumps({**document, "schema_version": 1}), encoding="utf-8")
    return marker


async def test_a_shard_of_the_older_schema_is_rebuilt_on_open(tmp_path: Path) -> None:
    settings = _embedded(tmp_path)
    embedder = HashingEmbeddingProvider()
    memory = await CharacterMemory.open(settings, "scenes", embedding_provider=embedder)
    plan = await _remember_scene(memory)
    episode = plan.objects[0].id
    keeps_scenes = await _graph_keeps_scenes(memory, episode)
    before = await stores_of(memory).vectors.point_ids()
    await memory.close()
    marker = _age_marker(settings, "scenes")
    assert EdgeVectorIndex.outdated_from_settings(settings, "scenes")
    with pytest.raises(StoreLayoutError) as refused:  # a direct opener is told to rebuild
        EdgeVectorIndex.from_settings(
            settings, "scenes", model_id=embedder.model_id, vector_size=embedder.vector_size
        )
    assert refused.value.found == 1 and refused.value.expected == SCHEMA_VERSION
    progress: list[tuple[int, int]] = []
    memory = await CharacterMemory.open(
        settings, "scenes", embedding_provider=embedder, rebuild_progress=lambda d, t: progress.append((d, t))
    )
    try:
        assert json.loads(marker.read_text(encoding="utf-8"))["schema_version"] == SCHEMA_VERSION
        assert progress and progress[-1][0] == progress[-1][1] == len(before) + 2 * keeps_scenes
        vectors = stores_of(memory).vectors
        assert await vectors.point_ids() == before
        assert await vectors.count(SETTING) == await vectors.count(PERSON) == int(keeps_scenes)
        report = await check(memory)
        assert report.consistent, report.describe()
    finally:
        await memory.close()
    assert not EdgeVectorIndex.outdated_from_settings(settings, "scenes")


async def test_an_empty_shard_of_the_older_schema_is_upgraded_in_place(tmp_path: Path) -> None:
    settings = _embedded(tmp_path)
    embedder = HashingEmbeddingProvider()
    index = EdgeVectorIndex.from_settings(
        settings, "empty", model_id=embedder.model_id, vector_size=embedder.vector_size
    )
    await index.close()
    marker = _age_marker(settings, "empty")
    index = EdgeVectorIndex.from_settings(
        settings, "empty", model_id=embedder.model_id, vector_size=embedder.vector_size
    )
    await index.close()
    assert json.loads(marker.read_text(encoding="utf-8"))["schema_version"] == SCHEMA_VERSION


async def test_check_reports_and_repair_removes_a_stray_surface_point(
    stack: tuple[Settings, CharacterMemory],
) -> None:
    _settings, memory = stack
    stray = MemoryId.new()
    vector = (await memory.embedder.embed_documents(["a kitchen"]))[0]
    point = VectorPoint(
        id=stray, object_type=ObjectType.EPISODE, vector=vector, text="a kitchen", surface=SETTING
    )
    await stores_of(memory).vectors.upsert([point])
    report = await check(memory)
    assert not report.consistent and report.repairable
    assert report.missing_vectors == report.orphan_vectors == ()
    assert [(s.surface, s.points, s.orphans) for s in report.surfaces] == [
        (SETTING, 1, (stray,)),
        (PERSON, 0, ()),
    ]
    assert report.to_dict()["vectors"]["surfaces"]["setting_words"]["orphans"] == [str(stray)]
    assert any("setting_words vector without a current object" in line for line in report.describe())
    await repair(memory, report)
    assert await stores_of(memory).vectors.point_ids(SETTING) == set()
    assert (await check(memory)).consistent


async def test_commit_many_writes_the_surfaces_of_every_plan(stack: tuple[Settings, CharacterMemory]) -> None:
    _settings, memory = stack
    plans = [await _scene_plan(memory) for _ in range(3)]
    outcomes = await memory.commit_many(plans)
    assert not any(outcome.repair_markers for outcome in outcomes)
    episodes = {plan.objects[0].id for plan in plans}
    vectors = stores_of(memory).vectors
    assert await vectors.point_ids(SETTING) == await vectors.point_ids(PERSON) == episodes
    assert await vectors.count() == 6
    assert (await check(memory)).consistent
