"""Decoding a stored record: equal values back, and a malformed record refused with ``CorruptNodeError``."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest
from charmem.domain.ids import MemoryId
from charmem.domain.model import Relation
from charmem.errors import CharmemError
from pyoxigraph import Literal, NamedNode

from charmem_oxigraph import _logic as lg
from charmem_oxigraph import _vocab as v
from charmem_oxigraph._codec import (
    RDF_JSON,
    RECORD,
    CorruptNodeError,
    NodeTriples,
    StoredItem,
    decode_item,
    record_json,
)

from oxigraph_builders import episode, link, observation

_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"


def _node(item: StoredItem, **changes: Any) -> NodeTriples:
    """The node of ``item`` as read back, its record's fields replaced by ``changes``."""
    kind = v.KIND_OF_CLASS[type(item)]
    data = {**json.loads(record_json(item)), **changes}
    node = NodeTriples(v.node_iri(kind, item.id))
    node.add(_TYPE, NamedNode(v.VOCAB + v.CLASS_OF_KIND[kind]))
    node.add(v.VOCAB + RECORD, Literal(json.dumps(data), datatype=NamedNode(RDF_JSON)))
    return node


def test_records_decode_to_equal_values_with_or_without_the_id_read_already() -> None:
    ep = episode()
    obs = observation(ep.id, mentioned_entity_ids=[MemoryId.new(), MemoryId.new()])
    has = link(ep.id, Relation.HAS_OBSERVATION, obs.id)
    for item in (ep, obs, has):
        assert decode_item(_node(item)) == item
        assert decode_item(_node(item), item.id) == item


@pytest.mark.parametrize(
    "changes",
    [
        {"observed_at": 12},  # an instant that is not text
        {"observed_at": "yesterday"},  # nor ISO 8601
        {"observed_at": "2024-01-01T10:00:00"},  # naive
        {"episode_id": "not-a-uuid"},
        {"episode_id": None},  # a required reference
        {"mentioned_entity_ids": ["not-a-uuid"]},
        {"mentioned_entity_ids": 7},
        {"text": "   "},
        {"salience": 3.0},
    ],
)
def test_a_malformed_observation_record_is_refused(changes: dict[str, Any]) -> None:
    ep = episode()
    with pytest.raises(CorruptNodeError):
        decode_item(_node(observation(ep.id), **changes))


@pytest.mark.parametrize(
    "changes", [{"relation": "loves"}, {"to_id": "x"}, {"from_id": 5}, {"created_at": "2024-01-01"}]
)
def test_a_malformed_link_record_is_refused(changes: dict[str, Any]) -> None:
    with pytest.raises(CorruptNodeError):
        decode_item(_node(link(MemoryId.new(), Relation.MENTIONS, MemoryId.new()), **changes))


_SCENE: dict[str, Any] = {
    "at": "2024-03-01T17:30:00+05:30",
    "participants": [{"entity_id": None, "name": "Mina", "description": None}],
    "setting": {"key": "kitchen", "words": None},
    "custom_values": {"activity": "chess"},
}


@pytest.mark.parametrize(
    "scene",
    [
        "a kitchen",  # not an object
        {**_SCENE, "at": "2024-03-01T12:00:00"},  # naive
        {**_SCENE, "at": "2024-03-01T12:00:30+00:00:30"},  # an offset of seconds
        {**_SCENE, "participants": [{"entity_id": None, "name": None, "description": None}]},
        {**_SCENE, "participants": [{"name": "Mina"}]},  # keys missing
        {**_SCENE, "participants": "Mina"},
        {**_SCENE, "setting": {"key": None, "words": None}},
        {**_SCENE, "custom_values": {"activity": 3}},
        {key: value for key, value in _SCENE.items() if key != "setting"},
    ],
)
def test_a_malformed_scene_is_refused(scene: object) -> None:
    with pytest.raises(CorruptNodeError):
        decode_item(_node(episode(), scene=scene))


def test_a_scene_decodes_and_an_absent_or_null_one_is_none() -> None:
    ep = episode(occurred_at=datetime.fromisoformat(_SCENE["at"]))  # a scene's at is its episode's time
    back = decode_item(_node(ep, scene=_SCENE))
    assert back.scene is not None
    assert back.scene.at.isoformat() == _SCENE["at"]
    assert [p.name for p in back.scene.participants] == ["Mina"]
    assert decode_item(_node(ep)) == ep
    assert decode_item(_node(ep, scene=None)) == ep


def _turn_row(
    episode_id: MemoryId, record_episode: object
) -> tuple[NamedNode, NamedNode, NamedNode, Literal]:
    obs = observation(episode_id)
    data = {**json.loads(record_json(obs)), "episode_id": record_episode}
    return (
        NamedNode(v.node_iri("episode", episode_id)),
        NamedNode(v.node_iri("link", MemoryId.new())),
        NamedNode(v.node_iri("observation", obs.id)),
        Literal(json.dumps(data), datatype=NamedNode(RDF_JSON)),
    )


def test_a_turn_counts_when_its_record_names_the_episode_in_any_uuid_form() -> None:
    ep = MemoryId.new()
    rows = [_turn_row(ep, str(ep)), _turn_row(ep, str(ep).upper()), _turn_row(ep, str(MemoryId.new()))]
    assert len(lg.turns_from_rows(rows)[ep]) == 2  # the third names another episode
    with pytest.raises(CorruptNodeError):
        lg.turns_from_rows([_turn_row(ep, "not-a-uuid")])


@pytest.mark.parametrize("uuid_part", ["0" * 34 + "--", "-" * 36, "0" * 35 + "-"])
def test_a_node_iri_without_a_uuid_is_store_damage_not_a_callers_error(uuid_part: str) -> None:
    # a plain ValueError: the store maps it to BackendError, never to a caller's DraftValidationError
    with pytest.raises(ValueError, match="does not carry a UUID") as raised:
        v.memory_id_of(f"urn:charmem:observation:{uuid_part}")
    assert not isinstance(raised.value, CharmemError)
