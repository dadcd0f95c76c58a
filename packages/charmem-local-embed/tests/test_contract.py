"""The embedding-provider contract suite on the real packaged all-MiniLM-L6-v2, offline.

The model loads once per session (the ``provider`` fixture of conftest); the suite only reads it.
"""

from __future__ import annotations

import pytest

from charmem.ports import EmbeddingProvider
from charmem_contract import EmbeddingProviderContract
from charmem_local_embed import LocalEmbeddingProvider


class TestLocalEmbeddingProvider(EmbeddingProviderContract):
    @pytest.fixture
    def embedding_provider(self, provider: LocalEmbeddingProvider) -> EmbeddingProvider:
        return provider
