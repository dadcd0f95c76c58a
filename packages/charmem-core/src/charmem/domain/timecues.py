"""Dates and relative times in a query, read as event-time periods (the time cues of retrieval).

"What did Nate cook on 9 November, 2022?" asks about what happened on that day; "what did we
talk about last week?" about what happened in the week before the reference time (the scene's
``at``, else ``as_of``, else now: :func:`charmem.domain.context.reference_time`). English only.

Absolute forms, read with or without a reference time:

* a day: ``9 November 2022``, ``9 Nov, 2022``, ``November 9, 2022``, ``November 9th 2022``,
  ``2022-11-09``;
* a month: ``November 2022``, ``Nov, 2022``;
* a season: ``summer 2023``, ``the spring of 2023``, ``fall, 2022``;
* a year: ``2022`` (1900-2099, as a word of its own, not part of a longer number or date).

Relative forms, read only against a reference time (its own calendar and time zone):

* a day: ``today``, ``tonight``, ``this morning|afternoon|evening``, ``yesterday``, ``last
  night``, ``the day before yesterday``, ``tomorrow``, ``the day after tomorrow``, ``last
  Monday`` (the latest Monday before the reference day), ``next Friday`` (the first after it);
* a count back: ``3 days ago``, ``two weeks ago``, ``a month ago``, ``a couple of years ago``,
  ``a few weeks ago`` (2-4), ``several months ago`` (3-6), ``this time last year`` (the same
  date a year back); numbers as digits or words up to ninety-nine (``twenty-one``, ``twenty
  one``);
* a span up to the reference day: ``the past week``, ``the last three months``, ``this past
  year``, ``earlier this week|month|year``;
* a calendar period: ``last|this|next week|weekend|month|year`` (ISO weeks, Monday to Sunday; a
  weekend is the Saturday and Sunday of its week);
* a season: ``last|this|next spring|summer|autumn|fall|winter``.

How wide each period is grows with how vague its words are. A day is the day widened by
``time_cue_day_margin`` on each side (time zones). A count back is the day that many units
before the reference day, widened by ``time_cue_count_margin`` of the unit on each side (at
least the day margin): "two months ago" covers what rounds to two months. ``this time last
year|month|week`` is the same date one unit back widened by the count margin of the next smaller
unit (a month, a week, a day; at least the day margin): around that date, not anywhere in that
year. A calendar period is its span; a season runs from its meteorological start (1 March, June,
September, December: northern hemisphere) to the end of its astronomical span (the next equinox
or solstice), so both readings of "summer" are inside. A winter belongs to the year it starts in
(``winter 2022`` is December 2022 to March 2023). ``this summer`` is the summer nearest the
reference day, ``last summer`` the latest whose whole period (to its astronomical end) is over
by it, ``next summer`` the first that starts after it: on 13 March 2024 winter is still running,
so ``last winter`` is December 2022 to March 2023 until 24 March.

Words are whole words; a hyphen joined to a letter joins one word ("twenty-one" is not "one",
"non-yesterday" not "yesterday"), while a prefix before a month or season of a year narrows
inside it ("mid-November 2022" is November 2022). A calendar period, weekday, season, ``last
night`` or ``the last ...`` span followed by ``of`` names another period ("the last week of
June", "her last year of school") and is not read.

Left alone, because reading them would be a guess: dates without a year ("on 9 November"),
weekday names without ``last``/``next``, counts forward ("in two weeks"), and vague words
("recently", "lately", "the other day");
a caller who means "recently" asks for the ``recency`` preference of the retrieval context.
Not read either: a month with ``last``/``next`` ("last May"), a date with a time of day
("2022-11-09T10:00"), dates in digits and slashes ("11/09/2022") and year ranges
("1999-2001"). "a year ago today" is two cues, "a year ago" and "today" (``this time last
year`` is the same date a year back).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta, tzinfo

import attrs

from charmem.domain.scoring import DEFAULT_SCORING, ScoringPolicy

__all__ = ["Period", "happened_in", "month_in_a_date", "time_cues"]

#: A half-open ``[start, end)`` event-time period, UTC.
Period = tuple[datetime, datetime]

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
_WEEKDAYS = {
    name: number
    for number, name in enumerate(
        ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
    )
}
#: Season -> the month its meteorological span starts in (three months long).
_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
#: From a season's meteorological end to the end of its astronomical span: the equinoxes and
#: solstices fall on the 20th to 23rd of March, June, September and December.
_ASTRONOMICAL_LAG = timedelta(days=23)
_NUMBER_WORDS = (
    *("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"),
    *("eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen"),
    "nineteen",
)
_TENS = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")


def _number_words() -> dict[str, int]:
    """Number words one to ninety-nine; a compound as ``twenty-one`` or ``twenty one``."""
    words = {word: n for n, word in enumerate(_NUMBER_WORDS, start=1)}
    for tens, base in zip(_TENS, range(20, 100, 10), strict=True):
        words[tens] = base
        for unit, n in zip(_NUMBER_WORDS[:9], range(1, 10), strict=True):
            words[f"{tens}-{unit}"] = words[f"{tens} {unit}"] = base + n
    return words


#: Count words -> the (fewest, most) units they mean.
_COUNTS: Mapping[str, tuple[int, int]] = {
    "a": (1, 1),
    "an": (1, 1),
    "a couple of": (2, 2),
    "a couple": (2, 2),
    "a few": (2, 4),
    "few": (2, 4),
    "several": (3, 6),
    "couple of": (2, 2),
    **{word: (n, n) for word, n in _number_words().items()},
}
#: Nominal length of a unit, for the margin of a count back.
_UNIT_DAYS = {"day": 1.0, "week": 7.0, "month": 365.25 / 12, "year": 365.25}

# A hyphen joined to a letter joins one word: "non-yesterday" and "twenty-one" are not
# "yesterday" and "one". A hyphen between digits is a range ("8-9 November 2022"), one before a
# space or another hyphen punctuation ("yesterday--the party").
_LETTER = r"[^\W\d_]"
_W = rf"(?<!\w)(?<!{_LETTER}-)"  # a word starts here
_E = rf"(?!\w)(?!-{_LETTER})"  # a word ends here
#: Before a month or season name of a year, a prefix narrows inside it: "mid-November 2022".
_W_NAMED = r"(?<!\w)"
#: "the last week of June", "last Monday of the month": ``of`` names another period than the
#: one before (or after) the reference, so the relative form is not read there ("of course"
#: names nothing).
_NOT_OF = r"(?!\s+of(?!\w)(?!\s+course(?!\w)))"
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")"
_ORDINAL = r"(?:st|nd|rd|th)?"
_DAY = rf"(?P<day>[0-3]?\d){_ORDINAL}"
#: What joins a date's parts around a month name (a space: any run of whitespace):
#: "9 May", "9th of May"; "May 9", "Nov. 9"; "May 2023", "May, 2023", "Nov. 2022".
_DAY_TO_MONTH = r" (?:of )?"
_MONTH_TO_DAY = r"\.? "
_MONTH_TO_YEAR = r"\.?,? "
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_SEASON = r"(?P<season>" + "|".join(_SEASONS) + r")"
_WEEKDAY = r"(?P<weekday>" + "|".join(_WEEKDAYS) + r")"
_COUNT = (
    r"(?P<count>\d{1,3}|"
    + "|".join(word.replace(" ", r"\s+") for word in sorted(_COUNTS, key=len, reverse=True))
    + r")"
)
_UNIT = r"(?P<unit>day|week|month|year)s?"


@attrs.frozen(kw_only=True)
class _Reading:
    """What a match is read against: the reference day and zone (``None``: no reference)."""

    today: date | None
    zone: tzinfo
    day_margin: timedelta
    count_margin: float


# ----------------------------------------------------------------------------- calendar steps


def _at(day: date, zone: tzinfo) -> datetime:
    """The start of ``day`` in ``zone``, as a UTC instant."""
    return datetime(day.year, day.month, day.day, tzinfo=zone).astimezone(UTC)


def _days(first: date, last: date, reading: _Reading, margin: timedelta | None = None) -> Period:
    """The days ``first`` to ``last`` (inclusive), widened by ``margin`` (default the day margin)."""
    widen = reading.day_margin if margin is None else margin
    return _at(first, reading.zone) - widen, _at(last + timedelta(days=1), reading.zone) + widen


def _span(start: date, end: date, reading: _Reading) -> Period:
    return _at(start, reading.zone), _at(end, reading.zone)


def _add_months(day: date, months: int) -> date:
    """``day`` moved by whole calendar months (the day clamped to the month's length)."""
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    return date(year, month + 1, min(day.day, calendar.monthrange(year, month + 1)[1]))


def _add(day: date, unit: str, count: int) -> date:
    """``day`` moved by ``count`` units (day, week, month or year; negative: back)."""
    if unit == "day":
        return day + timedelta(days=count)
    if unit == "week":
        return day + timedelta(weeks=count)
    return _add_months(day, count * (12 if unit == "year" else 1))


def _unit_start(day: date, unit: str) -> date:
    """The first day of the calendar ``unit`` holding ``day`` (ISO weeks start on Monday)."""
    if unit == "week":
        return day - timedelta(days=day.weekday())
    if unit == "month":
        return day.replace(day=1)
    return day.replace(month=1, day=1)


def _season_span(season: str, year: int) -> tuple[date, date]:
    """The meteorological span of ``season`` starting in ``year`` (``[start, end)``)."""
    start = date(year, _SEASONS[season], 1)
    return start, _add_months(start, 3)


def _season(season: str, year: int, reading: _Reading) -> Period:
    start, end = _season_span(season, year)
    return _span(start, end + _ASTRONOMICAL_LAG, reading)


def _count(text: str) -> tuple[int, int]:
    words = " ".join(text.lower().split())
    return (int(words), int(words)) if words.isdigit() else _COUNTS[words]


# ----------------------------------------------------------------------------- readers


def _iso_day(groups: Mapping[str, str], reading: _Reading) -> Period:
    day = date(int(groups["y"]), int(groups["m"]), int(groups["d"]))
    return _days(day, day, reading)


def _named_day(groups: Mapping[str, str], reading: _Reading) -> Period:
    day = date(int(groups["year"]), _MONTHS[groups["month"].lower()], int(groups["day"]))
    return _days(day, day, reading)


def _named_month(groups: Mapping[str, str], reading: _Reading) -> Period:
    start = date(int(groups["year"]), _MONTHS[groups["month"].lower()], 1)
    return _span(start, _add_months(start, 1), reading)


def _named_season(groups: Mapping[str, str], reading: _Reading) -> Period:
    return _season(groups["season"].lower(), int(groups["year"]), reading)


def _named_year(groups: Mapping[str, str], reading: _Reading) -> Period:
    start = date(int(groups["year"]), 1, 1)
    return _span(start, _add_months(start, 12), reading)


_DAY_WORDS = {
    "today": 0,
    "tonight": 0,
    "this morning": 0,
    "this afternoon": 0,
    "this evening": 0,
    "yesterday": -1,
    "last night": -1,
    "the day before yesterday": -2,
    "tomorrow": 1,
    "the day after tomorrow": 2,
}


def _day_word(groups: Mapping[str, str], today: date, reading: _Reading) -> Period:
    day = today + timedelta(days=_DAY_WORDS[" ".join(groups["word"].lower().split())])
    return _days(day, day, reading)


def _weekday(groups: Mapping[str, str], today: date, reading: _Reading) -> Period:
    wanted = _WEEKDAYS[groups["weekday"].lower()]
    if groups["rel"].lower() == "last":
        day = today - timedelta(days=(today.weekday() - wanted - 1) % 7 + 1)
    else:
        day = today + timedelta(days=(wanted - today.weekday() - 1) % 7 + 1)
    return _days(day, day, reading)


def _count_margin(unit: str, reading: _Reading) -> timedelta:
    """How far a day counted back in ``unit`` extends on each side: at least the day margin."""
    return max(reading.day_margin, timedelta(days=_UNIT_DAYS[unit] * reading.count_margin))


def _ago(groups: Mapping[str, str], today: date, reading: _Reading) -> Period:
    fewest, most = _count(groups["count"])
    unit = groups["unit"].lower()
    margin = _count_margin(unit, reading)
    return _days(_add(today, unit, -most), _add(today, unit, -fewest), reading, margin)


#: The next smaller unit, whose count margin widens "this time last <unit>" (the same date).
_FINER = {"week": "day", "month": "week", "year": "month"}


def _this_time_last(groups: Mapping[str, str], today: date, reading: _Reading) -> Period:
    unit = groups["unit"].lower()
    day = _add(today, unit, -1)
    return _days(day, day, reading, _count_margin(_FINER[unit], reading))


def _past(groups: Mapping[str, str], today: date, reading: _Reading) -> Period:
    _fewest, most = _count(groups["count"]) if groups.get("count") else (1, 1)
    return _days(_add(today, groups["unit"].lower(), -most), today, reading)


def _earlier(groups: Mapping[str, str], today: date, reading: _Reading) -> Period:
    start = _unit_start(today, groups["unit"].lower())
    return _at(start, reading.zone), _days(today, today, reading)[1]


def _calendar(groups: Mapping[str, str], today: date, reading: _Reading) -> Period:
    offset = {"last": -1, "this": 0, "next": 1}[groups["rel"].lower()]
    unit = groups["unit"].lower().replace("-", "")  # "week-end" is a weekend
    if unit == "weekend":
        saturday = _add(_unit_start(today, "week"), "week", offset) + timedelta(days=5)
        return _days(saturday, saturday + timedelta(days=1), reading)
    start = _add(_unit_start(today, unit), unit, offset)
    return _span(start, _add(start, unit, 1), reading)


def _relative_season(groups: Mapping[str, str], today: date, reading: _Reading) -> Period:
    season, rel = groups["season"].lower(), groups["rel"].lower()
    spans = {year: _season_span(season, year) for year in range(today.year - 2, today.year + 2)}
    if rel == "last":  # the latest whose whole period, to its astronomical end, is over
        year = max(year for year, (_start, end) in spans.items() if end + _ASTRONOMICAL_LAG <= today)
    elif rel == "next":
        year = min(year for year, (start, _end) in spans.items() if start > today)
    else:
        year = min(spans, key=lambda y: _distance(spans[y], today))
    return _season(season, year, reading)


def _distance(span: tuple[date, date], day: date) -> int:
    """Days from ``day`` to the ``[start, end)`` span (0 inside it)."""
    start, end = span
    return max((start - day).days, (day - end).days + 1, 0)


def _relative(
    reader: Callable[[Mapping[str, str], date, _Reading], Period],
) -> Callable[[Mapping[str, str], _Reading], Period | None]:
    """A reader of a relative form: nothing without a reference time."""

    def read(groups: Mapping[str, str], reading: _Reading) -> Period | None:
        return None if reading.today is None else reader(groups, reading.today, reading)

    return read


def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern.replace(" ", r"\s+"), re.IGNORECASE)


