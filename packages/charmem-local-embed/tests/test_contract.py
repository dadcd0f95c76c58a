"""The embedding-provider contract suite on the real packaged all-MiniLM-L6-v2, offline.

The model loads once per session (the ``provider`` fixture of conftest); the suite only reads it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from charmem.ports import EmbeddingProvider
from charmem_contract import EmbeddingProviderContract, Factory, opening
from charmem_local_embed import LocalEmbeddingProvider


class TestLocalEmbeddingProvider(EmbeddingProviderContract):
    @pytest.fixture
    async def embedding_provider_factory(
        self, provider: LocalEmbeddingProvider
    ) -> AsyncIterator[Factory[EmbeddingProvider]]:
        async with opening(lambda collection: provider) as factory:
            yield factory
