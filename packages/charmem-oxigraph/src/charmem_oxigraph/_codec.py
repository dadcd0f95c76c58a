"""Domain values to RDF triples and back: the compact layout (layout 2, the README's vocabulary).

Each stored item is one node holding its authored content as ONE canonical record literal
(``vocab:record``: JSON with sorted keys, datatype ``rdf:JSON``), plus only the triples that
traversal, currency, typing and a caller's own SPARQL need: ``rdf:type``, the *indexed* fields
(the reference edges the adapter's queries follow and the times used in filters) and, for a derived
memory, its ``KnownAs`` assertion nodes (the name index reads them), for an episode, its scene's
triples (:mod:`charmem_oxigraph._scene`). Every literal is built with
pyoxigraph ``Literal`` values (which escape correctly), so memory text is always data. Reading
decodes the record literal and rebuilds the domain value with its own constructor, so stored
values pass the same validation as new ones. The decoder of the older layout, which
``charmem migrate`` reads, is :mod:`charmem_oxigraph._legacy`.
"""

from __future__ import annotations

import enum
import functools
import json
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, Final, TypeAlias

import attrs
from charmem.domain.graph import LifecycleRecord
from charmem.domain.ids import MemoryId
from charmem.domain.model import (
    PREDICATE_TAGS,
    Actor,
    BeliefAssertion,
    Counterpart,
    DerivedMemory,
    Entity,
    Episode,
    KnownAs,
    MemoryLink,
    MemoryObject,
    MemoryThread,
    Observation,
    Relation,
    known_names,
)
from pyoxigraph import Literal, NamedNode

from charmem_oxigraph import _vocab as v
from charmem_oxigraph._scene import scene_from_json, scene_json, scene_lines

__all__ = [
    "ASSERTION",
    "ASSERTION_SUBJECT",
    "ENDPOINT_KINDS",
    "FIELDS",
    "KNOWN_AS",
    "RDF_JSON",
    "RECORD",
    "REFERENCE_KINDS",
    "CorruptNodeError",
    "Field",
    "Kind",
    "NodeTriples",
    "Resolver",
    "StoredItem",
    "Term",
    "decode_item",
    "encode_item",
    "kind_of_node",
    "normalise_for_comparison",
    "parse_record",
    "record_canonical",
    "record_json",
    "record_line",
    "record_of",
    "referenced_ids",
    "single",
]

#: Anything :meth:`GraphStore.write_batch` stores.
StoredItem: TypeAlias = MemoryObject | MemoryLink | LifecycleRecord
#: An RDF term as read back from pyoxigraph.
Term: TypeAlias = Any

#: ``resolve(id, declared_kind)`` returns the IRI term (``<...>``) a reference to ``id`` points at:
#: the stored (or batched) node's IRI when its kind is known, else
#: ``urn:charmem:<declared_kind or object>:<id>``.
Resolver: TypeAlias = Callable[[MemoryId, str | None], str]

_XSD_DATETIME: Final = NamedNode(v.XSD + "dateTime")
#: The datatype of the record literal: ``rdf:JSON`` (RDF 1.2).
RDF_JSON: Final = "http://www.w3.org/1999/02/22-rdf-syntax-ns#JSON"
_RDF_JSON_NODE: Final = NamedNode(RDF_JSON)
#: The local name of the record literal's property (``vocab:record``).
RECORD: Final = "record"


class CorruptNodeError(ValueError):
    """Triples stored under a charmem IRI do not decode to a valid domain value."""


class Kind(enum.Enum):
    TEXT = "text"  # str, always written (may be empty)
    OPT_TEXT = "opt_text"  # str | None, written when not None
    INSTANT = "instant"  # aware datetime as xsd:dateTime, offset as given
    DOUBLE = "double"  # float as xsd:double
    INT = "int"  # int as xsd:integer
    BOOL = "bool"  # bool as xsd:boolean
    ENUM = "enum"  # enum value as a plain string
    REF = "ref"  # MemoryId as the referenced node's IRI
    OPT_REF = "opt_ref"  # MemoryId | None
    REFS = "refs"  # tuple of MemoryId, one triple per id
    TEXTS = "texts"  # tuple of str, one plain literal triple per string
    RELATION = "relation"  # Relation as its property IRI


#: The kinds of the fields that hold references to other nodes.
REFERENCE_KINDS: Final = frozenset({Kind.REF, Kind.OPT_REF, Kind.REFS})


