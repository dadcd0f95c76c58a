"""Finding occasions: through a store's :class:`~charmem.ports.OccasionReader`, else by reading.

The fallback is the capability's executable definition: it reads the candidate episodes (those
involving the participant, else every episode) and keeps those
:func:`~charmem.domain.occasions.occasion_matches` accepts. It costs a read of every candidate;
the graph stores of this project answer with one query instead.
"""

from __future__ import annotations

from charmem.domain.ids import MemoryId
from charmem.domain.model import Episode, ObjectType, Relation
from charmem.domain.occasions import Occasion, OccasionQuery, occasion_matches, occasion_order
from charmem.ports import GraphStore, OccasionReader

__all__ = ["find_occasions", "read_occasions"]

_CHUNK = 512


async def find_occasions(graph: GraphStore, query: OccasionQuery) -> list[Occasion]:
    """The episodes meeting ``query``, newest first (:class:`~charmem.ports.OccasionReader`).

    Raises:
        BackendError: the store failed.
    """
    if isinstance(graph, OccasionReader):
        return await graph.occasions(query)
    return await read_occasions(graph, query)


async def read_occasions(graph: GraphStore, query: OccasionQuery) -> list[Occasion]:
    """The capability's answer computed from the memory and admin ports (the definition)."""
    involved: set[MemoryId] = set()
    if query.participant is not None:
        links = await graph.links_of([query.participant], relations=[Relation.INVOLVES])
        involved = {link.from_id for link in links if link.to_id == query.participant}
        candidates = sorted(involved)
    else:
        candidates = await graph.object_ids([ObjectType.EPISODE])
    found = []
    for start in range(0, len(candidates), _CHUNK):
        objects = await graph.get_objects(candidates[start : start + _CHUNK])
        for memory_id, obj in objects.items():
            if isinstance(obj, Episode) and occasion_matches(obj, query, involves=memory_id in involved):
                found.append(Occasion(memory_id, obj.occurred_at))
    found.sort(key=occasion_order)
    return found[: query.limit]
