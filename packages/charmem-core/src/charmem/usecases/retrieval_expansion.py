"""Retrieval stages that follow the graph from what was recalled: expansion, threads, currency.

The stages run in the order :func:`charmem.usecases.retrieval.retrieve_pack` lists, over its
:class:`~charmem.usecases.retrieval.Recall`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Final

from charmem.domain.ids import ID_ORDER, MemoryId
from charmem.domain.model import (
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
from charmem.domain.pack import event_time
from charmem.domain.retrieval import CurrencyStatus, GraphLimits
from charmem.domain.rules import replies_to
from charmem.domain.scoring import context_score
from charmem.ports import EpisodeTurn, EpisodeTurnReader, ExpansionReader, GraphStore

if TYPE_CHECKING:
    from charmem.usecases.retrieval import Candidate, Recall

__all__ = ["corrected_sources", "currency_hop", "episode_turns", "expand_roots", "thread_continuity"]

#: A root observation with its episode's turns in order and its place among them.
_Place = tuple["Candidate", list[EpisodeTurn], int]


async def expand_roots(recall: Recall, roots: list[MemoryId]) -> None:
    """Expansion: one hop of links from the roots, and the turns around the root observations.

    What both reach is loaded in one go (run concurrently, the two reads only contended for the
    GIL: measured slower; one call of a store implementing
    :class:`~charmem.ports.ExpansionReader` saves a worker-thread hand-off). Links are followed
    by :func:`_expansion_targets`; the turns around a root observation score
    ``policy.context_decay`` per step times it.
    """
    limits = recall.context.graph_limits
    expand = limits.depth >= 1 and bool(roots) and limits.node_budget > 0
    window = limits.context_window
    links, turns = await _links_and_turns(recall, roots, expand=expand, turns=window > 0)
    reached = _expansion_targets(recall, roots, links) if expand else {}
    places = _context_places(recall, roots, turns)
    await recall.load([*reached, *_context_turn_ids(places, window)])
    allowed_types = set(limits.allowed_object_types)
    for other, (score, signal) in sorted(reached.items(), key=_by_id):
        obj = recall.objects.get(other)
        if obj is not None and object_type_of(obj) not in allowed_types:
            continue
        if isinstance(obj, Entity):
            recall.entity_ids.add(other)
            continue
        if recall.offer(other, score, signal):
            recall.telemetry["nodes_expanded"] += 1
    _offer_context(recall, places, window)


async def thread_continuity(recall: Recall) -> None:
    """Offer the most recent members of every active thread among the items.

    A thread is an ongoing storyline: recalling it without what happened in it lately would lose
    the continuity it exists for. This is expansion along ``part_of_thread`` (signal
    ``expansion:part_of_thread``), bounded like it: ``depth`` >= 1, the relation allowed, the
    member's type allowed, ``per_node_fanout`` and ``node_budget``. Members score
    ``policy.expansion_decay`` times the thread; at most ``policy.thread_recent_members`` each.
    """
    limits = recall.context.graph_limits
    if limits.depth < 1 or Relation.PART_OF_THREAD not in _expansion_relations(limits):
        return
    threads = sorted(
        i
        for i, c in recall.chosen.items()
        if isinstance(c.obj, MemoryThread) and c.obj.status is ThreadStatus.ACTIVE
    )
    if not threads:
        return
    links = await recall.graph.links_of(threads, relations=[Relation.PART_OF_THREAD])
    await recall.load(sorted({link.from_id for link in links}))
    _note_members(recall, links)
    members = _thread_members(recall, links)
    for thread_id in threads:
        newest = sorted(members[thread_id], key=lambda pair: (-event_time(pair[0]).timestamp(), pair[0].id))
        score = recall.chosen[thread_id].score * recall.policy.expansion_decay
        for obj, link in newest[: min(recall.policy.thread_recent_members, limits.per_node_fanout)]:
            if recall.telemetry["nodes_expanded"] >= limits.node_budget:
                return
            recall.links[link.id] = link
            if recall.offer(obj.id, score, "expansion:part_of_thread"):
                recall.telemetry["nodes_expanded"] += 1


async def currency_hop(recall: Recall) -> None:
    """Currency: one hop of ``supersedes`` (recorded by ``as_of``) around every admitted memory.

    A predecessor or successor met this way scores ``policy.expansion_decay`` times the best
    admitted memory next to it and is judged by its currency like every memory.
    """
    admitted = sorted(recall.chosen, key=ID_ORDER)
    if not admitted:
        return
    as_of = recall.context.as_of
    supersedes = await recall.graph.links_of(admitted, relations=[Relation.SUPERSEDES])
    visible = [lk for lk in supersedes if as_of is None or lk.created_at <= as_of]
    hop: dict[MemoryId, tuple[float, str]] = {}
    for link in visible:
        if link.from_id in recall.chosen:
            recall.successors[link.to_id].add(link.from_id)
        for here, there, signal in (
            (link.from_id, link.to_id, "supersedes:predecessor"),
            (link.to_id, link.from_id, "supersedes:successor"),
        ):
            if here in recall.chosen and there not in recall.chosen:
                score = recall.chosen[here].score * recall.policy.expansion_decay
                if there not in hop or hop[there][0] < score:
                    hop[there] = (score, signal)
                recall.links[link.id] = link
    await recall.load(hop)
    for other, (score, signal) in sorted(hop.items(), key=_by_id):
        recall.offer(other, score, signal)


async def corrected_sources(recall: Recall) -> None:
    """Corrections: the admitted memories a correction left behind, and what corrected them.

    A memory is left behind when it is a source (``derived_from``, recorded by ``as_of``) of a
    belief that an admitted current memory supersedes, directly (the hop :func:`currency_hop`
    read) or through earlier corrections (:func:`_earlier_in_chains`), and a source of no
    current belief. What corrected it is every such current successor and the successors' own
    sources, among the admitted memories; :func:`~charmem.usecases.retrieval_assembly.rank`
    ranks the memory below all of them. Runs no query when no admitted memory supersedes
    another.
    """
    chosen = recall.chosen
    corrected = {
        predecessor: current
        for predecessor, successors in recall.successors.items()
        if (current := {s for s in successors if chosen[s].status is CurrencyStatus.CURRENT})
    }
    if not corrected:
        return
    await _earlier_in_chains(recall, corrected)
    successors = sorted({s for group in corrected.values() for s in group}, key=ID_ORDER)
    ends = [*sorted(corrected, key=ID_ORDER), *successors]
    sources = _sources_of(recall, await recall.graph.links_of(ends, relations=[Relation.DERIVED_FROM]))
    behind = sorted({x for p in corrected for x in sources.get(p, ()) if x in chosen}, key=ID_ORDER)
    grounded = await _grounding_current_beliefs(recall, behind) if behind else set()
    for memory_id in behind:
        by = _correctors(memory_id, corrected, sources) & chosen.keys() - {memory_id}
        if by and memory_id not in grounded:
            recall.corrected[memory_id] = frozenset(by)


#: The most ``supersedes`` hops a correction's chain is followed back (one query each).
MAX_CHAIN_HOPS: Final = 32


async def _earlier_in_chains(recall: Recall, corrected: dict[MemoryId, set[MemoryId]]) -> None:
    """Add to ``corrected`` every earlier belief of each chain, with the chain's current successors.

    After Oslo -> Bergen -> Trondheim, the Oslo belief was corrected by Trondheim too: follows
    ``supersedes`` (recorded by ``as_of``) back from each predecessor, at most
    :data:`MAX_CHAIN_HOPS` hops; a belief met twice is followed once.
    """
    as_of = recall.context.as_of
    frontier = dict(corrected)
    for _hop in range(MAX_CHAIN_HOPS):
        links = await recall.graph.links_of(sorted(frontier, key=ID_ORDER), relations=[Relation.SUPERSEDES])
        earlier: dict[MemoryId, set[MemoryId]] = defaultdict(set)
        for link in links:
            if (
                link.from_id in frontier
                and link.to_id not in corrected
                and (as_of is None or link.created_at <= as_of)
            ):
                earlier[link.to_id] |= frontier[link.from_id]
        if not earlier:
            return
        corrected.update(earlier)
        frontier = earlier


def _correctors(
    memory_id: MemoryId,
    corrected: Mapping[MemoryId, set[MemoryId]],
    sources: Mapping[MemoryId, set[MemoryId]],
) -> set[MemoryId]:
    """The successors of the beliefs ``memory_id`` grounded, with the successors' sources."""
    by = {s for p, group in corrected.items() if memory_id in sources.get(p, ()) for s in group}
    return by | {x for s in by for x in sources.get(s, ())}


