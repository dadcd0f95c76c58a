"""The contract suite on the example adapter, exactly as its README shows it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from shelf_index import ShelfVectorIndex

from charmem.ports import VectorIndex
from charmem_contract import VectorIndexContract


class TestShelfVectorIndex(VectorIndexContract):
    """Shelf has no lexical cue; everything else is claimed."""

    supports_lexical = False

    @pytest.fixture
    async def vector_index(self, tmp_path: Path) -> AsyncIterator[VectorIndex]:
        """An empty collection in a fresh Shelf directory, closed afterwards."""
        self.root = tmp_path / "shelf"
        index = ShelfVectorIndex(
            self.root, "contract", model_id=self.contract_model_id, vector_size=self.contract_vector_size
        )
        try:
            yield index
        finally:
            await index.close()

    async def reopen(self, index: VectorIndex, *, model_id: str, vector_size: int) -> VectorIndex:
        """The same directory and collection, with the fingerprint the suite asks for."""
        return ShelfVectorIndex(self.root, "contract", model_id=model_id, vector_size=vector_size)

    async def open_competitor(self, index: VectorIndex) -> None:
        """A second opener of the collection (refused while the first holds the lock)."""
        other = ShelfVectorIndex(
            self.root, "contract", model_id=self.contract_model_id, vector_size=self.contract_vector_size
        )
        await other.close()
