"""Objects, links and records read back equal to what was written, text byte-identical."""

from __future__ import annotations

import pytest
from charmem.domain.graph import GraphBatch, LifecycleAction, LifecycleRecord
from charmem.domain.ids import MemoryId
from charmem.domain.model import DerivedType, MemoryLink, MemoryObject, Relation, ThreadStatus
from charmem.domain.rules import canonical_content, content_equal

from charmem_oxigraph import OxigraphGraphStore

from oxigraph_builders import (
    HOSTILE_TEXTS,
    INDIA,
    PACIFIC,
    SEOUL,
    at,
    derived,
    entity,
    episode,
    known_as,
    link,
    observation,
    record,
    thread,
)

#: Also run against a real SPARQL 1.1 server (``oxigraph serve``), see conftest.
GRAPH_MODES = ("in_memory", "persistent", "service", "virtuoso")


async def test_fixture_starts_empty(store: OxigraphGraphStore) -> None:
    """Canary: the fixture yields an empty collection."""
    assert await store.statement_count() == 0
    assert await store.get_objects([MemoryId.new()]) == {}


def _full_world(text: str) -> tuple[list[MemoryObject], list[MemoryLink], list[LifecycleRecord]]:
    person, place = entity(entity_type="person"), entity(entity_type=f"place {text}")
    arc = thread(title=f"arc {text}", summary=text, status=ThreadStatus.DORMANT)
    ep = episode(
        summary=text,
        participant_entity_ids=[place.id, person.id],
        thread_ids=[arc.id],
        raw_ref=f"chat://{text}",
        salience=0.30000000000000004,
        occurred_at=at(-600, INDIA),
        created_at=at(5, PACIFIC),
    )
    obs = observation(
        ep.id,
        text=text,
        speaker_entity_id=person.id,
        mentioned_entity_ids=[place.id],
        raw_ref=text,
        salience=1.0,
        observed_at=at(-599, SEOUL),
    )
    belief = derived(
        derived_type=DerivedType.RELATIONSHIP_NOTE,
        text=text,
        episode_ids=[ep.id],
        observation_ids=[obs.id],
        entity_ids=[person.id, place.id],
        thread_ids=[arc.id],
        assertions=[
            known_as(place.id, text),
            known_as(person.id, "Ada"),
            known_as(person.id, "ada lovelace"),
        ],
        salience=0.0,
    )
    given = derived(
        derived_type=DerivedType.USER_PREFERENCE,
        text=f"given {text}",
        entity_ids=[person.id],
        assertions=[known_as(person.id, "Straße")],
        given_by_application=True,
        supersedes=[belief.id],
    )
    links = [
        link(ep.id, Relation.HAS_OBSERVATION, obs.id),
        link(belief.id, Relation.ABOUT, person.id, rationale=text),
        link(obs.id, Relation.ASSOCIATED_WITH, arc.id, rationale=""),
        link(given.id, Relation.SUPERSEDES, belief.id, created_at=at(7, INDIA)),
    ]
    records = [
        record(belief.id, rationale=text),
        record(arc.id, action=LifecycleAction.FORGET_NOTED, rationale=""),
    ]
    return [person, place, arc, ep, obs, belief, given], links, records


@pytest.mark.parametrize("text", HOSTILE_TEXTS, ids=range(len(HOSTILE_TEXTS)))
async def test_every_type_round_trips(store: OxigraphGraphStore, text: str) -> None:
    objects, links, records = _full_world(text)
    result = await store.write_batch(GraphBatch(objects=objects, links=links, records=records))
    assert result.inserted_ids == tuple(item.id for item in [*objects, *links, *records])
    assert result.existing_ids == ()

    read = await store.get_objects([obj.id for obj in objects])
    assert list(read) == [obj.id for obj in objects]
    for obj in objects:
        assert read[obj.id] == obj
        assert content_equal(read[obj.id], obj)
        assert canonical_content(read[obj.id]) == canonical_content(obj)
    read_links = await store.get_links([item.id for item in links])
    assert read_links == {item.id: item for item in links}
    assert all(content_equal(read_links[item.id], item) for item in links)
    read_records = await store.get_records([item.target_id for item in records])
    assert sorted(read_records, key=lambda r: r.id) == sorted(records, key=lambda r: r.id)