@attrs.frozen
class Field:
    """One authored field of a stored type.

    Attributes:
        attr: the domain attribute (and the record literal's key).
        prop: the property's local name in :data:`charmem_oxigraph._vocab.VOCAB`.
        kind: how its value is written.
        ref_kind: the kind a reference field declares (for IRIs of ids not stored yet).
        indexed: also written as a triple of its own (layout 2), for traversal or filters.
    """

    attr: str
    prop: str
    kind: Kind
    ref_kind: str | None = None
    indexed: bool = False


_TAIL = (
    Field("created_at", "createdAt", Kind.INSTANT),
    Field("schema_version", "schemaVersion", Kind.INT),
)

FIELDS: Final[dict[type, tuple[Field, ...]]] = {
    Episode: (
        Field("occurred_at", "occurredAt", Kind.INSTANT, indexed=True),
        Field("summary", "summary", Kind.TEXT),
        Field("participant_entity_ids", "participant", Kind.REFS, "entity"),
        Field("thread_ids", "inThread", Kind.REFS, "thread"),
        Field("raw_ref", "rawRef", Kind.OPT_TEXT),
        Field("salience", "salience", Kind.DOUBLE),
        *_TAIL,
    ),
    Observation: (
        Field("episode_id", "episode", Kind.REF, "episode"),
        Field("text", "text", Kind.TEXT),
        Field("observed_at", "observedAt", Kind.INSTANT, indexed=True),
        Field("speaker_entity_id", "speaker", Kind.OPT_REF, "entity"),
        Field("mentioned_entity_ids", "mentionedEntity", Kind.REFS, "entity"),
        Field("raw_ref", "rawRef", Kind.OPT_TEXT),
        Field("salience", "salience", Kind.DOUBLE),
        *_TAIL,
    ),
    Entity: (Field("entity_type", "entityType", Kind.TEXT), *_TAIL),
    MemoryThread: (
        Field("title", "title", Kind.TEXT),
        Field("summary", "summary", Kind.TEXT),
        Field("status", "status", Kind.ENUM),
        *_TAIL,
    ),
    DerivedMemory: (
        Field("derived_type", "derivedType", Kind.ENUM, indexed=True),
        Field("text", "text", Kind.TEXT),
        Field("episode_ids", "sourceEpisode", Kind.REFS, "episode"),
        Field("observation_ids", "sourceObservation", Kind.REFS, "observation"),
        Field("entity_ids", "subjectEntity", Kind.REFS, "entity"),
        Field("thread_ids", "inThread", Kind.REFS, "thread"),
        Field("given_by_application", "givenByApplication", Kind.BOOL),
        Field("supersedes", "declaresSupersedes", Kind.REFS),
        Field("salience", "salience", Kind.DOUBLE),
        *_TAIL,
    ),
    MemoryLink: (
        Field("from_id", "from", Kind.REF, indexed=True),
        Field("relation", "relation", Kind.RELATION, indexed=True),
        Field("to_id", "to", Kind.REF, indexed=True),
        Field("rationale", "rationale", Kind.OPT_TEXT),
        *_TAIL,
    ),
    LifecycleRecord: (
        Field("target_id", "target", Kind.REF, indexed=True),
        Field("action", "action", Kind.ENUM, indexed=True),
        Field("rationale", "rationale", Kind.TEXT),
        Field("recorded_at", "recordedAt", Kind.INSTANT, indexed=True),
        Field("related_ids", "related", Kind.REFS),
        Field("external_refs", "externalRef", Kind.TEXTS),
    ),
}

_CLASS_OF_KIND: Final[dict[str, type]] = {kind: cls for cls, kind in v.KIND_OF_CLASS.items()}

#: The endpoint kinds a relation implies (from, to), used when an endpoint is not stored yet.
ENDPOINT_KINDS: Final[dict[Relation, tuple[str | None, str | None]]] = {
    Relation.HAS_OBSERVATION: ("episode", "observation"),
    Relation.INVOLVES: ("episode", "entity"),
    Relation.MENTIONS: ("observation", "entity"),
    Relation.DERIVED_FROM: ("derived", None),
    Relation.ABOUT: ("derived", "entity"),
    Relation.PART_OF_THREAD: (None, "thread"),
    Relation.SUPERSEDES: ("derived", None),
}

