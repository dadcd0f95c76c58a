"""``retrieve``: candidate recall, graph authority, bounded expansion, one ranked pack.

:func:`retrieve_pack` runs named stages in order over one :class:`Recall`, the state they share.
Every weight and constant is a field of the :class:`~charmem.domain.scoring.ScoringPolicy`
(``policy.<name>`` below); the bounds are the caller's :class:`~charmem.domain.retrieval.RetrievalContext`.

1. Time (:func:`~charmem.usecases.retrieval_recall.time_cue_periods`): the periods the dates
   and relative times of the query name, read against the reference time
   (:func:`~charmem.domain.timecues.time_cues`).
2. Candidate recall (:func:`~charmem.usecases.retrieval_recall.recall_candidates`): the query
   is embedded and the vector index returns the nearest memories of the scoped object types
   (``RetrievalContext.object_type_defaults``), over-fetching ``policy.window_overfetch`` times
   under an ``occurred_between`` window or a time cue. The types it reports are handed to a
   graph store that takes them (:class:`~charmem.ports.ObjectTypeHints`), so it reads the
   candidates with one lookup each.
3. Graph authority (:func:`~charmem.usecases.retrieval_recall.admit_roots`): a candidate the
   graph does not hold is omitted (``not_in_graph``); one that is not current is omitted with
   its status (``suppressed`` beats ``superseded``). Under time cues the candidates that
   happened in a cue period are first ranked as a list of their own
   (:func:`~charmem.domain.scoring.period_lifts`).
4. Notions (:func:`~charmem.usecases.retrieval_recall.recall_notions`): focus entities and
   notions whose current ``KnownAs`` name occurs in the query lead to the memories about,
   involving or mentioning them: the vector index ranks a notion's members against the query
   (``VectorQuery.within``) and the ``per_node_fanout`` nearest enter at
   ``policy.expansion_decay`` times the best root. A notion with more than ``hub_edge_cap``
   links (retrieval stats) is a hub: following it would flood the pack with routine memories,
   so only ``per_node_fanout // policy.hub_fanout_divisor`` of its members enter, their score
   scaled by ``hub_edge_cap / degree`` (selectivity), yet a rare relevant memory reachable only
   through the hub still comes first among them. Members that are no longer current
   (superseded or suppressed, so out of the vector index) are reached through the graph: as
   many of them, the newest first, are met at the same score (see 6), so forgetting or
   replacing every belief about a notion never hides that there were some, and an ``as_of``
   view still finds what was current then.
5. Expansion (:mod:`charmem.usecases.retrieval_expansion`), one hop: from each admitted root,
   in rank order, follow its links to provenance (sources, the episode of an observation,
   interpretations grounded on it), threads, caller links and notions, at most
   ``per_node_fanout`` per root and ``node_budget`` in all, at ``policy.expansion_decay`` times
   the root's score; notions are listed in ``pack.entities`` with their current ``KnownAs``
   names, not as items. The ``context_window`` observations before and after each recalled
   observation in its episode (order: observed_at, id) score ``policy.context_decay`` per step
   times it: people remember an utterance with what was said around it. An active thread among
   the items brings its ``policy.thread_recent_members`` newest members.
6. Currency (:func:`~charmem.usecases.retrieval_expansion.currency_hop`): one hop of
   ``supersedes`` around every admitted memory. Superseded and suppressed memories met anywhere
   are listed among the omissions with their status (suppressed beats superseded), or returned
   as items with that status under ``include_superseded`` / ``include_suppressed``. With
   ``as_of``, only what was recorded by then counts, with the currency it had then. With
   ``occurred_between``, only what happened inside the window is an item. A memory a
   correction left behind (:func:`~charmem.usecases.retrieval_expansion.corrected_sources`: a
   source of a belief an admitted memory supersedes, and of no current belief) is noted with
   what corrected it.
7. Ranking (:func:`~charmem.usecases.retrieval_assembly.rank`): one score per item (a memory
   met twice keeps its best score); beliefs that assert names score
   ``policy.name_belief_weight`` times theirs (the pack's ``entities`` already show names);
   under a ``recency`` half-life every score is multiplied by
   :meth:`~charmem.domain.scoring.ScoringPolicy.recency_factor` of its age; a memory that
   happened in a period of a time cue scores ``policy.time_cue_weight`` times more; a memory a
   correction left behind scores at most ``policy.corrected_source_factor`` times the lowest of
   what corrected it (it ranks below the correction and its sources); canonical
   ties by :func:`~charmem.domain.scoring.rank_key` (score desc, newer first, object type, id),
   so identical stores and queries give identical packs whatever the insertion order.
8. Assembly (:func:`~charmem.usecases.retrieval_assembly.assemble`): the first ``max_items``
   in rank order, one per text: a memory whose text and status are those of a higher-ranked
   item (an utterance and the derived memory that restates it) is omitted as
   ``duplicate_text`` with ``duplicate_of`` naming the kept item
   (:func:`~charmem.domain.retrieval.same_text_key`); items, sections, links and entities are
   built from the kept items only. The kept obligations (commitments, open loops) are settled
   by ``resolves`` / ``fulfills_commitment`` links (one read, none without obligations;
   :func:`~charmem.domain.obligations.settled_by`): a settled one is listed in
   ``derived_memories`` with its ``resolved_by``. Each item reports its ``direction``
   relative to ``character_id`` (:func:`~charmem.domain.obligations.obligation_direction`),
   its ``admitted_by`` roads and ``seconds_since_support`` to the reference time
   (:func:`~charmem.domain.pack.support_time`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime

import attrs

from charmem.domain.context import reference_time
from charmem.domain.currency import is_shown
from charmem.domain.ids import MemoryId
from charmem.domain.model import Entity, Episode, MemoryLink, MemoryObject
from charmem.domain.pack import NOT_IN_GRAPH, AdmissionRoad, LastInteraction, SceneResolution, event_time
from charmem.domain.retrieval import (
    ContinuityContextPack,
    CurrencyStatus,
    RetrievalContext,
    VectorRecallCompleteness,
)
from charmem.domain.scoring import DEFAULT_SCORING, ScoringPolicy, combined_road_score
from charmem.ports import EmbeddingProvider, GraphStore, RetrievalStatsStore, TokenCounter, VectorIndex
from charmem.settings import DEFAULT_EMBEDDING_TIMEOUT_S
from charmem.usecases.embedding import embed_cue
from charmem.usecases.retrieval_assembly import assemble, rank
from charmem.usecases.retrieval_expansion import (
    corrected_sources,
    currency_hop,
    episode_turns,
    expand_roots,
    thread_continuity,
)
from charmem.usecases.retrieval_recall import admit_roots, recall_candidates, recall_notions, time_cue_periods
from charmem.usecases.retrieval_scene import recall_situation

__all__ = ["EXPANSION_DECAY", "episode_turns", "retrieve_pack"]

#: Score of an expanded memory relative to the root it was reached from (an alias of the
#: scoring policy's ``expansion_decay``, kept for importers of this module).
EXPANSION_DECAY = DEFAULT_SCORING.expansion_decay


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
    policy: ScoringPolicy = DEFAULT_SCORING,
    character_id: MemoryId | None = None,
) -> ContinuityContextPack:
    """Recall memories for ``context`` into a :class:`ContinuityContextPack` (module docstring).

    Args:
        context: what to recall and the bounds.
        graph: the graph authority.
        vectors: the candidate-recall index.
        embedder: embeds the query.
        stats: retrieval stats (notion degrees for hub selectivity).
        token_counter: counts tokens for the pack's ``render``.
        now: the reference time (``recency``, ``seconds_since_support``) when ``context.as_of``
            is unset (:func:`~charmem.domain.context.reference_time`).
        embed_timeout_s: seconds the query's embedding may take (``EMBEDDING_TIMEOUT_S``).
        policy: the weights and constants of retrieval.
        character_id: the collection's character, whom obligations' ``direction`` is relative
            to (``None``: no direction).

    Raises:
        BackendError: a store or the embedding provider failed, or the query's embedding timed
            out (``EmbeddingTimeoutError``).
    """
    reference = reference_time(context, now)
    recall = Recall(context, graph, policy, character_id=character_id, reference=reference)
    periods: tuple[tuple[datetime, datetime], ...] = ()
    completeness = VectorRecallCompleteness("not_requested")
    considered = admitted = 0
    if context.query is not None:
        query_vector = await embed_cue(embedder, context.query, timeout_s=embed_timeout_s)
        periods = time_cue_periods(recall)
        found = await recall_candidates(recall, vectors, query_vector, periods)
        roots = admit_roots(recall, found.hits, periods)
        await recall_notions(recall, vectors, stats, query_vector, roots)
        await expand_roots(recall, roots)
        completeness, considered, admitted = found.completeness, len(found.hits), len(roots)
        if roots:
            top = max(recall.chosen[i].score for i in roots)
            recall.road_scale = top * policy.scene_beside_topic
    if context.situated:
        await recall_situation(
            recall, vectors=vectors, embedder=embedder, stats=stats, timeout_s=embed_timeout_s
        )
    await thread_continuity(recall)
    await currency_hop(recall)
    await corrected_sources(recall)
    ranked = rank(recall, reference=reference, periods=periods)
    pack = await assemble(
        recall,
        ranked,
        completeness,
        token_counter,
        reference=reference,
        roots_considered=considered,
        roots_admitted=admitted,
    )
    if context.scene is None:
        return pack
    return attrs.evolve(
        pack, last_interactions=recall.last_interactions, scene_resolutions=recall.scene_resolutions
    )


@attrs.define
class Candidate:
    """A memory chosen as an item so far: its score, what admitted it, its currency.

    ``roads`` holds the best score each :class:`~charmem.domain.pack.AdmissionRoad` gave it;
    ``score`` combines them (:func:`~charmem.domain.scoring.combined_road_score`).
    """

    obj: MemoryObject
    score: float
    signals: set[str]
    status: CurrencyStatus = CurrencyStatus.CURRENT
    roads: dict[AdmissionRoad, float] = attrs.field(factory=dict)
    factors: list[tuple[str, float]] = attrs.field(factory=list)


class Recall:
    """The state of one retrieval: objects met, their currency, the chosen items, omissions.

    ``members`` holds, for each thread whose members recall read, their ids (recorded by
    ``as_of``): the support of the thread (:func:`~charmem.domain.pack.support_time`).
    """

    def __init__(
        self,
        context: RetrievalContext,
        graph: GraphStore,
        policy: ScoringPolicy = DEFAULT_SCORING,
        *,
        character_id: MemoryId | None = None,
        reference: datetime | None = None,
    ) -> None:
        self.context = context
        self.graph = graph
        self.policy = policy
        self.character_id = character_id
        self.members: dict[MemoryId, set[MemoryId]] = defaultdict(set)
        self.reference = reference
        #: Factor on every scene road's weight (``policy.scene_beside_topic`` times the best topic
        #: score when a query found roots, else 1).
        self.road_scale = 1.0
        self.last_interactions: tuple[LastInteraction, ...] = ()
        self.scene_resolutions: tuple[SceneResolution, ...] = ()
        self.objects: dict[MemoryId, MemoryObject] = {}
        self.currency: dict[MemoryId, CurrencyStatus] = {}
        self.chosen: dict[MemoryId, Candidate] = {}
        self.omissions: dict[MemoryId, str] = {}
        self.entity_ids: set[MemoryId] = set()
        self.links: dict[MemoryId, MemoryLink] = {}
        self.telemetry: dict[str, int] = defaultdict(int)
        self.loaded: set[MemoryId] = set()
        #: Per superseded memory, the admitted memories that supersede it (:func:`currency_hop`).
        self.successors: dict[MemoryId, set[MemoryId]] = defaultdict(set)
        #: Per admitted memory a correction left behind, what corrected it (:func:`corrected_sources`).
        self.corrected: dict[MemoryId, frozenset[MemoryId]] = {}

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

    def after_reference(self, obj: MemoryObject) -> bool:
        """Happened after the reference time of a situated context (never, for a query alone)."""
        return self.context.situated and self.reference is not None and event_time(obj) > self.reference

    async def after_reference_ids(self, ids: Iterable[MemoryId]) -> set[MemoryId]:
        """Which of ``ids`` happened after the reference time of a situated context (none else)."""
        if not self.context.situated or self.reference is None:
            return set()
        wanted = list(dict.fromkeys(ids))
        await self.load(wanted)
        return {i for i in wanted if (obj := self.objects.get(i)) is not None and self.after_reference(obj)}

    def offer(
        self, memory_id: MemoryId, score: float, signal: str, road: AdmissionRoad = AdmissionRoad.TOPIC
    ) -> bool:
        """Admit a loaded memory under the currency policy; returns whether it is an item.

        A memory offered again keeps its best score per road, and its score combines its roads'.
        """
        if memory_id in self.chosen:
            candidate = self.chosen[memory_id]
            candidate.signals.add(signal)
            candidate.roads[road] = max(candidate.roads.get(road, score), score)
            candidate.score = combined_road_score(candidate.roads.values(), self.policy.road_bonus)
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
        if not isinstance(obj, Entity) and self.after_reference(obj):
            self.telemetry["after_reference_time"] += 1
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
        self.chosen[memory_id] = Candidate(obj, score, {signal}, status, {road: score})
        return True
