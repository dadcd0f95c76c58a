"""Token counters for :meth:`ContinuityContextPack.render`."""

from __future__ import annotations

__all__ = ["WhitespaceTokenCounter"]


class WhitespaceTokenCounter:
    """Counts whitespace-separated words: a rough stand-in for a model tokenizer.

    It under-counts subword tokenizers by about a third on English prose; the pack names it
    (``"whitespace"``) so readers know.
    """

    name = "whitespace"

    def count(self, text: str) -> int:
        """Number of whitespace-separated words in ``text``."""
        return len(text.split())
