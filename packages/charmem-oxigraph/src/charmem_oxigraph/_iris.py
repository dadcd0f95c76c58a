"""Which node IRIs a read binds for an id: one when its stored kind is known, else one per kind.

Every node of a collection is ``urn:charmem:<kind>:<uuid>``; a reference to an id written before
the id was stored carries the kind its field or relation declares, or ``object``. These pure
functions turn ids (and what the cache knows of their kinds) into the IRIs a query's ``VALUES``
block binds (:mod:`charmem_oxigraph._queries`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from charmem.domain.ids import MemoryId
from charmem.domain.model import ObjectType, Relation

from charmem_oxigraph import _vocab as v
from charmem_oxigraph._codec import ENDPOINT_KINDS

__all__ = [
    "STORED_KINDS",
    "class_iris",
    "currency_iris",
    "endpoint_iris",
    "episode_turn_iris",
    "iris",
    "kind_hints",
    "node_iris",
    "relation_iris",
    "retry_iris",
    "unique",
]

#: Kinds an id of a batch item may already be stored as (ids are unique across all of them).
STORED_KINDS: Final = (*v.OBJECT_KINDS, "link", "record")


def unique(ids: Iterable[MemoryId]) -> list[MemoryId]:
    """``ids`` without repeats, first occurrence order."""
    return list(dict.fromkeys(ids))


def iris(ids: Iterable[MemoryId], kinds: Sequence[str]) -> list[str]:
    """Every IRI ``urn:charmem:<kind>:<id>`` an id may be stored or referenced under."""
    return [iri for memory_id in ids for iri in v.node_iris_of(kinds, memory_id)]


def node_iris(ids: Iterable[MemoryId], known: Mapping[MemoryId, str], kinds: Sequence[str]) -> list[str]:
    """The IRIs a stored node of each id may have: its own when its kind is known, else every kind.

    A stored node's subject IRI always carries its stored kind, so one IRI per known id suffices.

    Args:
        ids: ids to look up.
        known: stored kinds already known (:meth:`charmem_oxigraph._cache.GraphCache.kinds`).
        kinds: the kinds an id of unknown kind may be stored as.
    """
    found: list[str] = []
    for memory_id in ids:
        kind = known.get(memory_id)
        if kind is None:
            found.extend(v.node_iris_of(kinds, memory_id))
        else:
            found.append(v.node_iri(kind, memory_id))
    return found


def kind_hints(types: Mapping[MemoryId, ObjectType]) -> dict[MemoryId, str]:
    """The stored kinds ``types`` suggest (:class:`charmem.ports.ObjectTypeHints`).

    An object type's value is the ``<kind>`` segment of its node IRI, so a read of such an id
    binds one IRI; a wrong hint is retried under every other kind (:func:`retry_iris`).

    Raises:
        ValueError: a value is not an :class:`~charmem.domain.model.ObjectType`.
    """
    return {memory_id: ObjectType(object_type).value for memory_id, object_type in types.items()}


def retry_iris(missed: Iterable[MemoryId], hinted: Mapping[MemoryId, str], kinds: Sequence[str]) -> list[str]:
    """The IRIs left to try for ids not found under their hinted kind: every other kind.

    Args:
        missed: ids read under ``hinted[id]`` and not found.
        hinted: the kind each was read under (:meth:`charmem_oxigraph._cache.GraphCache.hints`).
        kinds: the kinds an id of unknown kind may be stored as.
    """
    return [
        v.node_iri(kind, memory_id) for memory_id in missed for kind in kinds if kind != hinted[memory_id]
    ]


#: The kind a link of each relation names an endpoint not stored yet by, per side (from, to): the
#: kind the relation declares for that side, else ``object``.
_UNSTORED_ENDPOINT_KINDS: Final[dict[Relation, tuple[str, str]]] = {
    relation: (from_kind or "object", to_kind or "object")
    for relation in Relation
    for from_kind, to_kind in [ENDPOINT_KINDS.get(relation, (None, None))]
}


def currency_iris(ids: Iterable[MemoryId], known: Mapping[MemoryId, str]) -> list[str]:
    """The IRIs under which currency facts about each id may be stored.

    The ``rdf:type`` sits on the node's own IRI; a ``suppress`` record's target and a
    ``supersedes`` link's ``to`` declare no kind, so a reference written before the id was stored
    carries ``object``. An id of known kind therefore needs two IRIs; an unknown one every object
    kind plus ``object`` (links and records have no currency).
    """
    unknown = (*v.OBJECT_KINDS, "object")
    return [
        iri
        for memory_id in ids
        for iri in v.node_iris_of((known[memory_id], "object") if memory_id in known else unknown, memory_id)
    ]


def endpoint_iris(
    ids: Iterable[MemoryId],
    known: Mapping[MemoryId, str],
    relations: Sequence[Relation] | None,
    unstored: Mapping[MemoryId, Sequence[str]] | None = None,
) -> tuple[list[str], list[str]]:
    """The IRIs the ``vocab:from`` and the ``vocab:to`` of a link of ``relations`` may use for ``ids``.

    A link refers to an endpoint by the endpoint's stored kind when it was known at write time,
    else by the kind its relation declares for that side, else ``object``
    (:func:`charmem_oxigraph._writing.plan_write`), and then marks it
    ``vocab:unstoredEndpoint``. With every mark known (``unstored``), an id is bound as its stored
    kind (every stored kind when that is not known) and as the kinds marks name it by; without
    them, as its stored kind (or every one) and as the unstored kinds of the wanted relations on
    that side.

    Args:
        ids: the endpoint ids.
        known: stored kinds already known (:meth:`charmem_oxigraph._cache.GraphCache.kinds`).
        relations: the relations of the links wanted (``None``: any).
        unstored: the kinds marks name ids by, for every marked id
            (:meth:`charmem_oxigraph._cache.GraphCache.unstored_kinds`); ``None``: not known.

    Returns:
        tuple[list[str], list[str]]: the IRIs to bind to ``vocab:from``, and to ``vocab:to``.
    """
    if unstored is not None:
        bound = [
            iri
            for memory_id in ids
            for iri in v.node_iris_of(
                dict.fromkeys((*_stored_kinds(known.get(memory_id)), *unstored.get(memory_id, ()))), memory_id
            )
        ]
        return bound, list(bound)
    chosen = Relation if relations is None else [Relation(relation) for relation in relations]
    unstored_kinds = [
        dict.fromkeys(_UNSTORED_ENDPOINT_KINDS[relation][side] for relation in chosen) for side in (0, 1)
    ]
    sides: tuple[list[str], list[str]] = ([], [])
    of_kind: dict[tuple[int, str | None], tuple[str, ...]] = {}  # the kinds to bind per side and kind
    for memory_id in ids:
        kind = known.get(memory_id)
        for side, found in enumerate(sides):
            kinds = of_kind.get((side, kind))
            if kinds is None:
                kinds = of_kind[side, kind] = tuple(
                    dict.fromkeys((*_stored_kinds(kind), *unstored_kinds[side]))
                )
            found.extend(v.node_iris_of(kinds, memory_id))
    return sides


def _stored_kinds(kind: str | None) -> tuple[str, ...]:
    return STORED_KINDS if kind is None else (kind,)


def episode_turn_iris(ids: Iterable[MemoryId], known: Mapping[MemoryId, str]) -> list[str]:
    """The IRI the ``vocab:from`` of a ``has_observation`` link from each episode id carries.

    A link names an endpoint by the endpoint's stored kind, else by the kind its relation declares
    (:func:`endpoint_iris`), and ``has_observation`` declares ``episode``: an episode's links carry
    its episode IRI whether it was stored before or after them. An id of unknown kind binds that
    one IRI (not one per kind: a turn read is about episodes); an id stored as another kind is no
    episode and binds nothing (:func:`charmem_oxigraph._queries.episode_turns`).
    """
    return [v.node_iri("episode", i) for i in ids if known.get(i, "episode") == "episode"]


def relation_iris(relations: Sequence[Relation] | None) -> list[str] | None:
    """The property IRIs a links read filters ``relations`` by in its query (``None``: no filter).

    No filter either when ``relations`` leave out at most one relation (expansion follows every
    relation but ``supersedes``): the query checks a link's relation with a seek per link (about
    a seventh of the read, measured), while the few links of the one left out are dropped after
    decoding (:func:`charmem_oxigraph._logic.of_relations`).
    """
    if relations is None:
        return None
    chosen = dict.fromkeys(Relation(relation) for relation in relations)
    if len(chosen) >= len(Relation) - 1:
        return None
    return [v.relation_iri(relation) for relation in chosen]


def class_iris(object_types: Sequence[ObjectType] | None) -> list[str]:
    """The RDF classes of ``object_types`` (``None``: every object class)."""
    kinds = v.OBJECT_KINDS if object_types is None else [ObjectType(t).value for t in object_types]
    return [v.VOCAB + v.CLASS_OF_KIND[kind] for kind in kinds]
