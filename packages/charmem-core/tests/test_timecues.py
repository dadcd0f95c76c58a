"""Absolute dates in a query become event-time periods (charmem.domain.timecues)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from charmem.domain.timecues import time_cues


def day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "periods"),
    [
        ("What did Nate make on 9 November, 2022?", [(day(2022, 11, 8), day(2022, 11, 11))]),
        ("on November 9th 2022", [(day(2022, 11, 8), day(2022, 11, 11))]),
        ("on 9 Nov. 2022", [(day(2022, 11, 8), day(2022, 11, 11))]),
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
