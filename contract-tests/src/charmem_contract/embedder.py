"""The embedding suite: :class:`EmbeddingProviderContract`, for :class:`~charmem.ports.EmbeddingProvider`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import pytest

from charmem.ports import EmbeddingProvider
from charmem_contract import data
from charmem_contract._base import ContractSuite
from charmem_contract.factories import CONTRACT_COLLECTION, Factory

__all__ = ["EmbeddingProviderContract"]

TEXTS = (
    "We planted tomatoes in the allotment on Saturday.",
    "Mina prefers tea to coffee in the morning.",
    "The violin lesson was moved to Thursday.",
    "short",
)


def _close(left: Sequence[float], right: Sequence[float], tolerance: float) -> bool:
    return len(left) == len(right) and all(
        math.isclose(a, b, rel_tol=0.0, abs_tol=tolerance) for a, b in zip(left, right, strict=True)
    )


class EmbeddingProviderContract(ContractSuite, suite=True):
    """Contract suite of :class:`charmem.ports.EmbeddingProvider`.

    Subclass it as ``TestMyEmbedder`` and override the one fixture ``embedding_provider_factory``:
    it yields a :class:`~charmem_contract.factories.Factory` whose ``open(collection)`` gives a
    ready provider (an embedder has no collection or store: it ignores them), for example
    ``opening(lambda collection: MyEmbedder())``. A provider is stateless from the suite's point
    of view (no empty canary), so a slow model may be loaded once per session by a session-scoped
    fixture the factory's opener returns.

    :attr:`tolerance` is the largest difference allowed between two embeddings of the same text
    (batching may change float rounding); keep it at 1e-6 or below.
    """

    capabilities: ClassVar[dict[str, str]] = {}
    optional_capabilities: ClassVar[frozenset[str]] = frozenset()
    minimum_passing: ClassVar[int] = 7
    stateful: ClassVar[bool] = False

    #: Largest per-component difference between two embeddings of one text.
    tolerance: ClassVar[float] = 1e-6

    @pytest.fixture
    def embedding_provider_factory(self) -> Factory[EmbeddingProvider]:
        """Override: yield a factory of ready embedding providers (collection and store ignored)."""
        raise NotImplementedError(
            f"{type(self).__name__} must override the embedding_provider_factory fixture to yield a "
            "Factory of EmbeddingProvider (see charmem_contract.opening)"
        )

    @pytest.fixture
    async def embedding_provider(
        self, embedding_provider_factory: Factory[EmbeddingProvider]
    ) -> EmbeddingProvider:
        """The provider the suite checks (the factory closes it if it has ``close``)."""
        return await embedding_provider_factory.open(CONTRACT_COLLECTION)

    async def test_fixture_is_an_embedding_provider(self, embedding_provider: EmbeddingProvider) -> None:
        """The fixture yields an object with the port's attributes and coroutines.

        If this fails: implement ``model_id``, ``vector_size``, ``embed_documents`` and
        ``embed_query`` (the last two as ``async def``).
        """
        assert isinstance(embedding_provider, EmbeddingProvider), (
            f"{type(embedding_provider).__name__} lacks members of charmem.ports.EmbeddingProvider"
        )

    async def test_fingerprint(self, embedding_provider: EmbeddingProvider) -> None:
        """``model_id`` is a non-blank string and ``vector_size`` a positive int, both stable.

        If this fails: expose the model's stable name and its dimension; they are recorded in every
        collection's vector marker, so they must not change between calls.
        """
        model_id, size = embedding_provider.model_id, embedding_provider.vector_size
        assert isinstance(model_id, str) and model_id.strip(), f"model_id = {model_id!r}"
        assert isinstance(size, int) and not isinstance(size, bool) and size > 0, f"vector_size = {size!r}"
        assert (embedding_provider.model_id, embedding_provider.vector_size) == (model_id, size)

    async def test_one_row_per_text_of_vector_size_finite_floats(
        self, embedding_provider: EmbeddingProvider
    ) -> None:
        """``embed_documents`` returns a list of one row per text, each ``vector_size`` finite floats.

        If this fails: convert the model output to ``list[list[float]]`` (Python floats, e.g. with
        ``.tolist()``), one row per input text, and check for NaN.
        """
        rows = await embedding_provider.embed_documents(list(TEXTS))
        assert isinstance(rows, list) and len(rows) == len(TEXTS)
        for row in rows:
            assert isinstance(row, list) and len(row) == embedding_provider.vector_size
            assert all(type(v) is float and math.isfinite(v) for v in row), (
                "rows must hold finite Python floats"
            )

    async def test_no_texts_give_no_rows(self, embedding_provider: EmbeddingProvider) -> None:
        """``embed_documents([])`` returns ``[]``.

        If this fails: return early for an empty batch (and do not call the model).
        """
        assert await embedding_provider.embed_documents([]) == []

    async def test_query_is_one_row_of_vector_size_finite_floats(
        self, embedding_provider: EmbeddingProvider
    ) -> None:
        """``embed_query`` returns one row of ``vector_size`` finite floats.

        If this fails: return a flat ``list[float]``, not a one-row matrix.
        """
        row = await embedding_provider.embed_query("what did we plant?")
        assert isinstance(row, list) and len(row) == embedding_provider.vector_size
        assert all(type(v) is float and math.isfinite(v) for v in row)

    async def test_same_text_gives_the_same_vector(self, embedding_provider: EmbeddingProvider) -> None:
        """A text embeds to the same vector every time, alone or in any batch, in input order.

        If this fails: make the model deterministic (eval mode, no dropout, fixed seeds), keep rows
        in input order, and check that padding in a batch does not change a row beyond
        :attr:`tolerance`.
        """
        forward = await embedding_provider.embed_documents(list(TEXTS))
        backward = await embedding_provider.embed_documents(list(reversed(TEXTS)))
        again = await embedding_provider.embed_documents(list(TEXTS))
        alone = [(await embedding_provider.embed_documents([text]))[0] for text in TEXTS]
        for index, text in enumerate(TEXTS):
            assert _close(forward[index], again[index], self.tolerance), f"{text!r} changed between calls"
            assert _close(forward[index], backward[-1 - index], self.tolerance), (
                f"{text!r} depends on batch order"
            )
            assert _close(forward[index], alone[index], self.tolerance), f"{text!r} depends on its batch"

    async def test_different_texts_give_different_vectors(
        self, embedding_provider: EmbeddingProvider
    ) -> None:
        """Unrelated texts do not collapse to one vector.

        If this fails: the provider returns a constant (a stub, a failed load, all-padding input).
        """
        rows = await embedding_provider.embed_documents(list(TEXTS))
        for i in range(len(rows)):
            for j in range(i + 1, len(rows)):
                assert not _close(rows[i], rows[j], 1e-4), f"{TEXTS[i]!r} and {TEXTS[j]!r} embed alike"

    async def test_hostile_texts_embed_to_finite_vectors(self, embedding_provider: EmbeddingProvider) -> None:
        """Quotes, NUL, emoji, Korean, zero-width characters... embed to finite rows of the right size.

        If this fails: pass the text to the tokenizer as is; do not strip or reject unusual
        characters, and make sure none produces NaN.
        """
        rows = await embedding_provider.embed_documents(list(data.HOSTILE_STRINGS))
        assert len(rows) == len(data.HOSTILE_STRINGS)
        bad = [
            repr(text)
            for text, row in zip(data.HOSTILE_STRINGS, rows, strict=True)
            if len(row) != embedding_provider.vector_size or not all(math.isfinite(v) for v in row)
        ]
        assert not bad, "rows of the wrong size or not finite for: " + ", ".join(bad)
        for text in data.HOSTILE_STRINGS[:4]:
            assert len(await embedding_provider.embed_query(text)) == embedding_provider.vector_size
