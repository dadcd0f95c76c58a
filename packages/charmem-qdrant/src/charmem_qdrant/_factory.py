"""The factories the ``charmem.vector_indexes`` entry points name: ``embedded`` and ``service``.

``service`` loads on first access, as :class:`charmem_qdrant.QdrantServiceVectorIndex` does: it
imports qdrant-client (over a second), which embedded users never pay for.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from charmem.composition import ClassFactory
from charmem.settings import Settings
from charmem_qdrant import EdgeVectorIndex

if TYPE_CHECKING:
    from charmem.admin import VectorLayoutMigration
    from charmem_qdrant import QdrantServiceVectorIndex

    service: _ServiceFactory

__all__ = ["embedded", "service"]


class _EmbeddedFactory(ClassFactory[EdgeVectorIndex]):
    """``embedded``: the Edge shard under ``VECTOR_STORE_PATH``; it can tell and drop a shard."""

    def exists(self, settings: Settings, collection: str) -> bool:
        """:meth:`EdgeVectorIndex.exists_from_settings`."""
        return EdgeVectorIndex.exists_from_settings(settings, collection)

    def outdated(self, settings: Settings, collection: str) -> bool:
        """:meth:`EdgeVectorIndex.outdated_from_settings`: a shard of an older schema version."""
        return EdgeVectorIndex.outdated_from_settings(settings, collection)

    async def drop(self, settings: Settings, collection: str) -> bool:
        """:meth:`EdgeVectorIndex.drop_from_settings`, in a worker thread."""
        return await asyncio.to_thread(EdgeVectorIndex.drop_from_settings, settings, collection)


class _ServiceFactory(ClassFactory["QdrantServiceVectorIndex"]):
    """``service``: a collection on a server; opened, dropped, migrated from the caller's loop."""

    async def open(
        self, settings: Settings, collection: str | None = None, /, **options: Any
    ) -> QdrantServiceVectorIndex:
        """:meth:`QdrantServiceVectorIndex.from_settings_async` (gRPC channels belong to a loop)."""
        if collection is None:
            raise TypeError("a vector index is opened for a collection")
        return await self.adapter.from_settings_async(settings, collection, **options)

    async def drop(self, settings: Settings, collection: str) -> bool:
        """:meth:`QdrantServiceVectorIndex.drop_from_settings_async`."""
        return await self.adapter.drop_from_settings_async(settings, collection)

    async def migrate(self, settings: Settings, collection: str) -> VectorLayoutMigration:
        """:meth:`QdrantServiceVectorIndex.migrate_from_settings_async` (``charmem migrate``)."""
        return await self.adapter.migrate_from_settings_async(settings, collection)


#: ``VECTOR_STORE_MODE=embedded`` (the default).
embedded = _EmbeddedFactory(EdgeVectorIndex)


def __getattr__(name: str) -> Any:
    if name == "service":
        import charmem_qdrant

        factory = _ServiceFactory(charmem_qdrant.QdrantServiceVectorIndex)
        globals()["service"] = factory
        return factory
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
