"""The read cache of the embedded store never serves stale knowledge, and answers without queries.

Each test warms the cache with a read, changes the graph through a write, and reads again: the
second read must see the write (currency after a suppression or a supersession, a new link, a
new name, an id that was absent). Warm reads are checked to run no query at all.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path

import attrs
import pytest
from charmem.domain.graph import GraphBatch
from charmem.domain.ids import MemoryId
from charmem.domain.model import Relation
from charmem.domain.retrieval import CurrencyStatus
from charmem.errors import IdConflictError
from charmem.ports import EpisodeTurn

from charmem_oxigraph import OxigraphGraphStore
from charmem_oxigraph._cache import CurrencyFacts, GraphCache

from oxigraph_builders import (
    at,
    derived,
    entity,
    episode,
    known_as,
    link,
    observation,
    record,
    spy_queries,
)

C, S, E = CurrencyStatus.CURRENT, CurrencyStatus.SUPERSEDED, CurrencyStatus.SUPPRESSED


class _NoQueries:
    """Stands in for the pyoxigraph store: any query or write fails the test."""

    def query(self, *_args: object, **_kwargs: object) -> object:
        raise AssertionError("a warm read ran a query")

    def load(self, *_args: object, **_kwargs: object) -> None:
        raise AssertionError("unexpected write")


async def test_warm_reads_run_no_query(store: OxigraphGraphStore, monkeypatch: pytest.MonkeyPatch) -> None:
    person = entity()
    ep = episode(participant_entity_ids=[person.id])
    obs = observation(ep.id, speaker_entity_id=person.id)
    name = derived(given_by_application=True, entity_ids=[person.id], assertions=[known_as(person.id, "Ana")])
    links = [link(ep.id, Relation.HAS_OBSERVATION, obs.id), link(name.id, Relation.ABOUT, person.id)]
    await store.write_batch(GraphBatch(objects=[person, ep, obs, name], links=links))
    ids = [person.id, ep.id, obs.id, name.id]
    cold = (
        await store.get_objects(ids),
        await store.get_links([lk.id for lk in links]),
        await store.links_of([ep.id, person.id], relations=[Relation.HAS_OBSERVATION, Relation.ABOUT]),
        await store.currency(ids),
        await store.name_assertions(),
        await store.episode_turns([ep.id]),
    )
    assert store._shared is not None
    monkeypatch.setattr(store._shared, "_store", _NoQueries())
    warm = (
        await store.get_objects(ids),
        await store.get_links([lk.id for lk in links]),
        await store.links_of([ep.id, person.id], relations=[Relation.HAS_OBSERVATION, Relation.ABOUT]),
        await store.currency(ids),
        await store.name_assertions(),
        await store.episode_turns([ep.id]),
    )
    assert warm == cold
    assert warm[2] == sorted(links, key=lambda lk: lk.id)
    assert warm[4] == [(name.id, person.id, "Ana")]
    assert warm[5] == {
        ep.id: [EpisodeTurn(observation_id=obs.id, observed_at=obs.observed_at, created_at=obs.created_at)]
    }
    # reads in a worker thread answer from the cache too, and so does an ``as_of`` view
    from charmem_oxigraph import _store

    monkeypatch.setattr(_store, "ON_LOOP_IDS", 0)
    assert await store.get_objects(ids) == cold[0]
    assert await store.currency(ids, as_of=at(0)) == dict.fromkeys(ids, C)


async def test_reference_iris_hint_the_kind_and_a_wrong_hint_falls_back(
    store: OxigraphGraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An id met as a link's endpoint is then read under that one IRI; a wrong hint costs a second
    query, never the object."""
    ep = episode()
    obs = observation(ep.id)
    turn = link(ep.id, Relation.HAS_OBSERVATION, obs.id)
    await store.write_batch(GraphBatch(objects=[ep, obs], links=[turn]))
    cache = store._cache()
    cache.clear()  # a new process: no kind known
    queries = spy_queries(store, monkeypatch)
    assert await store.get_links([turn.id]) == {turn.id: turn}
    assert cache.hints([ep.id, obs.id]) == {ep.id: "episode", obs.id: "observation"}
    queries.clear()
    assert await store.get_objects([obs.id]) == {obs.id: obs}
    assert len(queries) == 1
    assert queries[0].count(str(obs.id)) == 1  # one IRI bound, not one per kind
    cache.clear()
    cache.remember_hints({ep.id: "entity"})  # wrong
    queries.clear()
    assert await store.get_objects([ep.id]) == {ep.id: ep}
    assert len(queries) == 2
    assert cache.kinds([ep.id]) == {ep.id: "episode"}


