"""The decoder of layout 1, the layout before the compact one: for ``charmem migrate`` only.

Layout 1 stored every authored field as a triple of its own (``vocab:<field>``), each
``BeliefAssertion`` as a typed node with a ``vocab:position``, and each link also as a direct
edge ``<from> vocab:<relation> <to>``. Nothing writes it any more; :func:`decode_item` reads a
layout-1 node back into its domain value so the migration can write the record literal.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from charmem.domain.model import BeliefAssertion, DerivedMemory, KnownAs
from pyoxigraph import Literal, NamedNode

from charmem_oxigraph import _vocab as v
from charmem_oxigraph._codec import (
    ASSERTION_SUBJECT,
    FIELDS,
    KNOWN_AS,
    CorruptNodeError,
    Kind,
    NodeTriples,
    StoredItem,
    Term,
    kind_of_node,
    single,
)

__all__ = ["POSITION", "decode_item"]

#: The ``xsd:integer`` property of a layout-1 assertion node: its place in canonical order.
POSITION: Final = "position"

_CLASS_OF_KIND: Final[dict[str, type]] = {kind: cls for cls, kind in v.KIND_OF_CLASS.items()}


def _decode_value(kind: Kind, term: Term) -> object:
    if kind in (Kind.REF, Kind.OPT_REF, Kind.REFS, Kind.RELATION):
        if not isinstance(term, NamedNode):
            raise CorruptNodeError(f"expected an IRI, got {term!r}")
        return v.relation_of(term.value) if kind is Kind.RELATION else v.memory_id_of(term.value)
    if not isinstance(term, Literal):
        raise CorruptNodeError(f"expected a literal, got {term!r}")
    text: str = term.value
    if kind is Kind.INSTANT:
        return datetime.fromisoformat(text)
    if kind is Kind.DOUBLE:
        return float(text)
    if kind is Kind.INT:
        return int(text)
    if kind is Kind.BOOL:
        if text not in ("true", "false", "1", "0"):
            raise CorruptNodeError(f"{text!r} is not an xsd:boolean")
        return text in ("true", "1")
    return text  # TEXT, OPT_TEXT, ENUM (the constructor converts enum values)


def _decode_assertions(node: NodeTriples) -> list[BeliefAssertion]:
    decoded: list[tuple[int, BeliefAssertion]] = []
    for iri, props in node.assertions.items():
        subject = single(props, iri, v.VOCAB + ASSERTION_SUBJECT)
        name = single(props, iri, v.VOCAB + KNOWN_AS)
        position = single(props, iri, v.VOCAB + POSITION)
        if subject is None or name is None or position is None:
            raise CorruptNodeError(f"assertion node {iri} is incomplete")
        decoded.append(
            (int(position.value), BeliefAssertion(v.memory_id_of(subject.value), KnownAs(name.value)))
        )
    return [assertion for _position, assertion in sorted(decoded, key=lambda pair: pair[0])]


def decode_item(node: NodeTriples) -> StoredItem:
    """Rebuild the object, link or record stored as the layout-1 ``node``.

    Args:
        node: every triple of the node (and, for a derived memory, of its assertion nodes).

    Returns:
        StoredItem: the value that was written.

    Raises:
        CorruptNodeError: the node is not a stored item or its triples do not form a valid value.
    """
    kind = kind_of_node(node)
    if kind is None:
        raise CorruptNodeError(f"{node.iri} is not a charmem object, link or record")
    cls = _CLASS_OF_KIND[kind]
    try:
        kwargs: dict[str, Any] = {"id": v.memory_id_of(node.iri)}
        for field in FIELDS[cls]:
            predicate = v.VOCAB + field.prop
            if field.kind in (Kind.REFS, Kind.TEXTS):
                item_kind = Kind.REFS if field.kind is Kind.REFS else Kind.TEXT
                kwargs[field.attr] = [
                    _decode_value(item_kind, term) for term in node.props.get(predicate, [])
                ]
                continue
            term = single(node.props, node.iri, predicate)
            if term is not None:
                kwargs[field.attr] = _decode_value(field.kind, term)
            elif field.kind in (Kind.OPT_TEXT, Kind.OPT_REF):
                kwargs[field.attr] = None
        if cls is DerivedMemory:
            kwargs["assertions"] = _decode_assertions(node)
        item: StoredItem = cls(**kwargs)
    except CorruptNodeError:
        raise
    except (TypeError, ValueError) as exc:  # DraftValidationError is a ValueError
        raise CorruptNodeError(f"{node.iri} does not decode to a valid {cls.__name__}: {exc}") from exc
    return item
