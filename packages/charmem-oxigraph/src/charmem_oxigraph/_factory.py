"""The factories the ``charmem.graph_stores`` entry points name: one per graph store mode."""

from __future__ import annotations

import asyncio

from charmem.admin import LayoutMigration
from charmem.composition import ClassFactory
from charmem.settings import Settings

from charmem_oxigraph import (
    InMemoryOxigraphGraphStore,
    OxigraphGraphStore,
    PersistentOxigraphGraphStore,
    SparqlServiceGraphStore,
)

__all__ = ["in_memory", "persistent", "service"]


class _PersistentFactory(ClassFactory[OxigraphGraphStore]):
    """``persistent``: the store at ``OXIGRAPH_PATH``, which can tell whether it exists."""

    def exists(self, settings: Settings, collection: str) -> bool:
        """:meth:`PersistentOxigraphGraphStore.exists_from_settings`."""
        return PersistentOxigraphGraphStore.exists_from_settings(settings, collection)

    async def migrate(self, settings: Settings, collection: str) -> LayoutMigration:
        """:meth:`PersistentOxigraphGraphStore.migrate_from_settings` in a worker thread."""
        return await asyncio.to_thread(
            PersistentOxigraphGraphStore.migrate_from_settings, settings, collection
        )


class _ServiceFactory(ClassFactory[SparqlServiceGraphStore]):
    """``service``: a SPARQL server, whose layout is checked when the store is opened."""

    async def open(
        self, settings: Settings, collection: str | None = None, /, **options: object
    ) -> SparqlServiceGraphStore:
        """:meth:`SparqlServiceGraphStore.from_settings_async` (checks the collection's layout)."""
        del options
        if collection is None:
            raise TypeError("a graph store is opened for a collection")
        return await SparqlServiceGraphStore.from_settings_async(settings, collection)

    async def migrate(self, settings: Settings, collection: str) -> LayoutMigration:
        """:meth:`SparqlServiceGraphStore.migrate_from_settings_async`."""
        return await SparqlServiceGraphStore.migrate_from_settings_async(settings, collection)


#: ``GRAPH_STORE_MODE=persistent``.
persistent = _PersistentFactory(PersistentOxigraphGraphStore)
#: ``GRAPH_STORE_MODE=in_memory``: a new, empty store at each open.
in_memory = ClassFactory[OxigraphGraphStore](InMemoryOxigraphGraphStore)
#: ``GRAPH_STORE_MODE=service``: a SPARQL 1.1 server; whether a collection exists is not asked.
service = _ServiceFactory(SparqlServiceGraphStore)
