"""``retrieve``: candidate recall, graph authority, bounded expansion, one ranked pack (DESIGN §6).

The order of operations:

1. Candidate recall: the query is embedded and the vector index returns the nearest memories of
   the scoped object types (``RetrievalContext.object_type_defaults``). The types it reports
   are handed to a graph store that takes them (:class:`~charmem.ports.ObjectTypeHints`), so
   it reads the candidates with one lookup each.
2. Graph authority: a candidate the graph does not hold is omitted (``not_in_graph``); one that is
   not current is omitted with its status (``suppressed`` beats ``superseded``).
3. Bounded expansion (one hop): from each admitted root, in rank order, follow its links to
   provenance (sources, the episode of an observation, interpretations grounded on it), threads,
   caller links and notions, at most ``per_node_fanout`` per root and ``node_budget`` in all.
   An expanded memory scores ``EXPANSION_DECAY`` times its root's score. Notions are listed in
   ``pack.entities`` with their current ``KnownAs`` names, not as items.
4. Notions: focus entities and notions whose current ``KnownAs`` name occurs in the query
   lead to the memories about, involving or mentioning them: the vector index ranks a notion's
   members against the query (``VectorQuery.within``) and the ``per_node_fanout`` nearest enter
   at ``EXPANSION_DECAY`` times the best root. A notion with more than ``hub_edge_cap`` links
   (retrieval stats) is a hub: following it would flood the pack with routine memories, so only
   ``per_node_fanout // HUB_FANOUT_DIVISOR`` of its members enter, their score scaled by
   ``hub_edge_cap / degree`` (selectivity), yet a rare relevant memory reachable only through the
   hub still comes first among them. Members that are no longer current (superseded or
   suppressed, so out of the vector index) are reached through the graph: as many of them, the
   newest first, are met at the same score (see 7), so forgetting or replacing every belief
   about a notion never hides that there were some, and an ``as_of`` view still finds what was
   current then.
5. Conversational context: the ``context_window`` observations before and after each recalled
   observation in its episode (order: observed_at, id) score ``CONTEXT_DECAY`` per step times
   it: people remember an utterance with what was said around it.
6. Thread continuity: an active thread among the items brings its ``THREAD_RECENT_MEMBERS``
   newest members (``EXPANSION_DECAY`` times its score).
7. Currency: one hop of ``supersedes`` around every admitted memory. Superseded and suppressed
   memories met anywhere are listed among the omissions with their status (suppressed beats
   superseded), or returned as items with that status under ``include_superseded`` /
   ``include_suppressed``. With ``as_of``, only what was recorded by then counts, with the
   currency it had then. With ``occurred_between``, only what happened inside the window is an
   item (candidate recall over-fetches ``WINDOW_OVERFETCH`` times to fill it).
8. Ranking: one score per item (a memory met twice keeps its best score); beliefs that assert
   names score ``NAME_BELIEF_WEIGHT`` times theirs (the pack's ``entities`` already show names);
   under a ``recency`` half-life every score is multiplied by :func:`recency_factor` of its age;
   a memory that happened in a period named by an absolute date of the query (``time_cues``)
   scores ``TIME_CUE_WEIGHT`` times more;
   canonical ties by (score desc, newer first, object type, id), so identical stores and
   queries give identical packs whatever the insertion order.
9. Assembly: the first ``max_items`` in rank order, one per text: a memory whose text and status
   are those of a higher-ranked item (an utterance and the derived memory that restates it) is
   omitted as ``duplicate_text`` with ``duplicate_of`` naming the kept item
   (:func:`~charmem.domain.retrieval.same_text_key`); items, sections, links and entities are
   built from the kept items only.
"""

from __future__ import annotations

import inspect
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

import attrs

