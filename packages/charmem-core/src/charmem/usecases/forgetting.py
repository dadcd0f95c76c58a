"""What a forget reaches, and completing episode forgets recorded before it reached their parts.

Forgetting appends suppression records and nothing else. Which memories one forget suppresses
is decided here, in one pure function (:func:`forget_plan`), from what the graph holds around the
target (:class:`ForgetReach`):

* a derived memory, episode or observation: the target itself;
* an episode: also its observations, its parts (``apply_to_episode_observations``, default on):
  forgetting what happened forgets what was said in it;
* an episode or observation: also the derived memories grounded on it, and on the parts forgotten
  with it (``apply_to_derived_from_target``, default on);
* a thread: a ``forget_noted`` record only (its status and vector stay), and with
  ``apply_to_thread_members`` its derived members. Thread forgetting never reaches sources.

Stores written before episode forgets reached their parts hold forgotten episodes whose
observations are still current. :func:`episode_forget_gaps` finds what such a forget lacks and
:func:`complete_episode_forgets` appends it at the original forget's record time, with the
record ids a forget derives, so completing twice writes nothing new.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

import attrs

from charmem.domain._fields import id_set
from charmem.domain.graph import GraphBatch, LifecycleAction, LifecycleRecord
from charmem.domain.ids import MemoryId
from charmem.domain.lifecycle import ForgetMemoryDraft
from charmem.domain.model import (
    DerivedMemory,
    Episode,
    MemoryLink,
    MemoryObject,
    MemoryThread,
    Observation,
    Relation,
)
from charmem.domain.plan import RepairMarkerType
from charmem.ports import EmbeddingProvider, GraphStore, RetrievalStatsStore, VectorIndex
from charmem.usecases.maintenance import maintain_stats, maintain_vectors
from charmem.usecases.store_writes import exclusive_writes, finish_write

__all__ = [
    "ForgetReach",
    "collection_forget_gaps",
    "complete_episode_forgets",
    "episode_forget_gaps",
    "forget_plan",
    "forget_reach",
    "forget_record_id",
    "forget_records",
    "read_forget_surroundings",
]

ForgetPlan = list[tuple[MemoryId, LifecycleAction]]


@attrs.frozen(kw_only=True)
class ForgetReach:
    """What the graph holds around a forget's target.

    Attributes:
        parts: the observations of an episode target (``has_observation``), sorted.
        grounded_on_target: derived memories grounded on the target (``derived_from``), sorted.
        grounded_on_parts: derived memories grounded on one of ``parts``, sorted.
        members: the derived members of a thread target (``part_of_thread``), sorted.
    """

    parts: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set)
    grounded_on_target: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set)
    grounded_on_parts: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set)
    members: tuple[MemoryId, ...] = attrs.field(default=(), converter=id_set)


def forget_reach(
    target: MemoryObject, links: Iterable[MemoryLink], objects: Mapping[MemoryId, MemoryObject]
) -> ForgetReach:
    """What surrounds ``target``, from links touching it and its parts (pure).

    Args:
        target: the forget's target.
        links: at least the ``has_observation``, ``derived_from`` and ``part_of_thread`` links
            touching the target and its observations; others are ignored.
        objects: at least the observations and thread members those links reach (an id absent
            here is not counted as a part or member).

    Returns:
        ForgetReach: the parts, grounded derived memories and thread members.
    """
    links = list(links)
    parts = _episode_parts(target, links, objects) if isinstance(target, Episode) else set()
    members = _thread_members(target, links, objects) if isinstance(target, MemoryThread) else set()
    grounded = [link for link in links if link.relation is Relation.DERIVED_FROM]
    return ForgetReach(
        parts=parts,
        grounded_on_target=[link.from_id for link in grounded if link.to_id == target.id],
        grounded_on_parts=[link.from_id for link in grounded if link.to_id in parts],
        members=members,
    )


def _episode_parts(
    episode: Episode, links: Iterable[MemoryLink], objects: Mapping[MemoryId, MemoryObject]
) -> set[MemoryId]:
    """The observations an episode's ``has_observation`` links reach."""
    return {
        link.to_id
        for link in links
        if link.relation is Relation.HAS_OBSERVATION
        and link.from_id == episode.id
        and isinstance(objects.get(link.to_id), Observation)
    }