async def _grounding_current_beliefs(recall: Recall, ids: Sequence[MemoryId]) -> set[MemoryId]:
    """Which of ``ids`` are a source of a current belief (``derived_from``, recorded by ``as_of``)."""
    as_of = recall.context.as_of
    links = await recall.graph.links_of(ids, relations=[Relation.DERIVED_FROM])
    wanted = set(ids)
    grounding = [lk for lk in links if lk.to_id in wanted and (as_of is None or lk.created_at <= as_of)]
    beliefs = sorted({lk.from_id for lk in grounding}, key=ID_ORDER)
    currency = await recall.graph.currency(beliefs, as_of=as_of) if beliefs else {}
    return {lk.to_id for lk in grounding if currency.get(lk.from_id) is CurrencyStatus.CURRENT}


def _sources_of(recall: Recall, links: Sequence[MemoryLink]) -> dict[MemoryId, set[MemoryId]]:
    """Each memory's ``derived_from`` targets among ``links`` (recorded by ``as_of``)."""
    as_of = recall.context.as_of
    sources: dict[MemoryId, set[MemoryId]] = defaultdict(set)
    for link in links:
        if link.relation is Relation.DERIVED_FROM and (as_of is None or link.created_at <= as_of):
            sources[link.from_id].add(link.to_id)
    return sources


