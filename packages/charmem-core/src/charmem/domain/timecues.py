"""Explicit dates in a query, read as event-time periods (the time cues of retrieval).

"What did Nate cook on 9 November, 2022?" asks about what happened on that day. This module
recognises absolute English dates only, so a match is never a guess:

* a day: ``9 November 2022``, ``9 Nov, 2022``, ``November 9, 2022``, ``November 9th 2022``,
  ``2022-11-09``;
* a month: ``November 2022``, ``Nov, 2022``;
* a year: ``2022`` (1900-2099, as a word of its own, not part of a longer number or date).

Relative expressions ("last week") and dates without a year are left alone: their meaning needs
a reference time and a locale that a query does not carry. A day becomes the period from the
start of the day before to the end of the day after (UTC; the policy's ``time_cue_day_margin``),
absorbing time zones; a month or a year its whole span.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from charmem.domain.scoring import DEFAULT_SCORING

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


def _day(year: int, month: int, day: int, margin: timedelta) -> tuple[datetime, datetime] | None:
    try:
        start = datetime(year, month, day, tzinfo=UTC)
    except ValueError:  # 31 February: not a date
        return None
    return start - margin, start + timedelta(days=1) + margin


def _month(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def _period(match: re.Match[str], *, iso: bool, day_margin: timedelta) -> tuple[datetime, datetime] | None:
    """The period one matched date names (``None`` for a day that does not exist)."""
    groups = match.groupdict()
    if iso:
        return _day(int(groups["y"]), int(groups["m"]), int(groups["d"]), day_margin)
    year = int(groups["year"])
    if groups.get("day") is not None:
        return _day(year, _MONTHS[groups["month"].lower()], int(groups["day"]), day_margin)
    if groups.get("month") is not None:
        return _month(year, _MONTHS[groups["month"].lower()])
    return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)


def time_cues(
    text: str, *, day_margin: timedelta = DEFAULT_SCORING.time_cue_day_margin
) -> tuple[tuple[datetime, datetime], ...]:
    """The event-time periods that explicit dates in ``text`` name, in order of appearance.

    Args:
        text: a query.
        day_margin: how far a named day extends on each side (default one day).

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
            period = _period(match, iso=index == 0, day_margin=day_margin)
            if period is None:
                continue
            taken[match.start() : match.end()] = [True] * (match.end() - match.start())
            found.append((match.start(), period))
    return tuple(dict.fromkeys(period for _start, period in sorted(found)))
