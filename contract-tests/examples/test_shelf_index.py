"""The contract suite on the example adapter, exactly as its README shows it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from shelf_index import ShelfVectorIndex

from charmem.ports import VectorIndex
from charmem_contract import StoreFactory, VectorIndexContract, opening


class TestShelfVectorIndex(VectorIndexContract):
    """Shelf has no lexical cue; everything else is claimed."""

    supports_lexical = False

    @pytest.fixture
    async def vector_index_factory(self, tmp_path: Path) -> AsyncIterator[StoreFactory[VectorIndex]]:
        """A Shelf directory per store name under this test's temporary directory."""

        def open_index(collection: str, *, model_id: str, vector_size: int, store: str) -> VectorIndex:
            return ShelfVectorIndex(tmp_path / store, collection, model_id=model_id, vector_size=vector_size)

        async with opening(open_index) as factory:
            yield factory
