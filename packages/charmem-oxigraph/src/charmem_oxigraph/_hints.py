"""Kind hints: the kind segment reference IRIs carry, a guess about the referent's stored kind."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from charmem.domain.ids import MemoryId

from charmem_oxigraph import _vocab as v
from charmem_oxigraph._codec import ASSERTION_SUBJECT, FIELDS, REFERENCE_KINDS, NodeTriples

__all__ = ["reference_kinds"]

#: Predicates whose objects are references to other nodes (reference fields, assertion subjects).
_REFERENCE_PREDICATES: Final = frozenset(
    v.VOCAB + field.prop for fields in FIELDS.values() for field in fields if field.kind in REFERENCE_KINDS
) | {v.VOCAB + ASSERTION_SUBJECT}

#: Kinds a reference IRI may reveal (``object`` says nothing about the referent).
_STORED_KINDS: Final = frozenset(v.KIND_OF_CLASS.values())


def reference_kinds(nodes: Iterable[NodeTriples]) -> dict[MemoryId, str]:
    """The kind segment of every reference IRI the ``nodes`` carry, by referenced id: hints.

    A reference carries the referent's stored kind when the referent was stored at write time,
    else the kind its field declares (or ``object``, left out here). So a kind read this way is
    a guess that is almost always right, never a fact: a read binding it must fall back to every
    kind when the node is not found under it (:meth:`charmem_oxigraph._cache.GraphCache.hints`).

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
                        hints[MemoryId(match.group(2))] = match.group(1)
    return hints
