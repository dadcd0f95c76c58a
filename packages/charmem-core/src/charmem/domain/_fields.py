"""Field converters and validators shared by the domain types (private)."""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from charmem.domain.ids import MemoryId, as_memory_id
from charmem.errors import DraftValidationError

SCHEMA_VERSION = 1

_MINUTE = timedelta(minutes=1)
_MAX_OFFSET = timedelta(hours=14)


class ChoiceEnum(enum.Enum):
    """An enum looked up by member, value or name in any case.

    Anything else raises :class:`DraftValidationError` listing the choices (also a ``ValueError``).
    """

    @classmethod
    def _missing_(cls, value: object) -> Any:
        if isinstance(value, str):
            wanted = value.strip().lower()
            for member in cls:
                if wanted in (str(member.value).lower(), member.name.lower()):
                    return member
        choices = ", ".join(repr(member.value) for member in cls)
        raise DraftValidationError(
            f"{value!r} is not a valid {cls.__name__}; choose one of {choices}", field=cls.__name__
        )


def items_of(values: Any, what: str, field: str) -> list[Any]:
    """The items of a caller's collection; a lone string, bytes or a non-iterable is refused."""
    if isinstance(values, str | bytes):
        raise DraftValidationError(
            f"expected a sequence of {what}, got a single {type(values).__name__}", field=field
        )
    try:
        return list(values)
    except TypeError as exc:
        raise DraftValidationError(
            f"expected a sequence of {what}, not {type(values).__name__}", field=field
        ) from exc


def id_set(values: Iterable[Any] | None) -> tuple[MemoryId, ...]:
    """Canonical id collection: de-duplicated and sorted (order never carries meaning).

    Raises:
        DraftValidationError: ``values`` is not a collection, or holds a non-UUID.
    """
    if values is None:
        return ()
    return tuple(sorted({as_memory_id(value) for value in items_of(values, "ids", "ids")}))


def as_tuple(values: Iterable[Any]) -> tuple[Any, ...]:
    """Freeze any iterable into a tuple (keeps order).

    Raises:
        DraftValidationError: ``values`` is not iterable (or is a lone string).
    """
    return tuple(items_of(values, "items", "items"))


def text_set(values: Iterable[Any] | None) -> tuple[str, ...]:
    """Canonical collection of strings: de-duplicated and sorted; each must be valid Unicode."""
    if values is None:
        return ()
    found: set[str] = set()
    for value in items_of(values, "strings", "refs"):
        if not isinstance(value, str) or not value.strip():
            raise DraftValidationError(f"references must be non-blank strings, got {value!r}", field="refs")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise DraftValidationError("a reference contains a lone surrogate", field="refs") from exc
        found.add(value)
    return tuple(sorted(found))


def as_float(value: Any) -> Any:
    """Salience and other numbers are stored as floats, so ``1`` and ``1.0`` are equal content."""
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def empty_if_none(value: Any) -> Any:
    """An optional text given as ``None`` is empty (``summary=None`` means no summary)."""
    return "" if value is None else value


def optional_id(value: Any) -> MemoryId | None:
    return None if value is None else as_memory_id(value)


def aware(_instance: object, attribute: Any, value: Any) -> None:
    """Attrs validator: a datetime must carry a timezone every store can keep.

    The offset must be a whole number of minutes within ±14:00 (what ``xsd:dateTime`` and RFC 3339
    allow, so every graph store keeps it exactly) and the instant must exist in UTC (years 1 to
    9999 once normalised), since equality compares UTC-normalised instants
    (:func:`charmem.domain.rules.canonical_content`).
    """
    if value is None:
        return
    if not isinstance(value, datetime):
        raise DraftValidationError(
            f"{attribute.name} must be a datetime, not {type(value).__name__}", field=attribute.name
        )
    try:
        offset = value.utcoffset()
    except Exception as exc:
        raise DraftValidationError(
            f"{attribute.name} has a tzinfo that failed to give its offset: {type(exc).__name__}: {exc}",
            field=attribute.name,
        ) from exc
    if value.tzinfo is None or offset is None:
        raise DraftValidationError(
            f"{attribute.name} is a naive datetime; pass a timezone-aware one "
            "(e.g. datetime(..., tzinfo=timezone.utc))",
            field=attribute.name,
        )
    if offset % _MINUTE or abs(offset) > _MAX_OFFSET:
        raise DraftValidationError(
            f"{attribute.name} has the UTC offset {offset}; use an offset of whole minutes "
            "between -14:00 and +14:00 (as xsd:dateTime and RFC 3339 require)",
            field=attribute.name,
        )
    try:
        value.astimezone(UTC)
    except OverflowError as exc:
        raise DraftValidationError(
            f"{attribute.name}={value.isoformat()} lies outside the years 1-9999 once normalised to "
            "UTC; use an instant inside that range",
            field=attribute.name,
        ) from exc


def boolean(_instance: object, attribute: Any, value: Any) -> None:
    """Attrs validator: a flag is a real ``bool`` (``"no"`` would otherwise count as true)."""
    if not isinstance(value, bool):
        raise DraftValidationError(
            f"{attribute.name} must be True or False, not {type(value).__name__}", field=attribute.name
        )


def instance_of(*kinds: type) -> Any:
    """Attrs validator factory: the value is an instance of one of ``kinds``.

    Like ``attrs.validators.instance_of``, but raises :class:`DraftValidationError`.
    """
    names = " or ".join(kind.__name__ for kind in kinds)

    def check(_instance: object, attribute: Any, value: Any) -> None:
        if not isinstance(value, kinds):
            raise DraftValidationError(
                f"{attribute.name} must be a {names}, not {type(value).__name__}", field=attribute.name
            )

    return check


def salience(_instance: object, attribute: Any, value: Any) -> None:
    """Attrs validator: salience is a finite number in [0, 1]."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DraftValidationError(f"{attribute.name} must be a number in [0, 1]", field=attribute.name)
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise DraftValidationError(
            f"{attribute.name} must be a finite number in [0, 1], got {value!r}", field=attribute.name
        )


def text(_instance: object, attribute: Any, value: Any) -> None:
    """Attrs validator: memory text is a non-blank ``str`` encodable as UTF-8."""
    if value is None:
        raise DraftValidationError(f"{attribute.name} is required (a non-blank str)", field=attribute.name)
    plain(_instance, attribute, value)
    if not value.strip():
        raise DraftValidationError(f"{attribute.name} must not be blank", field=attribute.name)


def plain(_instance: object, attribute: Any, value: Any) -> None:
    """Attrs validator: an optional ``str`` that is valid Unicode (no lone surrogates)."""
    if value is None:
        return
    if not isinstance(value, str):
        raise DraftValidationError(
            f"{attribute.name} must be a str, not {type(value).__name__}", field=attribute.name
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise DraftValidationError(
            f"{attribute.name} contains a lone surrogate at index {exc.start}; "
            "memory text must be valid Unicode",
            field=attribute.name,
        ) from exc
