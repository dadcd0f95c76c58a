"""The census of the embedded store (``GraphCache``) answers bulk reads without probing every kind,
and never at the cost of a check: a census still sees ids stored as another kind, tombstones and
references written before their target, and it is only taken when the collection is small enough.

``CENSUS_MIN_PROBES`` is lowered to 1 so that small worlds take a census as a bulk write would.
"""

from __future__ import annotations

from datetime import datetime

import attrs
import pytest
from charmem.domain.graph import GraphBatch, GraphErasure, Tombstone
from charmem.domain.ids import MemoryId
from charmem.domain.model import MemoryLink, ObjectType, Relation
from charmem.domain.retrieval import CurrencyStatus
from charmem.errors import IdConflictError, PurgedMemoryError

from charmem_oxigraph import OxigraphGraphStore, _reads
from charmem_oxigraph._cache import CENSUS_MAX_ENTRIES, GraphCache

from oxigraph_builders import at, derived, entity, episode, link, observation, record, spy_queries

C, S, E = CurrencyStatus.CURRENT, CurrencyStatus.SUPERSEDED, CurrencyStatus.SUPPRESSED


@pytest.fixture
def census_always(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_reads, "CENSUS_MIN_PROBES", 1)


async def _purge(store: OxigraphGraphStore, memory_id: MemoryId, object_type: ObjectType) -> Tombstone:
    tombstone = Tombstone(id=memory_id, object_type=object_type, purged_at=at(30))
    await store.erase(GraphErasure(tombstones=[tombstone]))
    return tombstone


