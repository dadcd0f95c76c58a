"""Token counters for :meth:`ContinuityContextPack.render`."""

from __future__ import annotations

__all__ = ["WhitespaceTokenCounter"]


class WhitespaceTokenCounter:
    """Counts whitespace-separated words: a rough stand-in for a model tokenizer.

    It under-counts subword tokenizers on English prose: the LoCoMo conversations hold 1.3 word
    pieces per whitespace word, so a budget in words runs about 30% over in tokens. The pack
    names it (``"whitespace"``) so readers know. It is ``TOKEN_COUNTER=whitespace``, the default
    only when no real tokenizer is installed (charmem-local-embed registers ``local``).
    """

    name = "whitespace"

    def count(self, text: str) -> int:
        """Number of whitespace-separated words in ``text``."""
        return len(text.split())
