"""Retrieval hands the object types candidate recall reported to a graph store that takes them."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from datetime import UTC, datetime

from charmem import CharacterMemory, MemoryId, ObjectType, RememberInput, RetrievalContext
from charmem.domain.model import object_type_of
from charmem.ports import ObjectTypeHints
from charmem.stats import InMemoryRetrievalStatsStore
from charmem.testing import HashingEmbeddingProvider, ReferenceGraphStore, ReferenceVectorIndex
from charmem_contract.stacks import FixedClock


class HintedGraph(ReferenceGraphStore):
    """The reference graph store, recording the hints it is given."""

    def __init__(self, collection: str) -> None:
        super().__init__(collection)
        self.hints: list[dict[MemoryId, ObjectType]] = []

    def hint_object_types(self, types: Mapping[MemoryId, ObjectType]) -> None:
        self.hints.append(dict(types))


async def test_retrieve_hints_the_types_of_the_recalled_candidates() -> None:
    embedder = HashingEmbeddingProvider()
    graph = HintedGraph("hints")
    assert isinstance(graph, ObjectTypeHints)
    memory = CharacterMemory(
        graph=graph,
        vectors=ReferenceVectorIndex("hints", model_id=embedder.model_id, vector_size=embedder.vector_size),
        embedder=embedder,
        stats=InMemoryRetrievalStatsStore("hints"),
        collection="hints",
        clock=FixedClock(),
    )
    when = datetime(2024, 5, 1, tzinfo=UTC)  # before the FixedClock's now
    for text, summary in [("we planted tomatoes", "the allotment"), ("tomatoes need sun", None)]:
        await memory.remember(RememberInput(text, occurred_at=when, summary=summary))
    pack = await memory.retrieve(RetrievalContext(query="the allotment where we planted tomatoes"))

    assert graph.hints, "retrieve gave no hint"
    hinted = graph.hints[0]
    stored = await graph.get_objects(list(hinted))
    assert {i: object_type_of(o) for i, o in stored.items()} == hinted  # each the stored type
    recalled = {item.id for item in pack.items if "vector" in item.signals}
    assert recalled and recalled <= hinted.keys()
    assert {ObjectType.EPISODE, ObjectType.OBSERVATION} <= set(hinted.values())


class RaisingHints(ReferenceGraphStore):
    def hint_object_types(self, types: Mapping[MemoryId, ObjectType]) -> None:
        raise RuntimeError("a broken hint")


class AsyncHints(ReferenceGraphStore):
    async def hint_object_types(self, types: Mapping[MemoryId, ObjectType]) -> None:  # type: ignore[override]
        raise AssertionError("never awaited")


def _memory(graph: ReferenceGraphStore) -> CharacterMemory:
    embedder = HashingEmbeddingProvider()
    return CharacterMemory(
        graph=graph,
        vectors=ReferenceVectorIndex(
            graph.collection, model_id=embedder.model_id, vector_size=embedder.vector_size
        ),
        embedder=embedder,
        stats=InMemoryRetrievalStatsStore(graph.collection),
        collection=graph.collection,
        clock=FixedClock(),
    )


async def test_a_faulty_hint_never_fails_or_changes_a_retrieval() -> None:
    """A hint that raises, or an ``async def`` one, is logged and ignored: the same pack as without."""
    when = datetime(2024, 5, 1, tzinfo=UTC)  # before the FixedClock's now
    packs = []
    for graph in (ReferenceGraphStore("hints"), RaisingHints("hints"), AsyncHints("hints")):
        memory = _memory(graph)
        for text in ("we planted tomatoes", "tomatoes need sun", "the shed roof leaks"):
            await memory.remember(RememberInput(text, occurred_at=when, created_at=when))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no "coroutine was never awaited"
            pack = await memory.retrieve(RetrievalContext(query="planted tomatoes"))
        packs.append([(item.text, item.score, item.signals, item.status) for item in pack.items])
    assert packs[0]
    assert packs[1] == packs[0]
    assert packs[2] == packs[0]
