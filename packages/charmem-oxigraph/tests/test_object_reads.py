"""A cold read of objects of hinted kind reads each node's type and record, one row per node.

What it misses (a tombstone, a wrong hint, a damaged node) is read whole, so it answers exactly
as reading every triple did. Every test runs on a real store.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from charmem.domain.graph import GraphBatch, GraphErasure, Tombstone
from charmem.domain.ids import MemoryId
from charmem.domain.model import ObjectType
from charmem.errors import BackendError, PurgedMemoryError

from charmem_oxigraph import OxigraphGraphStore

from oxigraph_builders import derived, entity, episode, observation, spy_queries


async def test_hinted_objects_are_read_as_type_and_record(
    store: OxigraphGraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ep = episode()
    obs = [observation(ep.id) for _ in range(3)]
    belief = derived(text="a belief")
    await store.write_batch(GraphBatch(objects=[ep, *obs, belief]))
    store._cache().clear()  # a reopened store: kinds unknown
    store.hint_object_types({**{o.id: ObjectType.OBSERVATION for o in obs}, belief.id: ObjectType.DERIVED})
    queries = spy_queries(store, monkeypatch)
    ids = [belief.id, *(o.id for o in obs)]
    assert await store.get_objects(ids) == dict(zip(ids, [belief, *obs], strict=True))
    (read,) = queries
    assert read.startswith("SELECT ?root ?c ?rec")
    assert sum(read.count(str(i)) for i in ids) == len(ids)  # one IRI an id


async def test_a_purged_or_wrongly_hinted_id_is_read_whole(
    store: OxigraphGraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tombstone stays a tombstone (never taken for absent), a wrong hint still finds the object."""
    gone, here = entity(), observation(MemoryId.new())
    await store.write_batch(GraphBatch(objects=[gone, here]))
    await store.erase(
        GraphErasure(tombstones=[Tombstone(id=gone.id, object_type="entity", purged_at=datetime.now(UTC))])
    )
    store.hint_object_types({gone.id: ObjectType.ENTITY, here.id: ObjectType.ENTITY})  # here: wrong
    queries = spy_queries(store, monkeypatch)
    assert await store.get_objects([gone.id, here.id]) == {here.id: here}
    assert len(queries) == 2  # type and record under the hints, then both whole under every kind
    assert set(await store.tombstones([gone.id])) == {gone.id}
    with pytest.raises(PurgedMemoryError):
        await store.write_batch(GraphBatch(objects=[gone]))


async def test_a_hinted_node_without_its_type_is_refused_as_before(store: OxigraphGraphStore) -> None:
    """A record without an ``rdf:type`` is no item (read whole, as an unhinted read sees it)."""
    from pyoxigraph import NamedNode, Quad

    from charmem_oxigraph import node_iri

    person = entity()
    await store.write_batch(GraphBatch(objects=[person]))
    assert store._shared is not None
    subject = NamedNode(node_iri("entity", person.id))
    typed = NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#type")
    for quad in list(store._shared.store.quads_for_pattern(subject, typed, None, NamedNode(store.graph_iri))):
        store._shared.store.remove(quad)
    store._cache().clear()
    unhinted = await store.get_objects([person.id])
    store._cache().clear()
    store.hint_object_types({person.id: ObjectType.ENTITY})
    assert await store.get_objects([person.id]) == unhinted == {}
    store._cache().clear()
    store.hint_object_types({person.id: ObjectType.ENTITY})
    store._shared.store.add(
        Quad(subject, typed, NamedNode("urn:charmem:vocab#Entity"), NamedNode(store.graph_iri))
    )
    store._shared.store.add(
        Quad(subject, typed, NamedNode("urn:charmem:vocab#Observation"), NamedNode(store.graph_iri))
    )
    with pytest.raises(BackendError):
        await store.get_objects([person.id])
