"""charmem-qdrant: candidate recall for charmem over Qdrant: an embedded Edge shard or a server.

Entry points ``charmem.vector_indexes``: ``embedded`` -> :class:`EdgeVectorIndex`
(``VECTOR_STORE_MODE=embedded``, the default) and ``service`` -> :class:`QdrantServiceVectorIndex`
(``VECTOR_STORE_MODE=service``, a Qdrant server over gRPC). See the README for the shard and
collection layout, the fingerprint marker and the lexical-cue fusion rule.
"""

from charmem_qdrant._edge import (
    DENSE_VECTOR,
    LEXICAL_CUE_KEY,
    LEXICAL_VECTOR,
    RRF_K,
    EdgeVectorIndex,
)
from charmem_qdrant._marker import MARKER_FILE_NAME, SCHEMA_VERSION, ShardMarker
from charmem_qdrant._service import (
    COLLECTION_PREFIX,
    METADATA_KEY,
    QdrantServiceVectorIndex,
    service_collection_name,
)
from charmem_qdrant._version import __version__

__all__ = [
    "COLLECTION_PREFIX",
    "DENSE_VECTOR",
    "LEXICAL_CUE_KEY",
    "LEXICAL_VECTOR",
    "MARKER_FILE_NAME",
    "METADATA_KEY",
    "RRF_K",
    "SCHEMA_VERSION",
    "EdgeVectorIndex",
    "QdrantServiceVectorIndex",
    "ShardMarker",
    "__version__",
    "service_collection_name",
]