# Properties of BeliefAssertion nodes and the link from their derived memory.
ASSERTION = "assertion"
ASSERTION_SUBJECT = "assertionSubject"
KNOWN_AS = "knownAs"


def _term(iri: str) -> str:
    """``<iri>``, an IRI term in N-Triples.

    Only IRIs :mod:`charmem_oxigraph._vocab` builds from constants, kinds and UUIDs come here (the
    store's parser checks them again).
    """
    return f"<{iri}>"


#: Terms written once as text (encoding a batch writes hundreds of thousands of triples).
_RDF_TYPE_TERM: Final = _term(v.RDF_TYPE)
_CLASS_TERMS: Final[dict[str, str]] = {kind: _term(v.VOCAB + cls) for kind, cls in v.CLASS_OF_KIND.items()}
_ASSERTION_TERM: Final = _term(v.VOCAB + ASSERTION)
_ASSERTION_SUBJECT_TERM: Final = _term(v.VOCAB + ASSERTION_SUBJECT)
_KNOWN_AS_TERM: Final = _term(v.VOCAB + KNOWN_AS)
#: Each relation's property (the ``vocab:relation`` value of a link and its direct edge's predicate).
_RELATION_TERMS: Final[dict[Relation, str]] = {r: _term(v.relation_iri(r)) for r in Relation}

#: How :func:`encode_item` writes a field: one reference, a tuple of references, a tuple of
#: texts, a relation, or one literal.
_REF, _REFS, _TEXTS, _RELATION, _LITERAL = range(5)
_SHAPE_OF_KIND: Final = {
    Kind.REF: _REF,
    Kind.OPT_REF: _REF,
    Kind.REFS: _REFS,
    Kind.TEXTS: _TEXTS,
    Kind.RELATION: _RELATION,
}
#: Per stored type: (field, predicate term, shape) of each *indexed* field, in :data:`FIELDS` order.
_ENCODING: Final[dict[type, tuple[tuple[Field, str, int], ...]]] = {
    cls: tuple(
        (field, _term(v.VOCAB + field.prop), _SHAPE_OF_KIND.get(field.kind, _LITERAL))
        for field in fields
        if field.indexed
    )
    for cls, fields in FIELDS.items()
}
#: Per stored type: (attribute, kind) of every field, the record literal's keys.
_RECORD_FIELDS: Final[dict[type, tuple[tuple[str, Kind], ...]]] = {
    cls: tuple((field.attr, field.kind) for field in fields) for cls, fields in FIELDS.items()
}
_RECORD_TERM: Final = _term(v.VOCAB + RECORD)


@functools.lru_cache(maxsize=4096)
def _instant(text: str) -> str:
    # Instants repeat across a batch (a session's objects share theirs): write each term once.
    return str(Literal(text, datatype=_XSD_DATETIME))


@functools.lru_cache(maxsize=256, typed=True)  # True and 1 are different terms
def _plain(value: int | bool | str) -> str:
    # Small repeated values (schema versions, booleans, enum values): one term each.
    return str(Literal(value))


def _literal(kind: Kind, value: Any) -> str:  # noqa: ANN401 - any field value
    """The N-Triples text of a literal field value, serialised by pyoxigraph (which escapes)."""
    if kind is Kind.TEXT or kind is Kind.OPT_TEXT:
        return str(Literal(value))
    if kind is Kind.INSTANT:
        return _instant(value.isoformat())
    if kind is Kind.DOUBLE:
        return str(Literal(float(value)))
    if kind is Kind.INT:
        return _plain(int(value))
    if kind is Kind.BOOL:
        return _plain(bool(value))
    if kind is Kind.ENUM:
        return _plain(value.value)
    raise AssertionError(kind)  # pragma: no cover - references are handled by the caller


def _endpoint_kinds(item: StoredItem) -> tuple[str | None, str | None]:
    if isinstance(item, MemoryLink):
        return ENDPOINT_KINDS.get(item.relation, (None, None))
    return (None, None)


def _instant_text(value: datetime) -> str:
    return value.isoformat()


def _id_text(value: MemoryId) -> str:
    return str(value.value)


def _ids_text(values: Iterable[MemoryId]) -> list[str]:
    return [str(ref.value) for ref in values]


def _enum_value(value: enum.Enum) -> Any:  # noqa: ANN401 - an enum's value
    return value.value


