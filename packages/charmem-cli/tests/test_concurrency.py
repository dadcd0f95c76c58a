"""Many concurrent calls on one memory over the embedded stores (persistent Oxigraph, Qdrant
Edge, SQLite stats): writers are serialised, so no update is lost, no batch interleaves with
another, and the derived data stays in step with the graph (charmem.admin.check is clean)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest

from charmem import (
    CharacterMemory,
    CorrectionTarget,
    CorrectMemoryDraft,
    CurrencyStatus,
    DerivedMemoryDraft,
    DerivedType,
    ForgetMemoryDraft,
    LifecycleErrorKind,
    LifecycleValidationError,
    MemoryId,
    Relation,
    RememberInput,
    ReplacementDerivedMemoryDraft,
    Settings,
    SyncCharacterMemory,
)
from charmem.admin import check
from charmem.testing import stores_of

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)


def _input(n: int) -> RememberInput:
    return RememberInput(
        f"Turn {n}: the harbour at dusk.", occurred_at=T0 + timedelta(minutes=n)
    ).with_derived_memory(DerivedMemoryDraft(DerivedType.CLAIM, f"Belief {n} about the harbour."))


def _correction(target: MemoryId, text: str) -> CorrectMemoryDraft:
    return CorrectMemoryDraft(CorrectionTarget.derived_memory(target), f"because {text}").with_replacement(
        ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, text)
    )


async def _successors(memory: CharacterMemory, target: MemoryId) -> list[MemoryId]:
    links = await stores_of(memory).graph.links_of([target], relations=[Relation.SUPERSEDES])
    return [link.from_id for link in links if link.to_id == target]


async def test_concurrent_writers_and_readers_lose_no_update(embedded_settings: Settings) -> None:
    async with CharacterMemory.open(embedded_settings, "busy") as memory:
        seeded = [await memory.remember(_input(n)) for n in range(8)]
        claims = [outcome.object_ids[-1] for outcome in seeded]
        observations = [outcome.object_ids[1] for outcome in seeded]
        contested = claims[0]

        writes = [memory.remember(_input(100 + n)) for n in range(16)]
        writes += [memory.correct(_correction(claim, f"revised {i}")) for i, claim in enumerate(claims[1:5])]
        # five different corrections of one belief race: one line of successors (one write adds them)
        writes += [memory.correct(_correction(contested, f"rival {n}")) for n in range(5)]
        writes += [memory.forget(ForgetMemoryDraft.suppress(obs, "forget it")) for obs in observations[5:8]]
        reads = [memory.retrieve(f"harbour belief {n}") for n in range(16)]
        results = await asyncio.gather(*writes, *reads, return_exceptions=True)

        outcomes, packs = results[: len(writes)], results[len(writes) :]
        rivals = outcomes[20:25]
        refused = [r for r in rivals if isinstance(r, LifecycleValidationError)]
        assert len(refused) == 4, rivals
        assert all(r.kind is LifecycleErrorKind.ALREADY_SUPERSEDED for r in refused)
        others = [r for i, r in enumerate(outcomes) if not 20 <= i < 25]
        assert not [r for r in others if isinstance(r, BaseException)], others
        assert not [p for p in packs if isinstance(p, BaseException)], packs

        # every acknowledged write is stored whole
        remembered = [i for outcome in outcomes[:16] for i in outcome.object_ids]  # type: ignore[union-attr]
        assert len(await stores_of(memory).graph.get_objects(remembered)) == len(remembered) == 48
        winner = next(r for r in rivals if not isinstance(r, BaseException))
        assert await _successors(memory, contested) == list(winner.replacement_ids)  # type: ignore[union-attr]
        for claim in claims[1:5]:
            assert len(await _successors(memory, claim)) == 1
        currency = await stores_of(memory).graph.currency(claims)
        assert [currency[c] for c in claims[1:5]] == [CurrencyStatus.SUPERSEDED] * 4
        assert [currency[c] for c in claims[5:8]] == [CurrencyStatus.SUPPRESSED] * 3
        # every pack only holds stored memories
        for pack in packs:
            ids = [item.id for item in pack.items]  # type: ignore[union-attr]
            assert len(await stores_of(memory).graph.get_objects(ids)) == len(ids)

        report = await check(memory)
        assert report.consistent, report.describe()


async def test_the_same_plan_committed_concurrently_is_stored_once(embedded_settings: Settings) -> None:
    async with CharacterMemory.open(embedded_settings, "replays") as memory:
        plan = await memory.prepare(_input(1))
        outcomes = await asyncio.gather(*(memory.commit(plan) for _ in range(6)))
        assert all(outcome.object_ids == plan.object_ids for outcome in outcomes)
        assert sum(not outcome.warnings for outcome in outcomes) == 1  # the others were replays
        assert await stores_of(memory).stats.row_count() == len(plan.objects) + len(plan.derived_links)
        assert await stores_of(memory).vectors.count() == len(plan.index_entries)
        assert (await check(memory)).consistent


@pytest.mark.parametrize("threads", [4])
def test_the_blocking_facade_from_many_threads(embedded_settings: Settings, threads: int) -> None:
    with SyncCharacterMemory.open(embedded_settings, "threads") as memory:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            outcomes = list(pool.map(lambda n: memory.remember(_input(n)), range(12)))
            packs = list(pool.map(lambda n: memory.retrieve(f"belief {n}"), range(8)))
        ids = [i for outcome in outcomes for i in outcome.object_ids]
        assert len(set(ids)) == 36
        assert all(pack.items for pack in packs)

        async def verify() -> None:
            stored = await stores_of(memory).graph.get_objects(ids)
            assert len(stored) == 36
            report = await check(memory.memory)
            assert report.consistent, report.describe()

        memory._run(verify())