async def episode_turns(
    graph: GraphStore, episode_ids: Sequence[MemoryId]
) -> dict[MemoryId, list[EpisodeTurn]]:
    """The turns of each episode (:meth:`charmem.ports.EpisodeTurnReader.episode_turns`).

    Asks the graph store when it implements :class:`~charmem.ports.EpisodeTurnReader`; otherwise
    reads the episodes' ``has_observation`` links and their observations (the contract's
    definition).

    Args:
        graph: the graph authority.
        episode_ids: the episodes.

    Returns:
        dict[MemoryId, list[EpisodeTurn]]: by episode id, one turn per link (unordered).

    Raises:
        BackendError: the store failed.
    """
    if isinstance(graph, EpisodeTurnReader):
        return await graph.episode_turns(episode_ids)
    links = await graph.links_of(episode_ids, relations=[Relation.HAS_OBSERVATION])
    turn_ids = list(dict.fromkeys(link.to_id for link in links))
    observations = await graph.get_objects(turn_ids) if turn_ids else {}
    turns: dict[MemoryId, list[EpisodeTurn]] = defaultdict(list)
    for link in links:
        obs = observations.get(link.to_id)
        if isinstance(obs, Observation) and obs.episode_id == link.from_id:
            turns[link.from_id].append(
                EpisodeTurn(observation_id=obs.id, observed_at=obs.observed_at, created_at=obs.created_at)
            )
    return dict(turns)


def _by_id(pair: tuple[MemoryId, object]) -> int:
    return pair[0].value.int


