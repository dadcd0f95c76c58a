"""``prepare``: drafts -> an inspectable :class:`RememberWritePlan`. Writes nothing."""

from __future__ import annotations

import operator
from collections.abc import Iterable
from datetime import datetime

import attrs

from charmem.domain.drafts import (
    DerivedMemoryDraft,
    EntityDraft,
    EpisodeDraft,
    LinkDraft,
    ObservationDraft,
    RememberDrafts,
    RememberInput,
    ThreadDraft,
)
from charmem.domain.ids import MemoryId
from charmem.domain.model import (
    DerivedMemory,
    Entity,
    Episode,
    MemoryLink,
    MemoryObject,
    MemoryThread,
    ObjectType,
    Observation,
    Relation,
)
from charmem.domain.plan import IndexEntry, RememberWritePlan
from charmem.domain.rules import derived_link_id
from charmem.domain.surfaces import scene_surface_texts

__all__ = ["build_plan", "derive_links", "index_entries", "input_to_drafts"]

_DEFAULT_SALIENCE = 0.5

#: Links in id order, compared in C (:data:`charmem.domain.ids.ID_ORDER`).
_BY_ID = operator.attrgetter("id.value.int")


def _salience(value: float | None) -> float:
    return _DEFAULT_SALIENCE if value is None else float(value)


def input_to_drafts(item: RememberInput, now: datetime) -> RememberDrafts:
    """Expand the convenience input into one episode, one observation and its derived drafts.

    Derived drafts get the episode and observation as sources unless they name their own or are
    given by the application (docs/concepts/memory-model.md, "Names are beliefs"), and the
    input's ``created_at`` unless they have their own (so a back-filled history is recorded then).
    """
    episode_id = item.episode_id or MemoryId.new()
    observation_id = item.observation_id or MemoryId.new()
    occurred = item.occurred_at or now
    participants = set(item.participant_entity_ids)
    if item.speaker_entity_id is not None:
        participants.add(item.speaker_entity_id)
    episode = EpisodeDraft(
        id=episode_id,
        summary=item.summary or "",
        occurred_at=occurred,
        participant_entity_ids=participants,
        thread_ids=item.thread_ids,
        raw_ref=item.raw_ref,
        salience=item.salience,
        created_at=item.created_at,
        scene=item.scene,
    )
    observation = ObservationDraft(
        id=observation_id,
        text=item.text,
        episode_id=episode_id,
        observed_at=occurred,
        speaker_entity_id=item.speaker_entity_id,
        mentioned_entity_ids=item.mentioned_entity_ids,
        raw_ref=item.raw_ref,
        salience=item.salience,
        created_at=item.created_at,
    )
    derived = tuple(
        _recorded_with(
            d
            if d.has_sources or d.given_by_application
            else attrs.evolve(d, episode_ids=(episode_id,), observation_ids=(observation_id,)),
            item.created_at,
        )
        for d in item.derived
    )
    return RememberDrafts(episodes=(episode,), observations=(observation,), derived=derived)


def _recorded_with(draft: DerivedMemoryDraft, created_at: datetime | None) -> DerivedMemoryDraft:
    """A derived draft without its own ``created_at`` is recorded with its input (a back-fill)."""
    if draft.created_at is not None or created_at is None:
        return draft
    return attrs.evolve(draft, created_at=created_at)


def _episode(d: EpisodeDraft, now: datetime) -> Episode:
    return Episode(
        id=d.id or MemoryId.new(),
        occurred_at=d.occurred_at or now,
        summary=d.summary,
        participant_entity_ids=d.participant_entity_ids,
        thread_ids=d.thread_ids,
        raw_ref=d.raw_ref,
        salience=_salience(d.salience),
        created_at=d.created_at or now,
        scene=d.scene,
    )


def _observation(d: ObservationDraft, episodes: dict[MemoryId, Episode], now: datetime) -> Observation:
    episode = episodes.get(d.episode_id)
    observed = d.observed_at or (episode.occurred_at if episode else now)
    return Observation(
        id=d.id or MemoryId.new(),
        episode_id=d.episode_id,
        text=d.text,
        observed_at=observed,
        speaker_entity_id=d.speaker_entity_id,
        mentioned_entity_ids=d.mentioned_entity_ids,
        raw_ref=d.raw_ref,
        salience=_salience(d.salience),
        created_at=d.created_at or now,
    )


def _entity(d: EntityDraft, now: datetime) -> Entity:
    return Entity(id=d.id or MemoryId.new(), entity_type=d.entity_type, created_at=d.created_at or now)


def _thread(d: ThreadDraft, now: datetime) -> MemoryThread:
    return MemoryThread(
        id=d.id or MemoryId.new(),
        title=d.title,
        summary=d.summary,
        status=d.status,
        created_at=d.created_at or now,
    )


def _derived(d: DerivedMemoryDraft, now: datetime) -> DerivedMemory:
    return DerivedMemory(
        id=d.id or MemoryId.new(),
        derived_type=d.derived_type,
        text=d.text,
        episode_ids=d.episode_ids,
        observation_ids=d.observation_ids,
        entity_ids=d.entity_ids,
        thread_ids=d.thread_ids,
        assertions=d.assertions,
        given_by_application=d.given_by_application,
        supersedes=d.supersedes,
        salience=_salience(d.salience),
        created_at=d.created_at or now,
    )


def _link(d: LinkDraft, now: datetime) -> MemoryLink:
    return MemoryLink(
        id=d.id or MemoryId.new(),
        from_id=d.from_id,
        relation=d.relation,
        to_id=d.to_id,
        created_at=d.recorded_at or now,
        rationale=d.rationale,
    )


