"""LoCoMo conversations -> charmem drafts, and the turn-level counting rule used to score recall.

A LoCoMo file (one conversation) holds ``speaker_a``, ``speaker_b``, ``session_N`` turn lists with
``session_N_date_time``, and ``session_N_observation`` facts (per speaker, ``[text, dia_id]``).
Gold labels (``qa``, ``answer``, ``evidence``) are never read by :func:`conversation_drafts`.

Mapping (ids derive from the conversation id and ``dia_id``, so re-ingesting writes nothing new):

* each speaker -> an :class:`~charmem.EntityDraft` (``person``) plus a given ``KnownAs`` belief;
* each session -> an :class:`~charmem.EpisodeDraft` at the session time (UTC) with both speakers;
* each turn -> an :class:`~charmem.ObservationDraft` by its speaker, text kept as written plus the
  image caption (``[image: ...]``) when the turn shared one; ``observed_at`` is the session time
  plus the turn's index in seconds, so turns keep their order;
* each fact -> a :class:`~charmem.DerivedMemoryDraft` (``claim``) about its speaker, grounded on
  every turn it cites that exists (a citation may be a list or one string ``"D26:14, D26:34"``), or
  on the session's episode when none does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from charmem import (
    BeliefAssertion,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    EpisodeDraft,
    KnownAs,
    MemoryId,
    ObservationDraft,
    RememberDrafts,
)

__all__ = [
    "Conversation",
    "SessionDrafts",
    "cited_dia_ids",
    "conversation_drafts",
    "load_conversation",
    "parse_session_time",
]

_DIA_ID = re.compile(r"D\d+:\d+")
_SESSION_KEY = re.compile(r"session_(\d+)")


def parse_session_time(text: str) -> datetime:
    """Parse a LoCoMo session time such as ``"1:56 pm on 8 May, 2023"`` as a UTC instant.

    Raises:
        ValueError: the text is not in that form.
    """
    cleaned = " ".join(text.replace(",", ", ").split()).replace(" ,", ",")
    return datetime.strptime(cleaned, "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def cited_dia_ids(citation: Any) -> list[str]:
    """The turn ids a fact cites: a string (possibly several, comma separated) or a list."""
    if isinstance(citation, str):
        return _DIA_ID.findall(citation)
    if isinstance(citation, list | tuple):
        return [found for part in citation for found in cited_dia_ids(part)]
    return []


@dataclass(frozen=True)
class Conversation:
    """One LoCoMo conversation as read from its file."""

    conversation_id: str
    data: Mapping[str, Any]

    @property
    def speakers(self) -> tuple[str, str]:
        """The two participants' names (``speaker_a``, ``speaker_b``)."""
        return (str(self.data["speaker_a"]), str(self.data["speaker_b"]))

    def sessions(self) -> Iterator[tuple[int, datetime, list[Mapping[str, Any]]]]:
        """Sessions that have turns, in order: (number, time, turns)."""
        numbers = sorted(
            int(m.group(1))
            for key in self.data
            if (m := _SESSION_KEY.fullmatch(key)) and isinstance(self.data[key], list)
        )
        for number in numbers:
            turns = self.data[f"session_{number}"]
            if turns:
                yield number, parse_session_time(self.data[f"session_{number}_date_time"]), turns


def load_conversation(path: Path | str) -> Conversation:
    """Read one LoCoMo conversation file; its id is the file name without ``.json``.

    Raises:
        ValueError: the file is not a LoCoMo conversation (no speakers or sessions).
    """
    path = Path(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict) and "conversation" in data and "speaker_a" not in data:
        data = {**data["conversation"], **{k: v for k, v in data.items() if k != "conversation"}}
    if not isinstance(data, dict) or "speaker_a" not in data or "speaker_b" not in data:
        raise ValueError(f"{path} is not a LoCoMo conversation: speaker_a/speaker_b missing")
    conversation_id = str(data.get("sample_id") or path.stem)
    return Conversation(conversation_id, data)


@dataclass(frozen=True)
class SessionDrafts:
    """The drafts of one session, plus the ``dia_id`` of each observation and fact."""

    number: int
    drafts: RememberDrafts
    dia_ids: dict[MemoryId, tuple[str, ...]] = field(default_factory=dict)


def ids_for(conversation_id: str) -> _Ids:
    """Deterministic id derivation for one conversation."""
    return _Ids(f"locomo:{conversation_id}")


@dataclass(frozen=True)
class _Ids:
    namespace: str

    def speaker(self, name: str) -> MemoryId:
        return MemoryId.deterministic(self.namespace, "speaker", name)

    def name_belief(self, name: str) -> MemoryId:
        return MemoryId.deterministic(self.namespace, "known-as", name)

    def session(self, number: int) -> MemoryId:
        return MemoryId.deterministic(self.namespace, "session", number)

    def turn(self, dia_id: str) -> MemoryId:
        return MemoryId.deterministic(self.namespace, "turn", dia_id)

    def fact(self, number: int, speaker: str, index: int) -> MemoryId:
        return MemoryId.deterministic(self.namespace, "fact", number, speaker, index)


def _turn_text(turn: Mapping[str, Any]) -> str:
    text = str(turn.get("text") or "")
    caption = turn.get("blip_caption")
    if caption:
        text = f"{text} [image: {caption}]" if text.strip() else f"[image: {caption}]"
    return text


