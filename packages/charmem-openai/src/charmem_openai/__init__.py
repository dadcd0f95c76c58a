"""OpenAI embeddings for charmem: :class:`OpenAIEmbeddingProvider` on the official async SDK.

Registered as ``openai`` in the entry-point group ``charmem.embedders``, so
``EMBEDDING_PROVIDER=openai`` (the library default) with ``OPENAI_API_KEY`` and
``EMBEDDING_MODEL`` selects it; ``EMBEDDING_DIMENSIONS`` and ``OPENAI_BASE_URL`` are optional.
"""

from charmem_openai._provider import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    KNOWN_DIMENSIONS,
    MAX_INPUTS_PER_REQUEST,
    MAX_TOKENS_PER_REQUEST,
    OpenAIEmbeddingProvider,
)
from charmem_openai._version import __version__

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "KNOWN_DIMENSIONS",
    "MAX_INPUTS_PER_REQUEST",
    "MAX_TOKENS_PER_REQUEST",
    "OpenAIEmbeddingProvider",
    "__version__",
]