#: Forms in the order they claim text: longer and more specific first.
_FORMS: tuple[tuple[re.Pattern[str], Callable[[Mapping[str, str], _Reading], Period | None]], ...] = (
    (_compile(rf"{_W}(?P<y>(?:19|20)\d\d)-(?P<m>[01]\d)-(?P<d>[0-3]\d){_E}"), _iso_day),
    (_compile(rf"{_W}{_DAY}{_DAY_TO_MONTH}{_MONTH}{_MONTH_TO_YEAR}{_YEAR}{_E}"), _named_day),
    (_compile(rf"{_W_NAMED}{_MONTH}{_MONTH_TO_DAY}{_DAY},? {_YEAR}{_E}"), _named_day),
    (_compile(rf"{_W_NAMED}{_MONTH}{_MONTH_TO_YEAR}{_YEAR}{_E}"), _named_month),
    (_compile(rf"{_W_NAMED}{_SEASON}(?: of|,)? {_YEAR}{_E}"), _named_season),
    (_compile(rf"{_W}(?P<word>the day (?:before yesterday|after tomorrow)){_E}"), _relative(_day_word)),
    (_compile(rf"{_W}(?P<word>today|tonight|yesterday|tomorrow){_E}"), _relative(_day_word)),
    (_compile(rf"{_W}(?P<word>last night){_E}{_NOT_OF}"), _relative(_day_word)),
    (_compile(rf"{_W}(?P<word>this (?:morning|afternoon|evening)){_E}"), _relative(_day_word)),
    (_compile(rf"{_W}{_COUNT} {_UNIT} ago{_E}"), _relative(_ago)),
    (_compile(rf"{_W}this time last (?P<unit>week|month|year){_E}"), _relative(_this_time_last)),
    (_compile(rf"{_W}(?:the|this) past (?:{_COUNT} )?{_UNIT}{_E}"), _relative(_past)),
    (_compile(rf"{_W}(?:the|this) last (?:{_COUNT} )?{_UNIT}{_E}{_NOT_OF}"), _relative(_past)),
    (_compile(rf"{_W}earlier this (?P<unit>week|month|year){_E}"), _relative(_earlier)),
    (
        _compile(rf"{_W}(?P<rel>last|this|next) (?P<unit>weekend|week-end|week|month|year){_E}{_NOT_OF}"),
        _relative(_calendar),
    ),
    (_compile(rf"{_W}(?P<rel>last|next) {_WEEKDAY}{_E}{_NOT_OF}"), _relative(_weekday)),
    (_compile(rf"{_W}(?P<rel>last|this|next) {_SEASON}{_E}{_NOT_OF}"), _relative(_relative_season)),
    (re.compile(rf"(?<![\w/.:-]){_YEAR}(?![\w/.:-])"), _named_year),
)


