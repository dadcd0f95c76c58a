"""An episode's scene in the compact layout: queryable triples, unchanged records without one, races.

The round trips, replays, conflicts and erasure of scenes are in the graph contract suite
(``charmem_contract._graph_scenes``), run in every mode by ``test_contract*.py``.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
from charmem.domain.graph import GraphBatch
from charmem.domain.ids import MemoryId
from charmem.domain.model import Episode
from charmem.domain.rules import normalise_name
from charmem.domain.scene import Scene, SceneParticipant, SceneSetting
from charmem.usecases.planning import derive_links
from pyoxigraph import Literal, RdfFormat, parse

from charmem_oxigraph import OxigraphGraphStore, SparqlServiceGraphStore
from charmem_oxigraph import _logic as lg
from charmem_oxigraph import _queries as q
from charmem_oxigraph import _vocab as v
from charmem_oxigraph import _writing as wr
from charmem_oxigraph._codec import encode_item, record_json
from charmem_oxigraph.testing import OxigraphServer

from oxigraph_builders import HOSTILE_TEXTS, INDIA, PACIFIC, at, entity, episode

#: Also run against real SPARQL 1.1 servers (``oxigraph serve``, Virtuoso 7), see conftest.
GRAPH_MODES = ("in_memory", "persistent", "service", "virtuoso")

KITCHEN = 'the kitchen "north"\nside'


def _resolve(memory_id: MemoryId, declared: str | None) -> str:
    return f"<{v.node_iri(declared or 'object', memory_id)}>"


async def _rows(store: Any, query: str) -> list[tuple[str, ...]]:
    """The values of ``query``'s solutions, sorted (through the store's own query path)."""
    if isinstance(store, SparqlServiceGraphStore):
        solutions: Any = await store._select(query, "read in a test")
    else:
        assert store._shared is not None
        solutions = store._shared.store.query(query)
    return sorted(tuple(term.value for term in row) for row in solutions)


def _select(store: Any, variables: str, patterns: str) -> str:
    vocab = f"PREFIX vocab: <{v.VOCAB}> "
    return f"{vocab}SELECT {variables} WHERE {{ GRAPH <{store.graph_iri}> {{ {patterns} }} }}"


async def test_scene_triples_answer_plain_triple_patterns(store: OxigraphGraphStore) -> None:
    """Episodes in a setting, listing a notion, or with a custom value: one triple pattern or three."""
    mina, ben = entity(), entity()
    kitchen = episode(
        occurred_at=at(0, INDIA),
        scene=Scene(
            at=at(0, INDIA),
            participants=[SceneParticipant(name="Ben"), SceneParticipant(entity_id=mina.id)],
            setting=SceneSetting(key=KITCHEN, words=HOSTILE_TEXTS[7]),
            custom_values={"activity": "chess", "mood": HOSTILE_TEXTS[0]},
        ),
    )
    garden = episode(
        occurred_at=at(60, PACIFIC),
        scene=Scene(
            at=at(60, PACIFIC),
            participants=[SceneParticipant(entity_id=mina.id, description="in a straw hat")],
            setting=SceneSetting(key="garden"),
            custom_values={"activity": "weeding"},
        ),
    )
    await store.write_batch(GraphBatch(objects=[mina, ben, kitchen, garden, episode()]))
    iri = {e.id: v.node_iri("episode", e.id) for e in (kitchen, garden)}

    in_kitchen = _select(store, "?e", f"?e vocab:settingKey {Literal(KITCHEN)}")
    assert await _rows(store, in_kitchen) == [(iri[kitchen.id],)]
    listing_mina = _select(
        store,
        "?e ?i",
        f"?e vocab:sceneParticipant ?p . ?p vocab:participantEntity <{v.node_iri('entity', mina.id)}> . "
        "?p vocab:participantIndex ?i",
    )
    assert await _rows(store, listing_mina) == sorted([(iri[kitchen.id], "1"), (iri[garden.id], "0")])
    playing_chess = _select(
        store, "?e", '?e vocab:sceneCustom ?c . ?c vocab:customKey "activity" . ?c vocab:customValue "chess"'
    )
    assert await _rows(store, playing_chess) == [(iri[kitchen.id],)]
    named = _select(store, "?e ?name", "?e vocab:sceneParticipant ?p . ?p vocab:participantName ?name")
    assert await _rows(store, named) == [(iri[kitchen.id], "Ben")]


def test_an_episode_without_a_scene_keeps_its_record_and_triples() -> None:
    """No ``scene`` key and no scene triple: the record and the 3 triples of an episode before scenes."""
    bare = episode()
    assert set(json.loads(record_json(bare))) == {
        "created_at",
        "occurred_at",
        "participant_entity_ids",
        "raw_ref",
        "salience",
        "schema_version",
        "summary",
        "thread_ids",
    }
    assert len(encode_item(bare, _resolve)) == 3


def test_scene_lines_are_parsed_data_with_one_node_per_participant() -> None:
    """Every scene text is one literal (hostile text too); repeated participants stay two nodes."""
    for text in HOSTILE_TEXTS:
        scene = Scene(
            at=at(0, INDIA),
            participants=[SceneParticipant(name=text, description=text)] * 2,
            setting=SceneSetting(key=text, words=text),
            custom_values={text: text},
        )
        lines = encode_item(episode(occurred_at=scene.at, scene=scene), _resolve)
        triples = list(parse("\n".join(lines), RdfFormat.N_TRIPLES))
        texts = [t.object.value for t in triples if isinstance(t.object, Literal) and t.object.value == text]
        keys = [t.object.value for t in triples if t.predicate.value.endswith("participantNameKey")]
        assert keys == [normalise_name(text)] * 2, f"{text!r}: name keys {keys!r}"
        expected = 2 * 2 + 2 + 2 + (2 if normalise_name(text) == text else 0)  # names, words, key/value
        assert len(texts) == expected, f"{text!r}: {len(texts)} literals hold it"
        assert (
            len(triples) == len(lines) == 3 + 2 + 2 * 5 + 3
        )  # a participant: link, index, name, name key, description


async def test_a_raced_episode_keeps_the_winning_scene_only(
    service_store: SparqlServiceGraphStore, sparql_server: OxigraphServer
) -> None:
    """Two scenes stored for one episode (a late write): settling leaves exactly the winner's triples."""
    store = service_store
    mina = entity()
    scene = Scene(
        at=at(0, INDIA),
        participants=[SceneParticipant(entity_id=mina.id), SceneParticipant(name="Ben")],
        setting=SceneSetting(key="kitchen", words="warm"),
        custom_values={"activity": "chess"},
    )
    first = episode(occurred_at=scene.at, scene=scene)
    second = attrs.evolve(
        first,
        scene=attrs.evolve(
            scene,
            participants=[SceneParticipant(description="a stranger")],
            setting=SceneSetting(key="kitchen"),
            custom_values={"activity": "cards", "table": "round"},
        ),
    )
    links = derive_links(store.collection, [mina, first])
    await store.write_batch(GraphBatch(objects=[mina, first], links=links))
    _, _, late = wr.plan_write(wr.prepare_batch(GraphBatch(objects=[second])), {}, {mina.id: "entity"})
    await store._insert(late)
    assert await store.raced_writes() == [first.id]

    rows = await store._select(q.raced_nodes(store.graph_iri), "read")
    (settlement,) = [wr.settle_raced(node) for node in lg.group_rows(rows)]
    winner = first if settlement.kept == record_json(first) else second
    assert await store.settle_raced_writes() == [first.id]
    assert (await store.get_objects([first.id]))[first.id] == winner
    alone = SparqlServiceGraphStore(
        f"{store.collection}-alone",
        query_endpoint=sparql_server.query_endpoint,
        update_endpoint=sparql_server.update_endpoint,
    )
    try:
        await alone.write_batch(GraphBatch(objects=[mina, winner], links=links))
        every = "SELECT ?s ?p ?o WHERE {{ GRAPH <{}> {{ ?s ?p ?o }} }}"
        ours = await store._select(every.format(store.graph_iri), "read")
        theirs = await alone._select(every.format(alone.graph_iri), "read")
        assert {str(tuple(r)).replace(store.graph_iri, "g") for r in ours} == {
            str(tuple(r)).replace(alone.graph_iri, "g") for r in theirs
        }
    finally:
        await alone.close()