async def test_text_is_byte_identical_and_offsets_kept(store: OxigraphGraphStore) -> None:
    text = "".join(HOSTILE_TEXTS)
    ep = episode(summary=text, occurred_at=at(-1, INDIA), created_at=at(0, PACIFIC))
    obs = observation(ep.id, text=text, observed_at=at(0, SEOUL).replace(microsecond=123456))
    await store.write_batch(GraphBatch(objects=[ep, obs]))
    read = await store.get_objects([ep.id, obs.id])
    got_ep, got_obs = read[ep.id], read[obs.id]
    assert got_ep.summary.encode("utf-8") == text.encode("utf-8")  # type: ignore[union-attr]
    assert got_obs.text.encode("utf-8") == text.encode("utf-8")  # type: ignore[union-attr]
    assert got_ep.occurred_at.isoformat() == ep.occurred_at.isoformat()  # type: ignore[union-attr]
    assert got_ep.created_at.utcoffset() == PACIFIC.utcoffset(None)
    assert got_obs.observed_at.isoformat() == obs.observed_at.isoformat()  # type: ignore[union-attr]


async def test_optional_and_empty_fields_round_trip(store: OxigraphGraphStore) -> None:
    ep_none = episode(summary="", raw_ref=None)
    ep_empty = episode(summary="", raw_ref="")
    obs = observation(ep_none.id, speaker_entity_id=None)
    bare = link(ep_none.id, Relation.HAS_OBSERVATION, obs.id, rationale=None)
    await store.write_batch(GraphBatch(objects=[ep_none, ep_empty, obs], links=[bare]))
    read = await store.get_objects([ep_none.id, ep_empty.id, obs.id])
    assert read[ep_none.id] == ep_none
    assert read[ep_none.id].raw_ref is None  # type: ignore[union-attr]
    assert read[ep_empty.id] == ep_empty
    assert read[ep_empty.id].raw_ref == ""  # type: ignore[union-attr]
    assert read[obs.id] == obs
    assert (await store.get_links([bare.id]))[bare.id].rationale is None


async def test_hostile_text_stays_data(store: OxigraphGraphStore) -> None:
    """Text shaped like SPARQL updates must not touch anything outside its own literal."""
    other = store.for_collection("other")
    try:
        sentinel = entity()
        await other.write_batch(GraphBatch(objects=[sentinel]))
        before = await other.statement_count()
        for text in HOSTILE_TEXTS:
            objects, links, records = _full_world(text)
            await store.write_batch(GraphBatch(objects=objects, links=links, records=records))
        assert await other.statement_count() == before
        assert await other.get_objects([sentinel.id]) == {sentinel.id: sentinel}
    finally:
        await other.close()


async def test_links_and_objects_do_not_mix(store: OxigraphGraphStore) -> None:
    ep = episode()
    obs = observation(ep.id)
    edge = link(ep.id, Relation.HAS_OBSERVATION, obs.id)
    await store.write_batch(GraphBatch(objects=[ep, obs], links=[edge]))
    assert await store.get_objects([edge.id]) == {}
    assert await store.get_links([ep.id, obs.id]) == {}
    assert await store.get_objects([MemoryId.new(), ep.id]) == {ep.id: ep}


async def test_link_to_an_object_stored_later_still_reads_back(store: OxigraphGraphStore) -> None:
    later = derived()
    early = derived(supersedes=[later.id])
    edge = link(early.id, Relation.SUPPORTS, later.id)
    await store.write_batch(GraphBatch(objects=[early], links=[edge]))
    await store.write_batch(GraphBatch(objects=[later]))
    assert await store.get_links([edge.id]) == {edge.id: edge}
    assert await store.links_of([later.id]) == [edge]
    assert (await store.get_objects([early.id]))[early.id] == early


def test_record_literal_is_canonical_json_data() -> None:
    """The record literal is canonical JSON (sorted keys) of rdf:JSON type; hostile text stays data."""
    import json

    from pyoxigraph import RdfFormat, parse

    from charmem_oxigraph._codec import RDF_JSON, encode_item

    def resolve(memory_id: MemoryId, declared: str | None) -> str:
        return f"<urn:charmem:{declared or 'object'}:{memory_id}>"

    person = entity(entity_type="person")
    for text in HOSTILE_TEXTS:
        given = derived(text=text, given_by_application=True, entity_ids=[person.id])
        triples = list(parse("\n".join(encode_item(given, resolve)), RdfFormat.N_TRIPLES))
        records = [t.object for t in triples if t.predicate.value.endswith("#record")]
        assert len(records) == 1
        assert records[0].datatype.value == RDF_JSON
        data = json.loads(records[0].value)
        assert data["text"] == text
        assert data["given_by_application"] is True
        assert list(data) == sorted(data)
        assert json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False) == records[0].value
