"""Reference adapters and test helpers.

* :class:`ReferenceGraphStore` (``GRAPH_STORE_MODE=reference``) and :class:`ReferenceVectorIndex`
  (``VECTOR_STORE_MODE=in_memory``): the executable specification of their ports, in pure Python.
* :class:`HashingEmbeddingProvider`: a deterministic embedder for tests (``EMBEDDING_PROVIDER=hashing``).
* :mod:`charmem.testing.faults`: fault-injecting wrappers around any real adapter, and
  :class:`CrashPoints` (kill the process at a named point of the write path, for crash trials),
  :class:`FaultyEmbeddingProvider`, which answers NaN, wrong-length or missing rows on demand.
* :func:`stores_of`: the stores behind a memory facade, for tests that look inside them.
"""

from charmem.testing.faults import (
    CRASH_SITES,
    CrashPoint,
    CrashPoints,
    EmbeddingFault,
    FaultInjected,
    FaultyEmbeddingProvider,
    FaultyGraphStore,
    FaultyStatsStore,
    FaultyVectorIndex,
    kill_this_process,
)
from charmem.testing.hashing import HashingEmbeddingProvider
from charmem.testing.introspection import stores_of
from charmem.testing.reference_graph import ReferenceGraphStore
from charmem.testing.reference_vectors import ReferenceVectorIndex

__all__ = [
    "CRASH_SITES",
    "CrashPoint",
    "CrashPoints",
    "EmbeddingFault",
    "FaultInjected",
    "FaultyEmbeddingProvider",
    "FaultyGraphStore",
    "FaultyStatsStore",
    "FaultyVectorIndex",
    "HashingEmbeddingProvider",
    "ReferenceGraphStore",
    "ReferenceVectorIndex",
    "kill_this_process",
    "stores_of",
]