def derive_links(
    collection: str, objects: Iterable[MemoryObject], caller_links: Iterable[MemoryLink] = ()
) -> tuple[MemoryLink, ...]:
    """The links commit derives from objects, with deterministic ids.

    A derived link whose (from, relation, to) a caller link already states is not duplicated. An
    episode involves each of its participants and its scene's participants given by id, once.

    Returns:
        tuple[MemoryLink, ...]: sorted by id; ``created_at`` is the source object's.
    """
    stated = {(link.from_id, link.relation, link.to_id) for link in caller_links}
    edges: dict[tuple[MemoryId, Relation, MemoryId], datetime] = {}

    def add(from_id: MemoryId, relation: Relation, to_id: MemoryId, at: datetime) -> None:
        key = (from_id, relation, to_id)
        if key not in stated and key not in edges:
            edges[key] = at

    for obj in objects:
        at = obj.created_at
        if isinstance(obj, Episode):
            for entity_id in obj.involved_entity_ids:
                add(obj.id, Relation.INVOLVES, entity_id, at)
            for thread_id in obj.thread_ids:
                add(obj.id, Relation.PART_OF_THREAD, thread_id, at)
        elif isinstance(obj, Observation):
            add(obj.episode_id, Relation.HAS_OBSERVATION, obj.id, at)
            if obj.speaker_entity_id is not None:
                add(obj.episode_id, Relation.INVOLVES, obj.speaker_entity_id, at)
            for entity_id in obj.mentioned_entity_ids:
                add(obj.id, Relation.MENTIONS, entity_id, at)
        elif isinstance(obj, DerivedMemory):
            for source_id in obj.source_ids:
                add(obj.id, Relation.DERIVED_FROM, source_id, at)
            for entity_id in obj.entity_ids:
                add(obj.id, Relation.ABOUT, entity_id, at)
            for thread_id in obj.thread_ids:
                add(obj.id, Relation.PART_OF_THREAD, thread_id, at)
            for target_id in obj.supersedes:
                add(obj.id, Relation.SUPERSEDES, target_id, at)
    links = [
        MemoryLink(
            id=derived_link_id(collection, from_id, relation, to_id),
            from_id=from_id,
            relation=relation,
            to_id=to_id,
            created_at=at,
        )
        for (from_id, relation, to_id), at in edges.items()
    ]
    return tuple(sorted(links, key=_BY_ID))


def index_entries(objects: Iterable[MemoryObject]) -> tuple[IndexEntry, ...]:
    """Which objects get a vector, and the text embedded for each.

    Observations, derived memories and threads always; an episode only when its summary is not
    empty and differs from every observation text of the plan (no echo duplicates); notions never
    (they have no vector surface). An episode with a scene also gets an entry per scene surface
    (:func:`~charmem.domain.surfaces.scene_surface_texts`), after its content entry, whether or
    not its summary got one.
    """
    objects = list(objects)
    observation_texts: dict[MemoryId, set[str]] = {}
    for obj in objects:
        if isinstance(obj, Observation):
            observation_texts.setdefault(obj.episode_id, set()).add(obj.text.strip())
    entries: list[IndexEntry] = []
    for obj in objects:
        if isinstance(obj, Episode):
            summary = obj.summary.strip()
            if summary and summary not in observation_texts.get(obj.id, set()):
                entries.append(IndexEntry(id=obj.id, object_type=ObjectType.EPISODE, text=obj.summary))
            entries += [
                IndexEntry(id=obj.id, object_type=ObjectType.EPISODE, text=text, surface=surface)
                for surface, text in scene_surface_texts(obj).items()
            ]
        elif isinstance(obj, Observation):
            entries.append(IndexEntry(id=obj.id, object_type=ObjectType.OBSERVATION, text=obj.text))
        elif isinstance(obj, DerivedMemory):
            entries.append(IndexEntry(id=obj.id, object_type=ObjectType.DERIVED, text=obj.text))
        elif isinstance(obj, MemoryThread):
            text = f"{obj.title}\n{obj.summary}" if obj.summary.strip() else obj.title
            entries.append(IndexEntry(id=obj.id, object_type=ObjectType.THREAD, text=text))
    return tuple(entries)


def build_plan(collection: str, item: RememberInput | RememberDrafts, now: datetime) -> RememberWritePlan:
    """Turn drafts into a plan: defaults filled from ``now``, derived links, index entries.

    Args:
        collection: the collection name.
        item: the convenience input or explicit drafts.
        now: the instant for every defaulted timestamp (timezone-aware).

    Returns:
        RememberWritePlan: objects in draft order (entities, threads, episodes, observations,
        derived), caller links, derived links and index entries.
    """
    drafts = input_to_drafts(item, now) if isinstance(item, RememberInput) else item
    episodes = [_episode(d, now) for d in drafts.episodes]
    by_id = {e.id: e for e in episodes}
    objects: list[MemoryObject] = [
        *(_entity(d, now) for d in drafts.entities),
        *(_thread(d, now) for d in drafts.threads),
        *episodes,
        *(_observation(d, by_id, now) for d in drafts.observations),
        *(_derived(d, now) for d in drafts.derived),
    ]
    links = tuple(_link(d, now) for d in drafts.links)
    return RememberWritePlan(
        collection=collection,
        prepared_at=now,
        objects=tuple(objects),
        links=links,
        derived_links=derive_links(collection, objects, links),
        index_entries=index_entries(objects),
    )