def _thread_members(
    thread: MemoryThread, links: Iterable[MemoryLink], objects: Mapping[MemoryId, MemoryObject]
) -> set[MemoryId]:
    """The derived memories whose ``part_of_thread`` links reach a thread."""
    return {
        link.from_id
        for link in links
        if link.relation is Relation.PART_OF_THREAD
        and link.to_id == thread.id
        and isinstance(objects.get(link.from_id), DerivedMemory)
    }


def forget_plan(target: MemoryObject, draft: ForgetMemoryDraft, reach: ForgetReach) -> ForgetPlan:
    """The lifecycle records one forget appends: (memory id, action), target first (pure).

    The rule of the module docstring: the target is suppressed (a thread only gets
    ``forget_noted``); an episode's parts with ``apply_to_episode_observations``; the derived
    memories grounded on the target or on those parts with ``apply_to_derived_from_target`` (for
    an episode or observation target); a thread's derived members with
    ``apply_to_thread_members``. Episodes and observations are never reached through a thread.

    Args:
        target: the forget's target (not a notion: the caller refuses those).
        draft: the forget and its switches.
        reach: what surrounds the target (:func:`forget_reach`).

    Returns:
        list[tuple[MemoryId, LifecycleAction]]: each memory once.
    """
    if isinstance(target, MemoryThread):
        plan: ForgetPlan = [(target.id, LifecycleAction.FORGET_NOTED)]
        if draft.apply_to_thread_members:
            plan += [(i, LifecycleAction.SUPPRESS) for i in reach.members]
        return plan
    plan = [(target.id, LifecycleAction.SUPPRESS)]
    parts = reach.parts if isinstance(target, Episode) and draft.apply_to_episode_observations else ()
    plan += [(i, LifecycleAction.SUPPRESS) for i in parts]
    if draft.apply_to_derived_from_target and isinstance(target, Episode | Observation):
        grounded = {*reach.grounded_on_target, *(reach.grounded_on_parts if parts else ())}
        plan += [(i, LifecycleAction.SUPPRESS) for i in sorted(grounded - {target.id, *parts})]
    return plan


def forget_record_id(
    collection: str,
    action: LifecycleAction,
    memory_id: MemoryId,
    target_id: MemoryId,
    rationale: str,
    *,
    parts_kept: bool = False,
) -> MemoryId:
    """The id of one record of a forget: derived from (action, memory, target, rationale).

    The same forget replayed, or completed later, therefore names the same records. The own
    record of an episode forgotten with ``apply_to_episode_observations=False`` (``parts_kept``)
    gets another id, so a forget that kept the parts on purpose is told apart from one recorded
    before forgets reached parts (:func:`episode_forget_gaps`).
    """
    extra = ("parts_kept",) if parts_kept else ()
    return MemoryId.deterministic(collection, action.value, memory_id, target_id, rationale, *extra)


def forget_records(
    collection: str, target: MemoryObject, draft: ForgetMemoryDraft, recorded_at: datetime, plan: ForgetPlan
) -> list[LifecycleRecord]:
    """The records of a forget plan (:func:`forget_record_id`), at ``recorded_at``.

    Cascaded records name the target in ``related_ids`` (their origin).
    """
    kept = isinstance(target, Episode) and not draft.apply_to_episode_observations
    return [
        LifecycleRecord(
            id=forget_record_id(
                collection,
                action,
                memory_id,
                target.id,
                draft.rationale,
                parts_kept=kept and memory_id == target.id,
            ),
            target_id=memory_id,
            action=action,
            rationale=draft.rationale,
            recorded_at=recorded_at,
            related_ids=() if memory_id == target.id else (target.id,),
        )
        for memory_id, action in plan
    ]


