"""The RDF vocabulary charmem writes to Oxigraph (documented as a table in the README).

Every IRI the adapter puts into a quad or into SPARQL text is built here, from constants and from
:class:`~charmem.domain.ids.MemoryId` values (canonical UUIDs), never from memory text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from charmem.domain.graph import LifecycleRecord
from charmem.domain.ids import MemoryId
from charmem.domain.model import (
    DerivedMemory,
    Entity,
    Episode,
    MemoryLink,
    MemoryThread,
    Observation,
    Relation,
)
from charmem.errors import DraftValidationError
from pyoxigraph import NamedNode

__all__ = [
    "CHARACTER_ID",
    "DUMP_MEDIA_TYPE",
    "ITEM_CLASSES",
    "KIND_OF_CLASS",
    "LAYOUT_VERSION",
    "NODE_IRI",
    "NODE_KINDS",
    "OBJECT_KINDS",
    "RELATION_IRIS",
    "TOMBSTONE_CLASS",
    "UNSTORED_ENDPOINT",
    "VOCAB",
    "XSD",
    "assertion_iri",
    "collection_graph",
    "iri_ref",
    "kind_of_iri",
    "memory_id_of",
    "node_iri",
    "node_iris_of",
    "prop",
    "relation_iri",
    "relation_of",
    "scene_custom_iri",
    "scene_participant_iri",
]

#: The namespace of every class and property charmem writes.
VOCAB: Final = "urn:charmem:vocab#"
#: XML Schema datatypes.
XSD: Final = "http://www.w3.org/2001/XMLSchema#"
#: ``rdf:type``.
RDF_TYPE: Final = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"

#: The ``<type>`` segment of ``urn:charmem:<type>:<uuid>`` for each stored Python type.
KIND_OF_CLASS: Final[dict[type, str]] = {
    Episode: "episode",
    Observation: "observation",
    Entity: "entity",
    MemoryThread: "thread",
    DerivedMemory: "derived",
    MemoryLink: "link",
    LifecycleRecord: "record",
}

#: The RDF class (local name in :data:`VOCAB`) of each stored kind.
CLASS_OF_KIND: Final[dict[str, str]] = {
    "episode": "Episode",
    "observation": "Observation",
    "entity": "Entity",
    "thread": "MemoryThread",
    "derived": "DerivedMemory",
    "link": "MemoryLink",
    "record": "LifecycleRecord",
}

#: Stored kind of each RDF class IRI.
ITEM_CLASSES: Final[dict[str, str]] = {VOCAB + cls: kind for kind, cls in CLASS_OF_KIND.items()}

#: Kinds of memory objects (the ``get_objects`` and ``currency`` universe).
OBJECT_KINDS: Final = ("episode", "observation", "entity", "thread", "derived")

#: Every ``<type>`` segment an IRI may carry: stored kinds plus ``object``, the placeholder used for
#: a reference to an id that was not stored (and whose type no field declares) when it was written.
NODE_KINDS: Final = (*OBJECT_KINDS, "link", "record", "object")

#: ``BeliefAssertion`` nodes are typed with this class.
ASSERTION_CLASS: Final = VOCAB + "BeliefAssertion"

#: A purged object's node keeps only ``rdf:type`` this class and ``vocab:purgedAt`` (its IRI keeps
#: the object's kind), so references to it resolve to "something was here, purged at T".
TOMBSTONE_CLASS: Final = VOCAB + "Tombstone"
#: The ``xsd:dateTime`` property of a tombstone.
PURGED_AT: Final = "purgedAt"

#: Every relation's property IRI: the predicates of links' direct edges ``<from> <rel> <to>``.
RELATION_IRIS: Final = tuple(VOCAB + relation.value for relation in Relation)

#: Scene properties (local names). On an episode node: ``settingKey`` and ``settingWords`` (plain
#: literals), ``sceneParticipant`` (one participant node each) and ``sceneCustom`` (one node per
#: custom key/value). On a participant node: ``participantIndex`` (``xsd:integer``, its place in
#: the scene), ``participantEntity`` (the notion's IRI), ``participantName`` and
#: ``participantDescription`` (plain literals). On a custom node: ``customKey`` and ``customValue``.
SETTING_KEY: Final = "settingKey"
SETTING_WORDS: Final = "settingWords"
SCENE_PARTICIPANT: Final = "sceneParticipant"
PARTICIPANT_INDEX: Final = "participantIndex"
PARTICIPANT_ENTITY: Final = "participantEntity"
PARTICIPANT_NAME: Final = "participantName"
#: A participant's name as name matching compares it (``charmem.domain.rules.normalise_name``).
PARTICIPANT_NAME_KEY: Final = "participantNameKey"
PARTICIPANT_DESCRIPTION: Final = "participantDescription"
SCENE_CUSTOM: Final = "sceneCustom"
CUSTOM_KEY: Final = "customKey"
CUSTOM_VALUE: Final = "customValue"
#: The properties linking an episode to its scene's own nodes (an erasure removes those nodes).
SCENE_NODES: Final = (SCENE_PARTICIPANT, SCENE_CUSTOM)

#: The property (local name) of the layout version record ``<graph> vocab:layoutVersion n``.
LAYOUT_VERSION: Final = "layoutVersion"

#: The property (local name) of the mark ``<link> vocab:unstoredEndpoint <endpoint IRI>``: the link
#: names that endpoint by an IRI written before the endpoint was stored (so not, or not surely, the
#: endpoint's stored kind). Links without it name both endpoints by their stored kinds.
UNSTORED_ENDPOINT: Final = "unstoredEndpoint"

#: The property (local name) of the character record ``<graph> vocab:characterId "uuid"``.
CHARACTER_ID: Final = "characterId"

#: What ``export_graph`` writes: N-Quads, every quad in the collection's named graph.
DUMP_MEDIA_TYPE: Final = "application/n-quads"

_SAFE_IRI = re.compile(r"[A-Za-z0-9:#/_.-]+")
#: A node IRI ``urn:charmem:<kind>:<uuid>`` (groups: kind, uuid).
NODE_IRI: Final = re.compile(r"urn:charmem:([a-z]+):([0-9a-f-]{36})")


def prop(local_name: str) -> NamedNode:
    """The property or class IRI ``urn:charmem:vocab#<local_name>``."""
    return NamedNode(VOCAB + local_name)


