"""Ports of the providers every collection shares: embeddings, token counting, the clock."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "EmbeddingProvider", "TokenCounter"]


@runtime_checkable
class EmbeddingProvider(Protocol):
    """Turns text into dense vectors.

    Attributes:
        model_id: a stable name of the model (recorded in each collection's vector marker).
        vector_size: the number of dimensions of every vector it returns.

    Contract: ``embed_documents`` returns one row per text, in input order, each of
    ``vector_size`` finite floats; the same text gives the same vector. Failures raise
    :class:`~charmem.errors.BackendError`.

    Optional: a ``preferred_batch_size`` attribute (a positive int) states how many texts one
    ``embed_documents`` call should carry to embed efficiently; bulk writes gather that many
    (:func:`~charmem.usecases.embedding.provider_batch_size`; 64 when it is absent).
    """

    @property
    def model_id(self) -> str:
        """Stable model name, recorded in each collection's vector marker."""
        ...

    @property
    def vector_size(self) -> int:
        """Dimensions of every vector returned."""
        ...

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed memory texts: ``list[list[float]]``, one row per text, ``vector_size`` columns."""
        ...

    async def embed_query(self, text: str) -> list[float]:
        """Embed a recall cue: one row of ``vector_size`` floats."""
        ...


class TokenCounter(Protocol):
    """Counts prompt tokens for :meth:`ContinuityContextPack.render`.

    Attributes:
        name: shown in the pack so readers know what a "token" was.
    """

    @property
    def name(self) -> str:
        """The counter's name, shown in the pack."""
        ...

    def count(self, text: str) -> int:
        """Number of tokens in ``text`` (>= 0)."""
        ...


class Clock(Protocol):
    """The source of defaulted timestamps: ``now()`` returns a timezone-aware instant."""

    def now(self) -> datetime:
        """The current instant, timezone-aware."""
        ...
