"""Utterances are indexed with their speaker's name (``voiced_text``), on the write path and on
rebuild; the stored observation keeps its text as written."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from charmem import (
    BeliefAssertion,
    CharacterMemory,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    EpisodeDraft,
    KnownAs,
    MemoryId,
    ObservationDraft,
    RememberDrafts,
    RememberInput,
    RetrievalContext,
)
from charmem.domain.rules import voiced_text
from charmem.ports import VectorPoint
from charmem.stats import InMemoryRetrievalStatsStore
from charmem.testing import HashingEmbeddingProvider, ReferenceGraphStore, ReferenceVectorIndex, stores_of
from charmem.usecases.maintenance import rebuild_vector_index

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)


class RecordingVectorIndex(ReferenceVectorIndex):
    """The reference index, remembering the text of the last upsert of each point."""

    def __init__(self, collection: str, *, model_id: str, vector_size: int) -> None:
        super().__init__(collection, model_id=model_id, vector_size=vector_size)
        self.texts: dict[MemoryId, str] = {}

    async def upsert(self, points: Sequence[VectorPoint]) -> None:
        await super().upsert(points)
        self.texts.update({p.id: p.text for p in points})


def recording_memory() -> tuple[CharacterMemory, RecordingVectorIndex]:
    embedder = HashingEmbeddingProvider()
    vectors = RecordingVectorIndex("voiced", model_id=embedder.model_id, vector_size=embedder.vector_size)
    memory = CharacterMemory(
        graph=ReferenceGraphStore("voiced"),
        vectors=vectors,
        embedder=embedder,
        stats=InMemoryRetrievalStatsStore("voiced"),
        collection="voiced",
    )
    return memory, vectors


def name_belief(
    notion: MemoryId, name: str, supersedes: Sequence[MemoryId] = (), belief_id: MemoryId | None = None
) -> DerivedMemoryDraft:
    return DerivedMemoryDraft(
        DerivedType.REFLECTION,
        f"This person is called {name}.",
        id=belief_id,
        entity_ids=[notion],
        assertions=[BeliefAssertion(notion, KnownAs(name))],
        given_by_application=True,
        supersedes=supersedes,
    )


def test_voiced_text_names_the_speaker_or_leaves_the_text_alone() -> None:
    assert voiced_text("I went to the support group.", ("Caroline",)) == (
        'Caroline said, "I went to the support group."'
    )
    assert voiced_text("Hi", ("Al", "Alan")) == 'Al / Alan said, "Hi"'
    assert voiced_text("Hi", ()) == "Hi"


async def test_an_utterance_is_indexed_with_its_speakers_current_name() -> None:
    memory, vectors = recording_memory()
    ines, anon, episode = MemoryId.new(), MemoryId.new(), MemoryId.new()
    spoken, unnamed = MemoryId.new(), MemoryId.new()
    belief = name_belief(ines, "Ines")
    await memory.remember(
        RememberDrafts(
            entities=[EntityDraft(id=ines, entity_type="person"), EntityDraft(id=anon, entity_type="person")],
            derived=[belief],
            episodes=[EpisodeDraft(id=episode, occurred_at=T0)],
            observations=[
                ObservationDraft(
                    id=spoken, episode_id=episode, text="I started the violin.", speaker_entity_id=ines
                ),
                ObservationDraft(id=unnamed, episode_id=episode, text="Me too.", speaker_entity_id=anon),
            ],
        )
    )
    assert vectors.texts[spoken] == 'Ines said, "I started the violin."'
    assert vectors.texts[unnamed] == "Me too."  # a speaker without a name is not invented
    stored = await stores_of(memory).graph.get_objects([spoken])
    assert stored[spoken].text == "I started the violin."  # type: ignore[union-attr]
    pack = await memory.retrieve(RetrievalContext(query="violin"))
    assert {item.text for item in pack.items} >= {"I started the violin."}  # items show the text as said
    await memory.close()


async def test_rebuild_voices_utterances_with_the_name_current_at_rebuild() -> None:
    memory, vectors = recording_memory()
    notion, episode, said = MemoryId.new(), MemoryId.new(), MemoryId.new()
    old_belief = MemoryId.new()
    await memory.remember(
        RememberDrafts(
            entities=[EntityDraft(id=notion, entity_type="person")],
            derived=[name_belief(notion, "Al", belief_id=old_belief)],
            episodes=[EpisodeDraft(id=episode, occurred_at=T0)],
            observations=[
                ObservationDraft(id=said, episode_id=episode, text="Call me Bob.", speaker_entity_id=notion)
            ],
        )
    )
    assert vectors.texts[said] == 'Al said, "Call me Bob."'
    await memory.remember(
        RememberInput("The application renames the person.").with_derived_memory(
            name_belief(notion, "Bob", supersedes=[old_belief])
        )
    )
    assert vectors.texts[said] == 'Al said, "Call me Bob."'  # indexed once, with the name it had
    await rebuild_vector_index(
        graph=stores_of(memory).graph, vectors=stores_of(memory).vectors, embedder=memory.embedder
    )
    assert vectors.texts[said] == 'Bob said, "Call me Bob."'
    await memory.close()
