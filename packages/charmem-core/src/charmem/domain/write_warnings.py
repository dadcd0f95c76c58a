"""The rules that warn about a write without refusing it (:class:`~charmem.domain.plan.ValidationWarning`)."""

from __future__ import annotations

from collections.abc import Sequence

from charmem.domain.ids import MemoryId
from charmem.domain.model import (
    DerivedMemory,
    Entity,
    Episode,
    MemoryLink,
    MemoryObject,
    MemoryThread,
    Observation,
)
from charmem.domain.obligations import RESOLVING_RELATIONS
from charmem.domain.plan import ValidationWarning, WarningKind
from charmem.domain.rules import normalise_name

__all__ = [
    "observation_echo",
    "repeated_scene_participant",
    "resolver_without_common_ground",
    "subjects_and_threads",
]


def _words(text: str) -> str:
    return " ".join(text.split()).casefold()


def observation_echo(observation: Observation, episode: MemoryObject | None) -> ValidationWarning | None:
    """``DUPLICATE_OBSERVATION_ECHO`` when ``observation`` repeats its episode's summary.

    Texts are compared with runs of whitespace collapsed and case folded. An episode without a
    summary (the usual ``remember``: the observation carries the text) is no echo.

    Args:
        observation: a candidate observation.
        episode: its episode (planned or stored), ``None`` when unknown.
    """
    if not isinstance(episode, Episode) or not episode.summary.strip():
        return None
    if _words(observation.text) != _words(episode.summary):
        return None
    return ValidationWarning(WarningKind.DUPLICATE_OBSERVATION_ECHO, (observation.id, episode.id))


def subjects_and_threads(obj: MemoryObject) -> tuple[frozenset[MemoryId], frozenset[MemoryId]]:
    """The notions a memory is about and the threads it belongs to.

    A derived memory: its subjects and threads; an episode: its participants (its scene's
    participants given by id included) and threads; an observation: its speaker and the notions
    it mentions; a notion: itself; a thread: itself.
    """
    if isinstance(obj, DerivedMemory):
        return frozenset(obj.entity_ids), frozenset(obj.thread_ids)
    if isinstance(obj, Episode):
        return frozenset(obj.involved_entity_ids), frozenset(obj.thread_ids)
    if isinstance(obj, Observation):
        speaker = () if obj.speaker_entity_id is None else (obj.speaker_entity_id,)
        return frozenset((*obj.mentioned_entity_ids, *speaker)), frozenset()
    if isinstance(obj, Entity):
        return frozenset({obj.id}), frozenset()
    if isinstance(obj, MemoryThread):
        return frozenset(), frozenset({obj.id})
    return frozenset(), frozenset()  # pragma: no cover - every object type is listed above


def resolver_without_common_ground(
    link: MemoryLink,
    resolver: MemoryObject | None,
    matter: MemoryObject | None,
    episodes: Sequence[Episode] = (),
) -> ValidationWarning | None:
    """``RESOLVER_WITHOUT_SHARED_SUBJECT_OR_THREAD`` for a settling link between strangers.

    A ``resolves`` or ``fulfills_commitment`` link (from the resolver to the matter) whose two
    memories share no notion and no thread (:func:`subjects_and_threads`) may settle the wrong
    matter. An observation also shares its episode's (in ``episodes``, when given): an utterance
    in a scene with Ana is about Ana's matters too. Unknown endpoints (refused elsewhere) and other
    relations give no warning.
    """
    if link.relation not in RESOLVING_RELATIONS or resolver is None or matter is None:
        return None
    (resolver_subjects, resolver_threads), (matter_subjects, matter_threads) = (
        _with_episode(resolver, episodes),
        _with_episode(matter, episodes),
    )
    if resolver_subjects & matter_subjects or resolver_threads & matter_threads:
        return None
    return ValidationWarning(
        WarningKind.RESOLVER_WITHOUT_SHARED_SUBJECT_OR_THREAD, (link.id, link.from_id, link.to_id)
    )


def _with_episode(
    obj: MemoryObject, episodes: Sequence[Episode]
) -> tuple[frozenset[MemoryId], frozenset[MemoryId]]:
    subjects, threads = subjects_and_threads(obj)
    if isinstance(obj, Observation):
        for episode in episodes:
            if episode.id == obj.episode_id:
                more_subjects, more_threads = subjects_and_threads(episode)
                return subjects | more_subjects, threads | more_threads
    return subjects, threads


def repeated_scene_participant(episode: Episode) -> ValidationWarning | None:
    """``REPEATED_SCENE_PARTICIPANT`` when an episode's scene lists one participant twice.

    Two participants are the same when they share an ``entity_id``, a ``name`` or a
    ``description``, names and descriptions compared under
    :func:`~charmem.domain.rules.normalise_name` (NFKC, lower case, whitespace collapsed). Both
    are stored as given; the warning (naming the episode) says one person may count twice.

    Args:
        episode: a candidate episode (with or without a scene).
    """
    if episode.scene is None:
        return None
    seen: set[tuple[str, object]] = set()
    for participant in episode.scene.participants:
        keys = {
            ("entity_id", participant.entity_id),
            ("name", None if participant.name is None else normalise_name(participant.name)),
            (
                "description",
                None if participant.description is None else normalise_name(participant.description),
            ),
        }
        keys = {key for key in keys if key[1] is not None}
        if keys & seen:
            return ValidationWarning(WarningKind.REPEATED_SCENE_PARTICIPANT, (episode.id,))
        seen |= keys
    return None
