"""The one cattrs converter for charmem's types (plans serialise to JSON).

Datetimes are ISO 8601 strings with their offset preserved, ids canonical UUID strings, enums their
values, and unions (stored objects, belief predicates) are tagged with ``"kind"``. An episode's
``scene`` is written only when it has one, so an episode without a scene keeps the encoding it
had before scenes existed (stored replays compare it, :func:`charmem.domain.rules.canonical_content`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override
from cattrs.strategies import configure_tagged_union

from charmem.domain.ids import MemoryId
from charmem.domain.model import (
    PREDICATE_TAGS,
    BeliefPredicate,
    DerivedMemory,
    Entity,
    Episode,
    KnownAs,
    MemoryLink,
    MemoryObject,
    MemoryThread,
    Observation,
)
from charmem.domain.scene import Scene

__all__ = [
    "KIND_TAGS",
    "configure_scenes",
    "converter",
    "structure_item",
    "tag_predicates",
    "unstructure_item",
]

#: The tag written in the ``"kind"`` key for each stored type.
KIND_TAGS: dict[type, str] = {
    Episode: "episode",
    Observation: "observation",
    Entity: "entity",
    MemoryThread: "thread",
    DerivedMemory: "derived",
    MemoryLink: "link",
}


def tag_predicates(target: cattrs.Converter) -> None:
    """Tag belief predicates with ``"kind"`` in ``target``.

    ``{"kind": "known_as", "name": ...}``, ``{"kind": "actor"}``, ``{"kind": "counterpart"}``:
    :class:`~charmem.domain.model.Actor` and :class:`~charmem.domain.model.Counterpart` hold no
    field, so only the tag tells them apart. ``Converter.copy()`` does not keep a tagged union:
    a copy calls this again. Configure it before any class holding a predicate is (un)structured.
    """
    configure_tagged_union(
        BeliefPredicate,
        target,
        tag_name="kind",
        tag_generator=PREDICATE_TAGS.__getitem__,
        default=KnownAs,  # an untagged predicate is a name (plans and bodies from before the roles)
    )


def configure_scenes(target: cattrs.Converter) -> None:
    """Scenes in ``target``: an episode omits ``"scene"`` when it has none.

    ``custom_values`` reach :class:`~charmem.domain.scene.Scene` as given, so its validation
    (``str`` keys and values) refuses a hand-edited ``5`` instead of reading it as ``"5"``; it
    reads back as a read-only mapping. Configure it before the objects' tagged union, and again
    on a copy whose ``datetime`` hook differs (the scene's hooks are generated with the hooks of
    the converter they are configured on).
    """
    target.register_structure_hook(
        Scene, make_dict_structure_fn(Scene, target, custom_values=override(struct_hook=_as_given))
    )
    target.register_unstructure_hook(
        Episode, make_dict_unstructure_fn(Episode, target, scene=override(omit_if_default=True))
    )


def _as_given(value: Any, _type: Any) -> Any:
    return value


def _converter(instant: Callable[[datetime], str]) -> cattrs.Converter:
    built = cattrs.Converter(forbid_extra_keys=True)
    built.register_unstructure_hook(MemoryId, str)
    built.register_structure_hook(MemoryId, lambda value, _type: MemoryId(value))
    built.register_unstructure_hook(datetime, instant)
    built.register_structure_hook(datetime, lambda value, _type: datetime.fromisoformat(value))
    tag_predicates(built)  # first: configuring the objects' union builds their nested hooks
    configure_scenes(built)
    configure_tagged_union(MemoryObject, built, tag_name="kind", tag_generator=KIND_TAGS.__getitem__)
    return built


converter = _converter(datetime.isoformat)
#: Like :data:`converter`, but instants are normalised to UTC (for canonical content).
canonical_converter = _converter(lambda value: value.astimezone(UTC).isoformat())


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