#: How each kind of field value becomes JSON (``None``: it is a JSON value already).
_TO_JSON: Final[dict[Kind, Callable[[Any], Any] | None]] = {
    Kind.TEXT: None,
    Kind.OPT_TEXT: None,
    Kind.INSTANT: _instant_text,
    Kind.DOUBLE: float,
    Kind.INT: None,
    Kind.BOOL: None,
    Kind.ENUM: _enum_value,
    Kind.REF: _id_text,
    Kind.OPT_REF: _id_text,
    Kind.REFS: _ids_text,
    Kind.TEXTS: list,
    Kind.RELATION: _enum_value,
}
#: Per stored type: (attribute, converter to JSON) of every field.
_TO_RECORD: Final[dict[type, tuple[tuple[str, Callable[[Any], Any] | None], ...]]] = {
    cls: tuple((attr, _TO_JSON[kind]) for attr, kind in fields) for cls, fields in _RECORD_FIELDS.items()
}
#: One encoder for every record (``json.dumps`` with options builds a new one per call).
_ENCODER: Final = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def record_json(item: StoredItem) -> str:
    """The canonical record of ``item``: its authored fields as JSON, keys sorted, no spaces.

    Keys are the domain attribute names (the id is the node's IRI, so it is not repeated);
    instants are ISO 8601 with the offset as given, ids canonical UUID text, enums their values;
    a derived memory adds ``assertions`` in order: ``{"known_as": name, "subject": id}`` for a
    name, ``{"role": "actor" | "counterpart", "subject": id}`` for an obligation party; an
    episode with a scene adds ``scene`` (:func:`charmem_oxigraph._scene.scene_json`; no key
    without one, so such records are unchanged). Equal content gives equal text.
    """
    data: dict[str, Any] = {}
    for attr, convert in _TO_RECORD[type(item)]:
        value = getattr(item, attr)
        data[attr] = value if convert is None or value is None else convert(value)
    if isinstance(item, DerivedMemory):
        data["assertions"] = [_assertion_json(a) for a in item.assertions]
    elif isinstance(item, Episode) and item.scene is not None:
        data["scene"] = scene_json(item.scene)
    return _ENCODER.encode(data)


def _assertion_json(assertion: BeliefAssertion) -> dict[str, str]:
    predicate = assertion.predicate
    if isinstance(predicate, KnownAs):
        return {"known_as": predicate.name, "subject": str(assertion.subject)}
    return {"role": PREDICATE_TAGS[type(predicate)], "subject": str(assertion.subject)}


#: The obligation role of each ``"role"`` value of a record's assertion.
_ROLES: Final = {PREDICATE_TAGS[cls]: cls for cls in (Actor, Counterpart)}


def _assertion_from_json(data: dict[str, Any]) -> BeliefAssertion:
    subject = MemoryId(data["subject"])
    if "known_as" in data:
        return BeliefAssertion(subject, KnownAs(data["known_as"]))
    return BeliefAssertion(subject, _ROLES[data["role"]]())


def record_line(item: StoredItem) -> str:
    """The N-Triples line ``<node> vocab:record "{...}"^^rdf:JSON .`` of ``item`` (:func:`record_json`).

    The literal is serialised by pyoxigraph, which escapes it, so memory text stays data.
    """
    record = Literal(record_json(item), datatype=_RDF_JSON_NODE)
    return f"<{v.node_iri(v.KIND_OF_CLASS[type(item)], item.id)}> {_RECORD_TERM} {record} ."


