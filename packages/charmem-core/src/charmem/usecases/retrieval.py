"""``retrieve``: candidate recall, graph authority, bounded expansion, one ranked pack (DESIGN §6).

The order of operations:

1. Candidate recall: the query is embedded and the vector index returns the nearest memories of
   the scoped object types (``RetrievalContext.object_type_defaults``).
2. Graph authority: a candidate the graph does not hold is omitted (``not_in_graph``); one that is
   not current is omitted with its status (``suppressed`` beats ``superseded``).
3. Bounded expansion (one hop): from each admitted root, in rank order, follow its links to
   provenance (sources, the episode of an observation, interpretations grounded on it), threads,
   caller links and notions, at most ``per_node_fanout`` per root and ``node_budget`` in all.
   An expanded memory scores ``EXPANSION_DECAY`` times its root's score. Notions are listed in
   ``pack.entities`` with their current ``KnownAs`` names, not as items.
4. Ranking: one score per item; canonical ties by (score desc, newer first, object type, id), so
   identical stores and queries give identical packs whatever the insertion order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime

import attrs

from charmem.domain.ids import MemoryId
from charmem.domain.model import (
    DerivedMemory,
    Entity,
    Episode,
    MemoryLink,
    MemoryObject,
    MemoryThread,
    Observation,
    Relation,
    ThreadStatus,
    object_type_of,
)
from charmem.domain.retrieval import (
    SECTION_OF_DERIVED_TYPE,
    ContinuityContextPack,
    CurrencyStatus,
    Omission,
    PackEntity,
    PackItem,
    RetrievalContext,
)
from charmem.ports import EmbeddingProvider, GraphStore, TokenCounter, VectorIndex, VectorQuery

__all__ = ["EXPANSION_DECAY", "retrieve_pack"]

#: Score of an expanded memory relative to the root it was reached from.
EXPANSION_DECAY = 0.5

#: Omission reasons.
NOT_IN_GRAPH = "not_in_graph"


@attrs.define
class _Candidate:
    obj: MemoryObject
    score: float
    signals: set[str]
    status: CurrencyStatus = CurrencyStatus.CURRENT


def event_time(obj: MemoryObject) -> datetime:
    """When a memory happened: episode and observation event time, else record time."""
    if isinstance(obj, Episode):
        return obj.occurred_at
    if isinstance(obj, Observation):
        return obj.observed_at
    return obj.created_at


def _text(obj: MemoryObject) -> str:
    if isinstance(obj, Episode):
        return obj.summary or f"(episode of {obj.occurred_at.date().isoformat()})"
    if isinstance(obj, Observation | DerivedMemory):
        return obj.text
    if isinstance(obj, MemoryThread):
        return f"{obj.title}: {obj.summary}" if obj.summary else obj.title
    return obj.entity_type


def _provenance(obj: MemoryObject) -> tuple[MemoryId, ...]:
    if isinstance(obj, Observation):
        return (obj.episode_id,)
    if isinstance(obj, DerivedMemory):
        return obj.source_ids
    return ()


def _entities_of(obj: MemoryObject) -> tuple[MemoryId, ...]:
    if isinstance(obj, Episode):
        return obj.participant_entity_ids
    if isinstance(obj, Observation):
        ids = set(obj.mentioned_entity_ids)
        if obj.speaker_entity_id is not None:
            ids.add(obj.speaker_entity_id)
        return tuple(sorted(ids))
    if isinstance(obj, DerivedMemory):
        return obj.entity_ids
    return ()


def _follows(root: MemoryObject, link: MemoryLink) -> bool:
    """Whether expansion follows ``link`` from ``root`` (no member floods from containers)."""
    outgoing = link.from_id == root.id
    if isinstance(root, Episode) and outgoing and link.relation is Relation.HAS_OBSERVATION:
        return False  # an episode's turns are reached by their own vectors, not all at once
    return not (isinstance(root, MemoryThread) and not outgoing and link.relation is Relation.PART_OF_THREAD)


def _section(obj: MemoryObject) -> str | None:
    if isinstance(obj, MemoryThread):
        return "active_threads" if obj.status is ThreadStatus.ACTIVE else None
    if isinstance(obj, Episode):
        return "relevant_episodes"
    if isinstance(obj, Observation):
        return "salient_observations"
    if isinstance(obj, DerivedMemory):
        return SECTION_OF_DERIVED_TYPE[obj.derived_type]
    return None


def _rank_key(candidate: _Candidate) -> tuple[float, float, str, MemoryId]:
    obj = candidate.obj
    return (-candidate.score, -event_time(obj).timestamp(), object_type_of(obj).value, obj.id)


async def _names(graph: GraphStore, entity_ids: Iterable[MemoryId]) -> dict[MemoryId, tuple[str, ...]]:
    """Current ``KnownAs`` names of notions, as spelled, sorted."""
    wanted = set(entity_ids)
    if not wanted:
        return {}
    about = await graph.links_of(sorted(wanted), relations=[Relation.ABOUT])
    belief_ids = sorted({link.from_id for link in about if link.to_id in wanted})
    beliefs = await graph.get_objects(belief_ids)
    currency = await graph.currency(belief_ids)
    names: dict[MemoryId, set[str]] = defaultdict(set)
    for belief_id, belief in beliefs.items():
        if not isinstance(belief, DerivedMemory) or currency.get(belief_id) is not CurrencyStatus.CURRENT:
            continue
        for assertion in belief.assertions:
            if assertion.subject in wanted:
                names[assertion.subject].add(assertion.predicate.name)
    return {entity_id: tuple(sorted(found)) for entity_id, found in names.items()}


async def retrieve_pack(
    context: RetrievalContext,
    *,
    graph: GraphStore,
    vectors: VectorIndex,
    embedder: EmbeddingProvider,
    token_counter: TokenCounter,
) -> ContinuityContextPack:
    """Recall memories for ``context`` into a :class:`ContinuityContextPack`.

    Raises:
        BackendError: a store or the embedding provider failed.
    """
    limits = context.graph_limits
    query_vector = await embedder.embed_query(context.query)
    recall = await vectors.search(
        VectorQuery(
            vector=query_vector,
            limit=context.candidate_limit,
            object_types=context.object_type_defaults,
            text=context.query,
        )
    )
    hit_ids = [hit.id for hit in recall.hits]
    objects = await graph.get_objects(hit_ids)
    currency = await graph.currency(hit_ids)
    omissions: dict[MemoryId, str] = {}
    chosen: dict[MemoryId, _Candidate] = {}
    roots: list[MemoryId] = []
    below_floor = 0
    for hit in recall.hits:
        if hit.score <= context.score_floor:
            below_floor += 1
            continue
        obj = objects.get(hit.id)
        if obj is None:
            omissions[hit.id] = NOT_IN_GRAPH
            continue
        status = currency.get(hit.id, CurrencyStatus.CURRENT)
        if status is not CurrencyStatus.CURRENT:
            omissions[hit.id] = status.value
            continue
        if hit.id not in chosen:
            chosen[hit.id] = _Candidate(obj, float(hit.score), {"vector"})
            roots.append(hit.id)

    entity_ids: set[MemoryId] = set()
    expanded = 0
    item_links: dict[MemoryId, MemoryLink] = {}
    if limits.depth >= 1 and roots and limits.node_budget > 0:
        relations = limits.allowed_relation_types or tuple(
            r for r in Relation if r is not Relation.SUPERSEDES
        )
        links = await graph.links_of(roots, relations=relations)
        by_root: dict[MemoryId, list[MemoryLink]] = defaultdict(list)
        root_set = set(roots)
        for link in links:
            for end in (link.from_id, link.to_id):
                if end in root_set:
                    by_root[end].append(link)
        reached: dict[MemoryId, tuple[float, str]] = {}
        for root_id in roots:
            root = chosen[root_id]
            followed = 0
            for link in sorted(by_root[root_id], key=lambda lk: (lk.relation.value, lk.id)):
                if followed >= limits.per_node_fanout or len(reached) >= limits.node_budget:
                    break
                if not _follows(root.obj, link):
                    continue
                other = link.to_id if link.from_id == root_id else link.from_id
                item_links[link.id] = link
                followed += 1
                signal = f"expansion:{link.relation.value}"
                score = root.score * EXPANSION_DECAY
                if other in chosen:
                    chosen[other].signals.add(signal)
                elif other not in reached or reached[other][0] < score:
                    reached[other] = (score, signal)
        neighbours = await graph.get_objects(sorted(reached))
        neighbour_currency = await graph.currency(sorted(neighbours))
        allowed_types = set(limits.allowed_object_types)
        for other, (score, signal) in sorted(reached.items()):
            obj = neighbours.get(other)
            if obj is None:
                omissions.setdefault(other, NOT_IN_GRAPH)
                continue
            kind = object_type_of(obj)
            if kind not in allowed_types:
                continue
            if isinstance(obj, Entity):
                entity_ids.add(other)
                continue
            status = neighbour_currency.get(other, CurrencyStatus.CURRENT)
            if status is not CurrencyStatus.CURRENT:
                omissions.setdefault(other, status.value)
                continue
            chosen[other] = _Candidate(obj, score, {signal})
            expanded += 1

    ranked = sorted(chosen.values(), key=_rank_key)[: context.max_items]
    for candidate in ranked:
        entity_ids.update(_entities_of(candidate.obj))
    entity_objects = await graph.get_objects(sorted(entity_ids))
    names = await _names(graph, entity_objects)
    items = tuple(
        PackItem(
            id=c.obj.id,
            object_type=object_type_of(c.obj),
            text=_text(c.obj),
            occurred_at=event_time(c.obj),
            score=c.score,
            signals=tuple(sorted(c.signals)),
            status=c.status,
            provenance_ids=_provenance(c.obj),
            derived_type=c.obj.derived_type if isinstance(c.obj, DerivedMemory) else None,
            entity_ids=_entities_of(c.obj),
        )
        for c in ranked
    )
    sections: dict[str, list[MemoryId]] = {name: [] for name in context.section_limits}
    for candidate in ranked:
        section = _section(candidate.obj)
        if section is not None and len(sections[section]) < context.section_limits[section]:
            sections[section].append(candidate.obj.id)
    in_pack = {item.id for item in items}
    pack_links = tuple(
        sorted(
            (lk for lk in item_links.values() if lk.from_id in in_pack and lk.to_id in in_pack),
            key=lambda lk: lk.id,
        )
    )
    entities = tuple(
        PackEntity(id=e.id, entity_type=e.entity_type, names=names.get(e.id, ()))
        for e in sorted(entity_objects.values(), key=lambda e: e.id)
        if isinstance(e, Entity)
    )
    telemetry = {
        "roots_considered": len(recall.hits),
        "roots_admitted": len(roots),
        "roots_omitted": len(recall.hits) - len(roots) - below_floor,
        "roots_below_floor": below_floor,
        "nodes_expanded": expanded,
        "items": len(items),
        "entities": len(entities),
        "omissions": len(omissions),
    }
    return ContinuityContextPack(
        query=context.query,
        items=items,
        sections={name: tuple(ids) for name, ids in sections.items()},
        entities=entities,
        links=pack_links,
        omissions=tuple(Omission(i, r) for i, r in sorted(omissions.items())),
        completeness=recall.completeness,
        telemetry=telemetry,
        token_counter=token_counter,
        max_tokens=context.max_tokens,
    )