def _expansion_relations(limits: GraphLimits) -> tuple[Relation, ...]:
    """The relations expansion follows: the allowed ones (default all), never ``supersedes``.

    ``supersedes`` is the currency stage's (:func:`currency_hop`).
    """
    allowed = limits.allowed_relation_types or tuple(r for r in Relation if r is not Relation.SUPERSEDES)
    return tuple(r for r in allowed if r is not Relation.SUPERSEDES)


def _follows(root: MemoryObject, link: MemoryLink) -> bool:
    """Whether expansion follows ``link`` from ``root`` (no member floods from containers)."""
    if isinstance(root, Episode):  # its turns are reached by their own vectors, not all at once
        return not (link.relation is Relation.HAS_OBSERVATION and link.from_id == root.id)
    if isinstance(root, MemoryThread):
        return not (link.relation is Relation.PART_OF_THREAD and link.from_id != root.id)
    return True


def _expansion_targets(
    recall: Recall, roots: list[MemoryId], links: Sequence[MemoryLink]
) -> dict[MemoryId, tuple[float, str]]:
    """The memories one hop from the roots along ``links``: id -> (best score, signal).

    In root order, at most ``per_node_fanout`` followed links per root (by relation, then link
    id) and ``node_budget`` memories in all; a memory already chosen only gains the signal.
    Followed links are kept for the pack. A memory reached scores ``policy.expansion_decay``
    times its root.
    """
    limits = recall.context.graph_limits
    by_root: dict[MemoryId, list[MemoryLink]] = defaultdict(list)
    root_set = set(roots)
    for link in links:  # a link between two roots counts for both (a self-link once)
        source, target = link.from_id, link.to_id
        if source in root_set:
            by_root[source].append(link)
        if target in root_set and target != source:
            by_root[target].append(link)
    reached: dict[MemoryId, tuple[float, str]] = {}
    for root_id in roots:
        root = recall.chosen[root_id]
        followed_links = 0
        for link in sorted(by_root[root_id], key=lambda lk: (lk.relation.value, lk.id)):
            if followed_links >= limits.per_node_fanout or len(reached) >= limits.node_budget:
                break
            if not _follows(root.obj, link):
                continue
            other = link.to_id if link.from_id == root_id else link.from_id
            recall.links[link.id] = link
            followed_links += 1
            signal = f"expansion:{link.relation.value}"
            score = root.score * recall.policy.expansion_decay
            if other in recall.chosen:
                recall.chosen[other].signals.add(signal)
            elif other not in reached or reached[other][0] < score:
                reached[other] = (score, signal)
    return reached


async def _links_and_turns(
    recall: Recall, roots: list[MemoryId], *, expand: bool, turns: bool
) -> tuple[list[MemoryLink], dict[MemoryId, list[EpisodeTurn]]]:
    """Expansion's reads: the roots' links (``expand``), the turns around them (``turns``).

    People remember an utterance with what was said around it: the answer to a question is
    usually the next turn. Only the order of the root observations' episodes' turns is read
    (:func:`episode_turns`), in order (observed_at, id) as of the context. A store implementing
    :class:`~charmem.ports.ExpansionReader` is asked both in one call.
    """
    graph = recall.graph
    relations = _expansion_relations(recall.context.graph_limits)
    episodes = _root_episodes(recall, roots) if turns else []
    if expand and episodes and isinstance(graph, ExpansionReader):
        links, listed = await graph.links_and_turns(roots, relations=relations, episode_ids=episodes)
        return links, _in_turn_order(recall, listed)
    links = await graph.links_of(roots, relations=relations) if expand else []
    return links, _in_turn_order(recall, await episode_turns(graph, episodes)) if episodes else {}


def _root_episodes(recall: Recall, roots: list[MemoryId]) -> list[MemoryId]:
    """The episodes of the root observations, sorted."""
    return sorted({obj.episode_id for i in roots if isinstance(obj := recall.chosen[i].obj, Observation)})


