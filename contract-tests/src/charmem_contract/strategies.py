"""Hypothesis strategies of hostile input, and the settings of charmem's fuzz tests.

Adapter authors can fuzz their own adapters with the same inputs charmem's fuzz tests use::

    from hypothesis import given
    from charmem_contract.strategies import fuzz_settings, memory_texts

    @fuzz_settings(25)
    @given(text=memory_texts())
    def test_text_round_trips(text): ...

The run length comes from the environment, so the same tests serve as a quick suite (a modest,
derandomised number of examples) and as a long fuzzing run (``CHARMEM_FUZZ_EXAMPLES=5000``, random
examples; ``benchmarks/fuzz.py`` and ``nox -s fuzz`` set it).
"""

from __future__ import annotations

import functools
import os
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, Final, Literal

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from charmem.domain.ids import MemoryId
from charmem.domain.scene import Scene, SceneParticipant, SceneSetting
from charmem_contract.data import HOSTILE_STRINGS

__all__ = [
    "FUZZ_EXAMPLES_ENV",
    "METACHARACTERS",
    "MiB",
    "any_value",
    "characters_of_every_plane",
    "fuzz_settings",
    "instants",
    "lone_surrogate_texts",
    "memory_texts",
    "pooled_ids",
    "raw_texts",
    "scenes",
    "valid_instants",
]

#: Environment variable holding the number of examples of a long fuzzing run.
FUZZ_EXAMPLES_ENV: Final = "CHARMEM_FUZZ_EXAMPLES"
#: One mebibyte, in characters, the size of the "huge text" inputs.
MiB: Final = 1 << 20

#: Pieces of SPARQL, Turtle, N-Triples, JSON, SQL and Unicode that break hand-built text.
METACHARACTERS: Final[tuple[str, ...]] = (
    '"',
    "'",
    '"""',
    "'''",
    "\\",
    '\\"',
    "\\u0022",
    "{",
    "}",
    "<",
    ">",
    "#",
    "\n",
    "\r\n",
    "\t",
    "\x00",
    "\u2028",
    "\u2029",
    "\u0085",
    "\ufeff",
    "\u200b",
    "\u200d",
    "\u202e",  # right-to-left override
    "\u05e9\u05dc\u05d5\u05dd",  # Hebrew (RTL)
    "\u0627\u0644\u0633\u0644\u0627\u0645",  # Arabic (RTL)
    "e\u0301\u0302\u0303",  # stacked combining marks
    "\U0001f469\u200d\U0001f469\u200d\U0001f467",  # a ZWJ emoji sequence (astral)
    "\U00020000",  # CJK extension B (plane 2)
    "\U000e0041",  # a tag character (plane 14)
    "\U0010fffd",  # plane 16 private use
    " } ; DROP ALL ; # ",
    '" } ; CLEAR ALL ; INSERT DATA { <urn:a> <urn:b> "c" } #',
    "<urn:charmem:episode:00000000-0000-0000-0000-000000000000>",
    "> . <urn:x> <urn:y> <urn:z",
    "^^<http://www.w3.org/2001/XMLSchema#integer>",
    "@en",
    "_:b0",
    "?x $y",
    "GRAPH ?g { ?s ?p ?o }",
    "'); DROP TABLE stats_rows; --",
    '{"kind": "episode"}',
    "%00%22",
)

_PLANE: Final = 0x10000
_SURROGATE: Final[tuple[Literal["Cs"]]] = ("Cs",)  # the Unicode category of surrogate code points


@functools.cache
def characters_of_every_plane() -> st.SearchStrategy[str]:
    """Single code points from every Unicode plane (0-16), never a surrogate.

    A plane is drawn first, so astral planes are as likely as the basic one.
    """
    return st.integers(min_value=0, max_value=16).flatmap(
        lambda plane: st.characters(
            min_codepoint=plane * _PLANE,
            max_codepoint=plane * _PLANE + _PLANE - 1,
            exclude_categories=_SURROGATE,
        )
    )


