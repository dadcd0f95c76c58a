"""Drafts, contexts, plans and packs survive pickle and copy (they cross processes and caches)."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from types import MappingProxyType
from typing import Any

import pytest

from charmem import (
    CharacterMemory,
    EntityDraft,
    EpisodeDraft,
    MemoryId,
    RememberDrafts,
    RememberInput,
    RetrievalContext,
    Scene,
    SceneParticipant,
    SceneSetting,
)

AT = datetime(2024, 3, 1, 18, 30, tzinfo=timezone(timedelta(hours=2)))
MARA = MemoryId("5c3e2a10-7d4b-4f0e-8a1c-9b2d3e4f5a60")

#: Every way a value may be sent or cached: each pickle protocol, ``copy.copy`` and ``deepcopy``.
ROUND_TRIPS: list[Callable[[Any], Any]] = [
    *(
        lambda value, protocol=protocol: pickle.loads(pickle.dumps(value, protocol))
        for protocol in range(pickle.HIGHEST_PROTOCOL + 1)
    ),
    copy.copy,
    copy.deepcopy,
]


def _scene(at: datetime = AT) -> Scene:
    return Scene(
        at=at,
        participants=[
            SceneParticipant(entity_id=MARA, name="Mara"),
            SceneParticipant(description="a tall man"),
        ],
        setting=SceneSetting(key="kitchen", words="a small kitchen"),
        custom_values={"mood": "quiet", "activity": "tea"},
    )


@pytest.mark.parametrize("trip", ROUND_TRIPS)
def test_a_scene_comes_back_equal_with_read_only_custom_values(trip: Callable[[Any], Any]) -> None:
    scene = _scene()
    back = trip(scene)
    assert back == scene and hash(back) == hash(scene)
    assert back.at.utcoffset() == timedelta(hours=2)
    assert back.participants[0].entity_id is MARA
    assert isinstance(back.custom_values, MappingProxyType)
    assert dict(back.custom_values) == {"activity": "tea", "mood": "quiet"}
    with pytest.raises(TypeError):
        back.custom_values["mood"] = "loud"  # type: ignore[index]


@pytest.mark.parametrize("trip", ROUND_TRIPS)
def test_a_context_and_a_draft_with_a_scene_come_back_equal(trip: Callable[[Any], Any]) -> None:
    context = RetrievalContext(query="tea", scene=_scene(), max_tokens=50)
    draft = EpisodeDraft(summary="Tea with Mara", occurred_at=AT, scene=_scene())
    item = RememberInput("Mara brought lemon cake.").with_scene(_scene())
    assert trip(context) == context
    assert trip(draft) == draft
    assert trip(item) == item


async def test_a_plan_and_a_pack_with_a_scene_come_back_equal(memory: CharacterMemory) -> None:
    await memory.remember(RememberDrafts(entities=[EntityDraft(id=MARA, entity_type="person")]))
    plan = await memory.prepare(RememberInput("Mara brought lemon cake.").with_scene(_scene()))
    await memory.commit(plan)
    pack = await memory.retrieve(RetrievalContext(query="lemon cake", scene=_scene(datetime.now(UTC))))
    assert pack.items and pack.scene_resolutions
    for trip in ROUND_TRIPS:
        assert trip(plan) == plan
        back = trip(pack)
        assert back == pack
        assert back.render() == pack.render()
        assert back.render(max_tokens=8) == pack.render(max_tokens=8)
        assert back.to_dict() == pack.to_dict()