def _in_turn_order(
    recall: Recall, listed: Mapping[MemoryId, list[EpisodeTurn]]
) -> dict[MemoryId, list[EpisodeTurn]]:
    """Each episode's turns recorded by the context's ``as_of``, in order (observed_at, id)."""
    as_of = recall.context.as_of
    return {
        episode_id: sorted(
            (t for t in turns if as_of is None or t.created_at <= as_of),
            key=lambda t: (t.observed_at, t.observation_id),
        )
        for episode_id, turns in listed.items()
    }


def _context_places(
    recall: Recall, roots: list[MemoryId], turns: dict[MemoryId, list[EpisodeTurn]]
) -> list[_Place]:
    """Each root observation with its episode's turns and its place among them, in root order."""
    places: list[_Place] = []
    positions: dict[MemoryId, dict[MemoryId, int]] = {}
    for root_id in roots:
        root = recall.chosen[root_id]
        if not isinstance(root.obj, Observation):
            continue
        episode_id = root.obj.episode_id
        if episode_id not in positions:
            sequence = turns.get(episode_id, [])  # the first place of an id, as a scan finds it
            positions[episode_id] = {sequence[n].observation_id: n for n in reversed(range(len(sequence)))}
        position = positions[episode_id].get(root_id)
        if position is not None:
            places.append((root, turns[episode_id], position))
    return places


def _context_turn_ids(places: Sequence[_Place], window: int) -> Iterator[MemoryId]:
    """The turns within ``window`` of each place, the place itself excluded (to load them)."""
    for _root, sequence, position in places:
        for n in range(max(0, position - window), min(len(sequence), position + window + 1)):
            if n != position:
                yield sequence[n].observation_id


def _offer_context(recall: Recall, places: Sequence[_Place], window: int) -> None:
    """Offer the turns just before and after each recalled observation (signal ``context:adjacent``).

    Scored by :func:`~charmem.domain.scoring.context_score`: the reply to a recalled question
    (:func:`~charmem.domain.rules.replies_to`) as high as the question, the others lower.
    """
    policy, objects = recall.policy, recall.objects
    # What the query recalled each root at: a root raised as another's reply or neighbour lends
    # its turns no more than that (a reply to a reply never outranks the question recalled).
    recalled = [root.score for root, _sequence, _position in places]
    for (root, sequence, position), root_score in zip(places, recalled, strict=True):
        question = root.obj
        assert isinstance(question, Observation)  # places hold observations only
        for offset in range(1, window + 1):
            for neighbour in (position - offset, position + offset):
                if 0 <= neighbour < len(sequence):
                    turn_id = sequence[neighbour].observation_id
                    reply = neighbour == position + 1 and replies_to(objects.get(turn_id), question)
                    score = context_score(root_score, offset, reply=reply, policy=policy)
                    recall.offer(turn_id, score, "context:adjacent")


def _note_members(recall: Recall, links: Sequence[MemoryLink]) -> None:
    """Keep the members of each chosen thread recorded by ``as_of``, whatever may enter.

    They are the thread's support (:func:`~charmem.domain.pack.support_time`).
    """
    as_of = recall.context.as_of
    for link in links:
        if link.to_id in recall.chosen and (as_of is None or link.created_at <= as_of):
            recall.members[link.to_id].add(link.from_id)


def _thread_members(
    recall: Recall, links: Sequence[MemoryLink]
) -> dict[MemoryId, list[tuple[MemoryObject, MemoryLink]]]:
    """Each chosen thread's members that may enter: loaded, recorded by ``as_of``, of an allowed type."""
    allowed_types = set(recall.context.graph_limits.allowed_object_types)
    members: dict[MemoryId, list[tuple[MemoryObject, MemoryLink]]] = defaultdict(list)
    for link in links:
        obj = recall.objects.get(link.from_id)
        if (
            link.to_id in recall.chosen
            and obj is not None
            and recall.visible(obj)
            and object_type_of(obj) in allowed_types
        ):
            members[link.to_id].append((obj, link))
    return members
