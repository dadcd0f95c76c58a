"""Where a charmem collection's points live on a Qdrant server: the two service layouts.

``VECTOR_SERVICE_LAYOUT`` chooses:

* ``shared`` (the default): one Qdrant collection per embedder fingerprint,
  ``charmem-shared.<vector_size>.<first 16 hex digits of sha256(model_id)>``
  (:func:`shared_collection_name`), holding every charmem collection embedded by that model as
  one **tenant**: each point carries the tenant key ``charmem_collection`` (a keyword payload
  index made with ``is_tenant=True``), and its point id is ``uuid5(memory_id, collection)``, so
  two collections holding the same memory id (an imported copy) never overwrite each other's
  point. The memory id is read from the payload ``memory_id``.
* ``per_collection``: charmem collection ``c`` is the Qdrant collection ``charmem-c``, point id
  = the memory id (the layout of earlier versions).

:class:`ServiceScope` is the one place that knows which layout a collection is in: every count,
scroll, search, upsert and delete of :class:`~charmem_qdrant._service_points.ScopedPoints` takes
its filter from :meth:`ServiceScope.filter`, its point ids from :meth:`ServiceScope.point_id`
and its payload from :meth:`ServiceScope.payload`, so no data call can leave its tenant.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import attrs
from qdrant_client import models

from charmem.settings import validate_collection_name
from charmem_qdrant._recall import PAYLOAD_ID

__all__ = [
    "COLLECTION_PREFIX",
    "PER_COLLECTION",
    "PER_COLLECTION_LAYOUT",
    "SHARED",
    "SHARED_LAYOUT",
    "SHARED_PREFIX",
    "TENANT_KEY",
    "TENANT_MARKER_NAMESPACE",
    "ServiceScope",
    "service_collection_name",
    "shared_collection_name",
]

#: The Qdrant collection of charmem collection ``c`` in the per-collection layout is
#: ``charmem-c``.
COLLECTION_PREFIX: Final = "charmem-"
#: Shared collections are named ``charmem-shared.<size>.<hash>``: a charmem collection name has
#: no ``.``, so no per-collection name can take this form.
SHARED_PREFIX: Final = "charmem-shared."
#: The payload key naming a point's charmem collection (its tenant) in a shared collection.
TENANT_KEY: Final = "charmem_collection"
#: The ``VECTOR_SERVICE_LAYOUT`` values.
SHARED: Final = "shared"
PER_COLLECTION: Final = "per_collection"
#: Layout versions, as :class:`~charmem.errors.StoreLayoutError` reports them: 1 is one Qdrant
#: collection per charmem collection, 2 the shared layout.
PER_COLLECTION_LAYOUT: Final = 1
SHARED_LAYOUT: Final = 2
#: The namespace of tenant marker point ids: the marker of ``c`` is ``uuid5(namespace, c)``.
TENANT_MARKER_NAMESPACE: Final = uuid.UUID("6f1c1a52-3b59-5f4e-9d0e-8a54c2f0a7d1")


def service_collection_name(collection: str) -> str:
    """The per-collection layout's Qdrant collection of ``collection``: ``charmem-<collection>``.

    Raises:
        ConfigurationError: the collection name is not allowed.
    """
    return COLLECTION_PREFIX + validate_collection_name(collection)


def shared_collection_name(model_id: str, vector_size: int) -> str:
    """The shared layout's Qdrant collection of one embedder fingerprint.

    Args:
        model_id: the embedding model id (any text: it is hashed, so the name stays valid).
        vector_size: the dense vector's dimensions.

    Returns:
        str: ``charmem-shared.<vector_size>.<first 16 hex digits of sha256(model_id, UTF-8)>``.
    """
    digest = hashlib.sha256(model_id.encode("utf-8")).hexdigest()[:16]
    return f"{SHARED_PREFIX}{vector_size}.{digest}"


@attrs.frozen(kw_only=True)
class ServiceScope:
    """One charmem collection's place on the server: its Qdrant collection and, shared, tenant.

    Attributes:
        collection: the charmem collection.
        qdrant_collection: the Qdrant collection holding its points.
        shared: whether the Qdrant collection is shared (the points carry the tenant key).
    """

    collection: str
    qdrant_collection: str
    shared: bool

    @classmethod
    def of(cls, collection: str, *, model_id: str, vector_size: int, layout: str) -> ServiceScope:
        """The scope of ``collection`` in ``layout`` (:data:`SHARED` or :data:`PER_COLLECTION`).

        Raises:
            ConfigurationError: the collection name is not allowed.
        """
        legacy = service_collection_name(collection)
        if layout == SHARED:
            name = shared_collection_name(model_id, vector_size)
            return cls(collection=collection, qdrant_collection=name, shared=True)
        return cls(collection=collection, qdrant_collection=legacy, shared=False)

    def filter(self, conditions: Iterable[models.Condition] = ()) -> models.Filter | None:
        """``conditions`` and, in a shared collection, the tenant's: the filter of every call.

        Returns:
            The conjunction, or ``None`` (no condition at all, per-collection layout only).
        """
        must = [*self._tenant(), *conditions]
        return models.Filter(must=must) if must else None

    def selector(self, memory_ids: Sequence[str] | None = None) -> models.PointsSelector:
        """The points a delete removes: those of ``memory_ids``, or all (shared only).

        Per collection, the ids themselves (``PointIdsList``, as earlier versions sent); shared,
        the tenant's points among them (``FilterSelector`` of :meth:`filter`), so a delete
        never reaches another tenant's point.

        Raises:
            ValueError: all points of a per-collection layout (drop its collection instead).
        """
        if not self.shared:
            if memory_ids is None:
                raise ValueError("a per-collection layout drops its whole Qdrant collection")
            return models.PointIdsList(points=list(memory_ids))
        by_id = (
            [] if memory_ids is None else [models.HasIdCondition(has_id=self.point_ids(memory_ids))]
        )
        return models.FilterSelector(filter=models.Filter(must=[*self._tenant(), *by_id]))

    def _tenant(self) -> list[models.Condition]:
        if not self.shared:
            return []
        return [
            models.FieldCondition(key=TENANT_KEY, match=models.MatchValue(value=self.collection))
        ]

    def point_id(self, memory_id: str) -> str:
        """The point id of a memory id: itself, or ``uuid5(memory_id, collection)`` shared."""
        if not self.shared:
            return memory_id
        return str(uuid.uuid5(uuid.UUID(memory_id), self.collection))

    def point_ids(self, memory_ids: Sequence[str]) -> list[models.ExtendedPointId]:
        """:meth:`point_id` of each."""
        return [self.point_id(memory_id) for memory_id in memory_ids]

    def payload(self, payload: Mapping[str, str]) -> dict[str, str]:
        """The stored payload: ``payload`` and, shared, the tenant key."""
        if not self.shared:
            return dict(payload)
        return {**payload, TENANT_KEY: self.collection}

    def memory_id(self, point_id: object, payload: Mapping[str, object] | None) -> str:
        """A point's memory id: its ``memory_id`` payload (per collection, its id if unread)."""
        if not self.shared:
            return str((payload or {}).get(PAYLOAD_ID) or point_id)
        return str((payload or {}).get(PAYLOAD_ID) or "")  # none: an invalid id, refused

    @property
    def marker_id(self) -> str:
        """The point id of the tenant marker (shared only): ``uuid5(namespace, collection)``."""
        return str(uuid.uuid5(TENANT_MARKER_NAMESPACE, self.collection))
