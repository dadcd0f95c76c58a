"""A bulk commit on the embedded stores answers its checks from the graph store's census, and still
refuses what it must: an id stored with other content, a purged id, a reference to a purged
memory, with nothing written; a valid bulk plan commits every memory, current and indexed.

``CENSUS_MIN_PROBES`` is lowered to 1 so that this small history takes the census a bulk ingest
of thousands of memories takes (the commit's reads then probe no id kind by kind).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import attrs
import pytest

from charmem import (
    CharacterMemory,
    CurrencyStatus,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    EpisodeDraft,
    IdConflictError,
    MemoryId,
    ObservationDraft,
    PurgedMemoryError,
    RememberDrafts,
    Settings,
)
from charmem.admin import purge
from charmem.testing import stores_of
from charmem_oxigraph import OxigraphGraphStore, _reads

WHEN = datetime(2024, 3, 3, 18, 10, tzinfo=UTC)


def _session(tag: str, person: MemoryId, turns: int = 6) -> RememberDrafts:
    episode = MemoryId.deterministic("bulk-test", tag, "episode")
    said = [
        ObservationDraft(
            id=MemoryId.deterministic("bulk-test", tag, "turn", n),
            text=f"{tag}: the harbour workshop, turn {n}",
            episode_id=episode,
            observed_at=WHEN + timedelta(seconds=n),
            speaker_entity_id=person,
            created_at=WHEN,
        )
        for n in range(turns)
    ]
    return RememberDrafts(
        episodes=[
            EpisodeDraft(id=episode, occurred_at=WHEN, participant_entity_ids=[person], created_at=WHEN)
        ],
        observations=said,
        derived=[
            DerivedMemoryDraft(
                DerivedType.CLAIM,
                f"{tag}: the user runs the harbour workshop",
                id=MemoryId.deterministic("bulk-test", tag, "claim"),
                entity_ids=[person],
                observation_ids=[said[0].id],
                created_at=WHEN,
            )
        ],
    )


def _merged(*parts: RememberDrafts) -> RememberDrafts:
    return RememberDrafts(
        episodes=[d for p in parts for d in p.episodes],
        observations=[d for p in parts for d in p.observations],
        entities=[d for p in parts for d in p.entities],
        derived=[d for p in parts for d in p.derived],
    )


async def test_a_bulk_commit_with_a_census_refuses_conflicts_and_purged_ids(
    embedded_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    person = MemoryId.deterministic("bulk-test", "person")
    first = _merged(
        RememberDrafts(entities=[EntityDraft(id=person, entity_type="person", created_at=WHEN)]),
        _session("first", person),
    )
    async with CharacterMemory.open(embedded_settings, "bulk") as memory:
        await memory.commit(await memory.prepare(first))
        gone = first.observations[3].id
        await purge(memory, [gone])

    monkeypatch.setattr(_reads, "CENSUS_MIN_PROBES", 1)
    async with CharacterMemory.open(embedded_settings, "bulk") as memory:
        graph = stores_of(memory).graph
        assert isinstance(graph, OxigraphGraphStore)

        async def counts() -> tuple[int, int, int]:
            stats = await stores_of(memory).stats.row_count()
            return (await graph.statement_count(), await stores_of(memory).vectors.count(), stats)

        before = await counts()
        sessions = [_session(f"s{n}", person) for n in range(8)]
        clash = attrs.evolve(first.observations[0], text="other words under a stored id")
        refer = attrs.evolve(first.derived[0], id=MemoryId.new(), observation_ids=[gone])
        again = attrs.evolve(first.observations[3], text="the purged turn, written again")
        for bad, error in (
            (RememberDrafts(observations=[clash]), IdConflictError),
            (RememberDrafts(derived=[refer]), PurgedMemoryError),
            (RememberDrafts(observations=[again]), PurgedMemoryError),
        ):
            plan = await memory.prepare(_merged(*sessions, bad))
            with pytest.raises(error):
                await memory.commit(plan)
            assert graph._cache().has_census
            assert await counts() == before  # nothing written

        plan = await memory.prepare(_merged(*sessions))
        outcome = await memory.commit(plan)
        assert not outcome.repair_markers
        assert await stores_of(memory).vectors.count() == before[1] + len(plan.index_entries)
        ids = list(plan.object_ids)
        assert set((await graph.currency(ids)).values()) == {CurrencyStatus.CURRENT}
        replay = await memory.commit(plan)  # equal content: accepted, nothing new
        assert replay.warnings
        assert await stores_of(memory).vectors.count() == before[1] + len(plan.index_entries)
        pack = await memory.retrieve("s3: the harbour workshop, turn 2")
        assert MemoryId.deterministic("bulk-test", "s3", "turn", 2) in {item.id for item in pack.items}
