"""Dates and relative times in a query become event-time periods (charmem.domain.timecues)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from charmem import CharacterMemory, ContinuityContextPack, MemoryId, RememberInput, RetrievalContext
from charmem.domain.scoring import ScoringPolicy
from charmem.domain.timecues import time_cues


def day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "periods"),
    [
        ("What did Nate make on 9 November, 2022?", [(day(2022, 11, 8), day(2022, 11, 11))]),
        ("on November 9th 2022", [(day(2022, 11, 8), day(2022, 11, 11))]),
        ("on 9 Nov. 2022", [(day(2022, 11, 8), day(2022, 11, 11))]),
        # A prefix narrows inside the month or season; a hyphen between digits is a range.
        ("in mid-November 2022", [(day(2022, 11, 1), day(2022, 12, 1))]),
        ("the late-summer 2023 trip", [(day(2023, 6, 1), day(2023, 9, 24))]),
        ("on 8-9 November 2022", [(day(2022, 11, 8), day(2022, 11, 11))]),
        ("the note of 2022-11-09", [(day(2022, 11, 8), day(2022, 11, 11))]),
        ("Which city did John recommend in January 2024?", [(day(2024, 1, 1), day(2024, 2, 1))]),
        ("in December, 2023", [(day(2023, 12, 1), day(2024, 1, 1))]),
        ("How many times to the beach in 2023?", [(day(2023, 1, 1), day(2024, 1, 1))]),
        (
            "first 3 May 2023 then June 2023",
            [(day(2023, 5, 2), day(2023, 5, 5)), (day(2023, 6, 1), day(2023, 7, 1))],
        ),
    ],
)
def test_dates_become_periods(text: str, periods: list[tuple[datetime, datetime]]) -> None:
    assert list(time_cues(text)) == periods


@pytest.mark.parametrize(
    "text",
    [
        "What did Maria do last weekend?",
        "room 12345",
        "version 2023-1",
        "call 555-2023",
        "on 9 November",
        "May I?",
    ],
)
def test_no_absolute_date_no_period(text: str) -> None:
    assert time_cues(text) == ()


@given(st.text())
def test_any_text_gives_ordered_utc_periods(text: str) -> None:
    for start, end in time_cues(text):
        assert start < end
        assert start.tzinfo is UTC


# ----------------------------------------------------------------------------- relative forms

#: The clock of the ``memory`` fixture (conftest): Wednesday 8 May 2024, 13:56 UTC.
T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)

#: A Wednesday in a leap year.
WEDNESDAY = datetime(2024, 3, 13, 15, 30, tzinfo=UTC)


def around(
    first: datetime, last: datetime, margin: timedelta = timedelta(days=1)
) -> tuple[datetime, datetime]:
    """The days ``first`` to ``last`` (inclusive) widened by ``margin`` on each side."""
    return first - margin, last + timedelta(days=1) + margin


@pytest.mark.parametrize(
    ("text", "period"),
    [
        ("What did we do today?", around(day(2024, 3, 13), day(2024, 3, 13))),
        ("what's on tonight", around(day(2024, 3, 13), day(2024, 3, 13))),
        ("the walk this morning", around(day(2024, 3, 13), day(2024, 3, 13))),
        ("What did Maria say yesterday?", around(day(2024, 3, 12), day(2024, 3, 12))),
        ("the party last night", around(day(2024, 3, 12), day(2024, 3, 12))),
        ("the day before yesterday", around(day(2024, 3, 11), day(2024, 3, 11))),
        ("TOMORROW", around(day(2024, 3, 14), day(2024, 3, 14))),
        ("the day after tomorrow", around(day(2024, 3, 15), day(2024, 3, 15))),
        ("3 days ago", around(day(2024, 3, 10), day(2024, 3, 10))),
        ("three days ago", around(day(2024, 3, 10), day(2024, 3, 10))),
        ("a day ago", around(day(2024, 3, 12), day(2024, 3, 12))),
        ("two weeks ago", around(day(2024, 2, 28), day(2024, 2, 28), timedelta(days=3.5))),
        ("a week ago", around(day(2024, 3, 6), day(2024, 3, 6), timedelta(days=3.5))),
        ("two months ago", around(day(2024, 1, 13), day(2024, 1, 13), timedelta(days=365.25 / 24))),
        ("a couple of months ago", around(day(2024, 1, 13), day(2024, 1, 13), timedelta(days=365.25 / 24))),
        ("a couple months ago", around(day(2024, 1, 13), day(2024, 1, 13), timedelta(days=365.25 / 24))),
        ("a few weeks ago", around(day(2024, 2, 14), day(2024, 2, 28), timedelta(days=3.5))),
        ("several months ago", around(day(2023, 9, 13), day(2023, 12, 13), timedelta(days=365.25 / 24))),
        ("an year ago", around(day(2023, 3, 13), day(2023, 3, 13), timedelta(days=365.25 / 2))),
        ("10 years ago", around(day(2014, 3, 13), day(2014, 3, 13), timedelta(days=365.25 / 2))),
        ("this time last year", around(day(2023, 3, 13), day(2023, 3, 13), timedelta(days=365.25 / 24))),
        ("this time last month", around(day(2024, 2, 13), day(2024, 2, 13), timedelta(days=3.5))),
        ("this time last week", around(day(2024, 3, 6), day(2024, 3, 6))),
        ("twenty-one days ago", around(day(2024, 2, 21), day(2024, 2, 21))),
        ("twenty one days ago", around(day(2024, 2, 21), day(2024, 2, 21))),
        ("Twenty-Two years ago", around(day(2002, 3, 13), day(2002, 3, 13), timedelta(days=365.25 / 2))),
        ("ninety-nine days ago", around(day(2023, 12, 5), day(2023, 12, 5))),
        ("thirty days ago", around(day(2024, 2, 12), day(2024, 2, 12))),
        ("in the last twenty-one days", around(day(2024, 2, 21), day(2024, 3, 13))),
        ("what happened yesterday--the party", around(day(2024, 3, 12), day(2024, 3, 12))),
        ("last week-end", around(day(2024, 3, 9), day(2024, 3, 10))),
        ("at last year's party", (day(2023, 1, 1), day(2024, 1, 1))),
        ("we met last week of course", (day(2024, 3, 4), day(2024, 3, 11))),
        ("last week", (day(2024, 3, 4), day(2024, 3, 11))),
        ("this week", (day(2024, 3, 11), day(2024, 3, 18))),
        ("next week", (day(2024, 3, 18), day(2024, 3, 25))),
        ("last weekend", around(day(2024, 3, 9), day(2024, 3, 10))),
        ("this weekend", around(day(2024, 3, 16), day(2024, 3, 17))),
        ("next weekend", around(day(2024, 3, 23), day(2024, 3, 24))),
        ("last month", (day(2024, 2, 1), day(2024, 3, 1))),
        ("this month", (day(2024, 3, 1), day(2024, 4, 1))),
        ("next month", (day(2024, 4, 1), day(2024, 5, 1))),
        ("last year", (day(2023, 1, 1), day(2024, 1, 1))),
        ("this year", (day(2024, 1, 1), day(2025, 1, 1))),
        ("next year", (day(2025, 1, 1), day(2026, 1, 1))),
        ("earlier this year", (day(2024, 1, 1), day(2024, 3, 15))),
        ("earlier this month", (day(2024, 3, 1), day(2024, 3, 15))),
        ("earlier this week", (day(2024, 3, 11), day(2024, 3, 15))),
        ("over the past week", around(day(2024, 3, 6), day(2024, 3, 13))),
        ("in the last three months", around(day(2023, 12, 13), day(2024, 3, 13))),
        ("the last few days", around(day(2024, 3, 9), day(2024, 3, 13))),
        ("last Monday", around(day(2024, 3, 11), day(2024, 3, 11))),
        ("last Wednesday", around(day(2024, 3, 6), day(2024, 3, 6))),
        ("last thursday", around(day(2024, 3, 7), day(2024, 3, 7))),
        ("next Wednesday", around(day(2024, 3, 20), day(2024, 3, 20))),
        ("next Friday", around(day(2024, 3, 15), day(2024, 3, 15))),
        ("last summer", (day(2023, 6, 1), day(2023, 9, 24))),
        ("this summer", (day(2024, 6, 1), day(2024, 9, 24))),
        ("next summer", (day(2024, 6, 1), day(2024, 9, 24))),
        ("last winter", (day(2022, 12, 1), day(2023, 3, 24))),
        ("this winter", (day(2023, 12, 1), day(2024, 3, 24))),
        ("next winter", (day(2024, 12, 1), day(2025, 3, 24))),
        ("last spring", (day(2023, 3, 1), day(2023, 6, 24))),
        ("last fall", (day(2023, 9, 1), day(2023, 12, 24))),
        ("this autumn", (day(2023, 9, 1), day(2023, 12, 24))),
    ],
)
def test_relative_forms_read_against_the_reference(text: str, period: tuple[datetime, datetime]) -> None:
    assert time_cues(text, reference=WEDNESDAY) == (period,)


@pytest.mark.parametrize(
    ("text", "period"),
    [
        ("in the spring of 2023", (day(2023, 3, 1), day(2023, 6, 24))),
        ("summer 2023", (day(2023, 6, 1), day(2023, 9, 24))),
        ("the fall, 2022", (day(2022, 9, 1), day(2022, 12, 24))),
        ("winter of 2022", (day(2022, 12, 1), day(2023, 3, 24))),
    ],
)
def test_a_season_of_a_year_needs_no_reference(text: str, period: tuple[datetime, datetime]) -> None:
    assert time_cues(text) == (period,)
    assert time_cues(text, reference=WEDNESDAY) == (period,)


@pytest.mark.parametrize(
    ("reference", "text", "period"),
    [
        # Month ends: a month back clamps to the shorter month (leap and common years).
        (
            datetime(2024, 3, 31, tzinfo=UTC),
            "a month ago",
            around(day(2024, 2, 29), day(2024, 2, 29), timedelta(days=365.25 / 24)),
        ),
        (
            datetime(2023, 3, 31, tzinfo=UTC),
            "a month ago",
            around(day(2023, 2, 28), day(2023, 2, 28), timedelta(days=365.25 / 24)),
        ),
        (
            datetime(2024, 2, 29, tzinfo=UTC),
            "a year ago",
            around(day(2023, 2, 28), day(2023, 2, 28), timedelta(days=365.25 / 2)),
        ),
        (datetime(2024, 3, 1, tzinfo=UTC), "yesterday", around(day(2024, 2, 29), day(2024, 2, 29))),
        (datetime(2024, 1, 2, tzinfo=UTC), "last month", (day(2023, 12, 1), day(2024, 1, 1))),
        (datetime(2024, 1, 2, tzinfo=UTC), "last week", (day(2023, 12, 25), day(2024, 1, 1))),
        # ISO weeks: Sunday is the last day of its week, Monday the first.
        (datetime(2024, 3, 17, 23, tzinfo=UTC), "this week", (day(2024, 3, 11), day(2024, 3, 18))),
        (datetime(2024, 3, 18, 1, tzinfo=UTC), "last week", (day(2024, 3, 11), day(2024, 3, 18))),
        (datetime(2024, 3, 17, tzinfo=UTC), "this weekend", around(day(2024, 3, 16), day(2024, 3, 17))),
        (datetime(2024, 3, 18, tzinfo=UTC), "last weekend", around(day(2024, 3, 16), day(2024, 3, 17))),
        (datetime(2024, 3, 18, tzinfo=UTC), "last Monday", around(day(2024, 3, 11), day(2024, 3, 11))),
        # Seasons: inside one, "last" is the one before; just after one, "this" is that one.
        (datetime(2023, 7, 3, tzinfo=UTC), "last summer", (day(2022, 6, 1), day(2022, 9, 24))),
        (datetime(2023, 10, 3, tzinfo=UTC), "last summer", (day(2023, 6, 1), day(2023, 9, 24))),
        (datetime(2023, 10, 3, tzinfo=UTC), "this summer", (day(2023, 6, 1), day(2023, 9, 24))),
        (datetime(2023, 10, 3, tzinfo=UTC), "this winter", (day(2023, 12, 1), day(2024, 3, 24))),
        (datetime(2024, 1, 20, tzinfo=UTC), "last winter", (day(2022, 12, 1), day(2023, 3, 24))),
        # "last": the latest season whose whole period (to its astronomical end, the 24th) is
        # over; no flip at the meteorological end (1 March) while it is still winter.
        (datetime(2024, 2, 29, tzinfo=UTC), "last winter", (day(2022, 12, 1), day(2023, 3, 24))),
        (datetime(2024, 3, 1, tzinfo=UTC), "last winter", (day(2022, 12, 1), day(2023, 3, 24))),
        (datetime(2024, 3, 23, 23, tzinfo=UTC), "last winter", (day(2022, 12, 1), day(2023, 3, 24))),
        (datetime(2024, 3, 24, tzinfo=UTC), "last winter", (day(2023, 12, 1), day(2024, 3, 24))),
        (datetime(2023, 9, 23, tzinfo=UTC), "last summer", (day(2022, 6, 1), day(2022, 9, 24))),
        (datetime(2023, 9, 24, tzinfo=UTC), "last summer", (day(2023, 6, 1), day(2023, 9, 24))),
    ],
)
def test_calendar_edges(reference: datetime, text: str, period: tuple[datetime, datetime]) -> None:
    assert time_cues(text, reference=reference) == (period,)


def test_the_reference_day_is_read_in_its_own_time_zone() -> None:
    tokyo = timezone(timedelta(hours=9))
    late = datetime(2024, 3, 13, 23, 30, tzinfo=tokyo)  # 14:30 UTC, the same day in Tokyo
    early = datetime(2024, 3, 14, 0, 30, tzinfo=tokyo)  # 15:30 UTC on the 13th, the 14th in Tokyo
    start = datetime(2024, 3, 12, tzinfo=tokyo)
    assert time_cues("yesterday", reference=late) == ((start - timedelta(days=1), start + timedelta(days=2)),)
    assert time_cues("yesterday", reference=early)[0][0] == start
    assert time_cues("yesterday", reference=late)[0][0].tzinfo is UTC


def test_margins_come_from_the_policy() -> None:
    policy = ScoringPolicy(time_cue_day_margin=timedelta(0), time_cue_count_margin=1.0)
    assert time_cues("yesterday", reference=WEDNESDAY, policy=policy) == (
        (day(2024, 3, 12), day(2024, 3, 13)),
    )
    assert time_cues("two weeks ago", reference=WEDNESDAY, policy=policy) == (
        around(day(2024, 2, 28), day(2024, 2, 28), timedelta(days=7)),
    )


@pytest.mark.parametrize(
    "text",
    [
        "What did Maria do last weekend?",
        "two months ago",
        "yesterday",
        "last summer",
    ],
)
def test_relative_forms_need_a_reference(text: str) -> None:
    assert time_cues(text) == ()


@pytest.mark.parametrize(
    "text",
    [
        "What happened recently?",
        "lately she runs",
        "the other day",
        "How long ago was Caroline's 18th birthday?",
        "on Monday",
        "the last time we met",
        "lastweek",
        "blast weekend",
        "yesterdays",
        "todays",
        "the summer camp",
        "did she fall last",
        "several days",
        "the next meeting",
        "in two weeks",
        # A hyphen between letters joins one word.
        "non-yesterday",
        "pre-yesterday",
        "yesterday-ish",
        "the non-today list",
        "a one-two days ago",
        "ex-last week",
        "last week-long trip",
        "the seventy-something years ago",
        "summer-2023",
        # "of" names another period than the one before or after the reference.
        "the last week of June",
        "the last month of the year",
        "the last three months of his life",
        "in the last week of the trip",
        "last week of the term",
        "next month of the lease",
        "the last Monday of the month",
        "the last summer of the decade",
        "the last night of the festival",
        "her last year of school",
        # Documented as not read.
        "last May",
        "next March",
        "2022-11-09T10:00",
        "11/09/2022",
        "1999-2001",
    ],
)
def test_words_that_name_no_period(text: str) -> None:
    assert time_cues(text, reference=WEDNESDAY) == ()


def test_a_year_ago_today_is_two_cues() -> None:
    """As documented: "a year ago" and "today"; "this time last year" is the one date."""
    assert time_cues("a year ago today", reference=WEDNESDAY) == (
        around(day(2023, 3, 13), day(2023, 3, 13), timedelta(days=365.25 / 2)),
        around(day(2024, 3, 13), day(2024, 3, 13)),
    )


@pytest.mark.parametrize(
    "text",
    ["31 February 2023", "on February 30, 2023", "the 29th of February, 2023", "0 May 2023", "in 2023-02-29"],
)
def test_a_date_that_does_not_exist_names_nothing(text: str) -> None:
    """Not the month or year around it either: the text names a day, and that day is not there."""
    assert time_cues(text) == ()
    assert time_cues("29 February 2024") == ((day(2024, 2, 28), day(2024, 3, 2)),)


def test_the_last_week_of_a_named_month_is_that_month() -> None:
    """The relative form is not read; the month of a year, an absolute form, still is."""
    assert time_cues("the last week of June 2023", reference=WEDNESDAY) == (
        (day(2023, 6, 1), day(2023, 7, 1)),
    )


def test_forms_in_order_of_appearance() -> None:
    text = "Did we talk last week about what she did in the summer of 2023 and yesterday?"
    assert time_cues(text, reference=WEDNESDAY) == (
        (day(2024, 3, 4), day(2024, 3, 11)),
        (day(2023, 6, 1), day(2023, 9, 24)),
        around(day(2024, 3, 12), day(2024, 3, 12)),
    )


_REFERENCES = st.datetimes(
    min_value=datetime(1901, 1, 1),
    max_value=datetime(2098, 12, 31),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=-11)), timezone(timedelta(hours=13))]),
)
_UNITS = {
    "day": timedelta(days=1),
    "week": timedelta(weeks=1),
    "month": timedelta(days=30),
    "year": timedelta(days=365),
}


@given(_REFERENCES, st.integers(min_value=0, max_value=99), st.sampled_from(sorted(_UNITS)))
def test_a_count_back_holds_the_point_it_names(reference: datetime, count: int, unit: str) -> None:
    (period,) = time_cues(f"{count} {unit}s ago", reference=reference)
    start, end = period
    point = reference - count * _UNITS[unit]
    assert start < end
    # Calendar months and years differ from 30 and 365 days by a day per unit at most.
    slack = timedelta(days=count + 1) if unit in ("month", "year") else timedelta(0)
    assert start - slack <= point < end + slack


@given(
    _REFERENCES,
    st.sampled_from(
        [
            ("today", timedelta(0)),
            ("yesterday", timedelta(days=-1)),
            ("tomorrow", timedelta(days=1)),
            ("this week", timedelta(0)),
            ("last week", timedelta(weeks=-1)),
            ("next week", timedelta(weeks=1)),
            ("this month", timedelta(0)),
            ("this year", timedelta(0)),
            ("last year", timedelta(days=-366)),
            ("earlier this year", timedelta(0)),
            ("the past week", timedelta(days=-7)),
        ]
    ),
)
def test_a_relative_form_holds_its_point(reference: datetime, form: tuple[str, timedelta]) -> None:
    text, offset = form
    (period,) = time_cues(text, reference=reference)
    start, end = period
    assert start < end
    # A year back is 365 or 366 days back (a leap day between).
    points = (
        [reference + offset, reference - timedelta(days=365)] if text == "last year" else [reference + offset]
    )
    assert any(start <= point < end for point in points)


@given(
    _REFERENCES,
    st.sampled_from(["last", "this", "next"]),
    st.sampled_from(["spring", "summer", "autumn", "winter"]),
)
def test_a_season_is_about_three_months(reference: datetime, rel: str, season: str) -> None:
    (period,) = time_cues(f"{rel} {season}", reference=reference)
    start, end = period
    assert timedelta(days=89 + 23) <= end - start <= timedelta(days=92 + 23)
    if rel == "last":
        assert start < reference
    if rel == "next":
        assert start > reference - timedelta(days=1)


@given(st.text(), _REFERENCES)
def test_any_text_gives_ordered_utc_periods_against_any_reference(text: str, reference: datetime) -> None:
    for start, end in time_cues(text, reference=reference):
        assert start < end
        assert start.tzinfo is UTC


# ----------------------------------------------------------------------------- in retrieval


def _kept(pack: ContinuityContextPack, episode: MemoryId) -> bool:
    """Whether the pack holds ``episode`` or its observation, with the ``time_cue`` signal."""
    return any(
        episode in (item.id, *item.provenance_ids) and "time_cue" in item.signals for item in pack.items
    )


async def test_retrieval_reads_relative_times_against_its_reference(memory: CharacterMemory) -> None:
    """Of two equally close memories, the one a relative time in the query names ranks first,
    read against now (the memory's clock, T0 = Wednesday 8 May 2024) or, given, ``as_of``."""
    text = "We cooked coconut ice cream."
    january = (
        await memory.remember(RememberInput(text, summary=text, occurred_at=day(2024, 1, 15)))
    ).object_ids[0]
    may = (
        await memory.remember(RememberInput(text, summary=text, occurred_at=T0 - timedelta(hours=20)))
    ).object_ids[0]
    query = "the coconut ice cream we cooked {}"

    yesterday = await memory.retrieve(RetrievalContext(query=query.format("yesterday")))
    assert _kept(yesterday, may) and not _kept(yesterday, january)
    assert yesterday.telemetry["time_cue_periods"] == 1
    months = await memory.retrieve(RetrievalContext(query=query.format("four months ago")))
    assert _kept(months, january) and not _kept(months, may)

    a_month_later = T0 + timedelta(days=30)
    as_of = await memory.retrieve(RetrievalContext(query=query.format("a month ago"), as_of=a_month_later))
    assert _kept(as_of, may) and not _kept(as_of, january)
    off = await memory.retrieve(RetrievalContext(query=query.format("yesterday"), time_cues=False))
    assert off.telemetry["time_cue_periods"] == 0
    assert not any("time_cue" in item.signals for item in off.items)
