"""OpenAI embeddings for charmem.

Skeleton: the distribution installs, but registers no ``charmem.embedders`` entry point yet, so
``EMBEDDING_PROVIDER=openai`` fails with a ``ConfigurationError`` that says so. Until the provider
lands, use ``EMBEDDING_PROVIDER=local`` or pass any ``EmbeddingProvider`` object to ``open``.
"""

from charmem_openai._version import __version__

__all__ = ["__version__"]
