"""Field converters and validators shared by the domain types (private)."""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from charmem.domain.ids import MemoryId, as_memory_id
from charmem.errors import DraftValidationError

SCHEMA_VERSION = 1


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


def id_set(values: Iterable[Any] | None) -> tuple[MemoryId, ...]:
    """Canonical id collection: de-duplicated and sorted (order never carries meaning)."""
    if values is None:
        return ()
    if isinstance(values, (str, bytes)):
        raise DraftValidationError("expected a sequence of ids, got a single string", field="ids")
    return tuple(sorted({as_memory_id(value) for value in values}))


def as_tuple(values: Iterable[Any]) -> tuple[Any, ...]:
    """Freeze any iterable into a tuple (keeps order)."""
    return tuple(values)


def text_set(values: Iterable[Any] | None) -> tuple[str, ...]:
    """Canonical collection of strings: de-duplicated and sorted; each must be valid Unicode."""
    if values is None:
        return ()
    if isinstance(values, str):
        raise DraftValidationError("expected a sequence of strings, got a single string", field="refs")
    found: set[str] = set()
    for value in values:
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


def optional_id(value: Any) -> MemoryId | None:
    return None if value is None else as_memory_id(value)


def aware(_instance: object, attribute: Any, value: Any) -> None:
    """Attrs validator: a datetime must carry a timezone (DESIGN §3)."""
    if value is None:
        return
    if not isinstance(value, datetime):
        raise DraftValidationError(
            f"{attribute.name} must be a datetime, not {type(value).__name__}", field=attribute.name
        )
    if value.tzinfo is None or value.utcoffset() is None:
        raise DraftValidationError(
            f"{attribute.name} is a naive datetime; pass a timezone-aware one "
            "(e.g. datetime(..., tzinfo=timezone.utc))",
            field=attribute.name,
        )


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
