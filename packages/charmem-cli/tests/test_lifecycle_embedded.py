"""The lifecycle contract on the embedded default stores: persistent Oxigraph + Qdrant Edge +
SQLite stats (hashing embedder for speed), all collections in the same stores."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from charmem import (
    CharacterMemory,
    CorrectionTarget,
    CorrectMemoryDraft,
    CurrencyStatus,
    DerivedMemoryDraft,
    DerivedType,
    ForgetMemoryDraft,
    MemoryId,
    RememberInput,
    ReplacementDerivedMemoryDraft,
    Settings,
)
from charmem_contract import MemoryFactory, memory_factory
from charmem_contract.lifecycle import LifecycleContract


class TestEmbeddedLifecycle(LifecycleContract):
    @pytest.fixture
    async def memory_factory(self, tmp_path: Path) -> AsyncIterator[MemoryFactory]:
        """Every collection of a test in the same stores, under its temporary directory."""
        root = tmp_path / "store"
        settings = Settings.from_mapping(
            {
                "GRAPH_STORE_MODE": "persistent",
                "OXIGRAPH_PATH": str(root / "oxigraph"),
                "VECTOR_STORE_MODE": "embedded",
                "VECTOR_STORE_PATH": str(root / "vectors"),
                "RETRIEVAL_STATS_STORE_MODE": "sqlite",
                "RETRIEVAL_STATS_PATH": str(root / "retrieval-stats.sqlite3"),
                "EMBEDDING_PROVIDER": "hashing",
            }
        )

        async def open_embedded(collection: str) -> CharacterMemory:
            return await CharacterMemory.open(settings, collection)

        async with memory_factory(open_embedded) as factory:
            yield factory


async def test_warm_retrieval_sees_corrections_and_forgetting(embedded_settings: Settings) -> None:
    """The embedded graph store's read cache never serves stale currency: a retrieval that
    warmed it, then a correction and a forget, then the same retrieval again."""
    settings = embedded_settings
    when = datetime(2024, 5, 1, tzinfo=UTC)
    async with CharacterMemory.open(settings, "warm") as memory:
        first = await memory.remember(
            RememberInput("I moved to Lisbon in May.", occurred_at=when).with_derived_memory(
                DerivedMemoryDraft(DerivedType.CLAIM, "Lives in Lisbon.")
            )
        )
        claim = first.object_ids[-1]
        other = await memory.remember(RememberInput("My cat is called Mochi.", occurred_at=when))
        cat = other.object_ids[-1]

        async def statuses(query: str) -> tuple[dict[MemoryId, CurrencyStatus], dict[MemoryId, str]]:
            pack = await memory.retrieve(query)
            return {i.id: i.status for i in pack.items}, {o.id: o.reason for o in pack.omissions}

        items, _ = await statuses("Lives in Lisbon")
        assert items[claim] is CurrencyStatus.CURRENT  # warm: the claim and its currency are cached
        corrected = await memory.correct(
            CorrectMemoryDraft(CorrectionTarget.derived_memory(claim), "It was Porto.").with_replacement(
                ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "Lives in Porto, not Lisbon.")
            )
        )
        [replacement] = corrected.replacement_ids
        items, omitted = await statuses("Lives in Lisbon")
        assert claim not in items
        assert items[replacement] is CurrencyStatus.CURRENT
        assert omitted[claim] == "superseded"
        items, _ = await statuses("cat Mochi")
        assert cat in items
        await memory.forget(ForgetMemoryDraft.suppress(cat, "The user asked to forget it."))
        items, omitted = await statuses("cat Mochi")
        assert cat not in items
        await memory.forget(ForgetMemoryDraft.suppress(replacement, "Forget where they live."))
        items, omitted = await statuses("Lives in Lisbon")
        assert replacement not in items and claim not in items
        assert omitted.get(replacement) == "suppressed"
