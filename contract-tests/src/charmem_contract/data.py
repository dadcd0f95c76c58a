"""Values the suites write: hostile strings, fixed instants and builders of stored objects.

Adapter authors can reuse these in their own tests. Every builder takes keyword overrides and
fills the rest with fixed values, so two calls with the same arguments build equal objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, Final

from charmem.domain.graph import LifecycleAction, LifecycleRecord
from charmem.domain.ids import MemoryId
from charmem.domain.model import (
    BeliefAssertion,
    DerivedMemory,
    DerivedType,
    Entity,
    Episode,
    KnownAs,
    MemoryLink,
    MemoryThread,
    Observation,
    Relation,
)
from charmem.domain.scene import Scene, SceneParticipant

__all__ = [
    "HOSTILE_STRINGS",
    "SEOUL",
    "T0",
    "at",
    "derived",
    "entity",
    "episode",
    "ids",
    "link",
    "observation",
    "record",
    "scene",
    "thread",
]

#: Memory text that breaks hand-built SPARQL, N-Triples, JSON or SQL, or is easy to mangle.
#: Each must read back byte-identical.
HOSTILE_STRINGS: Final[tuple[str, ...]] = (
    'she said "hi"',
    "it's 'quoted'",
    '"""triple double quotes"""',
    "'''triple single quotes'''",
    "line one\nline two\r\nline three\rend",
    "{braces} and }} and {{",
    'back\\slash \\n \\u0041 \\" \\\\ and a trailing backslash \\',
    '} ; DROP ALL ; INSERT DATA { GRAPH <urn:x> { <urn:a> <urn:b> "c" } }',
    '" . } } ; CLEAR ALL # <urn:charmem:episode:00000000-0000-0000-0000-000000000000>',
    "'); DROP TABLE stats_rows; --",
    "emoji 😀🧠👩\u200d👩\u200d👧 and flags 🇰🇷",
    "한국어 기억: 오늘 비가 왔다",
    "zero\u200bwidth\u200cjoiner\u200dand\ufeffbom",
    "nul\x00byte inside",
    "tab\tvertical\vformfeed\f",
    "trailing spaces   ",
    "\u2028line and paragraph\u2029separators",
    "e\u0301 decomposed vs \u00e9 composed",
    "@prefix x: <urn:x> . _:b0 a x:Y .",
)

#: The suites' reference instant (UTC).
T0: Final = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)
#: A zone east of UTC, to check that offsets survive a round trip.
SEOUL: Final = timezone(timedelta(hours=9))


def at(minutes: float, tz: timezone = UTC) -> datetime:
    """The instant ``minutes`` after :data:`T0`, expressed in ``tz``."""
    return (T0 + timedelta(minutes=minutes)).astimezone(tz)


def ids(namespace: str, count: int) -> list[MemoryId]:
    """``count`` deterministic ids under ``namespace``, in creation order (not sorted)."""
    return [MemoryId.deterministic("charmem-contract", namespace, index) for index in range(count)]


def _new_id(kwargs: dict[str, Any]) -> None:
    kwargs.setdefault("id", MemoryId.new())


def entity(**kwargs: Any) -> Entity:
    """An :class:`Entity` (``entity_type="person"``, created at :data:`T0`)."""
    _new_id(kwargs)
    kwargs.setdefault("entity_type", "person")
    kwargs.setdefault("created_at", T0)
    return Entity(**kwargs)


def thread(**kwargs: Any) -> MemoryThread:
    """A :class:`MemoryThread` titled ``"garden project"``."""
    _new_id(kwargs)
    kwargs.setdefault("title", "garden project")
    kwargs.setdefault("created_at", T0)
    return MemoryThread(**kwargs)


def episode(**kwargs: Any) -> Episode:
    """An :class:`Episode` that occurred and was recorded at :data:`T0`."""
    _new_id(kwargs)
    kwargs.setdefault("occurred_at", T0)
    kwargs.setdefault("created_at", T0)
    return Episode(**kwargs)


def scene(
    *,
    entity_ids: Sequence[MemoryId] = (),
    names: Sequence[str] = (),
    descriptions: Sequence[str] = (),
    **kwargs: Any,
) -> Scene:
    """A :class:`Scene` at :data:`T0`: a participant per entity id, then per name, then per description.

    ``setting`` and ``custom_values`` are passed on as given (none by default).
    """
    kwargs.setdefault("at", T0)
    kwargs.setdefault(
        "participants",
        [
            *(SceneParticipant(entity_id=memory_id) for memory_id in entity_ids),
            *(SceneParticipant(name=name) for name in names),
            *(SceneParticipant(description=words) for words in descriptions),
        ],
    )
    return Scene(**kwargs)


def observation(episode_id: MemoryId, **kwargs: Any) -> Observation:
    """An :class:`Observation` of ``episode_id``."""
    _new_id(kwargs)
    kwargs.setdefault("text", "we planted tomatoes")
    kwargs.setdefault("observed_at", T0)
    kwargs.setdefault("created_at", T0)
    return Observation(episode_id=episode_id, **kwargs)


def derived(
    *,
    observation_ids: Sequence[MemoryId] = (),
    episode_ids: Sequence[MemoryId] = (),
    names: Sequence[tuple[MemoryId, str]] = (),
    **kwargs: Any,
) -> DerivedMemory:
    """A :class:`DerivedMemory` (a reflection); ``names`` adds ``KnownAs`` beliefs and subjects."""
    _new_id(kwargs)
    kwargs.setdefault("derived_type", DerivedType.REFLECTION)
    kwargs.setdefault("text", "they like gardening")
    kwargs.setdefault("created_at", T0)
    if names:
        kwargs.setdefault("entity_ids", [subject for subject, _ in names])
        kwargs.setdefault("assertions", [BeliefAssertion(subject, KnownAs(name)) for subject, name in names])
    return DerivedMemory(observation_ids=observation_ids, episode_ids=episode_ids, **kwargs)


def link(from_id: MemoryId, relation: Relation, to_id: MemoryId, **kwargs: Any) -> MemoryLink:
    """A :class:`MemoryLink` created at :data:`T0`."""
    _new_id(kwargs)
    kwargs.setdefault("created_at", T0)
    return MemoryLink(from_id=from_id, relation=relation, to_id=to_id, **kwargs)


def record(target_id: MemoryId, **kwargs: Any) -> LifecycleRecord:
    """A suppression :class:`LifecycleRecord` of ``target_id`` recorded at :data:`T0`."""
    _new_id(kwargs)
    kwargs.setdefault("action", LifecycleAction.SUPPRESS)
    kwargs.setdefault("rationale", "the user asked to forget it")
    kwargs.setdefault("recorded_at", T0)
    return LifecycleRecord(target_id=target_id, **kwargs)
