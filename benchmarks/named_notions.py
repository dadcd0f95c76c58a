"""Warm retrieve against the number of named notions: finding the names a query mentions.

Each size N gets a fresh embedded store (the CLI's stores: embedded Oxigraph, Qdrant Edge, SQLite
stats) with the same small conversation about a few people and N named notions (an entity and
the given ``KnownAs`` belief that names it). The same queries, each naming one of the
conversation's people, are retrieved once to warm the caches, then ``--repeats`` times; the
table gives the p50 / p95 of the warm retrieves and the p50's ratio to the smallest size. The
embedder is the hashing one (cheap and the same at every size).

The ratio to the smallest size includes what N more beliefs cost every retrieve: N more points
in the vector index, whose searches grow with them whatever their names. The table also gives
the mean time per retrieve inside the vector index's ``search`` and the p50 without it, the part
where the names are found.

    python benchmarks/named_notions.py                      # 10, 3,000, 10,000 named notions
    python benchmarks/named_notions.py --sizes 10,1000 --repeats 50
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from charmem import (
    BeliefAssertion,
    CharacterMemory,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    KnownAs,
    MemoryId,
    RememberDrafts,
    RememberInput,
)
from charmem.testing import HashingEmbeddingProvider, stores_of
from charmem_cli.app import cli_settings

COLLECTION = "named-notions"
T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
PEOPLE = ("Caroline", "Melanie", "Jon Snow", "Ｇｉｎａ", "Straße")
QUERIES = (
    "When did Caroline go to the support group?",
    "What does melanie paint?",
    "Where does JON  SNOW live?",
    "Did gina open the dance studio?",
)
TOPICS = ("the support group", "painting", "the dance studio", "the old house", "a long walk")


def named(notion: MemoryId, name: str) -> tuple[EntityDraft, DerivedMemoryDraft]:
    """A notion and the given belief naming it."""
    return EntityDraft(id=notion, entity_type="person", created_at=T0), DerivedMemoryDraft(
        DerivedType.REFLECTION,
        f"I know this person as {name}.",
        entity_ids=[notion],
        assertions=[BeliefAssertion(notion, KnownAs(name))],
        given_by_application=True,
        created_at=T0,
    )


async def populate(memory: CharacterMemory, count: int, batch: int) -> None:
    """The people of the conversation, what was said about them, then ``count - len(PEOPLE)`` others."""
    people = []
    for name in PEOPLE:
        notion = MemoryId.deterministic(COLLECTION, "person", name)
        entity, belief = named(notion, name)
        await memory.remember(RememberDrafts(entities=[entity], derived=[belief]))
        people.append(notion)
    for i in range(60):
        person, topic = people[i % len(people)], TOPICS[i % len(TOPICS)]
        text = f"{PEOPLE[i % len(PEOPLE)]} told me about {topic} again ({i})."
        when = T0 + timedelta(hours=i)
        await memory.remember(RememberInput(text, occurred_at=when, mentioned_entity_ids=[person]))
    others = max(0, count - len(PEOPLE))
    for first in range(0, others, batch):
        drafts = [
            named(MemoryId.deterministic(COLLECTION, "other", str(i)), f"Person {i} of Town {i % 97}")
            for i in range(first, min(others, first + batch))
        ]
        entities, beliefs = [e for e, _ in drafts], [d for _, d in drafts]
        await memory.commit(await memory.prepare(RememberDrafts(entities=entities, derived=beliefs)))


class TimedSearch:
    """Wraps the vector index's ``search`` on the store and adds up the seconds spent in it."""

    def __init__(self, memory: CharacterMemory) -> None:
        self.seconds = 0.0
        vectors = stores_of(memory).vectors
        inner = vectors.search

        async def search(query: Any) -> Any:
            start = time.perf_counter()
            try:
                return await inner(query)
            finally:
                self.seconds += time.perf_counter() - start

        vectors.search = search  # type: ignore[method-assign]


async def measure(size: int, repeats: int, batch: int) -> dict[str, float]:
    """Warm retrieves with ``size`` named notions: p50 / p95 ms, ms in the vector index, populate s."""
    with tempfile.TemporaryDirectory() as root:
        memory = await CharacterMemory.open(
            cli_settings({}, str(Path(root))), COLLECTION, embedding_provider=HashingEmbeddingProvider()
        )
        try:
            start = time.perf_counter()
            await populate(memory, size, batch)
            populated = time.perf_counter() - start
            for query in QUERIES:  # warm: every graph read answered by the process's cache after
                await memory.retrieve(query)
            timed = TimedSearch(memory)
            samples = []
            for i in range(repeats):
                start = time.perf_counter()
                await memory.retrieve(QUERIES[i % len(QUERIES)])
                samples.append(time.perf_counter() - start)
        finally:
            await memory.close()
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]
    vectors = timed.seconds / repeats * 1000
    p50 = statistics.median(ordered) * 1000
    return {"p50": p50, "p95": p95 * 1000, "vectors": vectors, "rest": p50 - vectors, "populate": populated}


async def main(sizes: Sequence[int], repeats: int, batch: int) -> None:
    print(
        f"{'named notions':>14} {'p50 ms':>7} {'p95 ms':>7} {'x smallest':>11}"
        f" {'in vectors ms':>14} {'p50 - vectors':>14} {'x smallest':>11} {'populate s':>11}"
    )
    base: dict[str, float] | None = None
    for size in sizes:
        row = await measure(size, repeats, batch)
        base = base or row
        print(
            f"{size:>14,} {row['p50']:>7.1f} {row['p95']:>7.1f} {row['p50'] / base['p50']:>10.2f}x"
            f" {row['vectors']:>14.1f} {row['rest']:>14.1f} {row['rest'] / base['rest']:>10.2f}x"
            f" {row['populate']:>11.1f}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10,3000,10000", help="named notions per store, comma separated")
    parser.add_argument("--repeats", type=int, default=40, help="warm retrieves timed per size")
    parser.add_argument("--batch", type=int, default=500, help="named notions per commit while populating")
    args = parser.parse_args()
    asyncio.run(main([int(s) for s in args.sizes.split(",")], args.repeats, args.batch))
