"""charmem-oxigraph: the charmem graph authority over embedded Oxigraph (pyoxigraph).

Three modes, selected by ``GRAPH_STORE_MODE`` through the entry-point group
``charmem.graph_stores``: ``persistent`` (:class:`PersistentOxigraphGraphStore`,
``pyoxigraph.Store(OXIGRAPH_PATH)``), ``in_memory`` (:class:`InMemoryOxigraphGraphStore`,
``pyoxigraph.Store()``) and ``service`` (:class:`SparqlServiceGraphStore`, any SPARQL 1.1
protocol server at ``SPARQL_QUERY_ENDPOINT`` / ``SPARQL_UPDATE_ENDPOINT``). Each collection is
one named graph ``urn:charmem:collection:<name>``; the RDF vocabulary (namespace :data:`VOCAB`) is
documented in the package README.
"""

from charmem_oxigraph._service import SparqlServiceGraphStore
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
    "SparqlServiceGraphStore",
    "__version__",
    "collection_graph",
    "node_iri",
]
