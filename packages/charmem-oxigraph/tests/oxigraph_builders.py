"""Builders of domain values for the tests, hostile memory texts, and a query spy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

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

#: Memory text that would break hand-built SPARQL, N-Triples or JSON, or is easy to mangle.
HOSTILE_TEXTS = (
    'she said "hi"',
    "it's 'quoted'",
    '"""triple double quotes"""',
    "'''triple single quotes'''",
    "line one\nline two\r\nline three\rend",
    "{braces} and }} and {{",
    'back\\slash \\n \\u0041 \\" \\\\',
    '} ; DROP ALL ; INSERT DATA { GRAPH <urn:x> { <urn:a> <urn:b> "c" } }',
    '" . } } ; CLEAR ALL # <urn:charmem:episode:00000000-0000-0000-0000-000000000000>',
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

UTC_TIME = datetime(2024, 3, 1, 12, 0, 0, tzinfo=UTC)
SEOUL = timezone(timedelta(hours=9))
INDIA = timezone(timedelta(hours=5, minutes=30))
PACIFIC = timezone(timedelta(hours=-8))


def at(minutes: int, tz: timezone = UTC) -> datetime:
    """An instant ``minutes`` after :data:`UTC_TIME`, expressed in ``tz``."""
    return (UTC_TIME + timedelta(minutes=minutes)).astimezone(tz)


def entity(**kwargs: object) -> Entity:
    values: dict[str, object] = {"id": MemoryId.new(), "entity_type": "person", "created_at": at(0)}
    values.update(kwargs)
    return Entity(**values)  # type: ignore[arg-type]


def episode(**kwargs: object) -> Episode:
    values: dict[str, object] = {
        "id": MemoryId.new(),
        "occurred_at": at(-60, SEOUL),
        "summary": "we talked about the garden",
        "created_at": at(1),
    }
    values.update(kwargs)
    return Episode(**values)  # type: ignore[arg-type]


def observation(episode_id: MemoryId, **kwargs: object) -> Observation:
    values: dict[str, object] = {
        "id": MemoryId.new(),
        "episode_id": episode_id,
        "text": "the tomatoes are ripe",
        "observed_at": at(-59, SEOUL),
        "created_at": at(1),
    }
    values.update(kwargs)
    return Observation(**values)  # type: ignore[arg-type]


def thread(**kwargs: object) -> MemoryThread:
    values: dict[str, object] = {"id": MemoryId.new(), "title": "the garden project", "created_at": at(2)}
    values.update(kwargs)
    return MemoryThread(**values)  # type: ignore[arg-type]


def derived(**kwargs: object) -> DerivedMemory:
    values: dict[str, object] = {
        "id": MemoryId.new(),
        "derived_type": DerivedType.REFLECTION,
        "text": "the user loves gardening",
        "created_at": at(3),
    }
    values.update(kwargs)
    return DerivedMemory(**values)  # type: ignore[arg-type]


def link(from_id: MemoryId, relation: Relation, to_id: MemoryId, **kwargs: object) -> MemoryLink:
    values: dict[str, object] = {
        "id": MemoryId.new(),
        "from_id": from_id,
        "relation": relation,
        "to_id": to_id,
        "created_at": at(4),
    }
    values.update(kwargs)
    return MemoryLink(**values)  # type: ignore[arg-type]


def record(target_id: MemoryId, **kwargs: object) -> LifecycleRecord:
    values: dict[str, object] = {
        "id": MemoryId.new(),
        "target_id": target_id,
        "action": LifecycleAction.SUPPRESS,
        "rationale": "the user asked to forget it",
        "recorded_at": at(10),
    }
    values.update(kwargs)
    return LifecycleRecord(**values)  # type: ignore[arg-type]


def known_as(subject: MemoryId, name: str) -> BeliefAssertion:
    return BeliefAssertion(subject, KnownAs(name))


def spy_queries(store: Any, monkeypatch: Any) -> list[str]:
    """Record the SPARQL text of every query an embedded graph store runs (and still run it).

    Returns:
        list[str]: filled as queries run (clear it between steps).
    """
    queries: list[str] = []
    real = store._select

    def spying(query: str) -> list[object]:
        queries.append(query)
        return list(real(query))

    monkeypatch.setattr(store, "_select", spying)
    return queries
