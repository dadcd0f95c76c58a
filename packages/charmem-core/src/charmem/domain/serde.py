"""The one cattrs converter for charmem's types (plans serialise to JSON).

Datetimes are ISO 8601 strings with their offset preserved, ids canonical UUID strings, enums their
values, and unions (stored objects, belief predicates) are tagged with ``"kind"``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import cattrs
from cattrs.strategies import configure_tagged_union

from charmem.domain.ids import MemoryId
from charmem.domain.model import (
    PREDICATE_TAGS,
    BeliefPredicate,
    DerivedMemory,
    Entity,
    Episode,
    MemoryLink,
    MemoryObject,
    MemoryThread,
    Observation,
)

__all__ = ["KIND_TAGS", "converter", "structure_item", "unstructure_item"]

#: The tag written in the ``"kind"`` key for each stored type.
KIND_TAGS: dict[type, str] = {
    Episode: "episode",
    Observation: "observation",
    Entity: "entity",
    MemoryThread: "thread",
    DerivedMemory: "derived",
    MemoryLink: "link",
}

converter = cattrs.Converter(forbid_extra_keys=True)
converter.register_unstructure_hook(MemoryId, str)
converter.register_structure_hook(MemoryId, lambda value, _type: MemoryId(value))
converter.register_unstructure_hook(datetime, datetime.isoformat)
converter.register_structure_hook(datetime, lambda value, _type: datetime.fromisoformat(value))
# Predicates first: configuring the objects' union builds their hooks, nested fields included.
configure_tagged_union(  # {"kind": "known_as", "name": ...}, {"kind": "actor"}, {"kind": "counterpart"}
    BeliefPredicate,
    converter,
    tag_name="kind",
    tag_generator=lambda cls: PREDICATE_TAGS[cls],
)
configure_tagged_union(
    MemoryObject,
    converter,
    tag_name="kind",
    tag_generator=lambda cls: KIND_TAGS[cls],
)


#: Like :data:`converter`, but instants are normalised to UTC (for canonical content).
canonical_converter = converter.copy()
canonical_converter.register_unstructure_hook(datetime, lambda value: value.astimezone(UTC).isoformat())


def unstructure_item(item: MemoryObject | MemoryLink, *, canonical: bool = False) -> dict[str, Any]:
    """Unstructure one object or link into plain JSON types, tagged with ``"kind"``.

    Args:
        item: the object or link.
        canonical: normalise instants to UTC (the canonical encoding,
            :func:`charmem.domain.rules.canonical_content`).
    """
    chosen = canonical_converter if canonical else converter
    data: dict[str, Any] = chosen.unstructure(item, unstructure_as=type(item))
    data["kind"] = KIND_TAGS[type(item)]
    return data


def structure_item(data: dict[str, Any]) -> MemoryObject | MemoryLink:
    """Inverse of :func:`unstructure_item`."""
    kind = data.get("kind")
    for cls, tag in KIND_TAGS.items():
        if tag == kind:
            body = {key: value for key, value in data.items() if key != "kind"}
            return converter.structure(body, cls)
    raise ValueError(f"unknown stored kind {kind!r}")
