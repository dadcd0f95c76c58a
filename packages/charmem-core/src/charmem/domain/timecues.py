"""Explicit dates in a query, read as event-time periods (DESIGN §6.5 "Time").

"What did Nate cook on 9 November, 2022?" asks about what happened on that day. This module
recognises absolute English dates only, so a match is never a guess:

* a day: ``9 November 2022``, ``9 Nov, 2022``, ``November 9, 2022``, ``November 9th 2022``,
  ``2022-11-09``;
* a month: ``November 2022``, ``Nov, 2022``;
* a year: ``2022`` (1900-2099, as a word of its own, not part of a longer number or date).

Relative expressions ("last week") and dates without a year are left alone: their meaning needs
a reference time and a locale that a query does not carry. A day becomes the period from the
start of the day before to the end of the day after (UTC), absorbing time zones; a month or a
year its whole span.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

__all__ = ["time_cues"]

_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_PATTERNS = (
    re.compile(r"(?<![\w-])(?P<y>(?:19|20)\d\d)-(?P<m>[01]\d)-(?P<d>[0-3]\d)(?![\w-])"),
    re.compile(rf"(?<!\w){_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}(?!\w)", re.IGNORECASE),
    re.compile(rf"(?<!\w){_MONTH}\s+{_DAY},?\s+{_YEAR}(?!\w)", re.IGNORECASE),
    re.compile(rf"(?<!\w){_MONTH},?\s+{_YEAR}(?!\w)", re.IGNORECASE),
    re.compile(rf"(?<![\w/.:-]){_YEAR}(?![\w/.:-])"),
)


def _day(year: int, month: int, day: int) -> tuple[datetime, datetime] | None:
    try:
        start = datetime(year, month, day, tzinfo=UTC)
    except ValueError:  # 31 February: not a date
        return None
    return start - timedelta(days=1), start + timedelta(days=2)


def _month(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def time_cues(text: str) -> tuple[tuple[datetime, datetime], ...]:
    """The event-time periods that explicit dates in ``text`` name, in order of appearance.

    Args:
        text: a query.

    Returns:
        tuple[tuple[datetime, datetime], ...]: half-open ``[start, end)`` periods, UTC,
        de-duplicated; empty when the text names no absolute date. Each character of the text
        belongs to at most one date (``9 November 2022`` is one day, not also a month and a year).
    """
    taken = [False] * len(text)
    found: list[tuple[int, tuple[datetime, datetime]]] = []
    for index, pattern in enumerate(_PATTERNS):
        for match in pattern.finditer(text):
            if any(taken[match.start() : match.end()]):
                continue
            groups = match.groupdict()
            period: tuple[datetime, datetime] | None
            if index == 0:
                period = _day(int(groups["y"]), int(groups["m"]), int(groups["d"]))
            elif groups.get("day") is not None:
                period = _day(int(groups["year"]), _MONTHS[groups["month"].lower()], int(groups["day"]))
            elif groups.get("month") is not None:
                period = _month(int(groups["year"]), _MONTHS[groups["month"].lower()])
            else:
                year = int(groups["year"])
                period = (datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC))
            if period is None:
                continue
            taken[match.start() : match.end()] = [True] * (match.end() - match.start())
            found.append((match.start(), period))
    return tuple(dict.fromkeys(period for _start, period in sorted(found)))