def node_iri(kind: str, memory_id: MemoryId) -> str:
    """``urn:charmem:<kind>:<uuid>``: the IRI of a stored node (or a reference placeholder).

    Args:
        kind: one of :data:`NODE_KINDS`.
        memory_id: the node's id.

    Returns:
        str: the IRI.
    """
    return f"urn:charmem:{kind}:{memory_id}"


def node_iris_of(kinds: Iterable[str], memory_id: MemoryId) -> list[str]:
    """:func:`node_iri` of ``memory_id`` under each of ``kinds`` (the id's text formatted once)."""
    text = str(memory_id)
    return [f"urn:charmem:{kind}:{text}" for kind in kinds]


def assertion_iri(derived_id: MemoryId, position: int) -> str:
    """``urn:charmem:derived:<uuid>/assertion/<n>``: the n-th assertion in canonical order."""
    return f"{node_iri('derived', derived_id)}/assertion/{position}"


def scene_participant_iri(episode_id: MemoryId, index: int) -> str:
    """``urn:charmem:episode:<uuid>/scene/participant/<n>``: the scene's n-th participant (from 0)."""
    return f"{node_iri('episode', episode_id)}/scene/participant/{index}"


def scene_custom_iri(episode_id: MemoryId, index: int) -> str:
    """``urn:charmem:episode:<uuid>/scene/custom/<n>``: the scene's n-th custom key/value, in key order."""
    return f"{node_iri('episode', episode_id)}/scene/custom/{index}"


def collection_graph(collection: str) -> str:
    """``urn:charmem:collection:<name>``: the named graph holding one collection."""
    return f"urn:charmem:collection:{collection}"


def relation_iri(relation: Relation) -> str:
    """The property IRI of a relation (``urn:charmem:vocab#<relation value>``).

    It is both the ``vocab:relation`` value of a link node and the predicate of the direct edge
    ``<from> vocab:<relation> <to>``.
    """
    return VOCAB + relation.value


def relation_of(iri: str) -> Relation:
    """Inverse of :func:`relation_iri`.

    Raises:
        ValueError: the IRI is not a relation property.
    """
    if not iri.startswith(VOCAB):
        raise ValueError(f"{iri!r} is not a charmem relation")
    return Relation(iri[len(VOCAB) :])


def _node_parts(iri: str) -> tuple[str, MemoryId]:
    match = NODE_IRI.fullmatch(iri)
    if match is None:
        raise ValueError(f"{iri!r} is not a charmem node IRI")
    try:
        return match.group(1), MemoryId(match.group(2))
    except DraftValidationError as exc:  # damage in the store, not a caller's bad input
        raise ValueError(f"{iri!r} does not carry a UUID") from exc


def memory_id_of(iri: str) -> MemoryId:
    """The id carried by a node IRI ``urn:charmem:<kind>:<uuid>``, whatever its kind.

    Raises:
        ValueError: the IRI is not a charmem node IRI.
    """
    return _node_parts(iri)[1]


def kind_of_iri(iri: str) -> str:
    """The ``<kind>`` segment of a node IRI ``urn:charmem:<kind>:<uuid>``.

    Raises:
        ValueError: the IRI is not a charmem node IRI.
    """
    return _node_parts(iri)[0]


def iri_ref(iri: str) -> str:
    """``<iri>`` for SPARQL text, after checking the IRI only holds characters we generate.

    Defence in depth: the adapter only ever passes IRIs built by this module from constants,
    validated collection names and UUIDs, so this never fails in practice.

    Raises:
        ValueError: the IRI holds a character outside ``[A-Za-z0-9:#/_.-]``.
    """
    if _SAFE_IRI.fullmatch(iri) is None:
        raise ValueError(f"refusing to put {iri!r} into SPARQL text")
    return f"<{iri}>"
