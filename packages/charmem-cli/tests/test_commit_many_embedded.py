"""``commit_many`` on the embedded stores: plans commit in order, each atomically, with their texts
embedded across plans in calls of the provider's ``preferred_batch_size``; a failing plan leaves
the plans before it committed and the plans after it unwritten, with a typed error naming it.
``ingest-locomo`` and ``import`` embed in the provider's batch size too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

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
    PlanSequenceError,
    RememberDrafts,
    Settings,
    SyncCharacterMemory,
)
from charmem.admin import check, export_collection, import_collection
from charmem.testing import HashingEmbeddingProvider, stores_of
from charmem.usecases.embedding import DEFAULT_EMBED_BATCH_SIZE, provider_batch_size
from charmem_cli._memory_commands import ingest_locomo

WHEN = datetime(2024, 5, 2, 9, 30, tzinfo=UTC)
PERSON = MemoryId.deterministic("many-test", "person")


class CountingEmbedder(HashingEmbeddingProvider):
    """The hashing embedder stating ``preferred_batch_size``, recording each call's size."""

    def __init__(self, preferred_batch_size: int) -> None:
        super().__init__(64)
        self.preferred_batch_size = preferred_batch_size
        self.calls: list[int] = []

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        return await super().embed_documents(texts)


def _person() -> RememberDrafts:
    return RememberDrafts(entities=[EntityDraft(id=PERSON, entity_type="person", created_at=WHEN)])


def _session(n: int, turns: int = 7, supersedes: Sequence[MemoryId] = ()) -> RememberDrafts:
    episode = MemoryId.deterministic("many-test", n, "episode")
    when = WHEN + timedelta(days=n)
    said = [
        ObservationDraft(
            id=MemoryId.deterministic("many-test", n, "turn", t),
            text=f"session {n}: the lighthouse keeper talks about boats, turn {t}",
            episode_id=episode,
            observed_at=when + timedelta(seconds=t),
            speaker_entity_id=PERSON,
            created_at=when,
        )
        for t in range(turns)
    ]
    claim = DerivedMemoryDraft(
        DerivedType.CLAIM,
        f"session {n}: the keeper owns {n + 1} boats",
        id=_claim(n),
        entity_ids=[PERSON],
        observation_ids=[said[0].id],
        supersedes=supersedes,
        created_at=when,
    )
    return RememberDrafts(
        episodes=[
            EpisodeDraft(id=episode, occurred_at=when, participant_entity_ids=[PERSON], created_at=when)
        ],
        observations=said,
        derived=[claim],
    )


def _claim(n: int) -> MemoryId:
    return MemoryId.deterministic("many-test", n, "claim")


def _settings(root: Path) -> Settings:
    """The embedded stores (persistent Oxigraph, Qdrant Edge, SQLite stats) under ``root``."""
    return Settings.from_mapping(
        {
            "GRAPH_STORE_MODE": "persistent",
            "VECTOR_STORE_MODE": "embedded",
            "RETRIEVAL_STATS_STORE_MODE": "sqlite",
            "EMBEDDING_PROVIDER": "hashing",
        }
    ).with_store_root(root)


