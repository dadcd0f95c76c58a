"""A Qdrant collection charmem made: how it is laid out and how it is recognised.

Both layouts (:mod:`charmem_qdrant._service_layout`) make a collection with a dense cosine vector
``"dense"`` (``vector_size`` floats), a sparse vector ``"lexical"`` (``Modifier.IDF``), a keyword
index on ``object_type`` and the embedder fingerprint (the marker document of the embedded shard)
in its metadata under ``"charmem"``:

* **per collection** (``charmem-c``): indexing threshold 0 (no HNSW: every search is an exact
  scan); the marker names the charmem collection.
* **shared** (``charmem-shared.<size>.<hash>``): a keyword index on the tenant key made with
  ``is_tenant=True`` (Qdrant keeps each tenant's points together) and per-tenant HNSW graphs
  (``HnswConfigDiff(m=0, payload_m=16)``: no graph across tenants); the marker names the shared
  collection itself, and each tenant has its own marker point (:mod:`charmem_qdrant._service_open`).
"""

from __future__ import annotations

from typing import Any, Final

from qdrant_client import AsyncQdrantClient, models

from charmem.errors import ConfigurationError
from charmem_qdrant._marker import ShardMarker
from charmem_qdrant._recall import DENSE_VECTOR, LEXICAL_VECTOR, PAYLOAD_SURFACE, PAYLOAD_TYPE
from charmem_qdrant._service_client import CONNECTION_KEY
from charmem_qdrant._service_layout import TENANT_KEY

__all__ = [
    "METADATA_KEY",
    "TENANT_PAYLOAD_M",
    "check_collection",
    "collection_config",
    "create_collection",
    "is_local",
    "payload_indexes",
]

#: The key of the collection metadata holding the embedder fingerprint (the marker document).
METADATA_KEY: Final = "charmem"
#: Edges per node of each tenant's HNSW graph in a shared collection (Qdrant's default ``m``).
TENANT_PAYLOAD_M: Final = 16


def is_local(client: AsyncQdrantClient | None) -> bool:
    """Whether ``client`` is qdrant-client's local mode (payload indexes do nothing there)."""
    return type(getattr(client, "_client", None)).__name__ == "AsyncQdrantLocal"


def collection_config(fingerprint: ShardMarker, *, shared: bool) -> dict[str, Any]:
    """The ``create_collection`` arguments of a collection for ``fingerprint`` (see the module)."""
    config: dict[str, Any] = {
        "vectors_config": {
            DENSE_VECTOR: models.VectorParams(
                size=fingerprint.vector_size, distance=models.Distance.COSINE
            )
        },
        "sparse_vectors_config": {
            LEXICAL_VECTOR: models.SparseVectorParams(modifier=models.Modifier.IDF)
        },
        "metadata": {METADATA_KEY: fingerprint.to_document()},
    }
    if shared:
        config["hnsw_config"] = models.HnswConfigDiff(m=0, payload_m=TENANT_PAYLOAD_M)
    else:
        config["optimizers_config"] = models.OptimizersConfigDiff(indexing_threshold=0)
    return config


def payload_indexes(*, shared: bool) -> list[tuple[str, models.PayloadSchemaType | Any]]:
    """The payload indexes of a collection: ``object_type``, ``surface``, and shared the tenant key.

    An opening creates those a collection lacks (one of schema version 1 lacks ``surface``).
    """
    indexes: list[tuple[str, Any]] = [
        (PAYLOAD_TYPE, models.PayloadSchemaType.KEYWORD),
        (PAYLOAD_SURFACE, models.PayloadSchemaType.KEYWORD),
    ]
    if shared:
        tenant = models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True)
        indexes.append((TENANT_KEY, tenant))
    return indexes


async def create_collection(
    client: AsyncQdrantClient, name: str, fingerprint: ShardMarker, *, shared: bool
) -> bool:
    """Create the Qdrant collection ``name`` for ``fingerprint`` (:func:`collection_config`)."""
    return await client.create_collection(name, **collection_config(fingerprint, shared=shared))


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