from charmem.domain.currency import is_shown
from charmem.domain.ids import ID_ORDER, MemoryId
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
    DUPLICATE_TEXT,
    SECTION_OF_DERIVED_TYPE,
    ContinuityContextPack,
    CurrencyStatus,
    Omission,
    PackEntity,
    PackItem,
    RetrievalContext,
    VectorRecallCompleteness,
    rank_key,
    same_text_key,
)
from charmem.domain.rules import name_occurs_in
from charmem.domain.timecues import time_cues
from charmem.log import get_logger
from charmem.ports import (
    EmbeddingProvider,
    EpisodeTurn,
    EpisodeTurnReader,
    GraphStore,
    ObjectTypeHints,
    RetrievalStatsStore,
    TokenCounter,
    VectorHit,
    VectorIndex,
    VectorQuery,
)
from charmem.settings import DEFAULT_EMBEDDING_TIMEOUT_S
from charmem.usecases.embedding import embed_cue
from charmem.usecases.names import current_names

__all__ = ["EXPANSION_DECAY", "episode_turns", "retrieve_pack"]

log = get_logger("charmem.retrieval")

#: Score of an expanded memory relative to the root it was reached from.
EXPANSION_DECAY = 0.5

#: Omission reasons.
NOT_IN_GRAPH = "not_in_graph"


def _by_id(pair: tuple[MemoryId, object]) -> int:
    return pair[0].value.int


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


def _rank_key(candidate: _Candidate) -> tuple[int, float, str, MemoryId]:
    obj = candidate.obj
    return rank_key(candidate.score, event_time(obj), object_type_of(obj), obj.id)