async def read_forget_surroundings(
    graph: GraphStore, target: MemoryObject
) -> tuple[list[MemoryLink], dict[MemoryId, MemoryObject]]:
    """Read the links :func:`forget_reach` needs around ``target`` and the objects they reach.

    Raises:
        BackendError: the graph failed.
    """
    links: list[MemoryLink] = []
    sources: list[MemoryId] = []
    if isinstance(target, Episode):
        links += await graph.links_of([target.id], relations=[Relation.HAS_OBSERVATION])
        sources = [link.to_id for link in links if link.from_id == target.id]
    if isinstance(target, MemoryThread):
        links += await graph.links_of([target.id], relations=[Relation.PART_OF_THREAD])
    if isinstance(target, Episode | Observation):
        links += await graph.links_of([target.id, *sources], relations=[Relation.DERIVED_FROM])
    ends = sorted({end for link in links for end in (link.from_id, link.to_id)} - {target.id})
    objects = await graph.get_objects(ends) if ends else {}
    return links, objects


def episode_forget_gaps(
    collection: str,
    episode: Episode,
    links: Iterable[MemoryLink],
    objects: Mapping[MemoryId, MemoryObject],
    records: Iterable[LifecycleRecord],
) -> list[LifecycleRecord]:
    """The suppressions a forget of ``episode`` recorded before forgets reached parts lacks (pure).

    The episode's original forget is its earliest suppression record of its own (no
    ``related_ids``) whose id is the one a forget that reaches parts derives (a forget with
    ``apply_to_episode_observations=False`` kept the parts on purpose). It lacks something only
    when one of the episode's observations that existed then has no suppression record at all.
    Its plan is then redone under today's rule with that forget's rationale and record time;
    whether it cascaded to derived memories is read from its records (it did unless a derived
    memory grounded on the episode then was left unsuppressed by it; with none, the default
    applies). Kept are the records of memories that existed then and have no suppression record.

    Args:
        collection: the collection (namespace of record ids).
        episode: the episode.
        links: at least the links :func:`forget_reach` needs around it.
        objects: at least the objects those links reach.
        records: at least the lifecycle records about the episode, its observations and the
            derived memories grounded on them.

    Returns:
        list[LifecycleRecord]: the missing records (empty when the episode was never forgotten or
        its forget is complete), with the ids a forget derives.
    """
    records = list(records)
    original = _original_forget(collection, episode, records)
    if original is None:
        return []
    at = original.recorded_at
    reach = forget_reach(episode, links, objects)
    draft = ForgetMemoryDraft.suppress(
        episode.id,
        original.rationale,
        apply_to_derived_from_target=_cascaded(original, records, reach, objects),
        recorded_at=at,
    )
    suppressed = {r.target_id for r in records if r.action is LifecycleAction.SUPPRESS}
    plan = [
        (memory_id, action)
        for memory_id, action in forget_plan(episode, draft, reach)
        if memory_id not in suppressed and _existed(objects, memory_id, at)
    ]
    if not any(memory_id in reach.parts for memory_id, _ in plan):
        return []
    return forget_records(collection, episode, draft, at, plan)


def _original_forget(
    collection: str, episode: Episode, records: Iterable[LifecycleRecord]
) -> LifecycleRecord | None:
    """The episode's earliest own suppression with the id of a forget that reaches parts."""
    forgets = [
        r
        for r in records
        if r.target_id == episode.id
        and r.action is LifecycleAction.SUPPRESS
        and not r.related_ids
        and r.id == forget_record_id(collection, r.action, episode.id, episode.id, r.rationale)
    ]
    return min(forgets, key=lambda r: (r.recorded_at, r.id)) if forgets else None


def _existed(objects: Mapping[MemoryId, MemoryObject], memory_id: MemoryId, at: datetime) -> bool:
    """Whether a memory was created by ``at``."""
    obj = objects.get(memory_id)
    return obj is not None and obj.created_at <= at


def _cascaded(
    original: LifecycleRecord,
    records: Iterable[LifecycleRecord],
    reach: ForgetReach,
    objects: Mapping[MemoryId, MemoryObject],
) -> bool:
    """Whether an episode's original forget cascaded to derived memories.

    It did unless a derived memory grounded on the episode then was left unsuppressed by it
    (with none, the default applies).
    """
    episode_id = original.target_id
    cascaded = {
        r.target_id
        for r in records
        if r.action is LifecycleAction.SUPPRESS
        and episode_id in r.related_ids
        and r.rationale == original.rationale
    }
    at = original.recorded_at
    return all(i in cascaded for i in reach.grounded_on_target if _existed(objects, i, at))


