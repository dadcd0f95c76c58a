"""Domain values to RDF quads and back (the vocabulary table of the README, as code).

Writing turns each authored field into one triple with a proper datatype, built from pyoxigraph
``Literal`` / ``NamedNode`` values (which escape correctly), so memory text is always data. Reading
groups the triples of one node and rebuilds the domain value with its own constructor, so stored
values pass the same validation as new ones.
"""

from __future__ import annotations

import enum
import functools
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, Final, TypeAlias

import attrs
from charmem.domain.graph import LifecycleRecord
from charmem.domain.ids import MemoryId
from charmem.domain.model import (
    BeliefAssertion,
    DerivedMemory,
    Entity,
    Episode,
    KnownAs,
    MemoryLink,
    MemoryObject,
    MemoryThread,
    Observation,
    Relation,
)
from pyoxigraph import Literal, NamedNode

from charmem_oxigraph import _vocab as v

__all__ = [
    "ENDPOINT_KINDS",
    "CorruptNodeError",
    "NodeTriples",
    "Resolver",
    "StoredItem",
    "Term",
    "decode_item",
    "encode_item",
    "kind_of_node",
    "normalise_for_comparison",
    "record_canonical",
    "reference_kinds",
    "referenced_ids",
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


class CorruptNodeError(ValueError):
    """Triples stored under a charmem IRI do not decode to a valid domain value."""


class _Kind(enum.Enum):
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


_REFERENCE_KINDS: Final = frozenset({_Kind.REF, _Kind.OPT_REF, _Kind.REFS})


@attrs.frozen
class _Field:
    attr: str
    prop: str
    kind: _Kind
    ref_kind: str | None = None


_TAIL = (
    _Field("created_at", "createdAt", _Kind.INSTANT),
    _Field("schema_version", "schemaVersion", _Kind.INT),
)

_FIELDS: Final[dict[type, tuple[_Field, ...]]] = {
    Episode: (
        _Field("occurred_at", "occurredAt", _Kind.INSTANT),
        _Field("summary", "summary", _Kind.TEXT),
        _Field("participant_entity_ids", "participant", _Kind.REFS, "entity"),
        _Field("thread_ids", "inThread", _Kind.REFS, "thread"),
        _Field("raw_ref", "rawRef", _Kind.OPT_TEXT),
        _Field("salience", "salience", _Kind.DOUBLE),
        *_TAIL,
    ),
    Observation: (
        _Field("episode_id", "episode", _Kind.REF, "episode"),
        _Field("text", "text", _Kind.TEXT),
        _Field("observed_at", "observedAt", _Kind.INSTANT),
        _Field("speaker_entity_id", "speaker", _Kind.OPT_REF, "entity"),
        _Field("mentioned_entity_ids", "mentionedEntity", _Kind.REFS, "entity"),
        _Field("raw_ref", "rawRef", _Kind.OPT_TEXT),
        _Field("salience", "salience", _Kind.DOUBLE),
        *_TAIL,
    ),
    Entity: (_Field("entity_type", "entityType", _Kind.TEXT), *_TAIL),
    MemoryThread: (
        _Field("title", "title", _Kind.TEXT),
        _Field("summary", "summary", _Kind.TEXT),
        _Field("status", "status", _Kind.ENUM),
        *_TAIL,
    ),
    DerivedMemory: (
        _Field("derived_type", "derivedType", _Kind.ENUM),
        _Field("text", "text", _Kind.TEXT),
        _Field("episode_ids", "sourceEpisode", _Kind.REFS, "episode"),
        _Field("observation_ids", "sourceObservation", _Kind.REFS, "observation"),
        _Field("entity_ids", "subjectEntity", _Kind.REFS, "entity"),
        _Field("thread_ids", "inThread", _Kind.REFS, "thread"),
        _Field("given_by_application", "givenByApplication", _Kind.BOOL),
        _Field("supersedes", "declaresSupersedes", _Kind.REFS),
        _Field("salience", "salience", _Kind.DOUBLE),
        *_TAIL,
    ),
    MemoryLink: (
        _Field("from_id", "from", _Kind.REF),
        _Field("relation", "relation", _Kind.RELATION),
        _Field("to_id", "to", _Kind.REF),
        _Field("rationale", "rationale", _Kind.OPT_TEXT),
        *_TAIL,
    ),
    LifecycleRecord: (
        _Field("target_id", "target", _Kind.REF),
        _Field("action", "action", _Kind.ENUM),
        _Field("rationale", "rationale", _Kind.TEXT),
        _Field("recorded_at", "recordedAt", _Kind.INSTANT),
        _Field("related_ids", "related", _Kind.REFS),
        _Field("external_refs", "externalRef", _Kind.TEXTS),
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
_ASSERTION_SUBJECT = "assertionSubject"
_KNOWN_AS = "knownAs"
_POSITION = "position"


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
_ASSERTION_CLASS_TERM: Final = _term(v.ASSERTION_CLASS)
_ASSERTION_SUBJECT_TERM: Final = _term(v.VOCAB + _ASSERTION_SUBJECT)
_KNOWN_AS_TERM: Final = _term(v.VOCAB + _KNOWN_AS)
_POSITION_TERM: Final = _term(v.VOCAB + _POSITION)
#: Each relation's property (the ``vocab:relation`` value of a link and its direct edge's predicate).
_RELATION_TERMS: Final[dict[Relation, str]] = {r: _term(v.relation_iri(r)) for r in Relation}

#: How :func:`encode_item` writes a field: one reference, a tuple of references, a tuple of
#: texts, a relation, or one literal.
_REF, _REFS, _TEXTS, _RELATION, _LITERAL = range(5)
_SHAPE_OF_KIND: Final = {
    _Kind.REF: _REF,
    _Kind.OPT_REF: _REF,
    _Kind.REFS: _REFS,
    _Kind.TEXTS: _TEXTS,
    _Kind.RELATION: _RELATION,
}
#: Per stored type: (field, predicate term, shape) of each field, in :data:`_FIELDS` order.
_ENCODING: Final[dict[type, tuple[tuple[_Field, str, int], ...]]] = {
    cls: tuple(
        (field, _term(v.VOCAB + field.prop), _SHAPE_OF_KIND.get(field.kind, _LITERAL)) for field in fields
    )
    for cls, fields in _FIELDS.items()
}


@functools.lru_cache(maxsize=4096)
def _instant(text: str) -> str:
    # Instants repeat across a batch (a session's objects share theirs): write each term once.
    return str(Literal(text, datatype=_XSD_DATETIME))


@functools.lru_cache(maxsize=256, typed=True)  # True and 1 are different terms
def _plain(value: int | bool | str) -> str:
    # Small repeated values (schema versions, booleans, enum values): one term each.
    return str(Literal(value))


def _literal(kind: _Kind, value: Any) -> str:  # noqa: ANN401 - any field value
    """The N-Triples text of a literal field value, serialised by pyoxigraph (which escapes)."""
    if kind is _Kind.TEXT or kind is _Kind.OPT_TEXT:
        return str(Literal(value))
    if kind is _Kind.INSTANT:
        return _instant(value.isoformat())
    if kind is _Kind.DOUBLE:
        return str(Literal(float(value)))
    if kind is _Kind.INT:
        return _plain(int(value))
    if kind is _Kind.BOOL:
        return _plain(bool(value))
    if kind is _Kind.ENUM:
        return _plain(value.value)
    raise AssertionError(kind)  # pragma: no cover - references are handled by the caller


def _endpoint_kinds(item: StoredItem) -> tuple[str | None, str | None]:
    if isinstance(item, MemoryLink):
        return ENDPOINT_KINDS.get(item.relation, (None, None))
    return (None, None)


def encode_item(item: StoredItem, resolve: Resolver) -> list[str]:
    """The triples storing ``item``, as N-Triples lines (the graph is given by the write).

    Memory text reaches the lines only as literals pyoxigraph serialised (``str(Literal(...))``,
    which escapes quotes, backslashes and line breaks); IRIs are built from constants, kinds and
    UUIDs (:mod:`charmem_oxigraph._vocab`). Writing text rather than ``Quad`` objects costs a third
    of the time (a ``Quad`` is ~3 µs to build), and the store parses it at the same speed.

    Args:
        item: an object, link or lifecycle record.
        resolve: maps a referenced id (and the kind its field declares, if any) to an IRI term.

    Returns:
        list[str]: lines ``<s> <p> o .``: ``rdf:type``, one per authored field value, assertion
        nodes for a derived memory, and for a link the direct edge ``<from> vocab:<relation> <to>``.
    """
    kind = v.KIND_OF_CLASS[type(item)]
    subject = _term(v.node_iri(kind, item.id)) + " "
    lines = [f"{subject}{_RDF_TYPE_TERM} {_CLASS_TERMS[kind]} ."]
    from_kind, to_kind = _endpoint_kinds(item)
    for field, predicate, shape in _ENCODING[type(item)]:
        value = getattr(item, field.attr)
        if shape == _LITERAL:
            if value is not None:
                lines.append(f"{subject}{predicate} {_literal(field.kind, value)} .")
        elif shape == _REFS:
            lines += [f"{subject}{predicate} {resolve(ref, field.ref_kind)} ." for ref in value]
        elif shape == _REF:
            if value is not None:
                declared = field.ref_kind
                if field.attr == "from_id":
                    declared = from_kind
                elif field.attr == "to_id":
                    declared = to_kind
                lines.append(f"{subject}{predicate} {resolve(value, declared)} .")
        elif shape == _RELATION:
            lines.append(f"{subject}{predicate} {_RELATION_TERMS[value]} .")
        else:  # _TEXTS
            lines += [f"{subject}{predicate} {Literal(text)} ." for text in value]
    if isinstance(item, DerivedMemory):
        for position, assertion in enumerate(item.assertions):
            node = _term(v.assertion_iri(item.id, position))
            lines += [
                f"{subject}{_ASSERTION_TERM} {node} .",
                f"{node} {_RDF_TYPE_TERM} {_ASSERTION_CLASS_TERM} .",
                f"{node} {_ASSERTION_SUBJECT_TERM} {resolve(assertion.subject, 'entity')} .",
                f"{node} {_KNOWN_AS_TERM} {Literal(assertion.predicate.name)} .",
                f"{node} {_POSITION_TERM} {_plain(position)} .",
            ]
    if isinstance(item, MemoryLink):
        edge = _RELATION_TERMS[item.relation]
        lines.append(f"{resolve(item.from_id, from_kind)} {edge} {resolve(item.to_id, to_kind)} .")
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
    kinds = {v.ITEM_CLASSES[t.value] for t in node.props.get(v.RDF_TYPE, ()) if t.value in v.ITEM_CLASSES}
    if len(kinds) > 1:
        raise CorruptNodeError(f"{node.iri} is typed as several kinds: {sorted(kinds)}")
    return next(iter(kinds), None)


def _single(props: dict[str, list[Term]], iri: str, predicate: str) -> Term | None:
    values = props.get(predicate, [])
    if len(values) > 1:
        raise CorruptNodeError(f"{iri} has {len(values)} values of {predicate}")
    return values[0] if values else None


def _decode_value(kind: _Kind, term: Term) -> object:
    if kind in (_Kind.REF, _Kind.OPT_REF, _Kind.REFS, _Kind.RELATION):
        if not isinstance(term, NamedNode):
            raise CorruptNodeError(f"expected an IRI, got {term!r}")
        return v.relation_of(term.value) if kind is _Kind.RELATION else v.memory_id_of(term.value)
    if not isinstance(term, Literal):
        raise CorruptNodeError(f"expected a literal, got {term!r}")
    text: str = term.value
    if kind is _Kind.INSTANT:
        return datetime.fromisoformat(text)
    if kind is _Kind.DOUBLE:
        return float(text)
    if kind is _Kind.INT:
        return int(text)
    if kind is _Kind.BOOL:
        if text not in ("true", "false", "1", "0"):
            raise CorruptNodeError(f"{text!r} is not an xsd:boolean")
        return text in ("true", "1")
    return text  # TEXT, OPT_TEXT, ENUM (the constructor converts enum values)


def _decode_assertions(node: NodeTriples) -> list[BeliefAssertion]:
    decoded: list[tuple[int, BeliefAssertion]] = []
    for iri, props in node.assertions.items():
        subject = _single(props, iri, v.VOCAB + _ASSERTION_SUBJECT)
        name = _single(props, iri, v.VOCAB + _KNOWN_AS)
        position = _single(props, iri, v.VOCAB + _POSITION)
        if subject is None or name is None or position is None:
            raise CorruptNodeError(f"assertion node {iri} is incomplete")
        decoded.append(
            (int(position.value), BeliefAssertion(v.memory_id_of(subject.value), KnownAs(name.value)))
        )
    return [assertion for _position, assertion in sorted(decoded, key=lambda pair: pair[0])]


def decode_item(node: NodeTriples) -> StoredItem:
    """Rebuild the object, link or record stored as ``node``.

    Args:
        node: every triple of the node (and, for a derived memory, of its assertion nodes).

    Returns:
        StoredItem: a value equal to the one written (``==`` and ``content_equal``).

    Raises:
        CorruptNodeError: the node is not a stored item or its triples do not form a valid value.
    """
    kind = kind_of_node(node)
    if kind is None:
        raise CorruptNodeError(f"{node.iri} is not a charmem object, link or record")
    cls = _CLASS_OF_KIND[kind]
    try:
        kwargs: dict[str, Any] = {"id": v.memory_id_of(node.iri)}
        for field in _FIELDS[cls]:
            predicate = v.VOCAB + field.prop
            if field.kind in (_Kind.REFS, _Kind.TEXTS):
                item_kind = _Kind.REFS if field.kind is _Kind.REFS else _Kind.TEXT
                kwargs[field.attr] = [
                    _decode_value(item_kind, term) for term in node.props.get(predicate, [])
                ]
                continue
            term = _single(node.props, node.iri, predicate)
            if term is not None:
                kwargs[field.attr] = _decode_value(field.kind, term)
            elif field.kind in (_Kind.OPT_TEXT, _Kind.OPT_REF):
                kwargs[field.attr] = None
        if cls is DerivedMemory:
            kwargs["assertions"] = _decode_assertions(node)
        item: StoredItem = cls(**kwargs)
    except CorruptNodeError:
        raise
    except (TypeError, ValueError) as exc:  # DraftValidationError is a ValueError
        raise CorruptNodeError(f"{node.iri} does not decode to a valid {cls.__name__}: {exc}") from exc
    return item


#: Predicates whose objects are references to other nodes (reference fields, assertion subjects).
_REFERENCE_PREDICATES: Final = frozenset(
    v.VOCAB + field.prop for fields in _FIELDS.values() for field in fields if field.kind in _REFERENCE_KINDS
) | {v.VOCAB + _ASSERTION_SUBJECT}

#: Kinds a reference IRI may reveal (``object`` says nothing about the referent).
_STORED_KINDS: Final = frozenset(v.KIND_OF_CLASS.values())


def reference_kinds(nodes: Iterable[NodeTriples]) -> dict[MemoryId, str]:
    """The kind segment of every reference IRI the ``nodes`` carry, by referenced id: hints.

    A reference carries the referent's stored kind when the referent was stored at write time,
    else the kind its field declares (or ``object``, left out here). So a kind read this way is
    a guess that is almost always right, never a fact: a read binding it must fall back to every
    kind when the node is not found under it (:meth:`GraphCache.hints`).

    Args:
        nodes: nodes read back (their props and assertion nodes).

    Returns:
        dict[MemoryId, str]: a stored kind per referenced id.
    """
    hints: dict[MemoryId, str] = {}
    for node in nodes:
        props = [node.props, *node.assertions.values()]
        for triples in props:
            for predicate, terms in triples.items():
                if predicate not in _REFERENCE_PREDICATES:
                    continue
                for term in terms:
                    match = v.NODE_IRI.fullmatch(term.value)
                    if match is not None and match.group(1) in _STORED_KINDS:
                        hints[MemoryId(uuid.UUID(match.group(2)))] = match.group(1)
    return hints


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
    """Every id ``item`` points at (its reference fields and assertion subjects)."""
    found: set[MemoryId] = set()
    for field in _FIELDS[type(item)]:
        value = getattr(item, field.attr)
        if field.kind is _Kind.REFS:
            found.update(value)
        elif field.kind in (_Kind.REF, _Kind.OPT_REF) and value is not None:
            found.add(value)
    if isinstance(item, DerivedMemory):
        found.update(assertion.subject for assertion in item.assertions)
    return found
