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

import calendar
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import attrs

from charmem.domain.ids import MemoryId
from charmem.domain.model import (
    DerivedMemory,
    Entity,
    Episode,
    MemoryLink,
    MemoryThread,
    ObjectType,
    Relation,
)
from charmem.domain.names import NameIndex
from charmem.domain.obligations import RESOLVING_RELATIONS, is_obligation, settled_by
from charmem.domain.occasions import Occasion, OccasionQuery, local_month_day, occasion_order
from charmem.domain.pack import (
    AdmissionRoad,
    LastInteraction,
    SceneResolution,
    SceneResolutionStatus,
    event_time,
)
from charmem.domain.retrieval import CurrencyStatus
from charmem.domain.scene import SceneParticipant
from charmem.domain.surfaces import VectorSurface
from charmem.errors import DraftValidationError
from charmem.ports import EmbeddingProvider, RetrievalStatsStore, VectorIndex, VectorQuery
from charmem.usecases.embedding import embed_cue
from charmem.usecases.occasions import find_occasions
from charmem.usecases.retrieval_assembly import OWED_BY_SOMEONE_PRESENT
from charmem.usecases.retrieval_expansion import episode_turns
from charmem.usecases.retrieval_recall import current_subjects

if TYPE_CHECKING:
    from charmem.usecases.retrieval import Recall

__all__ = ["recall_situation", "resolve_participants"]


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
        named = [
            (p.name, r.entity_ids)
            for p, r in zip(scene.participants, resolutions, strict=True)
            if p.entity_id is None and p.name is not None
        ]
        await _participants(recall, stats, notions, named)
        await _place(recall)
        await _similar(recall, vectors, embedder, timeout_s)
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