def collection_forget_gaps(
    collection: str,
    objects: Mapping[MemoryId, MemoryObject],
    links: Iterable[MemoryLink],
    records: Iterable[LifecycleRecord],
) -> dict[MemoryId, list[LifecycleRecord]]:
    """:func:`episode_forget_gaps` of every forgotten episode of a whole collection (pure).

    Args:
        collection: the collection (namespace of record ids).
        objects: every readable object, by id.
        links: every readable link.
        records: every lifecycle record.

    Returns:
        dict[MemoryId, list[LifecycleRecord]]: the missing records by episode id, in id order;
        only episodes that lack some.
    """
    records = list(records)
    forgotten = _forgotten_episodes(objects, records)
    if not forgotten:
        return {}
    touching: dict[MemoryId, list[MemoryLink]] = defaultdict(list)
    for link in links:
        touching[link.from_id].append(link)
        touching[link.to_id].append(link)
    about: dict[MemoryId, list[LifecycleRecord]] = defaultdict(list)
    for record in records:
        about[record.target_id].append(record)
    found: dict[MemoryId, list[LifecycleRecord]] = {}
    for episode_id in forgotten:
        episode = objects[episode_id]
        assert isinstance(episode, Episode)
        around = _links_around(episode_id, touching)
        near = sorted({end for link in around for end in (link.from_id, link.to_id)} | {episode_id})
        gaps = episode_forget_gaps(collection, episode, around, objects, [r for i in near for r in about[i]])
        if gaps:
            found[episode_id] = gaps
    return found


def _links_around(episode_id: MemoryId, touching: Mapping[MemoryId, list[MemoryLink]]) -> list[MemoryLink]:
    """The links touching an episode or one of its observations (``touching``: links by end)."""
    parts = [
        link.to_id
        for link in touching[episode_id]
        if link.relation is Relation.HAS_OBSERVATION and link.from_id == episode_id
    ]
    return [link for i in (episode_id, *parts) for link in touching[i]]


def _forgotten_episodes(
    objects: Mapping[MemoryId, MemoryObject], records: Iterable[LifecycleRecord]
) -> list[MemoryId]:
    """The episodes with a suppression record of their own, sorted."""
    return sorted(
        {
            r.target_id
            for r in records
            if r.action is LifecycleAction.SUPPRESS
            and not r.related_ids
            and isinstance(objects.get(r.target_id), Episode)
        }
    )


async def complete_episode_forgets(
    episode_ids: Sequence[MemoryId],
    *,
    collection: str,
    graph: GraphStore,
    vectors: VectorIndex,
    embedder: EmbeddingProvider,
    stats: RetrievalStatsStore,
) -> tuple[tuple[MemoryId, ...], list[RepairMarkerType]]:
    """Append what forgets of ``episode_ids`` lack (:func:`episode_forget_gaps`), in one batch.

    Then the newly suppressed memories leave candidate recall and their stats rows are refreshed
    (repairable writes). Completing again writes nothing new.

    Returns:
        tuple: the memories newly suppressed (sorted) and the repair markers of failed vector or
        stats writes.

    Raises:
        BackendError: the graph failed; nothing was written.
    """
    missing: list[LifecycleRecord] = []
    async with exclusive_writes(graph):  # writers of other processes wait: the checks hold
        found = await graph.get_objects(list(episode_ids))
        for episode in (obj for obj in found.values() if isinstance(obj, Episode)):
            links, objects = await read_forget_surroundings(graph, episode)
            records = await graph.get_records(sorted({episode.id, *objects}))
            missing += episode_forget_gaps(collection, episode, links, objects, records)
        if missing:
            await finish_write(graph.write_batch(GraphBatch(records=missing)))
    if not missing:
        return (), []
    affected = sorted({record.target_id for record in missing})
    markers = await maintain_vectors(
        [], affected, graph=graph, vectors=vectors, embedder=embedder, batch_size=64
    )
    markers += await maintain_stats([], [], affected, graph=graph, stats=stats)
    return tuple(affected), markers
