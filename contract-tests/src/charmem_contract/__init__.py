"""Contract suites for charmem adapters.

Skeleton: the suites (``GraphStoreContract``, ``VectorIndexContract``,
``EmbeddingProviderContract``, ``RetrievalStatsStoreContract``, ``CharacterMemoryContract``) land
with the contract-suite issue. Until then each adapter package tests itself.
"""

from charmem_contract._version import __version__

__all__ = ["__version__"]