def encode_item(item: StoredItem, resolve: Resolver) -> list[str]:
    """The triples storing ``item`` in the compact layout, as N-Triples lines (graph given by the write).

    Memory text reaches the lines only as literals pyoxigraph serialised (``str(Literal(...))``,
    which escapes quotes, backslashes and line breaks); IRIs are built from constants, kinds and
    UUIDs (:mod:`charmem_oxigraph._vocab`). Writing text rather than ``Quad`` objects costs a third
    of the time (a ``Quad`` is ~3 µs to build), and the store parses it at the same speed.

    Args:
        item: an object, link or lifecycle record.
        resolve: maps a referenced id (and the kind its field declares, if any) to an IRI term.

    Returns:
        list[str]: lines ``<s> <p> o .``: ``rdf:type``, ``vocab:record`` (:func:`record_json`),
        one per indexed field value, for a derived memory its assertion nodes
        (``vocab:assertion``, ``vocab:assertionSubject``, ``vocab:knownAs``), for an episode
        with a scene its scene triples (:func:`charmem_oxigraph._scene.scene_lines`).
    """
    kind = v.KIND_OF_CLASS[type(item)]
    subject = _term(v.node_iri(kind, item.id)) + " "
    lines = [f"{subject}{_RDF_TYPE_TERM} {_CLASS_TERMS[kind]} .", record_line(item)]
    from_kind, to_kind = _endpoint_kinds(item)
    for field, predicate, shape in _ENCODING[type(item)]:
        value = getattr(item, field.attr)
        if shape == _LITERAL:
            lines.append(f"{subject}{predicate} {_literal(field.kind, value)} .")
        elif shape == _REF:
            declared = from_kind if field.attr == "from_id" else to_kind if field.attr == "to_id" else None
            lines.append(f"{subject}{predicate} {resolve(value, declared or field.ref_kind)} .")
        else:  # _RELATION (no indexed field holds several values)
            lines.append(f"{subject}{predicate} {_RELATION_TERMS[value]} .")
    if isinstance(item, DerivedMemory):  # name nodes only: the name index reads them
        for position, (named, name) in enumerate(known_names(item.assertions)):
            node = _term(v.assertion_iri(item.id, position))
            lines += [
                f"{subject}{_ASSERTION_TERM} {node} .",
                f"{node} {_ASSERTION_SUBJECT_TERM} {resolve(named, 'entity')} .",
                f"{node} {_KNOWN_AS_TERM} {Literal(name)} .",
            ]
    elif isinstance(item, Episode) and item.scene is not None:
        lines += scene_lines(subject.rstrip(), item.id, item.scene, resolve)
    return lines


@attrs.define
class NodeTriples:
    """The triples of one node read back: ``props`` maps predicate IRI -> object terms.

    ``assertions`` maps each ``BeliefAssertion`` node IRI (of a derived memory) to its own props.
    """

    iri: str
    props: dict[str, list[Term]] = attrs.field(factory=dict)
    assertions: dict[str, dict[str, list[Term]]] = attrs.field(factory=dict)

    def add(self, predicate: str, obj: Term) -> None:
        """Record one triple ``<iri> <predicate> obj``."""
        self.props.setdefault(predicate, []).append(obj)

    def add_assertion(self, node: str, predicate: str, obj: Term) -> None:
        """Record one triple of the assertion node ``node``."""
        self.assertions.setdefault(node, {}).setdefault(predicate, []).append(obj)


def kind_of_node(node: NodeTriples) -> str | None:
    """The stored kind of a node from its ``rdf:type`` (``None``: not a stored item).

    Raises:
        CorruptNodeError: the node carries more than one charmem item class.
    """
    types = node.props.get(v.RDF_TYPE, ())
    if len(types) == 1:  # almost every node: one type, no set to build
        return v.ITEM_CLASSES.get(types[0].value)
    kinds = {v.ITEM_CLASSES[t.value] for t in types if t.value in v.ITEM_CLASSES}
    if len(kinds) > 1:
        raise CorruptNodeError(f"{node.iri} is typed as several kinds: {sorted(kinds)}")
    return next(iter(kinds), None)


def single(props: dict[str, list[Term]], iri: str, predicate: str) -> Term | None:
    """The one value of ``predicate`` among ``props`` (``None``: none).

    Raises:
        CorruptNodeError: the node holds several values of it.
    """
    values = props.get(predicate, [])
    if len(values) > 1:
        raise CorruptNodeError(f"{iri} has {len(values)} values of {predicate}")
    return values[0] if values else None


def _instant_from_json(value: Any) -> datetime:  # noqa: ANN401 - any field value
    if not isinstance(value, str):
        raise CorruptNodeError(f"expected an instant, got {value!r}")
    return datetime.fromisoformat(value)


#: Converters of a record's JSON values (not ``None``) by field kind; the constructor checks the rest.
_FROM_JSON: Final[dict[Kind, Callable[[Any], Any]]] = {
    Kind.INSTANT: _instant_from_json,
    Kind.REF: MemoryId,
    Kind.OPT_REF: MemoryId,
    Kind.REFS: lambda values: [MemoryId(ref) for ref in values],
    Kind.RELATION: Relation,
}
#: Per stored type: (attribute, its kind's converter or ``None``) of every record key.
_DECODERS: Final[dict[type, tuple[tuple[str, Callable[[Any], Any] | None], ...]]] = {
    cls: tuple((attr, _FROM_JSON.get(kind)) for attr, kind in fields)
    for cls, fields in _RECORD_FIELDS.items()
}


