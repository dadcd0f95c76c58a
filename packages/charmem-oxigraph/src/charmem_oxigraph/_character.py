"""The character a collection belongs to (:class:`charmem.ports.CharacterRecord`), as read plans.

The record is one statement in the collection's own graph, ``<graph> vocab:characterId "uuid"``
(a plain literal: the id need not name a stored notion), so an export carries it. Both graph
stores run these plans; each writes the lines :func:`record` returns under its writer exclusion.
"""

from __future__ import annotations

import uuid
from collections.abc import Generator
from typing import Any

from charmem.domain.ids import MemoryId
from pyoxigraph import Literal

from charmem_oxigraph import _queries as q
from charmem_oxigraph import _vocab as v
from charmem_oxigraph._cache import GraphCache
from charmem_oxigraph._codec import CorruptNodeError
from charmem_oxigraph._layout import version_line

__all__ = ["record", "recorded"]


def recorded(graph: str) -> Generator[str, list[Any], MemoryId | None]:
    """Plan: the character id ``graph`` records (``None``: none).

    Raises:
        CorruptNodeError: it records several ids, or one that is not a UUID.
    """
    values = sorted({row["c"].value for row in (yield q.character(graph))})
    if len(values) > 1:
        raise CorruptNodeError(f"the collection records {len(values)} character ids: {', '.join(values)}")
    if not values:
        return None
    try:
        return MemoryId(uuid.UUID(values[0]))
    except ValueError as exc:
        raise CorruptNodeError(f"the recorded character id {values[0]!r} is not a UUID") from exc


def record(
    cache: GraphCache, graph: str, character_id: MemoryId
) -> Generator[str, list[Any], tuple[MemoryId, list[str]]]:
    """Plan: the id recorded after recording ``character_id``, and the N-Triples lines to write.

    No lines when an id is recorded already (it is returned, whatever ``character_id`` is). The
    first statement of an empty collection also records the layout version.
    """
    found = yield from recorded(graph)
    if found is not None:
        return found, []
    line = f"<{graph}> <{v.VOCAB}{v.CHARACTER_ID}> {Literal(str(character_id.value))} ."
    lines = [line]
    if not cache.layout_recorded and not (yield q.layout_version(graph)):
        lines.append(version_line(graph))
    return character_id, lines
