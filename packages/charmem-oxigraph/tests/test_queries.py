"""Reads: ``links_of``, ``get_records``, ``currency`` (with ``as_of``) and ``statement_count``."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from charmem.domain.graph import GraphBatch, LifecycleAction
from charmem.domain.ids import MemoryId
from charmem.domain.model import Relation
from charmem.domain.retrieval import CurrencyStatus
from charmem.ports import EpisodeTurn, ExpansionReader

from charmem_oxigraph import OxigraphGraphStore

from oxigraph_builders import INDIA, PACIFIC, at, derived, entity, episode, link, observation, record, thread

#: Also run against a real SPARQL 1.1 server (``oxigraph serve``), see conftest.
GRAPH_MODES = ("in_memory", "persistent", "service", "virtuoso")


async def test_links_of_filters_by_relation_and_orders_by_id(store: OxigraphGraphStore) -> None:
    person, arc = entity(), thread()
    ep = episode(participant_entity_ids=[person.id])
    obs = observation(ep.id, mentioned_entity_ids=[person.id])
    links = [
        link(ep.id, Relation.HAS_OBSERVATION, obs.id),
        link(ep.id, Relation.INVOLVES, person.id),
        link(obs.id, Relation.MENTIONS, person.id),
        link(ep.id, Relation.PART_OF_THREAD, arc.id),
        link(obs.id, Relation.ASSOCIATED_WITH, arc.id),
    ]
    await store.write_batch(GraphBatch(objects=[person, arc, ep, obs], links=links))

    every = await store.links_of([ep.id])
    assert every == sorted([*links[:2], links[3]], key=lambda item: item.id)
    both_ends = await store.links_of([ep.id, obs.id])
    assert both_ends == sorted(links, key=lambda item: item.id)  # the ep->obs link appears once
    assert await store.links_of([person.id], relations=[Relation.MENTIONS]) == [links[2]]
    assert await store.links_of([arc.id], relations=[Relation.PART_OF_THREAD, Relation.SUPPORTS]) == [
        links[3]
    ]
    assert await store.links_of([person.id], relations=[Relation.SUPERSEDES]) == []
    assert await store.links_of([person.id], relations=[]) == []
    assert await store.links_of([]) == []
    assert await store.links_of([MemoryId.new()]) == []


async def test_links_of_leaving_out_one_relation_drops_its_links(store: OxigraphGraphStore) -> None:
    """Every relation but one (expansion's choice) is checked after decoding, not in the query."""
    person = entity()
    ep = episode(participant_entity_ids=[person.id])
    obs = observation(ep.id, mentioned_entity_ids=[person.id])
    links = [
        link(ep.id, Relation.HAS_OBSERVATION, obs.id),
        link(obs.id, Relation.MENTIONS, person.id),
        link(ep.id, Relation.INVOLVES, person.id),
    ]
    await store.write_batch(GraphBatch(objects=[person, ep, obs], links=links))

    for left_out in (Relation.MENTIONS, Relation.SUPERSEDES):
        chosen = [r for r in Relation if r is not left_out]
        kept = [lk for lk in links if lk.relation is not left_out]
        assert await store.links_of([obs.id, person.id], relations=chosen) == sorted(
            kept, key=lambda lk: lk.id
        )
    assert await store.links_of([obs.id, person.id]) == sorted(links, key=lambda lk: lk.id)


async def test_links_and_turns_answer_as_the_two_reads(store: OxigraphGraphStore) -> None:
    """Expansion's one call gives what ``links_of`` and ``episode_turns`` give (cold, then cached)."""
    person = entity()
    ep, other = episode(participant_entity_ids=[person.id]), episode()
    turns = [observation(ep.id, mentioned_entity_ids=[person.id]) for _ in range(3)]
    links = [
        *(link(ep.id, Relation.HAS_OBSERVATION, t.id) for t in turns),
        link(turns[0].id, Relation.MENTIONS, person.id),
        link(ep.id, Relation.INVOLVES, person.id),
    ]
    await store.write_batch(GraphBatch(objects=[person, ep, other, *turns], links=links))
    assert isinstance(store, ExpansionReader)
    roots, episodes = [turns[0].id, turns[2].id], [ep.id, other.id, MemoryId.new()]
    chosen = [r for r in Relation if r is not Relation.SUPERSEDES]

    def unordered(found: dict[MemoryId, list[EpisodeTurn]]) -> dict[MemoryId, list[MemoryId]]:
        return {e: sorted(t.observation_id for t in listed) for e, listed in found.items()}

    together = await store.links_and_turns(roots, relations=chosen, episode_ids=episodes)
    apart = (await store.links_of(roots, relations=chosen), await store.episode_turns(episodes))
    assert together[0] == apart[0] == sorted([links[0], links[2], links[3]], key=lambda lk: lk.id)
    assert unordered(together[1]) == unordered(apart[1]) == {ep.id: sorted(t.id for t in turns)}
    again = await store.links_and_turns(roots, relations=chosen, episode_ids=episodes)
    assert again[0] == together[0]
    assert unordered(again[1]) == unordered(together[1])
    assert await store.links_and_turns([], relations=None, episode_ids=[]) == ([], {})


async def test_get_records_orders_by_time_then_id(store: OxigraphGraphStore) -> None:
    a, b = derived(), derived()
    late = record(a.id, recorded_at=at(30, PACIFIC))
    early = record(b.id, recorded_at=at(5, INDIA))
    tie_1 = record(a.id, id=MemoryId("00000000-0000-4000-8000-000000000001"), recorded_at=at(10))
    tie_2 = record(b.id, id=MemoryId("00000000-0000-4000-8000-000000000002"), recorded_at=at(10, INDIA))
    noted = record(a.id, action=LifecycleAction.FORGET_NOTED, recorded_at=at(20))
    await store.write_batch(GraphBatch(objects=[a, b], records=[late, noted, tie_2, early, tie_1]))
    assert await store.get_records([a.id, b.id]) == [early, tie_1, tie_2, noted, late]
    assert await store.get_records([b.id]) == [early, tie_2]
    assert await store.get_records([MemoryId.new()]) == []


async def test_currency_with_supersedes_suppress_and_as_of(store: OxigraphGraphStore) -> None:
    old, new, forgotten, both, plain = derived(), derived(), derived(), derived(), episode()
    sup = link(new.id, Relation.SUPERSEDES, old.id, created_at=at(10))
    sup_both = link(new.id, Relation.SUPERSEDES, both.id, created_at=at(10))
    other_relation = link(new.id, Relation.CONTRADICTS, plain.id, created_at=at(10))
    suppress = record(forgotten.id, recorded_at=at(20))
    suppress_both = record(both.id, recorded_at=at(30, INDIA))
    noted = record(plain.id, action=LifecycleAction.FORGET_NOTED, recorded_at=at(5))
    await store.write_batch(
        GraphBatch(
            objects=[old, new, forgotten, both, plain],
            links=[sup, sup_both, other_relation],
            records=[suppress, suppress_both, noted],
        )
    )
    ids = [old.id, new.id, forgotten.id, both.id, plain.id, sup.id, suppress.id, MemoryId.new()]

    assert await store.currency(ids) == {
        old.id: CurrencyStatus.SUPERSEDED,
        new.id: CurrencyStatus.CURRENT,
        forgotten.id: CurrencyStatus.SUPPRESSED,
        both.id: CurrencyStatus.SUPPRESSED,  # suppressed beats superseded
        plain.id: CurrencyStatus.CURRENT,  # forget_noted and other relations do not count
    }
    assert await store.currency(ids, as_of=at(9)) == dict.fromkeys(
        [old.id, new.id, forgotten.id, both.id, plain.id], CurrencyStatus.CURRENT
    )
    at_ten = await store.currency(ids, as_of=at(10, PACIFIC))  # boundary: <= as_of counts
    assert at_ten[old.id] is CurrencyStatus.SUPERSEDED
    assert at_ten[both.id] is CurrencyStatus.SUPERSEDED
    assert at_ten[forgotten.id] is CurrencyStatus.CURRENT
    at_twenty = await store.currency(ids, as_of=at(20) + timedelta(microseconds=1))
    assert at_twenty[forgotten.id] is CurrencyStatus.SUPPRESSED
    assert at_twenty[both.id] is CurrencyStatus.SUPERSEDED
    assert (await store.currency([both.id], as_of=at(30)))[both.id] is CurrencyStatus.SUPPRESSED


async def test_currency_counts_records_written_before_their_target(store: OxigraphGraphStore) -> None:
    target = derived()
    await store.write_batch(GraphBatch(records=[record(target.id)]))
    assert await store.currency([target.id]) == {}
    await store.write_batch(GraphBatch(objects=[target]))
    assert await store.currency([target.id]) == {target.id: CurrencyStatus.SUPPRESSED}


async def test_currency_rejects_naive_as_of(store: OxigraphGraphStore) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        await store.currency([MemoryId.new()], as_of=at(0).replace(tzinfo=None))


async def test_statement_count_counts_triples(store: OxigraphGraphStore) -> None:
    """The compact layout: a record literal plus only the triples queries need."""
    person = entity()
    await store.write_batch(GraphBatch(objects=[person]))
    assert await store.statement_count() == 3  # the layout version, rdf:type, record
    ep = episode(participant_entity_ids=[person.id])
    await store.write_batch(GraphBatch(objects=[ep]))  # rdf:type, record, occurredAt
    assert await store.statement_count() == 3 + 3
    edge = link(ep.id, Relation.INVOLVES, person.id)  # rdf:type, record, from, relation, to
    await store.write_batch(GraphBatch(links=[edge]))
    assert await store.statement_count() == 3 + 3 + 5
    assert await store.links_of([person.id]) == [edge]


async def test_object_and_link_ids_list_the_collection_only() -> None:
    """Inventory for operational tools: every object id (by type) and link id, sorted."""
    from datetime import UTC, datetime

    from charmem import Entity, Episode, MemoryId, MemoryLink, ObjectType, Relation
    from charmem.domain.graph import GraphBatch
    from charmem.settings import Settings

    from charmem_oxigraph import InMemoryOxigraphGraphStore

    when = datetime(2024, 1, 1, tzinfo=UTC)
    store = InMemoryOxigraphGraphStore.from_settings(Settings(graph_store_mode="in_memory"), "inv")
    other = store.for_collection("other")
    entity = Entity(id=MemoryId.new(), created_at=when)
    episode = Episode(
        id=MemoryId.new(), occurred_at=when, created_at=when, participant_entity_ids=[entity.id]
    )
    link = MemoryLink(
        id=MemoryId.new(), from_id=episode.id, relation=Relation.INVOLVES, to_id=entity.id, created_at=when
    )
    await store.write_batch(GraphBatch(objects=[entity, episode], links=[link]))
    await other.write_batch(GraphBatch(objects=[Entity(id=MemoryId.new(), created_at=when)]))
    assert await store.object_ids() == sorted([entity.id, episode.id])
    assert await store.object_ids([ObjectType.EPISODE]) == [episode.id]
    assert await store.link_ids() == [link.id]
    assert len(await other.object_ids()) == 1
    await other.close()
    await store.close()


async def test_links_written_before_their_endpoints_are_found_from_either_side(tmp_path: Path) -> None:
    """A link names an endpoint not stored yet by its relation's declared kind, or ``object``.

    Once the endpoints are stored (as other kinds than declared, too) and their kinds are known to
    a reopened store, ``links_of`` finds every such link from the side it names them on.
    """
    ep, obs, person, arc, source = (
        episode(),
        observation(MemoryId.new()),
        entity(),
        thread(),
        observation(MemoryId.new()),
    )
    odd, belief = entity(), derived()  # odd: an entity a has_observation link names as an episode
    links = [
        link(ep.id, Relation.HAS_OBSERVATION, obs.id),  # episode:, observation:
        link(odd.id, Relation.HAS_OBSERVATION, obs.id),  # episode: for an entity
        link(ep.id, Relation.INVOLVES, person.id),  # entity:
        link(belief.id, Relation.PART_OF_THREAD, arc.id),  # object: on the from side, thread: on the to side
        link(belief.id, Relation.DERIVED_FROM, source.id),  # object: on the to side
        link(arc.id, Relation.SUPPORTS, odd.id),  # object: on both sides
    ]
    path = tmp_path / "early"
    async with await OxigraphGraphStore.open_async("test", path=path) as store:
        await store.write_batch(GraphBatch(links=links))
        await store.write_batch(GraphBatch(objects=[ep, obs, person, arc, source, odd, belief]))
    async with await OxigraphGraphStore.open_async("test", path=path) as store:
        every = [ep.id, obs.id, person.id, arc.id, source.id, odd.id, belief.id]
        assert len(await store.get_objects(every)) == len(every)  # their kinds are known now
        for memory_id in every:
            touching = sorted(
                (lk for lk in links if memory_id in (lk.from_id, lk.to_id)), key=lambda lk: lk.id
            )
            assert await store.links_of([memory_id]) == touching
            for relation in {lk.relation for lk in touching}:
                assert await store.links_of([memory_id], relations=[relation]) == [
                    lk for lk in touching if lk.relation is relation
                ]