async def _participants(
    recall: Recall,
    stats: RetrievalStatsStore,
    notions: Sequence[MemoryId],
    named: Sequence[tuple[str, tuple[MemoryId, ...]]],
) -> None:
    """Each participant's occasions and beliefs (taking turns), obligations, last interactions.

    A notion's occasions are those involving it and those whose scene listed one of its names
    before another notion was known by that name; a name that resolves to several notions or to
    none brings the occasions that listed it as a list of its own. Each list enters newest
    first, a hub's cut shorter.
    """
    policy, limits = recall.policy, recall.context.graph_limits
    degrees = await stats.degrees(list(notions)) if notions else {}
    names = await _own_names(recall, notions)
    lists: list[Sequence[Occasion]] = []
    last: list[LastInteraction] = []
    for notion in notions:
        found = await _occasions_of(recall, notion, names.get(notion, ()), policy.road_occasions)
        hub = degrees.get(notion, 0) > limits.hub_edge_cap
        lists.append(found[: max(1, policy.road_occasions // policy.hub_fanout_divisor) if hub else None])
        last.append(_last_interaction(recall, notion, found))
    for name, resolved in named:
        if len(resolved) != 1:
            query = OccasionQuery(
                limit=policy.road_occasions, participant_name=name, at_or_before=recall.reference
            )
            lists.append(await _remembered(recall, query))
    for occasions in lists:
        await _offer_occasions(recall, AdmissionRoad.PARTICIPANT, occasions)
    recall.last_interactions = tuple(last)
    if notions:
        await _beliefs_about(recall, notions)


async def _own_names(
    recall: Recall, notions: Sequence[MemoryId]
) -> dict[MemoryId, list[tuple[str, datetime | None]]]:
    """Each notion's names, current or former, with when another notion was first known by it.

    A scene that listed a name before any other notion was known by it meant this notion,
    whatever anyone is called now: a renamed friend keeps the meetings recorded under the old
    name, and a second person taking the name later takes none of them. ``None``: no other
    notion was ever known by the name.
    """
    if not notions:
        return {}
    index = await recall.graph.name_index()
    claims: dict[MemoryId, list[tuple[str, datetime | None]]] = {}
    for notion in notions:
        for name in sorted({name for _belief, _subject, name in index.naming([notion])}):
            others = [belief for belief, subject, _name in index.named(name) if subject != notion]
            await recall.load(others)
            times = [obj.created_at for belief in others if (obj := recall.objects.get(belief)) is not None]
            claims.setdefault(notion, []).append((name, min(times, default=None)))
    return claims


async def _occasions_of(
    recall: Recall, notion: MemoryId, names: Sequence[tuple[str, datetime | None]], limit: int
) -> list[Occasion]:
    """The ``limit`` newest remembered occasions involving ``notion`` or listing one of its ``names``.

    An occasion listing a name counts when it was recorded before another notion was known by
    that name (:func:`_own_names`).
    """
    merged = {
        o.episode_id: o
        for o in await _remembered(
            recall, OccasionQuery(limit=limit, participant=notion, at_or_before=recall.reference)
        )
    }
    for name, shared_since in names:
        query = OccasionQuery(limit=limit, participant_name=name, at_or_before=recall.reference)
        for occasion in await _remembered(recall, query):
            episode = recall.objects.get(occasion.episode_id)
            if shared_since is None or (episode is not None and episode.created_at < shared_since):
                merged[occasion.episode_id] = occasion
    return sorted(merged.values(), key=occasion_order)[:limit]


async def _remembered(recall: Recall, query: OccasionQuery) -> list[Occasion]:
    """The ``query.limit`` newest occasions meeting ``query`` that the character remembers.

    Remembered: recorded by the context's ``as_of`` and not forgotten (suppressed). The store's
    answer includes the others, so the search looks further back, four times as far each time,
    until enough are found or none are left: forgetting the latest occasions never hides the
    earlier ones.
    """
    want, limit = query.limit, query.limit
    while True:
        found = await find_occasions(recall.graph, attrs.evolve(query, limit=limit))
        await recall.load([o.episode_id for o in found])
        currency = await recall.graph.currency([o.episode_id for o in found], as_of=recall.context.as_of)
        kept = [
            o
            for o in found
            if isinstance(episode := recall.objects.get(o.episode_id), Episode)
            and recall.visible(episode)
            and currency.get(o.episode_id) is not CurrencyStatus.SUPPRESSED
        ]
        if len(kept) >= want or len(found) < limit:
            return kept[:want]
        limit *= 4


def _last_interaction(recall: Recall, notion: MemoryId, found: Sequence[Occasion]) -> LastInteraction:
    """The newest remembered occasion with ``notion`` (its stored ``occurred_at``), or never."""
    for occasion in found:
        episode = recall.objects.get(occasion.episode_id)
        if isinstance(episode, Episode):
            met = episode.occurred_at
            elapsed = recall.reference - met if recall.reference is not None else None
            return LastInteraction(entity_id=notion, last_met_at=met, elapsed=elapsed)
    return LastInteraction(entity_id=notion)


async def _beliefs_about(recall: Recall, notions: Sequence[MemoryId]) -> None:
    """What is held about the participants: newest first, taking turns; unsettled obligations first."""
    links = await recall.graph.links_of(list(notions), relations=[Relation.ABOUT])
    members: dict[MemoryId, set[MemoryId]] = {n: set() for n in notions}
    for link in links:
        if link.to_id in members:
            members[link.to_id].add(link.from_id)
    every = sorted({m for group in members.values() for m in group})
    await recall.load(every)
    obligations = [i for i in every if (obj := recall.objects.get(i)) is not None and is_obligation(obj)]
    settling = await recall.graph.links_of(obligations, relations=RESOLVING_RELATIONS) if obligations else []
    later = await recall.after_reference_ids([link.from_id for link in settling])
    for notion in notions:
        beliefs = [
            obj
            for i in members[notion]
            if isinstance(obj := recall.objects.get(i), DerivedMemory) and not recall.after_reference(obj)
        ]
        beliefs.sort(key=lambda obj: (-event_time(obj).timestamp(), obj.id))
        _offer_beliefs(recall, beliefs, settling, later)


def _offer_beliefs(
    recall: Recall, beliefs: Sequence[DerivedMemory], settling: Sequence[MemoryLink], later: set[MemoryId]
) -> None:
    """Offer one participant's beliefs: every unsettled obligation, then the newest others."""
    policy = recall.policy
    weight = _weight(recall, AdmissionRoad.PARTICIPANT)
    ordinary = 0
    for obj in beliefs:
        if is_obligation(obj) and not settled_by(obj, settling, recall.context.as_of, later):
            recall.offer(
                obj.id,
                policy.obligation_score * recall.road_scale,
                OWED_BY_SOMEONE_PRESENT,
                AdmissionRoad.PARTICIPANT,
            )
        elif ordinary < policy.road_occasions:
            score = weight * policy.road_rank_decay**ordinary
            recall.offer(obj.id, score, "scene:about", AdmissionRoad.PARTICIPANT)
            ordinary += 1


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


async def _similar(
    recall: Recall, vectors: VectorIndex, embedder: EmbeddingProvider, timeout_s: float
) -> None:
    """Occasions whose participants or setting were described alike (their own vector surfaces).

    The scene's participant descriptions (joined in order) are searched on the episodes'
    ``PERSON_WORDS`` surface, its setting words on ``SETTING_WORDS``; each hit enters at the
    road's weight times its similarity. A description never decides who anyone is.
    """
    scene = recall.context.scene
    assert scene is not None
    descriptions = "\n".join(p.description for p in scene.participants if p.description is not None)
    words = scene.setting.words if scene.setting is not None else None
    for road, surface, text in (
        (AdmissionRoad.PERSON_DESCRIPTION, VectorSurface.PERSON_WORDS, descriptions),
        (AdmissionRoad.SETTING_WORDS, VectorSurface.SETTING_WORDS, words),
    ):
        if not text:
            continue
        found = await vectors.search(
            VectorQuery(
                vector=await embed_cue(embedder, text, timeout_s=timeout_s),
                limit=recall.policy.road_occasions,
                object_types=(ObjectType.EPISODE,),
                text=text,
                surface=surface,
                min_score=max(recall.context.score_floor, recall.policy.scene_words_floor),
            )
        )
        weight = _weight(recall, road)
        await _offer_scored(recall, road, [(hit.id, weight * float(hit.score)) for hit in found.hits])


async def _anniversary(recall: Recall) -> None:
    """Occasions on the scene's local month and day in an earlier year (29 February on the 28th)."""
    scene = recall.context.scene
    assert scene is not None
    days = [local_month_day(scene.at)]
    if days[0] == (2, 28) and not calendar.isleap(scene.at.year):
        days.append((2, 29))  # a leap day's anniversary falls on 28 February in other years
    for day in days:
        query = OccasionQuery(limit=recall.policy.road_occasions, month_day=day, before_year=scene.at.year)
        await _occasions_road(recall, AdmissionRoad.ANNIVERSARY, query)


async def _activity(recall: Recall, activity: MemoryId) -> None:
    """A thread's members (newest first), or an open loop with its sources.

    Raises:
        DraftValidationError: ``activity`` is not a stored thread or derived memory.
    """
    await recall.load([activity])
    obj = recall.objects.get(activity)
    weight, decay = _weight(recall, AdmissionRoad.ACTIVITY), recall.policy.road_rank_decay
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
                    recall, AdmissionRoad.ACTIVITY, [Occasion(member.id, member.occurred_at)], rank + 1
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
    else:
        raise DraftValidationError(
            f"activity {activity} names no stored thread or open loop (found "
            f"{type(obj).__name__ if obj is not None else 'nothing'}); pass a thread's id or an "
            "open loop's id",
            field="activity",
        )


async def _occasions_road(recall: Recall, road: AdmissionRoad, query: OccasionQuery) -> None:
    await _offer_occasions(recall, road, await _remembered(recall, query))


async def _offer_occasions(
    recall: Recall, road: AdmissionRoad, occasions: Sequence[Occasion], first_rank: int = 0
) -> None:
    """Offer each occasion (newest first) at the road's weight times its decay per rank."""
    policy = recall.policy
    weight = _weight(recall, road)
    scored = [
        (o.episode_id, weight * policy.road_rank_decay**rank)
        for rank, o in enumerate(occasions, start=first_rank)
    ]
    await _offer_scored(recall, road, scored)


def _weight(recall: Recall, road: AdmissionRoad) -> float:
    """The road's weight, on the scale of the topic's scores when a query found some."""
    return recall.policy.road_weight(road) * recall.road_scale


async def _offer_scored(
    recall: Recall, road: AdmissionRoad, scored: Sequence[tuple[MemoryId, float]]
) -> None:
    """Offer each episode and its first ``policy.occasion_turns`` turns at the episode's score."""
    if not scored:
        return
    ids = [episode for episode, _score in scored]
    turns = await episode_turns(recall.graph, ids)
    chosen_turns = {
        episode: [t.observation_id for t in sorted(found, key=lambda t: (t.observed_at, t.observation_id))][
            : recall.policy.occasion_turns
        ]
        for episode, found in turns.items()
    }
    await recall.load([*ids, *(t for group in chosen_turns.values() for t in group)])
    signal = f"scene:{road.value}"
    for episode, score in scored:
        recall.offer(episode, score, signal, road)
        for turn in chosen_turns.get(episode, ()):
            recall.offer(turn, score, signal, road)
