"""Retrieval's scene stage: what comes to mind from who is here, where, when and what is being done.

Runs over :func:`charmem.usecases.retrieval.retrieve_pack`'s
:class:`~charmem.usecases.retrieval.Recall` when the context has a scene, an activity or a time
range (``RetrievalContext.situated``). Each road (:class:`~charmem.domain.pack.AdmissionRoad`)
offers memories at ``policy.road_weight(road)`` times ``policy.road_rank_decay`` per rank in its
list; a memory met by several roads combines them
(:func:`~charmem.domain.scoring.combined_road_score`). A road that reaches an episode reaches its
first ``policy.occasion_turns`` turns too, with the same road.

- **Participants** (by id, or by a name resolved to the notions currently known by it): the
  occasions each was at and the beliefs about them, newest first, ``policy.road_occasions`` each
  (a hub, a notion with more than ``hub_edge_cap`` links, ``road_occasions //
  hub_fanout_divisor``): every participant's k-th memory scores the same, so several people take
  turns and one cannot fill the pack. Unsettled obligations (commitments and open loops) about a
  participant score ``policy.obligation_score``, above what the roads bring.
- **Place**: occasions with the scene's setting key, and with each of its custom values.
- **Activity**: a thread's members, or an open loop with its sources.
- **Range**, **anniversary** (the scene's local month and day in an earlier year), **recency**.
- **Last interactions**: per recognised participant, the newest occasion at or before the
  reference time that was not forgotten.

Nothing after the reference time comes to mind (:meth:`~charmem.usecases.retrieval.Recall.offer`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from charmem.domain.ids import MemoryId
from charmem.domain.model import DerivedMemory, DerivedType, Entity, Episode, MemoryThread, Relation
from charmem.domain.names import NameIndex
from charmem.domain.occasions import Occasion, OccasionQuery, local_month_day
from charmem.domain.pack import (
    AdmissionRoad,
    LastInteraction,
    SceneResolution,
    SceneResolutionStatus,
    event_time,
)
from charmem.domain.retrieval import CurrencyStatus
from charmem.domain.scene import SceneParticipant
from charmem.ports import EmbeddingProvider, RetrievalStatsStore, VectorIndex
from charmem.usecases.occasions import find_occasions
from charmem.usecases.retrieval_expansion import episode_turns
from charmem.usecases.retrieval_recall import current_subjects

if TYPE_CHECKING:
    from charmem.usecases.retrieval import Recall

__all__ = ["recall_situation", "resolve_participants"]

_OBLIGATIONS = frozenset({DerivedType.COMMITMENT, DerivedType.OPEN_LOOP})
_SETTLING = (Relation.RESOLVES, Relation.FULFILLS_COMMITMENT)


async def recall_situation(
    recall: Recall,
    *,
    vectors: VectorIndex,
    embedder: EmbeddingProvider,
    stats: RetrievalStatsStore,
    timeout_s: float,
) -> None:
    """The scene stage (module docstring): offers what each road brings, fills last interactions."""
    context = recall.context
    scene = context.scene
    if scene is not None:
        resolutions = await resolve_participants(recall, scene.participants)
        recall.scene_resolutions = resolutions
        notions = sorted({i for r in resolutions for i in r.entity_ids})
        recall.entity_ids.update(notions)
        await _participants(recall, stats, notions)
        await _place(recall)
        await _anniversary(recall)
        await _occasions_road(
            recall,
            AdmissionRoad.RECENCY,
            OccasionQuery(limit=recall.policy.recent_occasions, at_or_before=recall.reference),
        )
    if context.activity is not None:
        await _activity(recall, context.activity)
    if context.time_range is not None:
        query = OccasionQuery(
            limit=recall.policy.road_occasions, at_or_before=recall.reference, between=context.time_range
        )
        await _occasions_road(recall, AdmissionRoad.RANGE, query)


async def resolve_participants(
    recall: Recall, participants: Sequence[SceneParticipant]
) -> tuple[SceneResolution, ...]:
    """How each participant resolves: its id, else the notions currently known by its name.

    An id resolves to itself when the graph holds it as a notion (else unknown); a name to the
    notions whose current ``KnownAs`` belief (as of the context) has that name under
    :func:`~charmem.domain.rules.normalise_name`: one is resolved, several ambiguous, none
    unknown. A description alone is unknown: it recalls similar occasions, never decides who
    anyone is. Names are looked up in the store's name index (work independent of how many).
    """
    index: NameIndex | None = None
    ids = sorted({p.entity_id for p in participants if p.entity_id is not None})
    stored = await recall.graph.get_objects(ids) if ids else {}
    resolutions = []
    for position, participant in enumerate(participants):
        found: set[MemoryId] = set()
        if participant.entity_id is not None:
            if isinstance(stored.get(participant.entity_id), Entity):
                found = {participant.entity_id}
        elif participant.name is not None:
            index = index or await recall.graph.name_index()
            found = await current_subjects(recall.graph, index.named(participant.name), recall.context.as_of)
        status = (
            SceneResolutionStatus.UNKNOWN
            if not found
            else SceneResolutionStatus.RESOLVED
            if len(found) == 1
            else SceneResolutionStatus.AMBIGUOUS
        )
        resolutions.append(
            SceneResolution(participant_index=position, status=status, entity_ids=tuple(sorted(found)))
        )
    return tuple(resolutions)


async def _participants(recall: Recall, stats: RetrievalStatsStore, notions: Sequence[MemoryId]) -> None:
    """Each participant's occasions and beliefs (taking turns), obligations, last interactions."""
    if not notions:
        return
    policy, limits = recall.policy, recall.context.graph_limits
    degrees = await stats.degrees(list(notions))
    last: list[LastInteraction] = []
    for notion in notions:
        hub = degrees.get(notion, 0) > limits.hub_edge_cap
        fanout = max(1, policy.road_occasions // policy.hub_fanout_divisor) if hub else policy.road_occasions
        found = await find_occasions(
            recall.graph,
            OccasionQuery(limit=policy.road_occasions, participant=notion, at_or_before=recall.reference),
        )
        await _offer_occasions(recall, AdmissionRoad.PARTICIPANT, found[:fanout])
        last.append(await _last_interaction(recall, notion, found))
    recall.last_interactions = tuple(last)
    await _beliefs_about(recall, notions)


async def _last_interaction(recall: Recall, notion: MemoryId, found: Sequence[Occasion]) -> LastInteraction:
    """The newest occasion with ``notion`` that is not forgotten (suppressed), or never.

    Its time is the stored episode's ``occurred_at`` (its own offset kept).
    """
    await recall.load([o.episode_id for o in found])
    currency = await recall.graph.currency([o.episode_id for o in found], as_of=recall.context.as_of)
    for occasion in found:
        episode = recall.objects.get(occasion.episode_id)
        if (
            isinstance(episode, Episode)
            and currency.get(occasion.episode_id) is not CurrencyStatus.SUPPRESSED
        ):
            met = episode.occurred_at
            elapsed = recall.reference - met if recall.reference is not None else None
            return LastInteraction(entity_id=notion, last_met_at=met, elapsed=elapsed)
    return LastInteraction(entity_id=notion)


async def _beliefs_about(recall: Recall, notions: Sequence[MemoryId]) -> None:
    """What is held about the participants: newest first, taking turns; unsettled obligations first."""
    policy = recall.policy
    links = await recall.graph.links_of(list(notions), relations=[Relation.ABOUT])
    members: dict[MemoryId, set[MemoryId]] = {n: set() for n in notions}
    for link in links:
        if link.to_id in members:
            members[link.to_id].add(link.from_id)
    await recall.load(sorted({m for group in members.values() for m in group}))
    settled = await _settled(recall, sorted({m for group in members.values() for m in group}))
    weight = policy.road_weight(AdmissionRoad.PARTICIPANT)
    for notion in notions:
        beliefs = [
            obj
            for i in members[notion]
            if isinstance(obj := recall.objects.get(i), DerivedMemory) and not recall.after_reference(obj)
        ]
        beliefs.sort(key=lambda obj: (-event_time(obj).timestamp(), obj.id))
        ordinary = 0
        for obj in beliefs:
            if obj.derived_type in _OBLIGATIONS and obj.id not in settled:
                recall.offer(obj.id, policy.obligation_score, "scene:obligation", AdmissionRoad.PARTICIPANT)
            elif ordinary < policy.road_occasions:
                recall.offer(
                    obj.id,
                    weight * policy.road_rank_decay**ordinary,
                    "scene:about",
                    AdmissionRoad.PARTICIPANT,
                )
                ordinary += 1


async def _settled(recall: Recall, ids: Sequence[MemoryId]) -> set[MemoryId]:
    """Which of ``ids`` a ``resolves`` or ``fulfills_commitment`` link settles."""
    if not ids:
        return set()
    wanted = set(ids)
    return {
        link.to_id
        for link in await recall.graph.links_of(list(ids), relations=_SETTLING)
        if link.to_id in wanted
    }


async def _place(recall: Recall) -> None:
    """Occasions in the scene's setting (its key) and with each of its custom values."""
    scene = recall.context.scene
    assert scene is not None
    limit = recall.policy.road_occasions
    if scene.setting is not None and scene.setting.key is not None:
        query = OccasionQuery(limit=limit, at_or_before=recall.reference, setting_key=scene.setting.key)
        await _occasions_road(recall, AdmissionRoad.PLACE, query)
    for key, value in scene.custom_values.items():
        query = OccasionQuery(limit=limit, at_or_before=recall.reference, custom_value=(key, value))
        await _occasions_road(recall, AdmissionRoad.PLACE, query)


async def _anniversary(recall: Recall) -> None:
    """Occasions on the scene's local month and day in an earlier year."""
    scene = recall.context.scene
    assert scene is not None
    query = OccasionQuery(
        limit=recall.policy.road_occasions, month_day=local_month_day(scene.at), before_year=scene.at.year
    )
    await _occasions_road(recall, AdmissionRoad.ANNIVERSARY, query)


async def _activity(recall: Recall, activity: MemoryId) -> None:
    """A thread's members (newest first), or an open loop with its sources."""
    await recall.load([activity])
    obj = recall.objects.get(activity)
    weight, decay = recall.policy.road_weight(AdmissionRoad.ACTIVITY), recall.policy.road_rank_decay
    if isinstance(obj, MemoryThread):
        links = await recall.graph.links_of([activity], relations=[Relation.PART_OF_THREAD])
        await recall.load(sorted({link.from_id for link in links if link.to_id == activity}))
        members = [
            m
            for link in links
            if link.to_id == activity and (m := recall.objects.get(link.from_id)) is not None
        ]
        members.sort(key=lambda m: (-event_time(m).timestamp(), m.id))
        recall.offer(activity, weight, "scene:activity", AdmissionRoad.ACTIVITY)
        for rank, member in enumerate(members[: recall.policy.road_occasions]):
            if isinstance(member, Episode):
                await _offer_occasions(
                    recall, AdmissionRoad.ACTIVITY, [Occasion(member.id, member.occurred_at)], rank
                )
            else:
                recall.offer(
                    member.id, weight * decay ** (rank + 1), "scene:activity", AdmissionRoad.ACTIVITY
                )
    elif isinstance(obj, DerivedMemory):
        recall.offer(activity, weight, "scene:activity", AdmissionRoad.ACTIVITY)
        await recall.load(obj.source_ids)
        for rank, source in enumerate(obj.source_ids):
            recall.offer(source, weight * decay ** (rank + 1), "scene:activity", AdmissionRoad.ACTIVITY)


async def _occasions_road(recall: Recall, road: AdmissionRoad, query: OccasionQuery) -> None:
    await _offer_occasions(recall, road, await find_occasions(recall.graph, query))


async def _offer_occasions(
    recall: Recall, road: AdmissionRoad, occasions: Sequence[Occasion], first_rank: int = 0
) -> None:
    """Offer each occasion (newest first) and its first turns, at the road's weight per rank."""
    if not occasions:
        return
    policy = recall.policy
    ids = [o.episode_id for o in occasions]
    turns = await episode_turns(recall.graph, ids)
    chosen_turns = {
        episode: [t.observation_id for t in sorted(found, key=lambda t: (t.observed_at, t.observation_id))][
            : policy.occasion_turns
        ]
        for episode, found in turns.items()
    }
    await recall.load([*ids, *(t for group in chosen_turns.values() for t in group)])
    signal = f"scene:{road.value}"
    for rank, occasion in enumerate(occasions, start=first_rank):
        score = policy.road_weight(road) * policy.road_rank_decay**rank
        recall.offer(occasion.episode_id, score, signal, road)
        for turn in chosen_turns.get(occasion.episode_id, ()):
            recall.offer(turn, score, signal, road)