async def retrieve_pack(
    context: RetrievalContext,
    *,
    graph: GraphStore,
    vectors: VectorIndex,
    embedder: EmbeddingProvider,
    stats: RetrievalStatsStore,
    token_counter: TokenCounter,
    now: datetime,
    embed_timeout_s: float = DEFAULT_EMBEDDING_TIMEOUT_S,
) -> ContinuityContextPack:
    """Recall memories for ``context`` into a :class:`ContinuityContextPack` (module docstring).

    Args:
        context: what to recall and the bounds.
        graph: the graph authority.
        vectors: the candidate-recall index.
        embedder: embeds the query.
        stats: retrieval stats (notion degrees for hub selectivity).
        token_counter: counts tokens for the pack's ``render``.
        now: the reference time of the ``recency`` preference when ``context.as_of`` is unset.
        embed_timeout_s: seconds the query's embedding may take (``EMBEDDING_TIMEOUT_S``).

    Raises:
        BackendError: a store or the embedding provider failed, or the query's embedding timed
            out (``EmbeddingTimeoutError``).
    """
    recall = _Recall(context, graph)
    limits = context.graph_limits
    query_vector = await embed_cue(embedder, context.query, timeout_s=embed_timeout_s)
    periods = time_cues(context.query) if context.time_cues else ()
    recall.telemetry["time_cue_periods"] = len(periods)
    overfetch = WINDOW_OVERFETCH if context.occurred_between is not None or periods else 1
    found = await vectors.search(
        VectorQuery(
            vector=query_vector,
            limit=context.candidate_limit * overfetch,
            object_types=context.object_type_defaults,
            text=context.query,
            min_score=context.score_floor,
        )
    )
    hits = found.hits
    _hint_object_types(graph, hits)
    await recall.load([hit.id for hit in hits])
    roots: list[MemoryId] = []
    for hit in hits:
        if recall.offer(hit.id, float(hit.score), "vector"):
            roots.append(hit.id)
    top = max((recall.chosen[i].score for i in roots), default=1.0)

    # notions: focus entities and notions named in the query
    seeds = dict.fromkeys(context.focus_entity_ids, "focus_entity")
    for subject in await _named_notions(graph, context):
        seeds.setdefault(subject, "named_notion")
    if seeds:
        entities = await graph.get_objects(sorted(seeds))
        seeds = {i: signal for i, signal in seeds.items() if isinstance(entities.get(i), Entity)}
        recall.entity_ids.update(seeds)
        links = await graph.links_of(sorted(seeds), relations=_NOTION_RELATIONS)
        members: dict[MemoryId, set[MemoryId]] = defaultdict(set)
        for link in links:
            if link.to_id in seeds:
                members[link.to_id].add(link.from_id)
        degrees = await stats.degrees(sorted(seeds))
        for seed in sorted(seeds):
            around = members.get(seed, set())
            degree = max(degrees.get(seed, 0), len(around))
            hub = degree > limits.hub_edge_cap
            recall.telemetry["hub_notions_narrowed"] += int(hub)
            fanout = max(1, limits.per_node_fanout // HUB_FANOUT_DIVISOR) if hub else limits.per_node_fanout
            score = top * EXPANSION_DECAY * (limits.hub_edge_cap / degree if hub else 1.0)
            chosen = await _most_relevant(graph, vectors, query_vector, context, around, fanout)
            await recall.load(chosen)
            for memory_id in chosen:
                recall.offer(memory_id, score, seeds[seed])
            for memory_id in await _not_current_members(recall, around, fanout):
                recall.offer(memory_id, score, seeds[seed])

    # one hop of bounded expansion from the roots, and the turns around them: what both reach is
    # loaded in one go (run together, the two reads only contended for the GIL: measured slower)
    expand = limits.depth >= 1 and bool(roots) and limits.node_budget > 0
    window = limits.context_window
    allowed_relations = limits.allowed_relation_types or tuple(
        r for r in Relation if r is not Relation.SUPERSEDES
    )
    relations = tuple(r for r in allowed_relations if r is not Relation.SUPERSEDES)
    links = await graph.links_of(roots, relations=relations) if expand else []
    turns = await _turns_around(recall, roots) if window > 0 else {}
    reached = _expansion_targets(recall, roots, links) if expand else {}
    places = _context_places(recall, roots, turns)
    await recall.load(
        [
            *reached,
            *(
                sequence[n].observation_id
                for _root, sequence, position in places
                for n in range(max(0, position - window), min(len(sequence), position + window + 1))
                if n != position
            ),
        ]
    )
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

    # conversational context: the turns just before and after each recalled observation
    for root, sequence, position in places:  # in root order: an offer may raise a later root's score
        for offset in range(1, window + 1):
            for neighbour in (position - offset, position + offset):
                if 0 <= neighbour < len(sequence):
                    score = root.score * CONTEXT_DECAY**offset
                    recall.offer(sequence[neighbour].observation_id, score, "context:adjacent")

    # thread continuity: an active thread met comes with its most recent members
    await _thread_continuity(recall, relations)

    # currency: one hop of supersedes around every admitted memory
    admitted = sorted(recall.chosen, key=ID_ORDER)
    if admitted:
        supersedes = await graph.links_of(admitted, relations=[Relation.SUPERSEDES])
        visible = [lk for lk in supersedes if context.as_of is None or lk.created_at <= context.as_of]
        hop: dict[MemoryId, tuple[float, str]] = {}
        for link in visible:
            for here, there, signal in (
                (link.from_id, link.to_id, "supersedes:predecessor"),
                (link.to_id, link.from_id, "supersedes:successor"),
            ):
                if here in recall.chosen and there not in recall.chosen:
                    score = recall.chosen[here].score * EXPANSION_DECAY
                    if there not in hop or hop[there][0] < score:
                        hop[there] = (score, signal)
                    recall.links[link.id] = link
        await recall.load(hop)
        for other, (score, signal) in sorted(hop.items(), key=_by_id):
            recall.offer(other, score, signal)

    _rescore(recall, reference=context.as_of or now, periods=periods)
    return await recall.pack(
        found.completeness,
        token_counter,
        roots_considered=len(found.hits),
        roots_admitted=len(roots),
    )


_NOTION_RELATIONS = (Relation.ABOUT, Relation.INVOLVES, Relation.MENTIONS)

#: Score of a neighbouring turn relative to the observation it was reached from.
CONTEXT_DECAY = 0.95

#: Score factor of a belief that asserts names: identity knowledge the pack already shows in
#: ``entities``, so it should not push episodic memories out of the top ranks.
NAME_BELIEF_WEIGHT = 0.5


#: Candidate recall fetches this many times ``candidate_limit`` under an event-time window, which
#: then drops what happened outside it.
WINDOW_OVERFETCH = 4

#: A hub notion admits ``per_node_fanout // HUB_FANOUT_DIVISOR`` members (at least one).
HUB_FANOUT_DIVISOR = 4

#: Members of an active thread recalled with it (newest first), at most ``per_node_fanout``.
THREAD_RECENT_MEMBERS = 3


#: Score factor of a memory that happened in a period an absolute date of the query names. On
#: LoCoMo (turns and facts, 129 of 1,033 questions carry a date) turn recall@10 is 0.719 without
#: the cue, 0.762 at 1.5 and 0.766 at 2.0 (RRF k 60); with k 5: 0.784 at 1.5, 0.789 at 2.0, 0.791 at 3.0.
TIME_CUE_WEIGHT = 2.0

#: The lowest factor the ``recency`` preference applies, however old a memory is.
RECENCY_FLOOR = 0.8


def recency_factor(age_seconds: float, half_life_seconds: float) -> float:
    """Score factor of the ``recency`` preference: ``F + (1 - F) * 0.5 ** (age / half_life)``.

    ``F`` is :data:`RECENCY_FLOOR`: 1 for what happens now (or later), 0.9 one half-life ago,
    never below 0.8: recency reorders near-ties in meaning without letting a recent distractor
    beat a clearly better old memory.
    """
    decay = float(0.5 ** (max(age_seconds, 0.0) / half_life_seconds))
    return RECENCY_FLOOR + (1.0 - RECENCY_FLOOR) * decay


def _rescore(recall: _Recall, reference: datetime, periods: Sequence[tuple[datetime, datetime]] = ()) -> None:
    """Adjust scores once every candidate is known (documented in the module docstring)."""
    half_life = recall.context.recency
    for candidate in recall.chosen.values():
        obj = candidate.obj
        if isinstance(obj, DerivedMemory) and obj.assertions:
            candidate.score *= NAME_BELIEF_WEIGHT
        when = event_time(obj)
        if any(start <= when < end for start, end in periods):
            candidate.score *= TIME_CUE_WEIGHT
            candidate.signals.add("time_cue")
        if half_life is not None:
            age = (reference - event_time(obj)).total_seconds()
            candidate.score *= recency_factor(age, half_life.total_seconds())
            candidate.signals.add("recency")


async def _most_relevant(
    graph: GraphStore,
    vectors: VectorIndex,
    query_vector: Sequence[float],
    context: RetrievalContext,
    members: set[MemoryId],
    limit: int,
) -> list[MemoryId]:
    """The ``limit`` members of a notion nearest to the query, ranked by the vector index itself.

    A notion may have many members (a hub has more links than ``hub_edge_cap``) and a rare
    relevant memory may be reachable only through it: the index ranks the members against the
    query, restricted to them (``VectorQuery.within``), so the relevant ones come first. No
    score floor: the notion itself (named in the query, or in focus) is the evidence.
    """
    if not members:
        return []
    found = await vectors.search(
        VectorQuery(
            vector=query_vector,
            limit=limit,
            object_types=context.object_type_defaults,
            text=context.query,
            within=tuple(sorted(members)),
        )
    )
    _hint_object_types(graph, found.hits)
    return [hit.id for hit in found.hits]


async def _not_current_members(recall: _Recall, members: set[MemoryId], limit: int) -> list[MemoryId]:
    """The ``limit`` newest members of a notion that left candidate recall (not current now).

    Superseded and suppressed memories leave the vector index, so it cannot rank them: the graph
    reaches them. They are what the character believed or noticed about the notion before; met
    like every memory, they are judged by their currency as of the context: omissions by default
    (or items with ``include_superseded`` / ``include_suppressed``), and items under an ``as_of``
    from before they stopped being current. Only the types of the vector scope count
    (``object_type_defaults``), as for the current members, and only what was recorded by
    ``as_of``; newest first (event time, then id). Loads what it returns.
    """
    if not members:
        return []
    currency = await recall.graph.currency(sorted(members))
    stale = [i for i, status in currency.items() if status is not CurrencyStatus.CURRENT]
    if not stale:
        return []
    await recall.load(stale)
    scope = set(recall.context.object_type_defaults)
    found = [
        obj
        for i in stale
        if (obj := recall.objects.get(i)) is not None and object_type_of(obj) in scope and recall.visible(obj)
    ]
    newest = sorted(found, key=lambda obj: rank_key(0.0, event_time(obj), object_type_of(obj), obj.id))
    return [obj.id for obj in newest[:limit]]


def _hint_object_types(graph: GraphStore, hits: Sequence[VectorHit]) -> None:
    """Pass the types candidate recall reported to a graph store that takes them.

    Advisory (:class:`~charmem.ports.ObjectTypeHints`): a hint that raises, or a coroutine
    function where a plain method is expected, is logged and otherwise ignored, so a faulty hint
    can never fail a retrieval.
    """
    if not hits or not isinstance(graph, ObjectTypeHints):
        return
    try:
        hint: Callable[..., object] = graph.hint_object_types  # an adapter's may wrongly return
        returned = hint({hit.id: hit.object_type for hit in hits})
    except Exception as exc:  # noqa: BLE001 - advisory by contract: recall goes on without it
        log.warning("object_type_hints_failed", store=type(graph).__name__, error=type(exc).__name__)
        return
    if inspect.iscoroutine(returned):  # an ``async def``: never awaited, so it did nothing
        returned.close()
        log.warning("object_type_hints_not_synchronous", store=type(graph).__name__)


async def _thread_continuity(recall: _Recall, relations: Sequence[Relation]) -> None:
    """Offer the most recent members of every active thread among the items.

    A thread is an ongoing storyline: recalling it without what happened in it lately would lose
    the continuity it exists for. This is expansion along ``part_of_thread`` (signal
    ``expansion:part_of_thread``), bounded like it: ``depth`` >= 1, the relation allowed, the
    member's type allowed, ``per_node_fanout`` and ``node_budget``. Members score
    ``EXPANSION_DECAY`` times the thread.
    """
    limits = recall.context.graph_limits
    if limits.depth < 1 or Relation.PART_OF_THREAD not in relations:
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
    allowed_types = set(limits.allowed_object_types)
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
    for thread_id in threads:
        newest = sorted(members[thread_id], key=lambda pair: (-event_time(pair[0]).timestamp(), pair[0].id))
        score = recall.chosen[thread_id].score * EXPANSION_DECAY
        for obj, link in newest[: min(THREAD_RECENT_MEMBERS, limits.per_node_fanout)]:
            if recall.telemetry["nodes_expanded"] >= limits.node_budget:
                return
            recall.links[link.id] = link
            if recall.offer(obj.id, score, "expansion:part_of_thread"):
                recall.telemetry["nodes_expanded"] += 1


def _expansion_targets(
    recall: _Recall, roots: list[MemoryId], links: Sequence[MemoryLink]
) -> dict[MemoryId, tuple[float, str]]:
    """The memories one hop from the roots along ``links``: id -> (best score, signal).

    In root order, at most ``per_node_fanout`` followed links per root (by relation, then link
    id) and ``node_budget`` memories in all; a memory already chosen only gains the signal.
    Followed links are kept for the pack.
    """
    limits = recall.context.graph_limits
    by_root: dict[MemoryId, list[MemoryLink]] = defaultdict(list)
    root_set = set(roots)
    for link in links:
        for end in {link.from_id, link.to_id} & root_set:
            by_root[end].append(link)
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
            score = root.score * EXPANSION_DECAY
            if other in recall.chosen:
                recall.chosen[other].signals.add(signal)
            elif other not in reached or reached[other][0] < score:
                reached[other] = (score, signal)
    return reached


async def _turns_around(recall: _Recall, roots: list[MemoryId]) -> dict[MemoryId, list[EpisodeTurn]]:
    """The turns of the root observations' episodes in order (observed_at, id), as of the context.

    People remember an utterance with what was said around it: the answer to a question is
    usually the next turn. Only the order of the episodes' turns is read (:func:`episode_turns`).
    """
    episodes = sorted({obj.episode_id for i in roots if isinstance(obj := recall.chosen[i].obj, Observation)})
    if not episodes:
        return {}
    as_of = recall.context.as_of
    return {
        episode_id: sorted(
            (t for t in listed if as_of is None or t.created_at <= as_of),
            key=lambda t: (t.observed_at, t.observation_id),
        )
        for episode_id, listed in (await episode_turns(recall.graph, episodes)).items()
    }


def _context_places(
    recall: _Recall, roots: list[MemoryId], turns: dict[MemoryId, list[EpisodeTurn]]
) -> list[tuple[_Candidate, list[EpisodeTurn], int]]:
    """Each root observation with its episode's turns and its place among them, in root order."""
    places: list[tuple[_Candidate, list[EpisodeTurn], int]] = []
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


async def _named_notions(graph: GraphStore, context: RetrievalContext) -> list[MemoryId]:
    """Notions whose current ``KnownAs`` name occurs in the query (DESIGN §3 matching)."""
    assertions = await graph.name_assertions()
    matching = [
        (belief, subject) for belief, subject, name in assertions if name_occurs_in(name, context.query)
    ]
    if not matching:
        return []
    beliefs = sorted({belief for belief, _subject in matching})
    currency = await graph.currency(beliefs, as_of=context.as_of)
    if context.as_of is not None:
        stored = await graph.get_objects(beliefs)
        recorded = {i for i, o in stored.items() if o.created_at <= context.as_of}
    else:
        recorded = set(beliefs)
    return sorted(
        {
            subject
            for belief, subject in matching
            if belief in recorded and currency.get(belief) is CurrencyStatus.CURRENT
        }
    )


def _distinct_texts(
    ranked: Sequence[_Candidate], limit: int
) -> tuple[list[_Candidate], dict[MemoryId, MemoryId]]:
    """The first ``limit`` candidates in rank order that do not repeat a kept one's text.

    A candidate with the :func:`~charmem.domain.retrieval.same_text_key` and status of a kept,
    higher-ranked candidate (an utterance and the derived memory that restates it) would only
    repeat its line: it is left out. Candidates after the ``limit``-th kept one are not looked
    at (they were never in the pack).

    Returns:
        tuple[list[_Candidate], dict[MemoryId, MemoryId]]: the kept candidates in rank order, and
        each left-out candidate's id -> the id of the kept one it repeats.
    """
    kept: list[_Candidate] = []
    first: dict[tuple[str, CurrencyStatus], MemoryId] = {}
    duplicates: dict[MemoryId, MemoryId] = {}
    for candidate in ranked:
        if len(kept) >= limit:
            break
        key = (same_text_key(_text(candidate.obj)), candidate.status)
        if key in first:
            duplicates[candidate.obj.id] = first[key]
            continue
        first[key] = candidate.obj.id
        kept.append(candidate)
    return kept, duplicates


class _Recall:
    """The state of one retrieval: objects met, their currency, the chosen items, omissions."""

    def __init__(self, context: RetrievalContext, graph: GraphStore) -> None:
        self.context = context
        self.graph = graph
        self.objects: dict[MemoryId, MemoryObject] = {}
        self.currency: dict[MemoryId, CurrencyStatus] = {}
        self.chosen: dict[MemoryId, _Candidate] = {}
        self.omissions: dict[MemoryId, str] = {}
        self.entity_ids: set[MemoryId] = set()
        self.links: dict[MemoryId, MemoryLink] = {}
        self.telemetry: dict[str, int] = defaultdict(int)
        self.loaded: set[MemoryId] = set()

    async def load(self, ids: Iterable[MemoryId]) -> None:
        """Fetch objects and their currency (as of the context's record time) not yet loaded."""
        loaded = self.loaded
        missing = [i for i in dict.fromkeys(ids) if i not in loaded]
        if not missing:
            return
        loaded.update(missing)
        self.objects.update(await self.graph.get_objects(missing))
        present = [i for i in missing if i in self.objects]
        if present:
            self.currency.update(await self.graph.currency(present, as_of=self.context.as_of))

    def visible(self, obj: MemoryObject) -> bool:
        """Recorded by the context's ``as_of`` (always, without one)."""
        return self.context.as_of is None or obj.created_at <= self.context.as_of

    def in_window(self, obj: MemoryObject) -> bool:
        """Happened inside the context's ``occurred_between`` (always, without one)."""
        window = self.context.occurred_between
        if window is None:
            return True
        when = event_time(obj)
        start, end = window
        return (start is None or when >= start) and (end is None or when <= end)

    def offer(self, memory_id: MemoryId, score: float, signal: str) -> bool:
        """Admit a loaded memory under the currency policy; returns whether it is an item."""
        if memory_id in self.chosen:
            candidate = self.chosen[memory_id]
            candidate.signals.add(signal)
            candidate.score = max(candidate.score, score)
            return False
        obj = self.objects.get(memory_id)
        if obj is None:
            self.omissions.setdefault(memory_id, NOT_IN_GRAPH)
            return False
        if not self.visible(obj):
            self.telemetry["not_yet_recorded"] += 1
            return False
        if not isinstance(obj, Entity) and not self.in_window(obj):
            self.telemetry["outside_time_window"] += 1
            return False
        if isinstance(obj, Entity):
            self.entity_ids.add(memory_id)
            return False
        if isinstance(obj, Episode) and not obj.summary.strip():
            return False  # no content of its own: it stays provenance of its observations
        status = self.currency.get(memory_id, CurrencyStatus.CURRENT)
        allowed = is_shown(
            status,
            include_superseded=self.context.include_superseded,
            include_suppressed=self.context.include_suppressed,
        )
        if not allowed:
            self.omissions.setdefault(memory_id, status.value)
            return False
        self.omissions.pop(memory_id, None)
        self.chosen[memory_id] = _Candidate(obj, score, {signal}, status)
        return True

    async def pack(
        self,
        completeness: VectorRecallCompleteness,
        token_counter: TokenCounter,
        *,
        roots_considered: int,
        roots_admitted: int,
    ) -> ContinuityContextPack:
        """Rank the chosen items and assemble the pack."""
        context = self.context
        ranked, duplicates = _distinct_texts(sorted(self.chosen.values(), key=_rank_key), context.max_items)
        for duplicate in duplicates:
            self.omissions[duplicate] = DUPLICATE_TEXT
        for candidate in ranked:
            self.entity_ids.update(_entities_of(candidate.obj))
        entity_objects = await self.graph.get_objects(sorted(self.entity_ids))
        names = await current_names(self.graph, entity_objects, context.as_of)
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
                (lk for lk in self.links.values() if lk.from_id in in_pack and lk.to_id in in_pack),
                key=lambda lk: lk.id,
            )
        )
        entities = tuple(
            PackEntity(id=e.id, entity_type=e.entity_type, names=names.get(e.id, ()))
            for e in sorted(entity_objects.values(), key=lambda e: e.id)
            if isinstance(e, Entity)
        )
        telemetry = {
            **self.telemetry,
            "roots_considered": roots_considered,
            "roots_admitted": roots_admitted,
            "roots_omitted": roots_considered - roots_admitted,
            "nodes_expanded": self.telemetry.get("nodes_expanded", 0),
            "items": len(items),
            "entities": len(entities),
            "omissions": len(self.omissions),
        }
        for reason in sorted(set(self.omissions.values())):
            telemetry[f"omitted_{reason}"] = sum(1 for r in self.omissions.values() if r == reason)
        return ContinuityContextPack(
            query=context.query,
            items=items,
            sections={name: tuple(ids) for name, ids in sections.items()},
            entities=entities,
            links=pack_links,
            omissions=tuple(
                Omission(i, r, duplicate_of=duplicates.get(i)) for i, r in sorted(self.omissions.items())
            ),
            completeness=completeness,
            telemetry=telemetry,
            token_counter=token_counter,
            max_tokens=context.max_tokens,
        )