@pytest.mark.usefixtures("census_always")
async def test_a_census_still_refuses_ids_stored_as_any_kind_and_purged_ids(
    store: OxigraphGraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    person, ep = entity(), episode()
    turn = link(ep.id, Relation.INVOLVES, person.id)
    note = record(person.id)
    gone = derived(given_by_application=True, entity_ids=[person.id])
    await store.write_batch(GraphBatch(objects=[person, ep, gone], links=[turn], records=[note]))
    tombstone = await _purge(store, gone.id, ObjectType.DERIVED)
    statements = await store.statement_count()
    cache = store._cache()
    cache.clear()  # a new process
    queries = spy_queries(store, monkeypatch)

    fresh = [entity() for _ in range(3)]
    for clash in (
        derived(id=person.id, given_by_application=True, entity_ids=[fresh[0].id]),  # an entity's id
        entity(id=turn.id),  # a link's id
        link(fresh[0].id, Relation.MENTIONS, fresh[1].id, id=note.id),  # a record's id
        attrs.evolve(ep, summary="another summary"),  # same kind, other content
    ):
        batch = (
            GraphBatch(objects=fresh, links=[clash])
            if isinstance(clash, MemoryLink)
            else GraphBatch(objects=[*fresh, clash])
        )
        with pytest.raises(IdConflictError):
            await store.write_batch(batch)
    assert cache.has_census
    # no id was probed kind by kind: stored ones were read under their own kind only
    assert not any("urn:charmem:thread:" in query for query in queries)
    with pytest.raises(PurgedMemoryError):
        await store.write_batch(GraphBatch(objects=[*fresh, gone]))
    assert await store.statement_count() == statements  # nothing was written

    assert await store.tombstones([gone.id, fresh[0].id, person.id]) == {gone.id: tombstone}
    assert await store.get_objects([person.id, gone.id, fresh[0].id]) == {person.id: person}
    assert await store.get_links([turn.id, note.id]) == {turn.id: turn}
    result = await store.write_batch(GraphBatch(objects=fresh))
    assert result.inserted_ids == tuple(f.id for f in fresh)
    cache.clear()  # read back from the store, not from what the write remembered
    assert await store.get_objects([f.id for f in fresh]) == {f.id: f for f in fresh}


@pytest.mark.usefixtures("census_always")
@pytest.mark.parametrize("census_first", [False, True], ids=["census-after", "census-before"])
async def test_references_written_before_their_target_still_count_for_currency(
    store: OxigraphGraphStore, census_first: bool
) -> None:
    """A supersedes link and a suppress record naming ids not stored yet (``object:`` IRIs), seen
    by the census scan or by the writer once a census is held, make those objects superseded and
    suppressed when they are written; an object nobody named is current without a query."""
    old, hidden, plain = derived(created_at=at(0)), derived(created_at=at(0)), derived(created_at=at(0))
    newer = derived(created_at=at(0))
    cache = store._cache()
    if census_first:
        assert await store.get_objects([MemoryId.new()]) == {}
        assert cache.has_census
    early = link(newer.id, Relation.SUPERSEDES, old.id, created_at=at(5))
    await store.write_batch(GraphBatch(links=[early], records=[record(hidden.id, recorded_at=at(8))]))
    if not census_first:
        cache.clear()
        assert await store.get_objects([MemoryId.new()]) == {}
        assert cache.has_census
    await store.write_batch(GraphBatch(objects=[old, hidden, plain, newer]))
    facts, unknown = cache.currency_facts([old.id, hidden.id, plain.id, newer.id])
    assert set(facts) == {plain.id, newer.id}  # known without a read: nobody named them early
    assert set(unknown) == {old.id, hidden.id}
    expected = {old.id: S, hidden.id: E, plain.id: C, newer.id: C}
    assert await store.currency([old.id, hidden.id, plain.id, newer.id]) == expected
    cache.clear()
    assert await store.currency([old.id, hidden.id, plain.id, newer.id]) == expected


@pytest.mark.usefixtures("census_always")
async def test_a_census_knows_what_one_write_does_to_its_own_objects(
    store: OxigraphGraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch superseding and suppressing its own new objects: currency from the cache is the
    store's, with no query."""
    assert await store.get_objects([MemoryId.new()]) == {}
    old, new, hidden = derived(created_at=at(0)), derived(created_at=at(0)), derived(created_at=at(0))
    ep = episode()
    obs = observation(ep.id)
    await store.write_batch(
        GraphBatch(
            objects=[ep, obs, old, new, hidden],
            links=[link(new.id, Relation.SUPERSEDES, old.id, created_at=at(5))],
            records=[record(hidden.id, recorded_at=at(8))],
        )
    )
    ids = [ep.id, obs.id, old.id, new.id, hidden.id]
    queries = spy_queries(store, monkeypatch)
    warm = await store.currency(ids)
    assert queries == []
    assert warm == {ep.id: C, obs.id: C, old.id: S, new.id: C, hidden.id: E}
    assert await store.currency([old.id], as_of=at(4)) == {old.id: C}
    store._cache().clear()
    assert await store.currency(ids) == warm


@pytest.mark.usefixtures("census_always")
async def test_no_census_of_a_collection_larger_than_the_probe(
    store: OxigraphGraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A census scans at most as many nodes as the read would probe IRIs; a larger collection is
    probed as before, and the census is not tried again for a read of that size."""
    people = [entity() for _ in range(20)]
    await store.write_batch(GraphBatch(objects=people))
    cache = store._cache()
    cache.clear()
    queries = spy_queries(store, monkeypatch)
    unknown = MemoryId.new()
    assert await store.get_objects([unknown, people[0].id]) == {people[0].id: people[0]}  # 14 IRIs
    assert not cache.has_census
    assert len(queries) == 2  # the census capped at 14 nodes (of 20), then the probe
    queries.clear()
    assert await store.get_objects([MemoryId.new()]) == {}
    assert len(queries) == 1  # 7 IRIs: no census tried
    assert await store.get_objects([MemoryId.new() for _ in range(3)]) == {}  # 21 IRIs > 20 nodes
    assert cache.has_census


def test_a_census_beyond_its_bound_is_dropped() -> None:
    cache = GraphCache(max_entries=1)  # a census of up to CENSUS_MAX_ENTRIES ids
    assert cache.census_limit(100) == CENSUS_MAX_ENTRIES
    assert cache.remember_census(cache.generation(), {}, ())
    cache.apply_write([entity() for _ in range(CENSUS_MAX_ENTRIES)])
    assert cache.has_census
    cache.apply_write([entity()])
    assert not cache.has_census
    assert cache.census_limit(100) == 0  # known to hold more than the bound
    cache.clear()
    assert cache.census_limit(100) == CENSUS_MAX_ENTRIES


def test_a_census_read_before_a_write_is_not_kept() -> None:
    cache = GraphCache()
    before = cache.generation()
    cache.apply_write([entity()])
    assert not cache.remember_census(before, {}, ())
    assert not cache.has_census


async def test_absent_ids_skip_the_tombstone_lookup_but_purged_ids_do_not(
    store: OxigraphGraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a census: an id read as absent is known not purged; a purged id read as absent
    (no object) is still looked up, so its tombstone is found."""
    person = entity()
    gone = derived(given_by_application=True, entity_ids=[person.id])
    await store.write_batch(GraphBatch(objects=[person, gone]))
    tombstone = await _purge(store, gone.id, ObjectType.DERIVED)
    never = MemoryId.new()
    assert await store.get_objects([gone.id, never, person.id]) == {person.id: person}
    queries = spy_queries(store, monkeypatch)
    assert await store.tombstones([never, person.id]) == {}
    assert queries == []
    assert await store.tombstones([never, gone.id]) == {gone.id: tombstone}
    assert len(queries) == 1
    with pytest.raises(PurgedMemoryError):
        await store.write_batch(GraphBatch(objects=[gone]))


def test_currency_facts_of_a_census_are_instants() -> None:
    """Facts a census gives a new object are those of a stored object with no instant."""
    cache = GraphCache()
    assert cache.remember_census(cache.generation(), {}, ())
    item = derived()
    cache.apply_write([item, record(item.id, recorded_at=at(10))])
    facts, _ = cache.currency_facts([item.id])
    assert facts[item.id].stored
    assert facts[item.id].suppressed_at == (at(10),)
    assert all(isinstance(instant, datetime) for instant in facts[item.id].suppressed_at)