async def test_currency_is_never_stale_after_suppression_or_supersession(store: OxigraphGraphStore) -> None:
    old, new = derived(created_at=at(0)), derived(created_at=at(0))
    await store.write_batch(GraphBatch(objects=[old, new]))
    assert await store.currency([old.id, new.id]) == {old.id: C, new.id: C}  # warm
    await store.write_batch(GraphBatch(links=[link(new.id, Relation.SUPERSEDES, old.id, created_at=at(5))]))
    assert await store.currency([old.id, new.id]) == {old.id: S, new.id: C}
    assert await store.currency([old.id], as_of=at(4)) == {old.id: C}
    await store.write_batch(GraphBatch(records=[record(old.id, recorded_at=at(8))]))
    assert await store.currency([old.id]) == {old.id: E}
    assert await store.currency([old.id], as_of=at(6)) == {old.id: S}


async def test_an_id_read_before_it_was_stored_is_found_once_written(store: OxigraphGraphStore) -> None:
    """Absent ids, adjacency and currency read before a write are brought up to date by it."""
    old, new = derived(created_at=at(0)), derived(created_at=at(0))
    assert await store.get_objects([old.id, new.id]) == {}
    assert await store.currency([old.id, new.id]) == {}
    assert await store.links_of([old.id]) == []
    early = link(new.id, Relation.SUPERSEDES, old.id)
    await store.write_batch(GraphBatch(links=[early], records=[record(new.id)]))
    assert await store.get_links([early.id]) == {early.id: early}
    assert await store.links_of([old.id]) == [early]
    await store.write_batch(GraphBatch(objects=[old, new]))
    assert await store.get_objects([old.id, new.id]) == {old.id: old, new.id: new}
    assert await store.currency([old.id, new.id]) == {old.id: S, new.id: E}


async def test_new_links_and_names_are_seen_after_a_warm_read(store: OxigraphGraphStore) -> None:
    person, ep = entity(), episode()
    first = observation(ep.id)
    await store.write_batch(
        GraphBatch(objects=[person, ep, first], links=[link(ep.id, Relation.HAS_OBSERVATION, first.id)])
    )
    assert len(await store.links_of([ep.id], relations=[Relation.HAS_OBSERVATION])) == 1
    assert await store.name_assertions() == []
    second = observation(ep.id)
    name = derived(given_by_application=True, entity_ids=[person.id], assertions=[known_as(person.id, "Bo")])
    await store.write_batch(
        GraphBatch(objects=[second, name], links=[link(ep.id, Relation.HAS_OBSERVATION, second.id)])
    )
    turns = await store.links_of([ep.id], relations=[Relation.HAS_OBSERVATION])
    assert {lk.to_id for lk in turns} == {first.id, second.id}
    assert await store.name_assertions() == [(name.id, person.id, "Bo")]


