"""The factories of the reference adapters: the ``reference`` graph, ``in_memory`` vectors, ``hashing``.

Each builds its class with ``from_settings`` and keeps nothing on disk, so the default
:class:`~charmem.composition.ClassFactory` is all they need.
"""

from __future__ import annotations

from charmem.composition import ClassFactory
from charmem.testing.hashing import HashingEmbeddingProvider
from charmem.testing.reference_graph import ReferenceGraphStore
from charmem.testing.reference_vectors import ReferenceVectorIndex

__all__ = ["hashing", "reference_graph", "reference_vectors"]

#: ``GRAPH_STORE_MODE=reference``.
reference_graph = ClassFactory(ReferenceGraphStore)
#: ``VECTOR_STORE_MODE=in_memory``.
reference_vectors = ClassFactory(ReferenceVectorIndex)
#: ``EMBEDDING_PROVIDER=hashing``.
hashing = ClassFactory(HashingEmbeddingProvider)
