"""Occasions: the episodes a scene brings to mind by who, where and when, not by what.

An :class:`OccasionQuery` names the conditions an episode must meet (all of them); a graph store
that answers it (:class:`~charmem.ports.OccasionReader`) returns :class:`Occasion` values newest
first. :func:`occasion_matches` is the rule, the one every store's answer must agree with.
"""

from __future__ import annotations

from datetime import datetime

import attrs

from charmem.domain import _fields
from charmem.domain._fields import optional_id
from charmem.domain.ids import MemoryId
from charmem.domain.model import Episode
from charmem.domain.rules import normalise_name
from charmem.errors import DraftValidationError

__all__ = ["Occasion", "OccasionQuery", "local_month_day", "occasion_matches", "occasion_order"]


def _month_day(value: object) -> tuple[int, int] | None:
    if value is None:
        return None
    if not isinstance(value, tuple) or len(value) != 2:
        raise DraftValidationError(f"month_day must be a (month, day) pair, not {value!r}", field="month_day")
    month, day = value
    try:
        datetime(2000, month, day)  # a leap year: 29 February is a day
    except (TypeError, ValueError) as exc:
        raise DraftValidationError(
            f"month_day {value!r} is not a day of the year", field="month_day"
        ) from exc
    return (month, day)


def _name_key(value: str | None) -> str | None:
    return None if value is None else normalise_name(value)


def _limit(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DraftValidationError(f"{attribute.name} must be a positive int, not {value!r}", field="limit")


@attrs.frozen(kw_only=True)
class OccasionQuery:
    """Episodes to bring to mind: every condition given holds; ``None`` means no condition.

    Attributes:
        limit: most occasions returned (count), the newest first.
        at_or_before: the episode happened at or before this instant.
        participant: the episode involves this notion (an ``involves`` link: a participant
            given by id, in the scene or the episode's participants, or a speaker).
        participant_name: the episode's scene lists a participant of this name, compared under
            :func:`~charmem.domain.rules.normalise_name`.
        setting_key: the episode's scene setting has this key (exact).
        custom_value: ``(key, value)``: the episode's scene has this custom value (exact).
        between: ``(start, end)``: the episode happened inside it (inclusive).
        month_day: ``(month, day)``: the episode's local date (in its own UTC offset) has this
            month and day.
        before_year: the episode's local year is earlier than this.

    Raises:
        DraftValidationError: a non-positive limit, a naive instant, a day that does not exist.
    """

    limit: int = attrs.field(validator=_limit)
    at_or_before: datetime | None = attrs.field(default=None, validator=_fields.aware)
    participant: MemoryId | None = attrs.field(default=None, converter=optional_id)
    participant_name: str | None = attrs.field(default=None, converter=_name_key)
    setting_key: str | None = None
    custom_value: tuple[str, str] | None = None
    between: tuple[datetime, datetime] | None = None
    month_day: tuple[int, int] | None = attrs.field(default=None, converter=_month_day)
    before_year: int | None = None


@attrs.frozen
class Occasion:
    """An episode a query found: its id and when it happened (``occurred_at``)."""

    episode_id: MemoryId
    occurred_at: datetime


def local_month_day(when: datetime) -> tuple[int, int]:
    """The month and day of ``when`` in its own offset (where it was lived)."""
    return (when.month, when.day)


def occasion_matches(episode: Episode, query: OccasionQuery, *, involves: bool) -> bool:
    """Whether ``episode`` meets every condition of ``query``.

    Args:
        episode: the stored episode.
        query: the conditions.
        involves: whether the episode has an ``involves`` link to ``query.participant`` (the
            caller knows it from the graph's links; ignored when no participant is asked for).
    """
    when = episode.occurred_at
    scene = episode.scene
    checks = (
        query.at_or_before is None or when <= query.at_or_before,
        query.participant is None or involves,
        query.participant_name is None
        or (scene is not None and any(_named(p.name, query.participant_name) for p in scene.participants)),
        query.between is None or query.between[0] <= when <= query.between[1],
        query.month_day is None or local_month_day(when) == query.month_day,
        query.before_year is None or when.year < query.before_year,
        query.setting_key is None
        or (scene is not None and scene.setting is not None and scene.setting.key == query.setting_key),
        query.custom_value is None
        or (scene is not None and scene.custom_values.get(query.custom_value[0]) == query.custom_value[1]),
    )
    return all(checks)


def _named(name: str | None, key: str) -> bool:
    return name is not None and normalise_name(name) == key


def occasion_order(occasion: Occasion) -> tuple[float, str]:
    """Newest first, then by id: the order every store returns occasions in."""
    return (-occasion.occurred_at.timestamp(), str(occasion.episode_id))