async def test_plans_commit_in_order_with_texts_embedded_in_the_providers_batch_size(tmp_path: Path) -> None:
    drafts = [_person(), *(_session(n) for n in range(6)), _session(6, supersedes=[_claim(2)])]
    embedder = CountingEmbedder(preferred_batch_size=16)
    async with CharacterMemory.open(_settings(tmp_path / "many"), "m", embedding_provider=embedder) as memory:
        plans = [await memory.prepare(d) for d in drafts]
        outcomes = await memory.commit_many(plans)
        report = await check(memory)
        stores = stores_of(memory)
        points = await stores.vectors.point_ids()
        currency = await stores.graph.currency([_claim(2), _claim(6)])
    texts = sum(len(p.index_entries) for p in plans)
    assert texts > 3 * 16
    # gathered across plans: whole batches, then what is left; the deletion of the claim that
    # session 6 supersedes flushes what was pending before it
    assert sum(embedder.calls) == texts
    assert len(embedder.calls) <= -(-texts // 16) + 1
    assert embedder.calls.count(16) >= texts // 16 - 1
    assert [o.object_ids for o in outcomes] == [p.object_ids for p in plans]
    assert all(not o.repair_markers for o in outcomes)
    assert report.consistent, report.to_dict()
    assert currency[_claim(2)] is CurrencyStatus.SUPERSEDED
    assert _claim(2) not in points and _claim(6) in points

    one_by_one = CountingEmbedder(preferred_batch_size=16)
    async with CharacterMemory.open(
        _settings(tmp_path / "one"), "m", embedding_provider=one_by_one
    ) as memory:
        single = [await memory.commit(await memory.prepare(d)) for d in drafts]
        assert await stores_of(memory).vectors.point_ids() == points
        assert await stores_of(memory).stats.row_count() > 0
    assert [o.object_ids for o in single] == [o.object_ids for o in outcomes]
    assert [o.link_ids for o in single] == [o.link_ids for o in outcomes]
    assert len(one_by_one.calls) > len(embedder.calls)


async def test_a_failing_plan_leaves_earlier_plans_committed_and_later_ones_unwritten(tmp_path: Path) -> None:
    embedder = CountingEmbedder(preferred_batch_size=8)
    async with CharacterMemory.open(_settings(tmp_path), "m", embedding_provider=embedder) as memory:
        await memory.commit(await memory.prepare(_person()))
        await memory.commit(await memory.prepare(_session(2)))
        good = [await memory.prepare(d) for d in (_session(0), _session(1))]
        clash = _session(2)  # the same ids as the stored session 2, with other text
        clash = RememberDrafts(
            episodes=clash.episodes,
            observations=[
                ObservationDraft(
                    id=o.id,
                    text=o.text + " (changed)",
                    episode_id=o.episode_id,
                    observed_at=o.observed_at,
                    speaker_entity_id=PERSON,
                    created_at=o.created_at,
                )
                for o in clash.observations
            ],
        )
        later = await memory.prepare(_session(3))
        plans = [*good, await memory.prepare(clash), later]
        with pytest.raises(PlanSequenceError) as raised:
            await memory.commit_many(plans)
        report = await check(memory)
        stores = stores_of(memory)
        points = await stores.vectors.point_ids()
        written = await stores.graph.get_objects(list(later.object_ids))
        earlier = await stores.graph.currency(list(good[1].object_ids))
    error = raised.value
    assert error.index == 2
    assert isinstance(error.error, IdConflictError) and error.__cause__ is error.error
    assert "plan 2 of 4" in str(error) and "plans[2:]" in str(error)
    assert [o.object_ids for o in error.outcomes] == [p.object_ids for p in good]
    assert all(status is CurrencyStatus.CURRENT for status in earlier.values())
    assert {e.id for p in good for e in p.index_entries} <= points
    assert not written and not {e.id for e in later.index_entries} & points
    assert report.consistent, report.to_dict()


async def test_commit_many_refuses_what_is_not_a_list_of_plans(tmp_path: Path) -> None:
    async with CharacterMemory.open(
        _settings(tmp_path), "m", embedding_provider=CountingEmbedder(8)
    ) as memory:
        plan = await memory.prepare(_person())
        with pytest.raises(ValueError, match="list or tuple"):
            await memory.commit_many(plan)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="RememberWritePlan"):
            await memory.commit_many([plan, _person()])  # type: ignore[list-item]
        assert await memory.commit_many([]) == []


def test_the_batch_size_is_the_providers_or_the_default() -> None:
    assert provider_batch_size(CountingEmbedder(300)) == 300
    assert provider_batch_size(CountingEmbedder(300), 7) == 7
    assert provider_batch_size(HashingEmbeddingProvider()) == DEFAULT_EMBED_BATCH_SIZE
    assert provider_batch_size(CountingEmbedder(0)) == DEFAULT_EMBED_BATCH_SIZE