def _huge(seed: str) -> str:
    return (seed * (MiB // len(seed) + 1))[:MiB]


@functools.cache
def memory_texts(*, huge: bool = True) -> st.SearchStrategy[str]:
    """Valid, non-blank memory text that is hard to store: any plane, metacharacters, 1 MiB.

    Args:
        huge: also draw (rarely) texts of :data:`MiB` characters.
    """
    pieces = st.sampled_from(METACHARACTERS) | st.text(characters_of_every_plane(), max_size=6)
    plane_text = st.text(characters_of_every_plane(), min_size=1, max_size=30)
    fragments = st.lists(pieces, min_size=1, max_size=8).map("".join)
    # repeated options weigh more: a huge text is about one draw in twelve
    options: list[st.SearchStrategy[str]] = (
        [plane_text] * 5 + [fragments] * 5 + [st.sampled_from(HOSTILE_STRINGS)]
    )
    if huge:
        options.append(st.sampled_from(METACHARACTERS[:12]).map(lambda s: _huge(f"word {s} ")))
    return st.one_of(*options).map(lambda text: text if text.strip() else f"{text}x")


@functools.cache
def lone_surrogate_texts() -> st.SearchStrategy[str]:
    """Text holding a lone surrogate (not valid Unicode: cannot be encoded as UTF-8)."""
    return st.builds(
        lambda before, surrogate, after: before + surrogate + after,
        st.text(max_size=5),
        st.characters(categories=_SURROGATE),
        st.text(max_size=5),
    )


@functools.cache
def raw_texts(*, huge: bool = False) -> st.SearchStrategy[str]:
    """Any str a caller may pass as text: valid memory text, blank, or with lone surrogates.

    Args:
        huge: also draw (rarely) texts of :data:`MiB` characters.
    """
    return st.one_of(
        memory_texts(huge=huge),
        memory_texts(huge=False),
        st.sampled_from(("", " ", "\n\t ", "\u3000")),
        lone_surrogate_texts(),
    )


@functools.cache
def _offsets() -> st.SearchStrategy[timezone]:
    whole_minutes = st.integers(min_value=-14 * 60, max_value=14 * 60).map(
        lambda minutes: timezone(timedelta(minutes=minutes))
    )
    odd = st.timedeltas(
        min_value=-timedelta(hours=23, minutes=59), max_value=timedelta(hours=23, minutes=59)
    ).map(timezone)
    return whole_minutes | odd


@functools.cache
def instants(*, naive: bool = True) -> st.SearchStrategy[datetime]:
    """Datetimes of the whole range: UTC, fixed offsets (also sub-minute and beyond ±14:00),
    IANA zones, and (when ``naive``) naive ones.
    """
    options: list[st.SearchStrategy[datetime]] = [
        st.datetimes(timezones=st.just(UTC)),
        st.datetimes(timezones=_offsets()),
        st.datetimes(timezones=st.timezones()),
        st.sampled_from(
            (
                datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
                datetime(9999, 12, 31, 23, 59, tzinfo=timezone(timedelta(hours=-14))),
                datetime(2024, 3, 10, 2, 30, tzinfo=timezone(timedelta(seconds=1))),
            )
        ),
    ]
    if naive:
        options.append(st.datetimes())
    return st.one_of(*options)


@functools.cache
def valid_instants() -> st.SearchStrategy[datetime]:
    """Aware datetimes every store keeps exactly: UTC, whole-minute offsets within ±14:00 and IANA
    zones, years 2 to 9998 (so the UTC instant exists too).
    """
    offsets = st.integers(min_value=-14 * 60, max_value=14 * 60).map(
        lambda minutes: timezone(timedelta(minutes=minutes))
    )
    low, high = datetime(2, 1, 1), datetime(9998, 12, 31)
    return st.one_of(
        st.datetimes(low, high, timezones=st.just(UTC)),
        st.datetimes(low, high, timezones=offsets),
        st.datetimes(low, high, timezones=st.timezones()),
    )


@functools.cache
def pooled_ids(size: int = 6) -> st.SearchStrategy[MemoryId]:
    """Ids from a small pool, so the same id is drawn for objects of different types."""
    return st.integers(min_value=0, max_value=size - 1).map(
        lambda n: MemoryId.deterministic("charmem-fuzz-pool", n)
    )


@functools.cache
def scenes() -> st.SearchStrategy[Scene]:
    """Valid scenes that are hard to store: whole-minute offsets (any zone), up to four
    participants of every kind (a pooled id, a name, a description, or all three; repeats
    possible), a setting or none, up to three custom key/values (empty values included); text
    from :func:`memory_texts` without the huge ones.
    """
    texts = memory_texts(huge=False)
    maybe_texts = st.none() | texts
    participants = st.one_of(
        st.builds(SceneParticipant, entity_id=pooled_ids()),
        st.builds(SceneParticipant, name=texts),
        st.builds(SceneParticipant, description=texts),
        st.builds(SceneParticipant, entity_id=pooled_ids(), name=texts, description=maybe_texts),
    )
    settings_ = (
        st.none()
        | st.builds(SceneSetting, key=texts, words=maybe_texts)
        | st.builds(SceneSetting, words=texts)
    )
    whole_minutes = valid_instants().filter(lambda moment: _whole_minutes(moment.utcoffset()))
    return st.builds(
        Scene,
        at=whole_minutes,
        participants=st.lists(participants, max_size=4),
        setting=settings_,
        custom_values=st.dictionaries(texts, texts | st.just(""), max_size=3),
    )


def _whole_minutes(offset: timedelta | None) -> bool:
    return offset is not None and offset % timedelta(minutes=1) == timedelta(0)


@functools.cache
def any_value() -> st.SearchStrategy[Any]:
    """A value of a wrong type for most fields: numbers, bytes, text, containers, ``None``."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(max_size=8),
        st.binary(max_size=8),
        st.datetimes(),
        st.uuids(),
        st.just(object()),
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=2),
        max_leaves=4,
    )


def fuzz_settings(suite_examples: int) -> settings:
    """Settings of one fuzz test: ``suite_examples`` derandomised examples, or a long run.

    With :data:`FUZZ_EXAMPLES_ENV` set (e.g. ``CHARMEM_FUZZ_EXAMPLES=5000``) the test runs that
    many examples from a random seed (pass ``--hypothesis-seed`` to pytest to repeat one); without
    it, ``suite_examples`` examples from a fixed seed, so the suite is fast and reproducible. No
    deadline (stores touch the disk); no example database (fuzz findings are kept as ``@example``).

    Args:
        suite_examples: examples in the ordinary test suite (count).
    """
    raw = os.environ.get(FUZZ_EXAMPLES_ENV, "").strip()
    long_run = int(raw) if raw else 0
    return settings(
        max_examples=long_run or suite_examples,
        deadline=None,
        derandomize=not long_run,
        database=None,
        suppress_health_check=(HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much),
        print_blob=True,
    )
