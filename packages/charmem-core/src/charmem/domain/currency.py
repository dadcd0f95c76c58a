"""Currency: whether a memory is current, superseded or suppressed.

The one place that decides a memory's :class:`~charmem.domain.retrieval.CurrencyStatus` from its
lifecycle facts, and whether a status is shown in a context pack. The reference graph, both
Oxigraph stores and retrieval call these functions; none restates the rule.

* A memory is **current** iff it is not suppressed (no ``suppress`` lifecycle record applies to
  it) and not superseded (no ``supersedes`` link points at it).
* When both apply, **suppressed beats superseded**: a forgotten memory stays forgotten whatever
  replaced it.
* An ``as_of`` view counts only what was recorded by then: a suppression by its record's
  ``recorded_at``, a supersession by its link's ``created_at`` (record time, never event time).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from charmem.domain.retrieval import CurrencyStatus

__all__ = ["currency_status", "is_current", "is_shown"]


def is_current(*, suppressed: bool, superseded: bool) -> bool:
    """Currency: current iff Active and not superseded.

    Current iff Active (not suppressed) and no incoming ``supersedes`` link.

    Args:
        suppressed: a suppression lifecycle record applies to the memory.
        superseded: at least one ``supersedes`` link points at the memory.

    Returns:
        bool: whether the memory is current.
    """
    return not suppressed and not superseded


def _recorded_by(instants: Collection[datetime], as_of: datetime | None) -> bool:
    """Whether any of ``instants`` counts in the view (all of them without ``as_of``)."""
    return any(as_of is None or at <= as_of for at in instants)


def currency_status(
    *,
    suppressed_at: Collection[datetime] = (),
    superseded_at: Collection[datetime] = (),
    as_of: datetime | None = None,
) -> CurrencyStatus:
    """A stored memory's currency in a view (:func:`is_current`; suppressed beats superseded).

    Args:
        suppressed_at: ``recorded_at`` of every ``suppress`` record targeting the memory
            (timezone-aware instants; any order).
        superseded_at: ``created_at`` of every ``supersedes`` link pointing at the memory.
        as_of: the view's record time: only instants at or before it count; ``None`` counts
            every one (the default view).

    Returns:
        CurrencyStatus: ``SUPPRESSED`` when a counted suppression applies, else ``SUPERSEDED``
        when a counted supersession applies, else ``CURRENT``.
    """
    if not suppressed_at and not superseded_at:  # the common case, whatever the view
        return CurrencyStatus.CURRENT
    suppressed = _recorded_by(suppressed_at, as_of)
    superseded = _recorded_by(superseded_at, as_of)
    if is_current(suppressed=suppressed, superseded=superseded):
        return CurrencyStatus.CURRENT
    return CurrencyStatus.SUPPRESSED if suppressed else CurrencyStatus.SUPERSEDED


def is_shown(status: CurrencyStatus, *, include_superseded: bool, include_suppressed: bool) -> bool:
    """Whether retrieval may return a memory of ``status`` as an item of a context pack.

    Current memories always are; superseded ones only with ``include_superseded``, suppressed
    ones only with ``include_suppressed`` (``RetrievalContext`` flags); the others are omitted
    with their status as the reason.

    Args:
        status: the memory's currency in the pack's view (:func:`currency_status`).
        include_superseded: the context asks for superseded memories met during recall.
        include_suppressed: the context asks for suppressed (forgotten) memories.

    Returns:
        bool: whether the memory may be an item.
    """
    return (
        status is CurrencyStatus.CURRENT
        or (status is CurrencyStatus.SUPERSEDED and include_superseded)
        or (status is CurrencyStatus.SUPPRESSED and include_suppressed)
    )
