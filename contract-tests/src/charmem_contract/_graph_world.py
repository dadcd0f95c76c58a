"""The sample graph the graph store suite writes: one object of every type, links, records, an erasure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from charmem.domain.graph import GraphBatch, GraphErasure, LifecycleAction, Tombstone
from charmem.domain.ids import MemoryId
from charmem.domain.model import (
    Actor,
    BeliefAssertion,
    Counterpart,
    DerivedType,
    MemoryLink,
    MemoryObject,
    ObjectType,
    Relation,
    ThreadStatus,
)
from charmem.domain.retrieval import CurrencyStatus
from charmem.domain.scene import Scene, SceneParticipant, SceneSetting
from charmem.ports import GraphStore
from charmem_contract import data
from charmem_contract.data import SEOUL, at

__all__ = ["C", "E", "S", "erase_world", "fields_of", "ids_of", "sample_world"]

S, E = CurrencyStatus.SUPERSEDED, CurrencyStatus.SUPPRESSED
C = CurrencyStatus.CURRENT


def sample_world() -> tuple[GraphBatch, dict[str, Any]]:
    """One object of every type with every optional field set (an episode's scene too), links and a record."""
    person = data.entity(entity_type="person")
    place = data.entity(entity_type="place", created_at=at(1, SEOUL))
    garden = data.thread(title="garden", summary="the allotment", status=ThreadStatus.DORMANT)
    visit = data.episode(
        summary="a visit to the allotment",
        participant_entity_ids=[place.id, person.id],
        thread_ids=[garden.id],
        raw_ref="chat:42#7",
        salience=0.75,
        occurred_at=at(-60, SEOUL),
        scene=Scene(
            at=at(-60, SEOUL),
            participants=[
                SceneParticipant(entity_id=person.id),
                SceneParticipant(name="Mina"),
                SceneParticipant(description="a neighbour with a straw hat"),
                SceneParticipant(entity_id=place.id, name="the allotment", description="muddy"),
            ],
            setting=SceneSetting(key="allotment", words="rows of tomatoes under netting"),
            custom_values={"activity": "planting", "weather": ""},
        ),
    )
    turn = data.observation(
        visit.id,
        text="we planted tomatoes",
        speaker_entity_id=person.id,
        mentioned_entity_ids=[place.id],
        raw_ref="chat:42#8",
        salience=1.0,
    )
    belief = data.derived(
        derived_type=DerivedType.USER_PREFERENCE,
        text="likes tomatoes",
        observation_ids=[turn.id],
        episode_ids=[visit.id],
        thread_ids=[garden.id],
        salience=0.0,
    )
    name = data.derived(
        derived_type=DerivedType.CLAIM,
        text="the person is called Mina",
        names=[(person.id, "Mina"), (person.id, "Mina Park")],
        given_by_application=True,
    )
    newer = data.derived(text="likes cherry tomatoes", observation_ids=[turn.id], supersedes=[belief.id])
    promise = data.derived(  # obligation parties: who owes, to whom (no names)
        derived_type=DerivedType.COMMITMENT,
        text="bring seedlings on Sunday",
        observation_ids=[turn.id],
        entity_ids=[person.id, place.id],
        assertions=[BeliefAssertion(person.id, Actor()), BeliefAssertion(place.id, Counterpart())],
    )
    links = [
        data.link(visit.id, Relation.HAS_OBSERVATION, turn.id),
        data.link(newer.id, Relation.SUPERSEDES, belief.id, created_at=at(5)),
        data.link(belief.id, Relation.SUPPORTS, name.id, rationale="said so twice"),
    ]
    records = [data.record(name.id, action=LifecycleAction.FORGET_NOTED, recorded_at=at(7))]
    batch = GraphBatch(
        objects=[person, place, garden, visit, turn, belief, name, newer, promise],
        links=links,
        records=records,
    )
    return batch, {"person": person, "visit": visit, "turn": turn, "belief": belief, "newer": newer}


def ids_of(items: Sequence[Any]) -> list[MemoryId]:
    """The ids of ``items``, in order."""
    return [item.id for item in items]


def fields_of(obj: MemoryObject | MemoryLink) -> dict[str, Any]:
    """The attributes of ``obj`` by name (not recursing)."""
    return attrs.asdict(obj, recurse=False)


async def erase_world(graph_store: GraphStore) -> dict[str, Any]:
    """The world of :func:`sample_world` plus two records, then an erasure of two objects.

    Erased: the observation ``turn`` (with its ``has_observation`` link and the record
    targeting it) and the derived memory ``newer``, whose ``supersedes`` link to ``belief`` is
    kept (its ``from`` now refers to a tombstone, and ``belief`` stays superseded).
    """
    batch, world = sample_world()
    turn, newer, visit = world["turn"], world["newer"], world["visit"]
    about_turn = data.record(turn.id, rationale="suppress the turn")
    cascade = data.record(visit.id, related_ids=[turn.id], recorded_at=at(8))
    await graph_store.write_batch(batch)
    await graph_store.write_batch(GraphBatch(records=[about_turn, cascade]))
    has_observation, supersede, supports = batch.links
    purged_at = at(90, SEOUL)
    erasure = GraphErasure(
        tombstones=[
            Tombstone(id=turn.id, object_type=ObjectType.OBSERVATION, purged_at=purged_at),
            Tombstone(id=newer.id, object_type=ObjectType.DERIVED, purged_at=purged_at),
        ],
        link_ids=[has_observation.id],
        record_ids=[about_turn.id],
    )
    before = await graph_store.statement_count()
    await graph_store.erase(erasure)
    return {
        **world,
        "batch": batch,
        "erasure": erasure,
        "before": before,
        "cascade": cascade,
        "kept_links": sorted([supersede, supports], key=lambda lk: lk.id),
        "supersede": supersede,
        "survivors": [o for o in batch.objects if o.id not in (turn.id, newer.id)],
    }