def _conversation(path: Path, sessions: int = 5, turns: int = 9) -> Path:
    data: dict[str, object] = {"sample_id": "tiny", "speaker_a": "Ana", "speaker_b": "Bo"}
    for n in range(1, sessions + 1):
        data[f"session_{n}_date_time"] = f"1:56 pm on {n} May, 2023"
        data[f"session_{n}"] = [
            {"speaker": "Ana" if t % 2 else "Bo", "dia_id": f"D{n}:{t}", "text": f"talk {n}.{t} about kites"}
            for t in range(1, turns + 1)
        ]
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


async def test_ingest_locomo_and_import_embed_in_the_providers_batch_size(tmp_path: Path) -> None:
    embedder = CountingEmbedder(preferred_batch_size=16)
    settings = _settings(tmp_path / "ingest")
    report = await ingest_locomo(
        [_conversation(tmp_path / "tiny.json")],
        settings,
        collection="tiny",
        per_file=False,
        include_facts=True,
        progress=False,
        provider=embedder,
    )
    texts = report["texts"]
    batches = [16] * (texts // 16) + [texts % 16]
    assert texts == 2 + 5 * 9 and embedder.calls == batches  # two names, then the turns
    async with CharacterMemory.open(settings, "tiny", embedding_provider=embedder) as memory:
        assert (await check(memory)).consistent
        await export_collection(memory, tmp_path / "backup")

    restorer = CountingEmbedder(preferred_batch_size=16)
    async with CharacterMemory.open(
        _settings(tmp_path / "restored"), "tiny", embedding_provider=restorer
    ) as memory:
        restored = await import_collection(memory, tmp_path / "backup")
    assert restored.vectors.indexed == texts
    assert restorer.calls == batches


class FailingOnce(CountingEmbedder):
    """Fails its second ``embed_documents`` call (a provider outage), answers every other."""

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if len(self.calls) == 1:
            self.calls.append(len(texts))
            raise RuntimeError("provider unavailable")
        return await super().embed_documents(texts)


async def test_a_failed_embedding_call_marks_each_plan_it_spans_and_a_replay_repairs(tmp_path: Path) -> None:
    drafts = [_person(), *(_session(n) for n in range(4))]
    embedder = FailingOnce(preferred_batch_size=10)
    async with CharacterMemory.open(_settings(tmp_path), "m", embedding_provider=embedder) as memory:
        plans = [await memory.prepare(d) for d in drafts]
        outcomes = await memory.commit_many(plans)
        failed = [(index, set(marker.ids)) for index, o in enumerate(outcomes) for marker in o.repair_markers]
        assert not (await check(memory)).vectors_consistent
        replayed = await memory.commit_many(plans)
        report = await check(memory)
    # the second call held texts 10-19, of two sessions: one marker for each, naming its ids
    entries = [(index, e.id) for index, p in enumerate(plans) for e in p.index_entries]
    second = entries[10:20]
    assert len({index for index, _id in second}) == 2
    assert sorted(index for index, _ids in failed) == sorted({index for index, _id in second})
    assert set().union(*(ids for _index, ids in failed)) == {memory_id for _i, memory_id in second}
    assert all(not o.repair_markers for o in replayed)
    assert report.consistent, report.to_dict()


def test_the_blocking_facade_commits_many(tmp_path: Path) -> None:
    embedder = CountingEmbedder(preferred_batch_size=16)
    with SyncCharacterMemory.open(_settings(tmp_path), "m", embedding_provider=embedder) as memory:
        plans = [memory.prepare(d) for d in (_person(), _session(0), _session(1), _session(2))]
        outcomes = memory.commit_many(plans)
    assert [o.object_ids for o in outcomes] == [p.object_ids for p in plans]
    assert embedder.calls == [16, sum(len(p.index_entries) for p in plans) - 16]
