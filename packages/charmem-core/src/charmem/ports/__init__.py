"""The ports: the contracts every adapter fulfils.

Each port is a :class:`typing.Protocol` whose docstring is its contract, written in the memory's
own terms; what an adapter adds in its backend's terms is in that adapter's README. A port
instance is bound to one collection; adapters are built by the factory their entry point names
(:class:`charmem.composition.AdapterFactory`). Adapters translate driver exceptions into
:class:`~charmem.errors.BackendError` (cause chained) and never block the event loop for long:
blocking store calls run in a worker thread.

* graph authority: :class:`GraphStore`, the union of the memory port :class:`MemoryGraphStore`
  (what remember, correct, forget, link and retrieve use) and the admin port
  :class:`AdminGraphStore` (enumeration, counts, backup, restore, erasure: operational tools
  only); optional capabilities :class:`EpisodeTurnReader`, :class:`ExpansionReader`,
  :class:`ObjectTypeHints` and :class:`OccasionReader`;
* candidate recall: :class:`VectorIndex`;
* retrieval statistics: :class:`RetrievalStatsStore`;
* providers shared by every collection: :class:`EmbeddingProvider`, :class:`TokenCounter`,
  :class:`Clock`.
"""

from __future__ import annotations

from charmem.ports._graph import (
    AdminGraphStore,
    CharacterRecord,
    EpisodeTurn,
    EpisodeTurnReader,
    ExpansionReader,
    GraphStore,
    MemoryGraphStore,
    ObjectTypeHints,
    RacedWrites,
    WriterExclusion,
)
from charmem.ports._occasions import OccasionReader
from charmem.ports._providers import Clock, EmbeddingProvider, TokenCounter
from charmem.ports._stats import RetrievalStatsStore, StatsEntry, StatsSummary
from charmem.ports._vectors import (
    VectorHit,
    VectorIndex,
    VectorPoint,
    VectorQuery,
    VectorSearchResult,
    VectorSurface,
)

__all__ = [
    "AdminGraphStore",
    "CharacterRecord",
    "Clock",
    "EmbeddingProvider",
    "EpisodeTurn",
    "EpisodeTurnReader",
    "ExpansionReader",
    "GraphStore",
    "MemoryGraphStore",
    "ObjectTypeHints",
    "OccasionReader",
    "RacedWrites",
    "RetrievalStatsStore",
    "StatsEntry",
    "StatsSummary",
    "TokenCounter",
    "VectorHit",
    "VectorIndex",
    "VectorPoint",
    "VectorQuery",
    "VectorSearchResult",
    "VectorSurface",
    "WriterExclusion",
]