async def test_names_follow_writes_without_reading_them_again(
    store: OxigraphGraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write adds the new beliefs' names to the cached ones (no query); what a cold read finds
    afterwards is the same list."""
    ana, bo = entity(), entity()
    first = derived(given_by_application=True, entity_ids=[ana.id], assertions=[known_as(ana.id, "Ana")])
    await store.write_batch(GraphBatch(objects=[ana, bo, first]))
    assert await store.name_assertions() == [(first.id, ana.id, "Ana")]  # warm
    queries = spy_queries(store, monkeypatch)
    both = derived(
        given_by_application=True,
        entity_ids=[ana.id, bo.id],
        assertions=[known_as(bo.id, "Bo"), known_as(ana.id, "Annie")],
    )
    unnamed = derived(given_by_application=True, entity_ids=[bo.id])
    await store.write_batch(GraphBatch(objects=[both, unnamed]))
    queries.clear()
    warm = await store.name_assertions()
    assert queries == []
    store._cache().clear()
    assert warm == await store.name_assertions()
    assert {(b, s, n) for b, s, n in warm} == {
        (first.id, ana.id, "Ana"),
        (both.id, bo.id, "Bo"),
        (both.id, ana.id, "Annie"),
    }


async def test_handles_of_one_path_share_the_cache_and_the_writer(tmp_path: Path) -> None:
    """Two graph stores opened on one path: a write through one is seen through the other, and
    racing writers of one id with different content are serialised (exactly one wins)."""
    path = tmp_path / "shared"
    first = await OxigraphGraphStore.open_async("test", path=path)
    second = await OxigraphGraphStore.open_async("test", path=path)
    try:
        old, new = derived(created_at=at(0)), derived(created_at=at(0))
        await first.write_batch(GraphBatch(objects=[old, new]))
        assert await second.currency([old.id]) == {old.id: C}
        await first.write_batch(GraphBatch(records=[record(old.id)]))
        assert await second.currency([old.id]) == {old.id: E}
        shared_id = MemoryId.new()
        racing = [attrs.evolve(entity(), id=shared_id, entity_type=f"type {n}") for n in range(6)]
        outcomes = await asyncio.gather(
            *(
                (first if n % 2 else second).write_batch(GraphBatch(objects=[item]))
                for n, item in enumerate(racing)
            ),
            return_exceptions=True,
        )
        assert sum(isinstance(outcome, IdConflictError) for outcome in outcomes) == len(racing) - 1
        stored = await first.get_objects([shared_id])
        assert stored == await second.get_objects([shared_id])
        assert len(stored) == 1
    finally:
        await first.close()
        await second.close()


def test_a_reader_that_started_before_a_write_does_not_store_what_it_read() -> None:
    """The generation guard: knowledge read before a write is not kept after it."""
    cache = GraphCache()
    target = derived()
    before = cache.generation()
    cache.apply_write([record(target.id)])  # a write lands while the reader was reading
    cache.remember_currency_facts(before, {target.id: CurrencyFacts(stored=True)})
    cache.remember_items(before, {}, absent=[target.id])
    cache.remember_names(before, [])
    cache.remember_links_of(before, [target.id], None, [])
    cache.remember_episode_turns(before, [target.id], {})
    assert cache.episode_turns([target.id]) == ({}, [target.id])
    assert cache.currency_facts([target.id]) == ({}, [target.id])
    assert cache.items([target.id]) == ({}, [target.id])
    assert cache.names() is None
    assert cache.links_of([target.id], None) == ({}, [target.id])
    now = cache.generation()
    cache.remember_currency_facts(now, {target.id: CurrencyFacts(stored=True)})
    assert cache.currency_facts([target.id])[0] == {target.id: CurrencyFacts(stored=True)}


def test_a_cache_of_a_shared_server_keeps_only_immutable_items() -> None:
    cache = GraphCache(coherent=False)
    person = entity()
    cache.remember_items(cache.generation(), {person.id: person}, absent=[MemoryId.new()])
    cache.remember_currency_facts(cache.generation(), {person.id: CurrencyFacts(stored=True)})
    cache.remember_names(cache.generation(), [])
    assert cache.items([person.id]) == ({person.id: person}, [])
    assert cache.kinds([person.id]) == {person.id: "entity"}
    assert cache.currency_facts([person.id]) == ({}, [person.id])
    assert cache.names() is None


def test_the_cache_is_bounded() -> None:
    cache = GraphCache(max_entries=3)
    people = [entity() for _ in range(5)]
    cache.remember_items(cache.generation(), {p.id: p for p in people})
    found, unknown = cache.items([p.id for p in people])
    assert list(found) == [p.id for p in people[2:]]
    assert unknown == [p.id for p in people[:2]]
    with pytest.raises(ValueError, match="max_entries"):
        GraphCache(max_entries=0)


def test_currency_facts_compare_instants() -> None:
    """``as_of`` views from cached facts count what was recorded by then (inclusive)."""
    cache = GraphCache()
    target = derived()
    cache.remember_currency_facts(cache.generation(), {target.id: CurrencyFacts(stored=True)})
    cache.apply_write([record(target.id, recorded_at=at(10))])
    facts, _ = cache.currency_facts([target.id])
    assert facts[target.id].suppressed_at == (at(10),)
    assert all(isinstance(instant, datetime) for instant in facts[target.id].suppressed_at)


async def test_only_small_warm_reads_run_on_the_event_loop(
    store: OxigraphGraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A warm read of up to ON_LOOP_IDS ids skips the worker thread; a larger one uses it."""
    from charmem_oxigraph import _store

    people = [entity() for _ in range(4)]
    await store.write_batch(GraphBatch(objects=people))
    ids = [p.id for p in people]
    await store.get_objects(ids)
    await store.currency(ids)
    await store.links_of(ids)
    hops: list[str] = []
    real = asyncio.to_thread

    async def counting(func: object, /, *args: object, **kwargs: object) -> object:
        hops.append(str(args[0]))  # the read a worker thread runs, by its action
        return await real(func, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(asyncio, "to_thread", counting)
    monkeypatch.setattr(_store, "ON_LOOP_IDS", 3)
    assert await store.get_objects(ids[:3]) == {p.id: p for p in people[:3]}
    assert await store.currency(ids[:3]) == dict.fromkeys(ids[:3], C)
    assert await store.links_of(ids[:3]) == []
    assert hops == []
    assert await store.get_objects(ids) == {p.id: p for p in people}
    assert await store.currency(ids) == dict.fromkeys(ids, C)
    assert await store.links_of(ids) == []
    assert hops == ["read objects", "read currency", "read links"]


async def test_the_lifecycle_index_answers_currency_and_the_supersedes_hop_without_queries(
    store: OxigraphGraphStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once read, every supersedes link and suppress instant is known: currency of ids of known kind
    and ``links_of(..., [supersedes])`` run no query, and writes after the read keep it exact."""
    old, new, other, forgotten = (derived(created_at=at(0)) for _ in range(4))
    await store.write_batch(GraphBatch(objects=[old, new, other, forgotten]))
    ids = [old.id, new.id, other.id, forgotten.id]
    first = link(new.id, Relation.SUPERSEDES, old.id, created_at=at(5))
    await store.write_batch(GraphBatch(links=[first], records=[record(forgotten.id, recorded_at=at(6))]))
    assert await store.currency(ids) == {old.id: S, new.id: C, other.id: C, forgotten.id: E}  # reads it
    assert store._shared is not None
    real = store._shared._store
    monkeypatch.setattr(store._shared, "_store", _NoQueries())
    assert await store.currency(ids, as_of=at(5)) == {old.id: S, new.id: C, other.id: C, forgotten.id: C}
    assert await store.links_of(ids, relations=[Relation.SUPERSEDES]) == [first]
    assert await store.links_of([other.id], relations=[Relation.SUPERSEDES]) == []
    monkeypatch.setattr(store._shared, "_store", real)
    second = link(other.id, Relation.SUPERSEDES, new.id, created_at=at(7))
    await store.write_batch(GraphBatch(links=[second], records=[record(other.id, recorded_at=at(8))]))
    monkeypatch.setattr(store._shared, "_store", _NoQueries())
    expected = {old.id: S, new.id: S, other.id: E, forgotten.id: E}
    assert await store.currency(ids) == expected
    assert await store.currency(ids, as_of=at(7)) == {old.id: S, new.id: S, other.id: C, forgotten.id: E}
    assert await store.links_of([new.id], relations=[Relation.SUPERSEDES]) == sorted(
        [first, second], key=lambda lk: lk.id
    )
    monkeypatch.setattr(store._shared, "_store", real)
    store._shared.cache(store.graph_iri).clear()  # what a fresh process reads per id agrees
    assert await store.links_of([new.id], relations=[Relation.SUPERSEDES]) == sorted(
        [first, second], key=lambda lk: lk.id
    )
    assert await store.currency(ids) == expected


def test_a_lifecycle_larger_than_the_cache_is_not_indexed() -> None:
    cache = GraphCache(max_entries=2)
    old, new = derived(), derived()
    cache.remember_items(cache.generation(), {old.id: old, new.id: new})
    links = [link(new.id, Relation.SUPERSEDES, old.id) for _ in range(3)]
    assert cache.wants_lifecycle()
    cache.remember_lifecycle(cache.generation(), links, [])
    assert not cache.wants_lifecycle()  # refused: currency and the hop are read per id
    assert cache.currency_facts([old.id]) == ({}, [old.id])
    assert cache.links_of([old.id], [Relation.SUPERSEDES]) == ({}, [old.id])

    growing = GraphCache(max_entries=2)
    growing.remember_items(growing.generation(), {old.id: old})
    growing.remember_lifecycle(growing.generation(), links[:1], [])
    assert growing.currency_facts([old.id])[0] == {old.id: CurrencyFacts(True, (), (links[0].created_at,))}
    growing.apply_write([*links[1:], record(old.id)])  # now 4 entries: the index is dropped
    assert growing.currency_facts([old.id]) == ({}, [old.id])
    assert not growing.wants_lifecycle()
    growing.clear()
    assert growing.wants_lifecycle()


def test_a_lifecycle_read_across_a_write_is_not_kept() -> None:
    cache = GraphCache()
    before = cache.generation()
    cache.apply_write([record(MemoryId.new())])
    cache.remember_lifecycle(before, [], [])
    assert cache.wants_lifecycle()
