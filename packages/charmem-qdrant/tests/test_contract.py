"""The vector-index contract suite on a real Qdrant Edge shard per test.

The BM25 lexical cue is on, as ``from_settings`` opens the index by default; every contract test
passes, including the ties with a cue text (the fusion is computed client-side, see ``_fusion``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from charmem_contract import StoreFactory, VectorIndexContract, opening

from charmem.ports import VectorIndex
from charmem_qdrant import EdgeVectorIndex


class TestEdgeVectorIndex(VectorIndexContract):
    """``EdgeVectorIndex`` with the lexical cue on; every capability claimed."""

    @pytest.fixture
    async def vector_index_factory(
        self, tmp_path: Path
    ) -> AsyncIterator[StoreFactory[VectorIndex]]:
        """A shard directory per store name under this test's temporary directory.

        The lock competitor is a second index object on the shard (its WAL lock admits one opener
        per shard), refused after a short lock timeout.
        """

        def open_index(
            collection: str, *, model_id: str, vector_size: int, store: str
        ) -> VectorIndex:
            return EdgeVectorIndex(
                tmp_path / store,
                collection,
                model_id=model_id,
                vector_size=vector_size,
                lexical=True,
            )

        async def competitor(
            collection: str, *, model_id: str, vector_size: int, store: str
        ) -> None:
            index = EdgeVectorIndex(
                tmp_path / store,
                collection,
                model_id=model_id,
                vector_size=vector_size,
                lock_timeout=0.3,
            )
            await index.close()

        async with opening(open_index, competitor=competitor) as factory:
            yield factory
