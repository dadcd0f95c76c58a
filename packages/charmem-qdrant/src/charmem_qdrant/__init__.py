"""charmem-qdrant: candidate recall for charmem over Qdrant: an embedded Edge shard or a server.

Entry points ``charmem.vector_indexes``: ``embedded`` -> :class:`EdgeVectorIndex`
(``VECTOR_STORE_MODE=embedded``, the default) and ``service`` -> :class:`QdrantServiceVectorIndex`
(``VECTOR_STORE_MODE=service``, a Qdrant server over gRPC; ``VECTOR_SERVICE_LAYOUT`` shared or
per collection). See the README for the shard and collection layouts, the fingerprint marker and
the lexical-cue fusion rule.
"""

from typing import TYPE_CHECKING, Any

from charmem_qdrant._disk import SHARD_DISK_SPACE, ShardDiskSpace
from charmem_qdrant._edge import EdgeVectorIndex, HnswBuildReport
from charmem_qdrant._fusion import DEFAULT_FUSION_WEIGHTS, RRF_K
from charmem_qdrant._hnsw import (
    HNSW_BACKGROUND_KEY,
    HNSW_EF_CONSTRUCT_KEY,
    HNSW_EF_KEY,
    HNSW_M_KEY,
    HNSW_THRESHOLD_KEY,
    HnswSettings,
    hnsw_from_settings,
)
from charmem_qdrant._marker import MARKER_FILE_NAME, SCHEMA_VERSION, ShardMarker
from charmem_qdrant._recall import DENSE_VECTOR, LEXICAL_CUE_KEY, LEXICAL_VECTOR, LEXICAL_WEIGHT_KEY
from charmem_qdrant._version import __version__

if TYPE_CHECKING:
    from charmem_qdrant._service import (
        COLLECTION_PREFIX,
        METADATA_KEY,
        QdrantServiceVectorIndex,
        service_collection_name,
        shared_collection_name,
    )
    from charmem_qdrant._service_layout import SHARED_PREFIX, TENANT_KEY

# The service index imports qdrant-client (over a second to import); embedded users never pay
# for it: these names load on first access (the entry point ``service`` resolves through here).
_SERVICE_NAMES = (
    "COLLECTION_PREFIX",
    "METADATA_KEY",
    "QdrantServiceVectorIndex",
    "SHARED_PREFIX",
    "TENANT_KEY",
    "service_collection_name",
    "shared_collection_name",
)


def __getattr__(name: str) -> Any:
    if name in _SERVICE_NAMES:
        from charmem_qdrant import _service

        return getattr(_service, name)
    raise AttributeError(f"module 'charmem_qdrant' has no attribute {name!r}")


__all__ = [
    "COLLECTION_PREFIX",
    "DEFAULT_FUSION_WEIGHTS",
    "DENSE_VECTOR",
    "HNSW_BACKGROUND_KEY",
    "HNSW_EF_CONSTRUCT_KEY",
    "HNSW_EF_KEY",
    "HNSW_M_KEY",
    "HNSW_THRESHOLD_KEY",
    "LEXICAL_CUE_KEY",
    "LEXICAL_VECTOR",
    "LEXICAL_WEIGHT_KEY",
    "MARKER_FILE_NAME",
    "METADATA_KEY",
    "RRF_K",
    "SCHEMA_VERSION",
    "SHARD_DISK_SPACE",
    "SHARED_PREFIX",
    "TENANT_KEY",
    "EdgeVectorIndex",
    "HnswBuildReport",
    "HnswSettings",
    "QdrantServiceVectorIndex",
    "ShardDiskSpace",
    "ShardMarker",
    "__version__",
    "hnsw_from_settings",
    "service_collection_name",
    "shared_collection_name",
]
