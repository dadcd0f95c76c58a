"""A deterministic hashing embedder for tests: no model, no network."""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections.abc import Sequence

from charmem.settings import Settings

__all__ = ["HashingEmbeddingProvider"]

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbeddingProvider:
    """Feature hashing of lower-cased words (and word bigrams) into a normalised vector.

    Texts sharing words are close; the same text always gives the same vector in every process.
    Good enough to test recall paths; not a semantic model.

    Args:
        vector_size: dimensions (default 256: fewer hash collisions between unrelated words).
        model_id: the fingerprint name (default ``"charmem-hashing-v1"``).
    """

    def __init__(self, vector_size: int = 256, model_id: str = "charmem-hashing-v1") -> None:
        if vector_size < 2:
            raise ValueError("vector_size must be at least 2")
        self._size = vector_size
        self._model_id = model_id

    @classmethod
    def from_settings(cls, settings: Settings) -> HashingEmbeddingProvider:
        """Build with the default size (``EMBEDDING_PROVIDER=hashing``)."""
        del settings
        return cls()

    @property
    def model_id(self) -> str:
        """Fingerprint name."""
        return self._model_id

    @property
    def vector_size(self) -> int:
        """Dimensions."""
        return self._size

    def embed(self, text: str) -> list[float]:
        """Embed one text synchronously: ``vector_size`` floats, unit length (or all zero)."""
        vector = [0.0] * self._size
        words = [w.lower() for w in _WORD.findall(text)]
        features = words + [f"{a} {b}" for a, b in itertools.pairwise(words)]
        for feature in features:
            digest = hashlib.blake2b(feature.encode("utf-8", "surrogatepass"), digest_size=8).digest()
            slot = int.from_bytes(digest[:4], "little") % self._size
            sign = 1.0 if digest[4] & 1 else -1.0
            vector[slot] += sign
        norm = math.sqrt(sum(v * v for v in vector))
        if norm == 0.0:
            vector[0] = 1.0
            return vector
        return [v / norm for v in vector]

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """One row per text."""
        return [self.embed(text) for text in texts]

    async def embed_query(self, text: str) -> list[float]:
        """One row."""
        return self.embed(text)
