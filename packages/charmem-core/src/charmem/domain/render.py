"""A pack as prompt text within a token budget, and when two texts are the same line of it."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from charmem.domain.pack import CurrencyStatus, ObligationDirection, PackEntity, PackItem
from charmem.tokens import token_floor

if TYPE_CHECKING:
    from charmem.ports import TokenCounter

__all__ = ["render_lines", "same_text_key"]


def _cost(counter: TokenCounter, text: str) -> int:
    """What ``text`` costs in a render: the counter's count, never below :func:`token_floor`.

    Lines are counted each with the line break before it, so for a counter additive over lines
    (both built-in ones are) the costs add up to the count of the rendered text.
    """
    return max(counter.count(text), token_floor(text))


def _longest_fitting(count: int, fits: Callable[[int], bool]) -> int:
    """The largest ``k`` in ``1..count`` with ``fits(k)`` found by binary search, or 0.

    About log2(count) calls, so cutting a long memory stays cheap with a real tokenizer. Only a
    ``k`` that was tried and fits is returned, so the result fits even when ``fits`` is not
    monotone in ``k``.
    """
    best, low, high = 0, 1, count
    while low <= high:
        middle = (low + high) // 2
        if fits(middle):
            best, low = middle, middle + 1
        else:
            high = middle - 1
    return best


def _cut_to_fit(separator: str, prefix: str, text: str, counter: TokenCounter, budget: int) -> str:
    """The longest ``prefix + cut + " ..."`` whose cost after ``separator`` fits ``budget``.

    ``cut`` is the longest run of whole words of ``text`` (split at spaces) that fits; when not
    even the first word fits (a 40,000-character word), that word is cut by characters.

    Returns:
        str: the cut line, or ``""`` when not one character of ``text`` fits after ``prefix``.
    """

    def fits(candidate: str) -> bool:
        return _cost(counter, f"{separator}{prefix}{candidate} ...") <= budget

    words = text.split(" ")
    kept = _longest_fitting(len(words), lambda k: fits(" ".join(words[:k])))
    if kept:
        return f"{prefix}{' '.join(words[:kept])} ..."
    first = words[0]
    chars = _longest_fitting(len(first), lambda k: fits(first[:k]))
    return f"{prefix}{first[:chars]} ..." if chars else ""


_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x1f\x7f-\x9f]")


def _prompt_safe(text: str) -> str:
    """Text for prompt lines: control characters dropped, line breaks indented.

    Every line break ``str.splitlines`` knows (LF, CR, CR LF, VT, FF, U+001C-U+001E,
    U+0085, U+2028, U+2029) starts an indented continuation line, and the other control
    characters (C0, DEL, C1) are dropped, so a stored text can never start a line of its own
    that reads as another memory.
    """
    return "\n    ".join(_CONTROL.sub("", line).rstrip() for line in text.splitlines())


def _one_line(name: str) -> str:
    """A name on one line: every whitespace run, line breaks included, becomes one space."""
    return " ".join(name.split())


def same_text_key(text: str) -> str:
    """What makes two memory texts the same line of a rendered pack.

    The rule: texts are the same when they are equal as
    :meth:`~charmem.domain.retrieval.ContinuityContextPack.render` writes them (control
    characters dropped, line breaks escaped) once every run of whitespace is one space and the
    ends are stripped. Case and punctuation count: ``"Us."`` and ``"us."`` differ. Pack assembly
    keeps the higher-ranked of two items with the same key and status and lists the other as a
    ``"duplicate_text"`` :class:`~charmem.domain.pack.Omission`.

    Args:
        text: an item's text.

    Returns:
        str: the comparison key.
    """
    return " ".join(_prompt_safe(text).split())


def render_lines(
    items: Sequence[PackItem], entities: Sequence[PackEntity], counter: TokenCounter, budget: int | None
) -> str:
    """The prompt text of a pack (:meth:`~charmem.domain.retrieval.ContinuityContextPack.render`).

    Args:
        items: the pack's items in rank order.
        entities: the pack's notions.
        counter: counts the tokens of each line.
        budget: the budget in tokens; ``None`` means unbounded.

    Returns:
        str: the header line of known names (within half the budget), then one line per item
        until the budget is spent (``- [date] type (qualifiers): text``, the qualifiers of
        :func:`_qualifiers`); empty when there are no items.
    """
    if not items:
        return ""
    out: list[str] = []
    used = 0
    header = _header_line(entities, counter, budget)
    if header:
        out.append(header)
        used = _cost(counter, header)
    for n, item in enumerate(items):
        when = item.occurred_at.date().isoformat()
        kind = item.derived_type.value if item.derived_type else item.object_type.value
        prefix, text = f"- [{when}] {kind}{_qualifiers(item)}: ", _prompt_safe(item.text)
        separator = "\n" if out else ""  # each line is counted with the break before it
        cost = _cost(counter, separator + prefix + text)
        if budget is not None and used + cost > budget:
            if n == 0:  # the best memory alone is over budget: keep as much of it as fits
                cut = _cut_to_fit(separator, prefix, text, counter, budget - used)
                if cut:
                    out.append(cut)
            break
        out.append(prefix + text)
        used += cost
    return "\n".join(out)


#: How an obligation's direction reads in a prompt, while it is open and once it is settled.
_DIRECTION_WORDS = {
    ObligationDirection.OWED_BY_CHARACTER: ("I owe", "I owed"),
    ObligationDirection.OWED_TO_CHARACTER: ("owed to me", "was owed to me"),
}


def _qualifiers(item: PackItem) -> str:
    """What a line says of an item besides its type: status, settlement, direction.

    ``""`` for a current item that is no obligation (the line of format 1), else a parenthesis:
    ``" (superseded)"``, ``" (I owe)"``, ``" (owed to me)"``, ``" (settled)"``,
    ``" (settled, I owed)"``, ``" (settled, was owed to me)"``, in that order when several hold.
    """
    words = [] if item.status is CurrencyStatus.CURRENT else [item.status.value]
    settled = bool(item.resolved_by)
    if settled:
        words.append("settled")
    if item.direction is not None:
        words.append(_DIRECTION_WORDS[item.direction][settled])
    return f" ({', '.join(words)})" if words else ""


def _header_line(entities: Sequence[PackEntity], counter: TokenCounter, budget: int | None) -> str:
    """The line naming the known notions, cut to half the budget (``""`` when none is named).

    Half, so a long list of names never crowds out the memories.
    """
    named = [e for e in entities if e.names]
    if not named:
        return ""
    ordered = sorted(named, key=lambda e: (e.names, e.id))
    known = "; ".join(", ".join(map(_one_line, e.names)) for e in ordered)
    prefix, text = "Known people and things: ", _prompt_safe(known)
    line = prefix + text
    if budget is not None and _cost(counter, line) > budget // 2:
        line = _cut_to_fit("", prefix, text, counter, budget // 2)
    return line
