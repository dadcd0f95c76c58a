"""rebuild_vector_index on the reference stack: vectors come back from graph authority."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from charmem import (
    CharacterMemory,
    CorrectionTarget,
    CorrectMemoryDraft,
    DerivedMemoryDraft,
    DerivedType,
    EpisodeDraft,
    ForgetMemoryDraft,
    MemoryId,
    ObjectType,
    ObservationDraft,
    RememberDrafts,
    RememberInput,
    ReplacementDerivedMemoryDraft,
    ThreadDraft,
)
from charmem.ports import VectorPoint
from charmem.testing import ReferenceVectorIndex, stores_of
from charmem.usecases.maintenance import VectorRebuildReport, rebuild_vector_index

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)


async def _world(memory: CharacterMemory) -> dict[str, MemoryId]:
    ids: dict[str, MemoryId] = {}
    first = await memory.remember(
        RememberInput("Ines started violin lessons.", occurred_at=T0).with_derived_memory(
            DerivedMemoryDraft(DerivedType.CLAIM, "Ines learns the violin.")
        )
    )
    ids["episode"], ids["observation"], ids["claim"] = first.object_ids
    thread, episode, echo, other = MemoryId.new(), MemoryId.new(), MemoryId.new(), MemoryId.new()
    await memory.remember(
        RememberDrafts(
            threads=[ThreadDraft(id=thread, title="Music", summary="Ines and her violin")],
            episodes=[EpisodeDraft(id=episode, summary="A lesson recap", occurred_at=T0)],
            observations=[
                ObservationDraft(id=echo, episode_id=episode, text="Scales again.", observed_at=T0),
                ObservationDraft(id=other, episode_id=episode, text="A new etude.", observed_at=T0),
            ],
        )
    )
    ids.update(thread=thread, summarised=episode)
    corrected = await memory.correct(
        CorrectMemoryDraft(
            CorrectionTarget.derived_memory(ids["claim"]), "It is the cello."
        ).with_replacement(ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "Ines learns the cello."))
    )
    ids["replacement"] = corrected.replacement_ids[0]
    await memory.forget(ForgetMemoryDraft.suppress(other, "Not worth keeping."))
    ids["forgotten"] = other
    return ids


async def test_rebuild_recreates_exactly_the_current_index_entries(memory: CharacterMemory) -> None:
    ids = await _world(memory)
    expected = await stores_of(memory).vectors.point_ids()
    assert ids["summarised"] in expected  # its summary differs from every observation text
    assert ids["episode"] not in expected  # it echoes its observation
    assert not {ids["claim"], ids["forgotten"]} & expected

    emptied = ReferenceVectorIndex(
        "test", model_id=memory.embedder.model_id, vector_size=memory.embedder.vector_size
    )
    calls: list[tuple[int, int]] = []
    report = await rebuild_vector_index(
        graph=stores_of(memory).graph,
        vectors=emptied,
        embedder=memory.embedder,
        batch_size=2,
        on_progress=lambda *a: calls.append(a),
    )
    assert await emptied.point_ids() == expected
    assert report == VectorRebuildReport(
        objects=len(
            await stores_of(memory).graph.object_ids(
                [ObjectType.EPISODE, ObjectType.OBSERVATION, ObjectType.DERIVED, ObjectType.THREAD]
            )
        ),
        indexed=len(expected),
        not_current=2,
        removed=0,
    )
    assert calls == [
        (0, len(expected)),
        *((min(n, len(expected)), len(expected)) for n in range(2, len(expected) + 2, 2)),
    ]


async def test_the_facade_rebuild_removes_points_no_current_object_backs(memory: CharacterMemory) -> None:
    ids = await _world(memory)
    expected = await stores_of(memory).vectors.point_ids()
    vector = await memory.embedder.embed_query("stale")
    await stores_of(memory).vectors.upsert(
        [
            VectorPoint(id=ids["claim"], object_type=ObjectType.DERIVED, vector=vector),  # superseded
            VectorPoint(id=MemoryId.new(), object_type=ObjectType.DERIVED, vector=vector),  # no object
        ]
    )
    report = await memory.rebuild_vector_index()
    assert report.removed == 2
    assert await stores_of(memory).vectors.point_ids() == expected
    pack = await memory.retrieve("violin")
    assert ids["claim"] not in {item.id for item in pack.items if item.status.value == "current"}


async def test_rebuild_of_an_empty_collection_and_bad_batch_size(memory: CharacterMemory) -> None:
    calls: list[tuple[int, int]] = []
    report = await memory.rebuild_vector_index(on_progress=lambda *a: calls.append(a))
    assert report == VectorRebuildReport(objects=0, indexed=0, not_current=0, removed=0)
    assert calls == [(0, 0)]
    with pytest.raises(ValueError, match="batch_size"):
        await memory.rebuild_vector_index(batch_size=0)