def conversation_drafts(
    conversation: Conversation, *, include_facts: bool = True
) -> tuple[RememberDrafts, list[SessionDrafts]]:
    """Map a conversation to drafts: the notions first, then one batch per session.

    Args:
        conversation: the loaded conversation.
        include_facts: also map ``session_N_observation`` facts to derived memories.

    Returns:
        (notions, sessions): the speakers and their given names, then per-session drafts with
        the ``dia_id`` each observation and fact counts as.
    """
    ids = ids_for(conversation.conversation_id)
    first_time = next(conversation.sessions())[1]
    notions = _notion_drafts(conversation.speakers, ids, first_time)
    known_turns = {str(turn["dia_id"]) for _n, _t, turns in conversation.sessions() for turn in turns}
    sessions = [
        _session_drafts(conversation, ids, number, when, turns, known_turns, include_facts=include_facts)
        for number, when, turns in conversation.sessions()
    ]
    return notions, sessions


def _notion_drafts(speakers: tuple[str, str], ids: _Ids, first_time: datetime) -> RememberDrafts:
    """Each speaker as a person, with the given belief of the name they are known as."""
    return RememberDrafts(
        entities=[
            EntityDraft(id=ids.speaker(name), entity_type="person", created_at=first_time)
            for name in speakers
        ],
        derived=[
            DerivedMemoryDraft(
                DerivedType.REFLECTION,
                f"I know this person as {name}.",
                id=ids.name_belief(name),
                entity_ids=[ids.speaker(name)],
                assertions=[BeliefAssertion(ids.speaker(name), KnownAs(name))],
                given_by_application=True,
                created_at=first_time,
            )
            for name in speakers
        ],
    )


def _session_drafts(
    conversation: Conversation,
    ids: _Ids,
    number: int,
    when: datetime,
    turns: list[Mapping[str, Any]],
    known_turns: set[str],
    *,
    include_facts: bool,
) -> SessionDrafts:
    """One session: its episode, an observation per turn with text, and its facts if asked."""
    episode_id = ids.session(number)
    dia_ids: dict[MemoryId, tuple[str, ...]] = {}
    observations = _observation_drafts(conversation, ids, episode_id, when, turns, dia_ids)
    stored_turns = {d for (d,) in dia_ids.values()}
    facts = conversation.data.get(f"session_{number}_observation") if include_facts else None
    derived = _fact_drafts(
        conversation.speakers, ids, number, when, facts or {}, known_turns, stored_turns, dia_ids
    )
    speakers = conversation.speakers
    episode = EpisodeDraft(
        id=episode_id,
        occurred_at=when,
        participant_entity_ids=[ids.speaker(name) for name in speakers],
        raw_ref=f"locomo:{conversation.conversation_id}:session_{number}",
        created_at=when,
    )
    return SessionDrafts(
        number,
        RememberDrafts(episodes=[episode], observations=observations, derived=derived),
        dia_ids,
    )


def _observation_drafts(
    conversation: Conversation,
    ids: _Ids,
    episode_id: MemoryId,
    when: datetime,
    turns: list[Mapping[str, Any]],
    dia_ids: dict[MemoryId, tuple[str, ...]],
) -> list[ObservationDraft]:
    """An observation per turn that has text (or an image caption); fills ``dia_ids``."""
    speakers = conversation.speakers
    observations = []
    for index, turn in enumerate(turns):
        dia_id = str(turn["dia_id"])
        speaker = str(turn.get("speaker") or "")
        text = _turn_text(turn)
        if not text.strip():
            continue
        turn_id = ids.turn(dia_id)
        dia_ids[turn_id] = (dia_id,)
        observations.append(
            ObservationDraft(
                id=turn_id,
                text=text,
                episode_id=episode_id,
                observed_at=when + timedelta(seconds=index),
                speaker_entity_id=ids.speaker(speaker) if speaker in speakers else None,
                raw_ref=f"locomo:{conversation.conversation_id}:{dia_id}",
                created_at=when,
            )
        )
    return observations


def _fact_drafts(
    speakers: tuple[str, str],
    ids: _Ids,
    number: int,
    when: datetime,
    facts: Mapping[str, Any],
    known_turns: set[str],
    stored_turns: set[str],
    dia_ids: dict[MemoryId, tuple[str, ...]],
) -> list[DerivedMemoryDraft]:
    """A claim per fact, grounded on the stored turns it cites (else the episode); fills ``dia_ids``."""
    episode_id = ids.session(number)
    derived = []
    for speaker, entries in sorted(facts.items()):
        for index, entry in enumerate(entries):
            if not isinstance(entry, list | tuple) or not entry or not str(entry[0]).strip():
                continue
            cited = [d for d in cited_dia_ids(list(entry[1:])) if d in known_turns]
            grounded = [d for d in cited if d in stored_turns]
            fact_id = ids.fact(number, speaker, index)
            dia_ids[fact_id] = tuple(dict.fromkeys(cited))
            derived.append(
                DerivedMemoryDraft(
                    DerivedType.CLAIM,
                    str(entry[0]),
                    id=fact_id,
                    entity_ids=[ids.speaker(speaker)] if speaker in speakers else [],
                    observation_ids=[ids.turn(d) for d in grounded],
                    episode_ids=[] if grounded else [episode_id],
                    created_at=when,
                )
            )
    return derived


def turn_recall(ranked_dia_ids: Sequence[str], evidence: Sequence[str], k: int) -> float:
    """Share of ``evidence`` turns among the first ``k`` distinct ranked turns (0..1)."""
    seen: list[str] = []
    for dia_id in ranked_dia_ids:
        if dia_id not in seen:
            seen.append(dia_id)
        if len(seen) == k:
            break
    wanted = set(evidence)
    return len(wanted & set(seen)) / len(wanted) if wanted else 0.0
