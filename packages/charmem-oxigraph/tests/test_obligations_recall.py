"""Obligations in recall on the embedded stack (persistent Oxigraph, Qdrant Edge, statistics from
the graph): direction, settlement and forgetting the resolver, read warm and again cold from the
reopened stores (the resolving links come from the graph cache's adjacency or from one query)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from charmem import (
    Actor,
    BeliefAssertion,
    CharacterMemory,
    ContinuityContextPack,
    Counterpart,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    EpisodeDraft,
    ForgetMemoryDraft,
    LinkDraft,
    MemoryId,
    ObjectType,
    Relation,
    RememberDrafts,
    RetrievalContext,
)
from charmem.domain.pack import AdmissionRoad, ObligationDirection
from charmem.settings import Settings
from charmem.testing import HashingEmbeddingProvider

NOW = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)
PROMISED = datetime(2024, 5, 1, 18, 0, tzinfo=UTC)
KEPT = datetime(2024, 5, 4, 10, 0, tzinfo=UTC)
ME, ANA = (MemoryId.deterministic("oxigraph-obligations", name) for name in ("me", "ana"))
VISIT, BOOK, PHOTOS, RETURN_VISIT, RETURNED = (
    MemoryId.deterministic("oxigraph-obligations", name)
    for name in ("visit", "book", "photos", "return-visit", "returned")
)


class FixedClock:
    def now(self) -> datetime:
        return NOW


def _settings(where: Path) -> Settings:
    return Settings.from_mapping(
        {
            "GRAPH_STORE_MODE": "persistent",
            "OXIGRAPH_PATH": str(where / "graph"),
            "VECTOR_STORE_MODE": "embedded",
            "VECTOR_STORE_PATH": str(where / "vectors"),
            "RETRIEVAL_STATS_STORE_MODE": "graph",
            "EMBEDDING_PROVIDER": "hashing",
        }
    )


def _open(where: Path) -> CharacterMemory:
    return CharacterMemory.open(
        _settings(where),
        "obligations",
        embedding_provider=HashingEmbeddingProvider(),
        clock=FixedClock(),
        character_id=ME,
    )


def _obligation(
    memory_id: MemoryId, kind: DerivedType, text: str, owes: MemoryId, owed: MemoryId
) -> DerivedMemoryDraft:
    return DerivedMemoryDraft(
        kind,
        text,
        id=memory_id,
        entity_ids=[ME, ANA],
        episode_ids=[VISIT],
        assertions=[BeliefAssertion(owes, Actor()), BeliefAssertion(owed, Counterpart())],
        created_at=PROMISED,
    )


async def _write(memory: CharacterMemory) -> None:
    await memory.remember(
        RememberDrafts(
            entities=[EntityDraft(id=i, entity_type="person", created_at=PROMISED) for i in (ME, ANA)],
            episodes=[
                EpisodeDraft(id=VISIT, occurred_at=PROMISED, summary="Ana came over.", created_at=PROMISED),
                EpisodeDraft(
                    id=RETURN_VISIT, occurred_at=KEPT, summary="Gave Ana her book.", created_at=KEPT
                ),
            ],
            derived=[
                _obligation(BOOK, DerivedType.COMMITMENT, "Return Ana's book on Saturday.", ME, ANA),
                _obligation(PHOTOS, DerivedType.OPEN_LOOP, "Ana will send the photos from Porto.", ANA, ME),
                DerivedMemoryDraft(
                    DerivedType.CLAIM,
                    "I returned the book to Ana.",
                    id=RETURNED,
                    entity_ids=[ME, ANA],
                    episode_ids=[RETURN_VISIT],
                    created_at=KEPT,
                ),
            ],
            links=[LinkDraft(RETURNED, Relation.FULFILLS_COMMITMENT, BOOK, recorded_at=KEPT)],
        )
    )
    await memory.forget(ForgetMemoryDraft.suppress(RETURNED, "not to be recalled", recorded_at=NOW))


def _check(pack: ContinuityContextPack) -> None:
    items = {item.id: item for item in pack.items}
    book, photos = items[BOOK], items[PHOTOS]
    assert (book.direction, photos.direction) == (
        ObligationDirection.OWED_BY_CHARACTER,
        ObligationDirection.OWED_TO_CHARACTER,
    )
    assert book.resolved_by == (RETURNED,)
    assert photos.resolved_by == ()
    assert BOOK in pack.sections["derived_memories"]
    assert BOOK not in pack.sections["commitments"]
    assert PHOTOS in pack.sections["open_loops"]
    assert RETURNED not in items
    assert book.seconds_since_support == (NOW - PROMISED) // timedelta(seconds=1)
    assert {item.admitted_by for item in pack.items} == {(AdmissionRoad.TOPIC,)}
    rendered = pack.render()
    assert "commitment (settled, I owed): Return Ana's book on Saturday." in rendered
    assert "open_loop (owed to me): Ana will send the photos from Porto." in rendered
    assert "I returned the book to Ana." not in rendered


async def test_obligations_warm_and_cold(tmp_path: Path) -> None:
    context = RetrievalContext(query="Ana's book and the photos from Porto")
    async with _open(tmp_path) as memory:
        await _write(memory)
        warm = await memory.retrieve(context)
    _check(warm)
    async with _open(tmp_path) as memory:  # a cold graph cache
        cold = await memory.retrieve(context)
    _check(cold)
    assert cold.to_dict() == warm.to_dict()


async def test_an_obligation_reached_through_expansion_is_settled_cold(tmp_path: Path) -> None:
    """Only the visit is recalled by its vector: the obligations grounded on it come by expansion,
    so their resolving links were not read with the roots' and are read for the pack."""
    context = RetrievalContext(query="Ana came over.", object_type_defaults=(ObjectType.EPISODE,))
    async with _open(tmp_path) as memory:
        await _write(memory)
    async with _open(tmp_path) as memory:
        pack = await memory.retrieve(context)
    items = {item.id: item for item in pack.items}
    assert {"expansion:derived_from"} <= set(items[BOOK].signals)
    assert "vector" not in items[BOOK].signals
    assert items[BOOK].resolved_by == (RETURNED,)
    assert items[PHOTOS].resolved_by == ()
    assert BOOK in pack.sections["derived_memories"]
    assert PHOTOS in pack.sections["open_loops"]