async def test_a_scene_reads_back_cold_then_warm_through_another_handle(
    service_store: SparqlServiceGraphStore, sparql_server: OxigraphServer, tmp_path: Any
) -> None:
    """Written by one handle, read by a new one: cold (decoded from the store), then warm (cached)."""
    mina = entity()
    scene = Scene(
        at=at(0, PACIFIC),
        participants=[SceneParticipant(entity_id=mina.id, name="Mina"), SceneParticipant(description="tall")],
        setting=SceneSetting(key="kitchen"),
        custom_values={"activity": "chess", "note": ""},
    )
    ep = episode(occurred_at=scene.at, scene=scene)
    path = tmp_path / "embedded"
    embedded = await OxigraphGraphStore.open_async("test", path=path)
    await embedded.write_batch(GraphBatch(objects=[mina, ep]))
    await embedded.close()
    await service_store.write_batch(GraphBatch(objects=[mina, ep]))
    reopened = await OxigraphGraphStore.open_async("test", path=path)
    other = SparqlServiceGraphStore(
        service_store.collection,
        query_endpoint=sparql_server.query_endpoint,
        update_endpoint=sparql_server.update_endpoint,
    )
    try:
        for handle in (reopened, other):
            for _ in ("cold", "warm"):
                back = (await handle.get_objects([ep.id]))[ep.id]
                assert back == ep
                assert isinstance(back, Episode)
                assert back.scene is not None
                assert back.scene.at.utcoffset() == scene.at.utcoffset()
                assert back.scene.participants == scene.participants
    finally:
        await reopened.close()
        await other.close()
