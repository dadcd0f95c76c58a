"""``write_batch``: atomic check-then-write, idempotent replay, id conflicts across every kind."""

from __future__ import annotations

import asyncio

import attrs
import pytest
from charmem.domain.graph import GraphBatch, GraphWriteResult
from charmem.domain.ids import MemoryId
from charmem.domain.model import Entity, Episode, Relation
from charmem.errors import IdConflictError, PlanValidationError

from charmem_oxigraph import OxigraphGraphStore

from oxigraph_builders import at, derived, entity, episode, link, observation, record, thread

#: Also run against a real SPARQL 1.1 server (``oxigraph serve``), see conftest.
GRAPH_MODES = ("in_memory", "persistent", "service", "virtuoso")


def _world() -> GraphBatch:
    person = entity()
    ep = episode(participant_entity_ids=[person.id])
    obs = observation(ep.id, speaker_entity_id=person.id)
    belief = derived(episode_ids=[ep.id], entity_ids=[person.id])
    return GraphBatch(
        objects=[person, ep, obs, belief],
        links=[link(ep.id, Relation.HAS_OBSERVATION, obs.id), link(belief.id, Relation.ABOUT, person.id)],
        records=[record(belief.id)],
    )


async def test_empty_batch_writes_nothing(store: OxigraphGraphStore) -> None:
    assert await store.write_batch(GraphBatch()) == GraphWriteResult()
    assert await store.statement_count() == 0


async def test_equal_content_replay_is_accepted_and_writes_nothing(store: OxigraphGraphStore) -> None:
    batch = _world()
    first = await store.write_batch(batch)
    count = await store.statement_count()
    assert count > 0
    again = await store.write_batch(batch)
    assert again.inserted_ids == ()
    assert again.existing_ids == first.inserted_ids
    assert await store.statement_count() == count


async def test_replay_ignores_order_and_offsets(store: OxigraphGraphStore) -> None:
    """Equality is canonical content: id-list order and the offset of an instant do not matter."""
    a, b = entity(), entity()
    ep = episode(participant_entity_ids=[a.id, b.id], occurred_at=at(0))
    await store.write_batch(GraphBatch(objects=[a, b, ep]))
    count = await store.statement_count()
    same = attrs.evolve(
        ep, participant_entity_ids=[b.id, a.id], occurred_at=at(0).astimezone(ep.created_at.tzinfo)
    )
    result = await store.write_batch(GraphBatch(objects=[same]))
    assert result.existing_ids == (ep.id,)
    assert await store.statement_count() == count


async def test_int_salience_replays_without_conflict(store: OxigraphGraphStore) -> None:
    ep = episode(salience=1)
    await store.write_batch(GraphBatch(objects=[ep]))
    assert (await store.write_batch(GraphBatch(objects=[ep]))).existing_ids == (ep.id,)


async def test_partial_replay_inserts_only_the_new_items(store: OxigraphGraphStore) -> None:
    batch = _world()
    await store.write_batch(batch)
    extra = entity()
    result = await store.write_batch(attrs.evolve(batch, objects=[*batch.objects, extra]))
    assert result.inserted_ids == (extra.id,)
    assert len(result.existing_ids) == len(batch)


async def test_different_content_conflicts_and_changes_nothing(store: OxigraphGraphStore) -> None:
    batch = _world()
    await store.write_batch(batch)
    count = await store.statement_count()
    ep = batch.objects[1]
    assert isinstance(ep, Episode)
    changed = attrs.evolve(ep, summary="something else")
    with pytest.raises(IdConflictError) as caught:
        await store.write_batch(GraphBatch(objects=[changed]))
    assert caught.value.ids == (str(ep.id),)
    assert str(ep.id) in caught.value.reasons
    assert isinstance(caught.value, PlanValidationError)
    assert await store.statement_count() == count
    assert (await store.get_objects([ep.id]))[ep.id] == ep


async def test_changed_link_relation_conflicts(store: OxigraphGraphStore) -> None:
    """Replacing a derived ``supersedes`` link with another relation is a conflict: stored links never
    change."""
    old, new = derived(), derived()
    sup = link(new.id, Relation.SUPERSEDES, old.id)
    await store.write_batch(GraphBatch(objects=[old, new], links=[sup]))
    with pytest.raises(IdConflictError):
        await store.write_batch(GraphBatch(links=[attrs.evolve(sup, relation=Relation.SUPPORTS)]))
    assert await store.get_links([sup.id]) == {sup.id: sup}


