"""The Qdrant collection of a charmem collection: how it is laid out and how it is recognised.

Charmem collection ``c`` is the Qdrant collection ``charmem-c``, made with a dense cosine vector
``"dense"`` (``vector_size`` floats), a sparse vector ``"lexical"`` (``Modifier.IDF``), indexing
threshold 0 (no HNSW: every search is an exact scan) and the embedder fingerprint (the marker
document of the embedded shard) in its metadata under ``"charmem"``.
"""

from __future__ import annotations

from typing import Final

from qdrant_client import AsyncQdrantClient, models

from charmem.errors import ConfigurationError
from charmem_qdrant._marker import ShardMarker
from charmem_qdrant._recall import DENSE_VECTOR, LEXICAL_VECTOR
from charmem_qdrant._service_client import CONNECTION_KEY

__all__ = ["METADATA_KEY", "check_collection", "create_collection", "is_local"]

#: The key of the collection metadata holding the embedder fingerprint (the marker document).
METADATA_KEY: Final = "charmem"


def is_local(client: AsyncQdrantClient | None) -> bool:
    """Whether ``client`` is qdrant-client's local mode (payload indexes do nothing there)."""
    return type(getattr(client, "_client", None)).__name__ == "AsyncQdrantLocal"


async def create_collection(client: AsyncQdrantClient, name: str, fingerprint: ShardMarker) -> bool:
    """Create the Qdrant collection ``name`` for ``fingerprint`` (see the module)."""
    return await client.create_collection(
        name,
        vectors_config={
            DENSE_VECTOR: models.VectorParams(
                size=fingerprint.vector_size, distance=models.Distance.COSINE
            )
        },
        sparse_vectors_config={
            LEXICAL_VECTOR: models.SparseVectorParams(modifier=models.Modifier.IDF)
        },
        optimizers_config=models.OptimizersConfigDiff(indexing_threshold=0),
        metadata={METADATA_KEY: fingerprint.to_document()},
    )


def check_collection(info: models.CollectionInfo, fingerprint: ShardMarker, where: str) -> None:
    """Check the collection's layout and fingerprint against the opener's ``fingerprint``.

    A collection without the marker is adopted when empty; its own vector size is
    authoritative over the marker's.

    Args:
        info: the collection as the server describes it.
        fingerprint: the opener's collection, model id and vector size.
        where: the collection as named in messages (``charmem-c on http://...``).

    Raises:
        ConfigurationError: not a charmem collection, holding points without a marker, or a
            marker naming another collection.
        DimensionMismatchError: another vector size.
        EmbedderMismatchError: another model of the same size.
    """
    vectors = info.config.params.vectors
    dense = vectors.get(DENSE_VECTOR) if isinstance(vectors, dict) else None
    if dense is None:
        raise ConfigurationError(
            f"the Qdrant collection {where} has no dense vector named {DENSE_VECTOR!r}, so "
            "it was not made by charmem-qdrant; delete or rename it, then rebuild the "
            "vectors with rebuild_vector_index()",
            key=CONNECTION_KEY,
        )
    document = (info.config.metadata or {}).get(METADATA_KEY)
    if document is None:
        if info.points_count:
            raise ConfigurationError(
                f"the Qdrant collection {where} holds {info.points_count} points but no "
                "charmem fingerprint in its metadata, so its embedder is unknown; delete it "
                "and rebuild the vectors with rebuild_vector_index()",
                key=CONNECTION_KEY,
            )
        marker = ShardMarker(
            collection=fingerprint.collection,
            model_id=fingerprint.model_id,
            vector_size=dense.size,
        )
    else:
        marker = ShardMarker.from_document(document, where=where, key=CONNECTION_KEY)
    if marker.collection != fingerprint.collection:
        raise ConfigurationError(
            f"the Qdrant collection {where} belongs to charmem collection "
            f"{marker.collection!r}, not {fingerprint.collection!r}; delete it or choose another "
            "collection name",
            key=CONNECTION_KEY,
        )
    if dense.size != marker.vector_size:  # the collection's own config is authoritative
        marker = ShardMarker(
            collection=marker.collection, model_id=marker.model_id, vector_size=dense.size
        )
    marker.check(
        collection=fingerprint.collection,
        model_id=fingerprint.model_id,
        vector_size=fingerprint.vector_size,
        path=where,
    )
