"""charmem-qdrant: candidate recall for charmem over an embedded Qdrant Edge shard.

Entry point ``charmem.vector_indexes`` / ``embedded`` -> :class:`EdgeVectorIndex`
(``VECTOR_STORE_MODE=embedded``, the default). See the README for the shard layout, the marker
file and the lexical-cue fusion rule.
"""

from charmem_qdrant._edge import (
    DENSE_VECTOR,
    LEXICAL_CUE_KEY,
    LEXICAL_VECTOR,
    RRF_K,
    EdgeVectorIndex,
)
from charmem_qdrant._marker import MARKER_FILE_NAME, SCHEMA_VERSION, ShardMarker
from charmem_qdrant._version import __version__

__all__ = [
    "DENSE_VECTOR",
    "LEXICAL_CUE_KEY",
    "LEXICAL_VECTOR",
    "MARKER_FILE_NAME",
    "RRF_K",
    "SCHEMA_VERSION",
    "EdgeVectorIndex",
    "ShardMarker",
    "__version__",
]
