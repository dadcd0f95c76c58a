"""Hung embedders, cancelled writes and close() on the embedded stores (persistent Oxigraph,
Qdrant Edge, SQLite stats), for real.

* ``close()`` with a remember in flight waits for it: the remember's vectors and stats reach the
  real stores before they are closed (no marker caused by the close).
* A remember cancelled after its graph batch is seen by ``charmem.admin.check_settings`` once the
  stores are closed, and a replay after reopening repairs it.
* ``EMBEDDING_TIMEOUT_S`` from the settings bounds a hung provider: the write keeps its graph batch
  and reports a marker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import Any

import pytest

from charmem import CharacterMemory, RememberInput, RepairMarker, Settings
from charmem.admin import check_settings
from charmem.testing import HashingEmbeddingProvider

#: Only stops a regression from hanging the suite; no assertion depends on it.
GUARD_S = 60


class GatedProvider:
    """A hashing provider whose ``embed_documents`` waits until :attr:`release` is set."""

    def __init__(self) -> None:
        self.inner = HashingEmbeddingProvider()
        self.model_id = self.inner.model_id
        self.vector_size = self.inner.vector_size
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.entered.set()
        await self.release.wait()
        return await self.inner.embed_documents(texts)

    async def embed_query(self, text: str) -> list[float]:
        return await self.inner.embed_query(text)


async def _guarded(awaitable: Awaitable[Any]) -> Any:
    async with asyncio.timeout(GUARD_S):
        return await awaitable


async def test_close_waits_for_a_remember_in_flight_on_the_embedded_stores(
    embedded_settings: Settings,
) -> None:
    provider = GatedProvider()
    memory = await CharacterMemory.open(embedded_settings, "faults", embedding_provider=provider)
    remember = asyncio.create_task(memory.remember(RememberInput("The tea is black.")))
    await _guarded(provider.entered.wait())  # the graph batch is stored
    closing = asyncio.create_task(memory.close())
    await asyncio.sleep(0)
    assert not closing.done()

    provider.release.set()
    outcome = await _guarded(remember)
    await _guarded(closing)

    assert outcome.repair_markers == ()
    report = await check_settings(embedded_settings, "faults", embedding_provider=HashingEmbeddingProvider())
    assert report.consistent
    assert report.vector_points == report.expected_vectors > 0


async def test_a_cancelled_remember_is_reported_by_check_and_a_replay_repairs_it(
    embedded_settings: Settings,
) -> None:
    provider = GatedProvider()
    memory = await CharacterMemory.open(embedded_settings, "faults", embedding_provider=provider)
    plan = await memory.prepare(RememberInput("The tea is black."))
    commit = asyncio.create_task(memory.commit(plan))
    await _guarded(provider.entered.wait())
    commit.cancel()
    with pytest.raises(asyncio.CancelledError):
        await commit
    await memory.close()

    hashing = HashingEmbeddingProvider()
    report = await check_settings(embedded_settings, "faults", embedding_provider=hashing)
    assert report.graph_consistent and report.repairable
    assert set(report.missing_vectors) == {entry.id for entry in plan.index_entries}
    assert not report.stats_consistent

    async with CharacterMemory.open(embedded_settings, "faults", embedding_provider=hashing) as again:
        assert (await again.commit(plan)).repair_markers == ()
    assert (await check_settings(embedded_settings, "faults", embedding_provider=hashing)).consistent


async def test_the_embedding_timeout_setting_turns_a_hung_provider_into_a_marker(
    embedded_settings: Settings,
) -> None:
    settings = Settings.from_mapping({**embedded_settings.extra, "EMBEDDING_TIMEOUT_S": "0.05"})
    async with CharacterMemory.open(settings, "faults", embedding_provider=GatedProvider()) as memory:
        outcome = await _guarded(memory.remember(RememberInput("The tea is black.")))
    [marker] = outcome.repair_markers
    assert isinstance(marker, RepairMarker.VectorMaintenance)
    assert "did not answer within 0.05 s" in marker.cause
    report = await check_settings(settings, "faults", embedding_provider=HashingEmbeddingProvider())
    assert set(report.missing_vectors) == set(marker.ids)
    assert report.stats_consistent
