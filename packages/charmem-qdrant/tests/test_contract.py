"""The vector-index contract suite on a real Qdrant Edge shard per test.

The BM25 lexical cue is on, as ``from_settings`` opens the index by default; every contract test
passes, including the ties with a cue text (the fusion is computed client-side, see ``_fusion``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from charmem_contract import VectorIndexContract

from charmem.ports import VectorIndex
from charmem_qdrant import EdgeVectorIndex


class TestEdgeVectorIndex(VectorIndexContract):
    """``EdgeVectorIndex`` with the lexical cue on; every capability claimed."""

    @pytest.fixture
    async def vector_index(self, tmp_path: Path) -> AsyncIterator[VectorIndex]:
        """A new shard under this test's temporary directory."""
        self.root = tmp_path / "vectors"
        index = EdgeVectorIndex(
            self.root,
            "contract",
            model_id=self.contract_model_id,
            vector_size=self.contract_vector_size,
            lexical=True,
        )
        try:
            yield index
        finally:
            await index.close()

    async def reopen(self, index: VectorIndex, *, model_id: str, vector_size: int) -> VectorIndex:
        """The same shard directory, opened with the given fingerprint."""
        return EdgeVectorIndex(
            self.root, "contract", model_id=model_id, vector_size=vector_size, lexical=True
        )

    async def open_competitor(self, index: VectorIndex) -> None:
        """A second index object on the shard: its WAL lock admits one opener per shard."""
        competitor = EdgeVectorIndex(
            self.root,
            "contract",
            model_id=self.contract_model_id,
            vector_size=self.contract_vector_size,
            lock_timeout=0.3,
        )
        await competitor.close()
