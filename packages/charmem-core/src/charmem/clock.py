"""Clocks: the source of defaulted timestamps."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["SystemClock"]


class SystemClock:
    """The wall clock in UTC."""

    def now(self) -> datetime:
        """The current instant, timezone-aware (UTC)."""
        return datetime.now(UTC)
