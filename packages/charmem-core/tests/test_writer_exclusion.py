"""The write path runs each check-then-write inside a graph store's writer exclusion, if it has one.

A store several processes write (``charmem.ports.WriterExclusion``) keeps the single-process checks
only if every read a write depends on and the write itself happen inside ``exclusive_writes()``:
a spy graph records, for each call, whether it ran inside the block.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import pytest

from charmem import (
    CharacterMemory,
    CorrectionTarget,
    CorrectMemoryDraft,
    DerivedMemoryDraft,
    DerivedType,
    ForgetMemoryDraft,
    LinkDraft,
    MemoryId,
    Relation,
    RememberInput,
)
from charmem.admin import purge
from charmem.ports import WriterExclusion
from charmem.stats import InMemoryRetrievalStatsStore
from charmem.testing import HashingEmbeddingProvider, ReferenceGraphStore, ReferenceVectorIndex
from charmem.usecases.store_writes import exclusive_writes

_READS = ("get_objects", "get_links", "get_records", "links_of", "tombstones")
_WRITES = ("write_batch", "erase")


class ExclusiveSpyGraph(ReferenceGraphStore):
    """A reference graph with a writer exclusion that logs (call, inside the block) pairs."""

    def __init__(self, collection: str) -> None:
        super().__init__(collection)
        self.log: list[tuple[str, bool]] = []
        self.depth = 0

    @contextlib.asynccontextmanager
    async def exclusive_writes(self) -> AsyncIterator[None]:
        self.log.append(("enter", self.depth > 0))
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def __getattribute__(self, name: str) -> Any:
        attribute = super().__getattribute__(name)
        if name not in (*_READS, *_WRITES):
            return attribute

        async def logged(*args: Any, **kwargs: Any) -> Any:
            self.log.append((name, self.depth > 0))
            return await attribute(*args, **kwargs)

        return logged


@pytest.fixture
async def spied() -> AsyncIterator[tuple[CharacterMemory, ExclusiveSpyGraph]]:
    graph = ExclusiveSpyGraph("spy")
    embedder = HashingEmbeddingProvider(vector_size=16)
    memory = CharacterMemory(
        graph=graph,
        vectors=ReferenceVectorIndex("spy", model_id=embedder.model_id, vector_size=embedder.vector_size),
        embedder=embedder,
        stats=InMemoryRetrievalStatsStore("spy"),
        collection="spy",
    )
    async with memory:
        yield memory, graph


def _until_write(log: Sequence[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """The calls from the block's entry up to and including the first write."""
    start = next(i for i, (name, _) in enumerate(log) if name == "enter")
    end = next(i for i, (name, _) in enumerate(log) if name in _WRITES)
    return list(log[start : end + 1])


async def test_every_check_then_write_runs_inside_the_exclusion(
    spied: tuple[CharacterMemory, ExclusiveSpyGraph],
) -> None:
    memory, graph = spied
    assert isinstance(graph, WriterExclusion)
    belief, other = MemoryId.new(), MemoryId.new()
    operations: list[Callable[[], Awaitable[object]]] = [
        lambda: memory.remember(
            RememberInput("we planted roses")
            .with_derived_memory(DerivedMemoryDraft(DerivedType.REFLECTION, "she likes roses", id=belief))
            .with_derived_memory(DerivedMemoryDraft(DerivedType.REFLECTION, "she grows roses", id=other))
        ),
        lambda: memory.link(LinkDraft(belief, Relation.SUPPORTS, other)),
        lambda: memory.correct(
            CorrectMemoryDraft(CorrectionTarget.derived_memory(belief), "she likes tulips")
        ),
        lambda: memory.forget(ForgetMemoryDraft.suppress(other, "asked to forget")),
    ]
    for operation in operations:
        graph.log.clear()
        await operation()
        segment = _until_write(graph.log)
        assert segment[0] == ("enter", False)  # entered once, not nested
        assert any(name in _READS for name, _ in segment)  # the check read the graph...
        assert all(inside for _, inside in segment[1:])  # ...inside the block, as the write
    graph.log.clear()
    await purge(memory, [other])
    assert all(inside for name, inside in graph.log if name == "erase")


async def test_a_graph_without_the_capability_needs_no_exclusion() -> None:
    graph = ReferenceGraphStore("plain")
    assert not isinstance(graph, WriterExclusion)
    async with exclusive_writes(graph):  # nothing to hold: one process writes it
        pass
