"""charmem-oxigraph: the charmem graph authority over embedded Oxigraph (pyoxigraph).

Two modes, selected by ``GRAPH_STORE_MODE`` through the entry-point group
``charmem.graph_stores``: ``persistent`` (:class:`PersistentOxigraphGraphStore`,
``pyoxigraph.Store(OXIGRAPH_PATH)``) and ``in_memory`` (:class:`InMemoryOxigraphGraphStore`,
``pyoxigraph.Store()``). Each collection is one named graph ``urn:charmem:collection:<name>``; the
RDF vocabulary (namespace :data:`VOCAB`) is documented in the package README.
"""

from charmem_oxigraph._store import (
    InMemoryOxigraphGraphStore,
    OxigraphGraphStore,
    PersistentOxigraphGraphStore,
)
from charmem_oxigraph._version import __version__
from charmem_oxigraph._vocab import VOCAB, collection_graph, node_iri

__all__ = [
    "VOCAB",
    "InMemoryOxigraphGraphStore",
    "OxigraphGraphStore",
    "PersistentOxigraphGraphStore",
    "__version__",
    "collection_graph",
    "node_iri",
]
