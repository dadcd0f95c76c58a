"""The factories the ``charmem.graph_stores`` entry points name: one per graph store mode."""

from __future__ import annotations

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


#: ``GRAPH_STORE_MODE=persistent``.
persistent = _PersistentFactory(PersistentOxigraphGraphStore)
#: ``GRAPH_STORE_MODE=in_memory``: a new, empty store at each open.
in_memory = ClassFactory[OxigraphGraphStore](InMemoryOxigraphGraphStore)
#: ``GRAPH_STORE_MODE=service``: a SPARQL 1.1 server; whether a collection exists is not asked.
service = ClassFactory(SparqlServiceGraphStore)