#: A day joined before a month name; a day or year joined after it, or a year of two digits.
_DAY_BEFORE_MONTH = _compile(rf"\d{_ORDINAL}{_DAY_TO_MONTH}$")
_NUMBER_AFTER_MONTH = _compile(rf"(?:{_MONTH_TO_DAY}|{_MONTH_TO_YEAR})(?:\d|['\u2019]\d\d(?!\d))")


def month_in_a_date(before: str, after: str) -> bool:
    """Whether a month name between the texts ``before`` and ``after`` is part of a date.

    It is when a day stands before it, joined as :func:`time_cues` joins one ("9 May", "the
    3rd of May"), or a day or year after it ("May 9", "May 2023", "May, 2023", "Nov. 2022"), or
    a year of two digits ("May '23"). Every month :func:`time_cues` reads as part of a day or a
    month of a year is in a date; so are the dates it leaves alone (no year: "9 May").

    Args:
        before: the text up to the month name.
        after: the text from the end of the month name on.

    Returns:
        bool: True when a number is joined to the month as a date's day or year.
    """
    return bool(_DAY_BEFORE_MONTH.search(before) or _NUMBER_AFTER_MONTH.match(after))


def time_cues(
    text: str, *, reference: datetime | None = None, policy: ScoringPolicy = DEFAULT_SCORING
) -> tuple[Period, ...]:
    """The event-time periods the dates and relative times in ``text`` name, in order of appearance.

    Args:
        text: a query.
        reference: the instant relative forms are read against, timezone-aware (its calendar
            day and zone); ``None`` reads absolute forms only.
        policy: ``time_cue_day_margin`` (how far a day extends on each side) and
            ``time_cue_count_margin`` (the fraction of its unit a count back extends on each side).

    Returns:
        tuple[tuple[datetime, datetime], ...]: half-open ``[start, end)`` periods, UTC,
        de-duplicated; empty when the text names no time. Each character of the text belongs to
        at most one form (``9 November 2022`` is one day, not also a month and a year); a date
        that does not exist (31 February 2023) or falls outside the calendar names nothing, and
        its text is not read as another form (not as February 2023, nor as 2023).
    """
    reading = _Reading(
        today=reference.date() if reference is not None else None,
        zone=(reference.tzinfo if reference is not None else None) or UTC,
        day_margin=policy.time_cue_day_margin,
        count_margin=policy.time_cue_count_margin,
    )
    taken = [False] * len(text)
    found: list[tuple[int, Period]] = []
    for pattern, reader in _FORMS:
        for match in pattern.finditer(text):
            if any(taken[match.start() : match.end()]):
                continue
            try:
                period = reader(match.groupdict(), reading)
            except (ValueError, OverflowError):  # 31 February, or past the calendar's ends
                period = None  # names nothing, and no other form reads its text
            else:
                if period is None:  # a relative form without a reference: another form may read it
                    continue
            taken[match.start() : match.end()] = [True] * (match.end() - match.start())
            if period is not None:
                found.append((match.start(), period))
    return tuple(dict.fromkeys(period for _start, period in sorted(found)))


def happened_in(when: datetime, periods: Sequence[Period]) -> bool:
    """Whether ``when`` (an event time) falls inside one of the half-open ``[start, end)`` ``periods``."""
    return any(start <= when < end for start, end in periods)