def record_of(node: NodeTriples) -> dict[str, Any]:
    """The decoded record literal of ``node`` (a JSON object).

    Raises:
        CorruptNodeError: the node has no record literal (a store of an older layout), or it is
            not a JSON object.
    """
    term = single(node.props, node.iri, v.VOCAB + RECORD)
    if not isinstance(term, Literal):
        raise CorruptNodeError(f"{node.iri} has no record literal (damaged, or a layout-1 node migrate left)")
    return parse_record(node.iri, term.value)


def parse_record(iri: str, text: str) -> dict[str, Any]:
    """The JSON object of a record literal's text.

    Raises:
        CorruptNodeError: ``text`` is not a JSON object.
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CorruptNodeError(f"the record of {iri} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise CorruptNodeError(f"the record of {iri} is not a JSON object")
    return data


def decode_item(node: NodeTriples, memory_id: MemoryId | None = None) -> StoredItem:
    """Rebuild the object, link or record stored as ``node`` from its record literal.

    Args:
        node: the node's triples (its ``rdf:type`` and ``vocab:record`` are read).
        memory_id: the id its IRI carries, when the caller has read it already.

    Returns:
        StoredItem: a value equal to the one written (``==`` and ``content_equal``).

    Raises:
        CorruptNodeError: the node is not a stored item, has no record literal, or its record does
            not form a valid value.
    """
    kind = kind_of_node(node)
    if kind is None:
        raise CorruptNodeError(f"{node.iri} is not a charmem object, link or record")
    cls = _CLASS_OF_KIND[kind]
    data = record_of(node)
    try:
        kwargs: dict[str, Any] = {"id": v.memory_id_of(node.iri) if memory_id is None else memory_id}
        for attr, convert in _DECODERS[cls]:
            value = data[attr]
            kwargs[attr] = value if convert is None or value is None else convert(value)
        if cls is DerivedMemory:
            kwargs["assertions"] = [_assertion_from_json(a) for a in data["assertions"]]
        elif cls is Episode:
            kwargs["scene"] = scene_from_json(data.get("scene"))
        item: StoredItem = cls(**kwargs)
    except CorruptNodeError:
        raise
    except (KeyError, TypeError, ValueError) as exc:  # DraftValidationError is a ValueError
        raise CorruptNodeError(f"{node.iri} does not decode to a valid {cls.__name__}: {exc}") from exc
    return item


def normalise_for_comparison(item: MemoryObject | MemoryLink) -> MemoryObject | MemoryLink:
    """``item`` with numeric fields in their stored Python types (salience as ``float``).

    A salience given as ``int`` reads back as ``float``; comparing the normalised value keeps an
    equal-content replay from looking like a conflict.
    """
    if isinstance(item, (Episode, Observation, DerivedMemory)) and type(item.salience) is not float:
        return attrs.evolve(item, salience=float(item.salience))
    return item


def record_canonical(record: LifecycleRecord) -> tuple[str, ...]:
    """The content of a lifecycle record in canonical form (instant in UTC) for equality."""
    return (
        str(record.id),
        str(record.target_id),
        record.action.value,
        record.rationale,
        record.recorded_at.astimezone(UTC).isoformat(),
        *(f"related:{i}" for i in record.related_ids),
        *(f"ref:{r}" for r in record.external_refs),
    )


def referenced_ids(item: StoredItem) -> set[MemoryId]:
    """Every id ``item`` points at (its reference fields, assertion subjects, scene participants)."""
    found: set[MemoryId] = set()
    for field in FIELDS[type(item)]:
        value = getattr(item, field.attr)
        if field.kind is Kind.REFS:
            found.update(value)
        elif field.kind in (Kind.REF, Kind.OPT_REF) and value is not None:
            found.add(value)
    if isinstance(item, DerivedMemory):
        found.update(assertion.subject for assertion in item.assertions)
    elif isinstance(item, Episode) and item.scene is not None:
        found.update(item.scene.participant_entity_ids)
    return found
