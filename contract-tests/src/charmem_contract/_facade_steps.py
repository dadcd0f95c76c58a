"""What the facade suites share: fixed write options, store counts, a whole sample session."""

from __future__ import annotations

from typing import Any

from charmem import (
    CharacterMemory,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    EpisodeDraft,
    LinkDraft,
    MemoryId,
    ObservationDraft,
    PackItem,
    PrepareOptions,
    Relation,
    RememberDrafts,
    RememberOptions,
    ThreadDraft,
)
from charmem.domain.retrieval import rank_key
from charmem.testing import stores_of
from charmem_contract import data
from charmem_contract.data import T0

__all__ = ["AT_T0", "NOW", "Counts", "pack_rank_key", "session_drafts", "store_counts"]

NOW = PrepareOptions(now=T0)
AT_T0 = RememberOptions(prepare=NOW)

Counts = tuple[int, int, int]


async def store_counts(memory: CharacterMemory) -> Counts:
    """(graph statements, vector points, stats rows)."""
    return (
        await stores_of(memory).graph.statement_count(),
        await stores_of(memory).vectors.count(),
        await stores_of(memory).stats.row_count(),
    )


def pack_rank_key(item: PackItem) -> tuple[int, float, str, MemoryId]:
    """The canonical rank key of a pack item (score, newer first, object type, id)."""
    return rank_key(item.score, item.occurred_at, item.object_type, item.id)


def session_drafts(tag: str, texts: list[str]) -> tuple[RememberDrafts, dict[str, Any]]:
    """A whole session: two notions, a thread, an episode, its turns and an interpretation."""
    person, place, garden, visit, belief = data.ids(f"session-{tag}", 5)
    turns = data.ids(f"session-{tag}-turns", len(texts))
    drafts = RememberDrafts(
        entities=[EntityDraft(id=person, entity_type="person"), EntityDraft(id=place, entity_type="place")],
        threads=[ThreadDraft(title="the allotment", summary="growing vegetables", id=garden)],
        episodes=[
            EpisodeDraft(
                summary="an afternoon at the allotment",
                occurred_at=T0,
                id=visit,
                participant_entity_ids=[person],
                thread_ids=[garden],
            )
        ],
        observations=[
            ObservationDraft(
                text=text, episode_id=visit, id=turn, speaker_entity_id=person, mentioned_entity_ids=[place]
            )
            for text, turn in zip(texts, turns, strict=True)
        ],
        derived=[
            DerivedMemoryDraft(
                DerivedType.USER_PREFERENCE,
                "likes growing tomatoes",
                id=belief,
                observation_ids=turns[:1],
                entity_ids=[person],
                thread_ids=[garden],
            )
        ],
        links=[LinkDraft(turns[0], Relation.MENTIONS, person, recorded_at=T0)],
    )
    return drafts, {
        "person": person,
        "place": place,
        "thread": garden,
        "episode": visit,
        "belief": belief,
        "turns": turns,
    }
