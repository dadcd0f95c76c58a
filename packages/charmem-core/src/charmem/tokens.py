"""Token counters for :meth:`ContinuityContextPack.render`, and the floor every count keeps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

__all__ = ["MAX_CHARS_PER_TOKEN", "WhitespaceTokenCounter", "count_with_floor", "token_floor"]

#: The most characters one token may stand for: no count is below one token per this many
#: characters (:func:`token_floor`). 4 is the usual rule of thumb for LLM tokenizers on English.
MAX_CHARS_PER_TOKEN: Final = 4


def token_floor(text: str) -> int:
    """The fewest tokens a count of ``text`` may give: one per 4 characters, rounded up.

    The rule: a text of ``k`` characters (code points, whitespace and line breaks included)
    counts at least ``ceil(k / MAX_CHARS_PER_TOKEN)`` tokens. Tokenizers can count a long text
    as almost nothing (WordPiece counts any word of more than 100 characters as one ``[UNK]``
    and whitespace as nothing; a word counter counts a 40,000-character word as one), so a
    budget in tokens would not bound the prompt's length. Under this floor
    ``render(max_tokens=N)`` is at most ``4 * N`` characters: both built-in counters apply it
    (:func:`count_with_floor`), and ``render`` applies it to every count it takes, so a
    third-party counter that undercounts cannot lengthen the prompt either.

    Args:
        text: any string.

    Returns:
        int: ``ceil(len(text) / MAX_CHARS_PER_TOKEN)`` (0 for ``""``).
    """
    return -(-len(text) // MAX_CHARS_PER_TOKEN)


def count_with_floor(count: Callable[[str], int], text: str) -> int:
    r"""``count`` line by line, each line never below its :func:`token_floor`.

    ``text`` is cut before every line feed (``"a\nb"`` is ``"a"`` and ``"\nb"``); each line
    counts ``max(count(line), token_floor(line))`` and the counts add up. Flooring line by line,
    not the whole text, keeps a counter additive over lines when ``count`` is: the count of
    lines joined by line breaks is the sum of the counts of the first line and of each further
    line with its break, so a budget met line by line is met by the joined text, exactly.

    Args:
        count: the underlying count of a text without the floor (for example word pieces).
        text: any string.

    Returns:
        int: the floored count (>= ``token_floor(text)``; 0 for ``""``).
    """
    first, *rest = text.split("\n")
    return sum(max(count(line), token_floor(line)) for line in (first, *(f"\n{r}" for r in rest)))


class WhitespaceTokenCounter:
    """Counts whitespace-separated words, floored at one token per 4 characters.

    A rough stand-in for a model tokenizer: each line counts ``max(words, token_floor(line))``
    (:func:`count_with_floor`). On English prose the floor usually decides (a word with its
    space and punctuation averages more than 4 characters): the 4,124 turns of the LoCoMo
    conversations (93,912 words) count 129,145, where all-MiniLM-L6-v2's WordPiece finds
    121,633 word pieces. The pack names it (``"whitespace"``) so readers know. It is
    ``TOKEN_COUNTER=whitespace``, the default only when no real tokenizer is installed
    (charmem-local-embed registers ``local``).
    """

    name = "whitespace"

    def count(self, text: str) -> int:
        """Whitespace-separated words, line by line never below :func:`token_floor`."""
        return count_with_floor(_words, text)


def _words(text: str) -> int:
    return len(text.split())
