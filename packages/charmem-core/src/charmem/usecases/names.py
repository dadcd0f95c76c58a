"""Names of notions and the texts candidate recall embeds.

Both the write path (``commit``, lifecycle operations, ``rebuild_vector_index``) and retrieval
read current ``KnownAs`` names through :func:`current_names`, so a name means the same everywhere.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime

from charmem.domain.ids import MemoryId
from charmem.domain.model import DerivedMemory, MemoryObject, ObjectType, Observation, Relation, known_names
from charmem.domain.plan import IndexEntry
from charmem.domain.retrieval import CurrencyStatus
from charmem.domain.rules import voiced_text
from charmem.ports import GraphStore

__all__ = ["current_names", "embedding_texts"]


async def current_names(
    graph: GraphStore, entity_ids: Iterable[MemoryId], as_of: datetime | None = None
) -> dict[MemoryId, tuple[str, ...]]:
    """Current ``KnownAs`` names of notions, as spelled and sorted.

    A notion's names are what current beliefs about it assert with a ``KnownAs`` predicate. A name
    is current when the belief asserting it is current (as of ``as_of``, a record time, when
    given: only beliefs recorded by then, with the currency they had then).

    Args:
        graph: the collection's graph authority.
        entity_ids: notion ids; unknown ids and notions without names are left out.
        as_of: record time, timezone-aware; ``None`` for now.

    Returns:
        dict[MemoryId, tuple[str, ...]]: names per notion, sorted, without duplicates.

    Raises:
        BackendError: the graph failed.
    """
    wanted = set(entity_ids)
    belief_ids = await _naming_beliefs(graph, wanted) if wanted else []
    if not belief_ids:
        return {}
    beliefs = await graph.get_objects(belief_ids)
    currency = await graph.currency(belief_ids, as_of=as_of)
    names: dict[MemoryId, set[str]] = defaultdict(set)
    for belief_id, belief in beliefs.items():
        if not isinstance(belief, DerivedMemory) or currency.get(belief_id) is not CurrencyStatus.CURRENT:
            continue
        if as_of is not None and belief.created_at > as_of:
            continue
        for subject, name in known_names(belief.assertions):
            if subject in wanted:
                names[subject].add(name)
    return {entity_id: tuple(sorted(found)) for entity_id, found in names.items()}


async def _naming_beliefs(graph: GraphStore, wanted: set[MemoryId]) -> list[MemoryId]:
    """The beliefs about ``wanted`` notions that assert a name of one of them, sorted.

    Only those can contribute: start from the store's name index (its assertions by subject, so
    the work does not grow with the names of other notions) and check their ``about`` links,
    rather than reading every belief about the notions (hundreds for a person); the beliefs kept
    are the same.
    """
    named = {belief for belief, _subject, _name in (await graph.name_index()).naming(wanted)}
    if not named:
        return []
    about = await graph.links_of(sorted(named), relations=[Relation.ABOUT])
    return sorted({link.from_id for link in about if link.to_id in wanted and link.from_id in named})


async def embedding_texts(
    entries: Sequence[IndexEntry], graph: GraphStore, known: Iterable[MemoryObject] = ()
) -> list[str]:
    """The texts embedded (and given to the lexical cue) for index entries, in entry order.

    An observation is voiced with its speaker's current names (:func:`~charmem.domain.rules.voiced_text`);
    every other entry embeds its own text. The names are read when the entry is indexed, so a
    rename reaches older utterances at the next ``rebuild_vector_index``.

    Args:
        entries: index entries whose objects are already in the graph.
        graph: the collection's graph authority.
        known: objects as stored in the graph (for example those a commit just wrote or found
            stored with equal content); the utterances among them are not read again.

    Returns:
        list[str]: one text per entry.

    Raises:
        BackendError: the graph failed.
    """
    utterances = [e.id for e in entries if e.object_type is ObjectType.OBSERVATION]
    if not utterances:
        return [e.text for e in entries]
    speakers = await _speakers(utterances, graph, known)
    names = await current_names(graph, set(speakers.values()))
    return [
        voiced_text(e.text, names.get(speakers[e.id], ())) if e.id in speakers else e.text for e in entries
    ]


async def _speakers(
    utterances: Sequence[MemoryId], graph: GraphStore, known: Iterable[MemoryObject]
) -> dict[MemoryId, MemoryId]:
    """The speaker of each utterance that has one, reading from the graph only what ``known`` lacks."""
    given = {obj.id: obj for obj in known if isinstance(obj, Observation)}
    objects: dict[MemoryId, MemoryObject] = {i: given[i] for i in utterances if i in given}
    missing = [i for i in utterances if i not in objects]
    if missing:
        objects.update(await graph.get_objects(missing))
    return {
        i: obj.speaker_entity_id
        for i, obj in objects.items()
        if isinstance(obj, Observation) and obj.speaker_entity_id is not None
    }