async def test_changed_record_conflicts(store: OxigraphGraphStore) -> None:
    target = derived()
    forget = record(target.id)
    await store.write_batch(GraphBatch(objects=[target], records=[forget]))
    same_instant = attrs.evolve(forget, recorded_at=forget.recorded_at.astimezone(at(0).tzinfo))
    assert (await store.write_batch(GraphBatch(records=[same_instant]))).existing_ids == (forget.id,)
    with pytest.raises(IdConflictError):
        await store.write_batch(GraphBatch(records=[attrs.evolve(forget, rationale="other")]))


@pytest.mark.parametrize("second_kind", ["entity", "thread", "link", "record"])
async def test_an_id_reused_across_kinds_conflicts(store: OxigraphGraphStore, second_kind: str) -> None:
    ep = episode()
    await store.write_batch(GraphBatch(objects=[ep]))
    count = await store.statement_count()
    if second_kind == "entity":
        batch = GraphBatch(objects=[entity(id=ep.id)])
    elif second_kind == "thread":
        batch = GraphBatch(objects=[thread(id=ep.id)])
    elif second_kind == "link":
        batch = GraphBatch(links=[link(ep.id, Relation.ASSOCIATED_WITH, MemoryId.new(), id=ep.id)])
    else:
        batch = GraphBatch(records=[record(MemoryId.new(), id=ep.id)])
    with pytest.raises(IdConflictError) as caught:
        await store.write_batch(batch)
    assert "unique across" in caught.value.reasons[str(ep.id)][0]
    assert await store.statement_count() == count


async def test_link_id_reused_as_object_conflicts(store: OxigraphGraphStore) -> None:
    ep = episode()
    obs = observation(ep.id)
    edge = link(ep.id, Relation.HAS_OBSERVATION, obs.id)
    forget = record(ep.id)
    await store.write_batch(GraphBatch(objects=[ep, obs], links=[edge], records=[forget]))
    for clash in (entity(id=edge.id), entity(id=forget.id)):
        with pytest.raises(IdConflictError):
            await store.write_batch(GraphBatch(objects=[clash]))


async def test_a_batch_with_one_conflict_writes_nothing(store: OxigraphGraphStore) -> None:
    stored = entity()
    await store.write_batch(GraphBatch(objects=[stored]))
    count = await store.statement_count()
    fresh = _world()
    clash = attrs.evolve(stored, entity_type="place")
    with pytest.raises(IdConflictError) as caught:
        await store.write_batch(attrs.evolve(fresh, objects=[*fresh.objects, clash]))
    assert caught.value.ids == (str(stored.id),)
    assert await store.statement_count() == count
    assert await store.get_objects([obj.id for obj in fresh.objects]) == {}
    assert await store.get_links([item.id for item in fresh.links]) == {}
    assert await store.get_records([item.target_id for item in fresh.records]) == []


async def test_an_id_twice_in_one_batch(store: OxigraphGraphStore) -> None:
    person = entity()
    result = await store.write_batch(GraphBatch(objects=[person, person]))
    assert result.inserted_ids == (person.id,)
    other = Entity(id=MemoryId.new(), entity_type="person", created_at=at(0))
    twin = Entity(id=other.id, entity_type="place", created_at=at(0))
    with pytest.raises(IdConflictError) as caught:
        await store.write_batch(GraphBatch(objects=[other, twin]))
    assert caught.value.ids == (str(other.id),)
    assert await store.get_objects([other.id]) == {}


async def test_concurrent_writers_of_one_id_never_both_insert(store: OxigraphGraphStore) -> None:
    """Writers are serialised: of N racing batches for one id, one inserts and the others see it."""
    person = entity()
    results = await asyncio.gather(*(store.write_batch(GraphBatch(objects=[person])) for _ in range(8)))
    assert sum(len(result.inserted_ids) for result in results) == 1
    shared_id = MemoryId.new()
    racing = [attrs.evolve(person, id=shared_id, entity_type=f"type {n}") for n in range(2)]
    outcomes = await asyncio.gather(
        *(store.write_batch(GraphBatch(objects=[item])) for item in racing), return_exceptions=True
    )
    assert sum(isinstance(outcome, IdConflictError) for outcome in outcomes) == 1
    assert len(await store.get_objects([shared_id])) == 1
