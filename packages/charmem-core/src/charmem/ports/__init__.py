"""The ports: the contracts every adapter fulfils (DESIGN §1, STYLE "Ports and adapters").

Each port is a :class:`typing.Protocol` whose docstring is its contract. A port instance is bound
to one collection; adapters build themselves with ``from_settings(settings, collection, ...)`` (see
:mod:`charmem.composition`). Adapters translate driver exceptions into
:class:`~charmem.errors.BackendError` (cause chained) and never block the event loop for long:
blocking store calls run in a worker thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import BinaryIO, Protocol, runtime_checkable

import attrs

from charmem.domain.graph import (
    GraphBatch,
    GraphErasure,
    GraphExport,
    GraphWriteResult,
    LifecycleRecord,
    Tombstone,
)
from charmem.domain.ids import MemoryId
from charmem.domain.model import MemoryLink, MemoryObject, ObjectType, Relation
from charmem.domain.retrieval import CurrencyStatus, VectorRecallCompleteness

__all__ = [
    "Clock",
    "EmbeddingProvider",
    "EpisodeTurn",
    "EpisodeTurnReader",
    "GraphStore",
    "ObjectTypeHints",
    "RetrievalStatsStore",
    "StatsEntry",
    "StatsSummary",
    "TokenCounter",
    "VectorHit",
    "VectorIndex",
    "VectorPoint",
    "VectorQuery",
    "VectorSearchResult",
]


@runtime_checkable
class EmbeddingProvider(Protocol):
    """Turns text into dense vectors.

    Attributes:
        model_id: a stable name of the model (recorded in each collection's vector marker).
        vector_size: the number of dimensions of every vector it returns.

    Contract: ``embed_documents`` returns one row per text, in input order, each of
    ``vector_size`` finite floats; the same text gives the same vector. Failures raise
    :class:`~charmem.errors.BackendError`.
    """

    @property
    def model_id(self) -> str:
        """Stable model name, recorded in each collection's vector marker."""
        ...

    @property
    def vector_size(self) -> int:
        """Dimensions of every vector returned."""
        ...

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed memory texts: ``list[list[float]]``, one row per text, ``vector_size`` columns."""
        ...

    async def embed_query(self, text: str) -> list[float]:
        """Embed a recall cue: one row of ``vector_size`` floats."""
        ...


class TokenCounter(Protocol):
    """Counts prompt tokens for :meth:`ContinuityContextPack.render`.

    Attributes:
        name: shown in the pack so readers know what a "token" was.
    """

    @property
    def name(self) -> str:
        """The counter's name, shown in the pack."""
        ...

    def count(self, text: str) -> int:
        """Number of tokens in ``text`` (>= 0)."""
        ...


class Clock(Protocol):
    """The source of defaulted timestamps: ``now()`` returns a timezone-aware instant."""

    def now(self) -> datetime:
        """The current instant, timezone-aware."""
        ...


class GraphStore(Protocol):
    """The graph authority for one collection: objects, links, lifecycle records, currency.

    Contract:
        * ``write_batch`` is atomic: either every new item of the batch is stored or none is.
          Writers are serialised, so a check-then-write cannot interleave with another writer.
        * An id already stored (as an object, link or record, of any type) with equal content
          (:func:`charmem.domain.rules.content_equal`) is skipped; with different content the whole
          batch is refused with :class:`~charmem.errors.IdConflictError` and nothing is written.
        * An id that was purged (it has a :class:`~charmem.domain.graph.Tombstone`) is refused
          by ``write_batch`` with :class:`~charmem.errors.PurgedMemoryError` and nothing is
          written: a purged memory never comes back, whatever is replayed.
        * Objects and links read back equal to what was written (text byte-identical).
        * Nothing is ever deleted or rewritten by the memory operations. The one exception is
          :meth:`erase`, the out-of-band purge of ``charmem.admin.purge`` (personal-data erasure,
          spec "Memory permanence and data erasure").
        * ``export_graph`` / ``import_graph`` copy a whole collection between stores of the same
          adapter family (backup and restore, ``charmem.admin``).
        * Driver failures raise :class:`~charmem.errors.BackendError`.
    """

    @property
    def collection(self) -> str:
        """The collection this store is bound to."""
        ...

    async def write_batch(self, batch: GraphBatch) -> GraphWriteResult:
        """Store a batch atomically (see the contract). Returns what was new and what existed."""
        ...

    async def get_objects(self, ids: Sequence[MemoryId]) -> dict[MemoryId, MemoryObject]:
        """Objects stored under ``ids``; absent ids (and ids of links) are missing from the dict."""
        ...

    async def get_links(self, ids: Sequence[MemoryId]) -> dict[MemoryId, MemoryLink]:
        """Links stored under ``ids``; absent ids are missing from the dict."""
        ...

    async def get_records(self, target_ids: Sequence[MemoryId]) -> list[LifecycleRecord]:
        """Lifecycle records about ``target_ids``, ordered by (recorded_at, id)."""
        ...

    async def links_of(
        self,
        ids: Sequence[MemoryId],
        *,
        relations: Sequence[Relation] | None = None,
    ) -> list[MemoryLink]:
        """Links whose ``from_id`` or ``to_id`` is in ``ids``, ordered by link id.

        Only links of ``relations`` when given.
        """
        ...

    async def currency(
        self, ids: Sequence[MemoryId], *, as_of: datetime | None = None
    ) -> dict[MemoryId, CurrencyStatus]:
        """Currency of stored objects (DESIGN §4.1): suppressed beats superseded.

        Only records and ``supersedes`` links recorded at or before ``as_of`` count when it is
        given. Absent ids are missing from the dict.
        """
        ...

    async def statement_count(self) -> int:
        """Number of stored statements (triples, or rows for a non-RDF store) in the collection."""
        ...

    async def name_assertions(self) -> list[tuple[MemoryId, MemoryId, str]]:
        """Every stored ``KnownAs`` assertion as ``(belief_id, subject_id, name)``, sorted.

        Includes beliefs that are no longer current; callers filter with :meth:`currency`.
        """
        ...

    async def object_ids(self, object_types: Sequence[ObjectType] | None = None) -> list[MemoryId]:
        """Ids of every stored object (optionally of ``object_types``), sorted.

        For operational tools (rebuilding vectors and stats, checks), not for recall: the memory
        facade offers no enumeration.
        """
        ...

    async def link_ids(self) -> list[MemoryId]:
        """Ids of every stored link, sorted (operational tools only)."""
        ...

    async def tombstones(self, ids: Sequence[MemoryId] | None = None) -> dict[MemoryId, Tombstone]:
        """The tombstones of purged objects among ``ids`` (``None``: every tombstone), by id.

        Ids that were never purged are missing from the dict. Write validation asks it so that a
        replay cannot bring a purged memory back (DESIGN §5; ``charmem.admin.purge``).
        """
        ...

    async def erase(self, erasure: GraphErasure) -> None:
        """Remove objects, links and records for good and leave tombstones (out-of-band purge).

        Contract: atomic (everything of ``erasure`` or nothing); for each tombstone, every
        statement *describing* that object goes (its fields, its assertions) and the tombstone is
        stored under its id; the listed links and records go entirely (for an RDF store also each
        link's direct edge ``<from> <relation> <to>``). Statements of *other* items that merely
        refer to an erased id (a surviving derived memory's source ids, a kept link's endpoint, a
        kept record's ``related_ids``) are kept: they now refer to the tombstone. Ids that are
        already tombstones and absent links or records are skipped, so an erasure can be applied
        again. Afterwards ``get_objects``, ``currency``, ``object_ids`` and ``get_records`` no
        longer see the erased items, ``get_links`` / ``links_of`` / ``link_ids`` no longer see the
        erased links, and ``tombstones`` and ``write_batch`` see the tombstones.

        Only ``charmem.admin.purge`` calls it; it is never a memory operation.

        Raises:
            BackendError: the store failed; nothing was erased.
        """
        ...

    async def export_graph(self, out: BinaryIO) -> GraphExport:
        """Write every statement of the collection (tombstones included) to ``out``.

        The bytes are in the adapter's dump format (``GraphExport.media_type``; RDF stores write
        N-Quads in the collection's named graph), read as one consistent view. Writing does not
        close ``out``.

        Returns:
            GraphExport: the media type and how many statements were written.

        Raises:
            BackendError: the store failed or ``out`` could not be written.
        """
        ...

    async def import_graph(self, source: BinaryIO, media_type: str) -> int:
        """Load what :meth:`export_graph` wrote (for this same collection) into an empty collection.

        Contract: atomic (everything or nothing); afterwards every read answers as the exported
        store did (objects, links, records, currency, tombstones, ``statement_count``).

        Args:
            source: the exported bytes, read to the end (not closed).
            media_type: ``GraphExport.media_type`` of the export.

        Returns:
            int: statements loaded.

        Raises:
            CollectionNotEmptyError: the collection already holds statements; nothing written.
            BackupFormatError: the media type is not one this adapter reads, the bytes do not
                parse, or they hold statements of another collection; nothing written.
            BackendError: the store failed; nothing written.
        """
        ...

    async def close(self) -> None:
        """Release resources. Acknowledged writes are already durable."""
        ...


@attrs.frozen(kw_only=True)
class EpisodeTurn:
    """One observation's place in its episode: what ordering the turns of a session needs.

    Attributes:
        observation_id: the observation.
        observed_at: its ``observed_at`` (the order within the episode is ``(observed_at, id)``).
        created_at: its ``created_at`` (record time: an ``as_of`` view hides later turns).
    """

    observation_id: MemoryId
    observed_at: datetime
    created_at: datetime


@runtime_checkable
class EpisodeTurnReader(Protocol):
    """Optional :class:`GraphStore` capability: the turns of episodes without reading them whole.

    Context expansion (``charmem.usecases.retrieval``) needs the order of a recalled
    observation's episode to find its neighbours; a graph store that implements this answers
    from the observations' order fields alone (and may cache it). Graph stores without it are
    read through ``links_of`` and ``get_objects``, with the same result.
    """

    async def episode_turns(self, episode_ids: Sequence[MemoryId]) -> dict[MemoryId, list[EpisodeTurn]]:
        """The turns of each episode: one per stored ``has_observation`` link from it.

        Contract: the same answer as reading ``links_of(episode_ids, relations=[has_observation])``
        and ``get_objects`` of their ``to_id``: each link from an asked episode (its ``from_id``)
        to a stored :class:`~charmem.domain.model.Observation` whose ``episode_id`` is that
        episode gives one turn (an observation linked twice appears twice), whatever the
        ``as_of`` view (callers filter by ``created_at``). Order within a list is not part of the
        contract (callers sort by ``(observed_at, observation_id)``).

        Args:
            episode_ids: the episodes.

        Returns:
            dict[MemoryId, list[EpisodeTurn]]: by episode id; an episode without turns (or not
            stored) may be missing.

        Raises:
            BackendError: the store failed.
        """
        ...


@runtime_checkable
class ObjectTypeHints(Protocol):
    """Optional :class:`GraphStore` capability: take the object types candidate recall reported.

    The vector index keeps each point's object type (:class:`VectorHit`); retrieval passes them
    on before it reads the recalled memories. A graph store whose node addresses depend on the
    type (the Oxigraph stores' IRIs carry it) then reads a node of known type with one lookup
    instead of one per possible type. Graph stores without it answer the same, only slower.
    """

    def hint_object_types(self, types: Mapping[MemoryId, ObjectType]) -> None:
        """Take ``types`` as hints about ids the store may soon be asked for.

        Contract: advisory only. A wrong or stale hint (another type, an absent id) may cost the
        store another lookup, never a different answer from any method. A plain (not ``async``)
        method: it runs on the event loop, so it must not block (no I/O, no waiting on a lock
        held across I/O). It should not raise; retrieval logs an exception (or a coroutine
        returned by an ``async def``) and goes on without the hint.

        Args:
            types: object type by id (as the vector index recorded it).
        """
        ...


@attrs.frozen(kw_only=True)
class VectorPoint:
    """One candidate-recall entry: an object's id, type, vector and the text it embeds."""

    id: MemoryId
    object_type: ObjectType
    vector: Sequence[float]
    text: str = ""


@attrs.frozen(kw_only=True)
class VectorQuery:
    """A candidate-recall request.

    Attributes:
        vector: the query vector (``vector_size`` floats).
        limit: most hits returned (count).
        object_types: only points of these types (empty: all types).
        text: the cue text, for a lexical cue where the index supports one.
        within: only these points (``None``: every point); ids without a point are ignored.
            Retrieval uses it to rank the members of a notion against the query.
        min_score: a floor on the dense similarity (cosine): a point less similar than this to
            ``vector`` is not a dense candidate (Qdrant's ``score_threshold``); a lexical cue may
            still propose it when its text shares a term with ``text``. ``None``: no floor.
    """

    vector: Sequence[float]
    limit: int
    object_types: tuple[ObjectType, ...] = ()
    text: str | None = None
    within: tuple[MemoryId, ...] | None = None
    min_score: float | None = None


@attrs.frozen
class VectorHit:
    """One candidate: id, object type and similarity score (cosine, higher is closer)."""

    id: MemoryId
    object_type: ObjectType
    score: float


@attrs.frozen(kw_only=True)
class VectorSearchResult:
    """Hits ordered by score descending, ties by id ascending; and how complete the scan was.

    Scores of one :func:`~charmem.domain.retrieval.score_step` are ties.
    """

    hits: tuple[VectorHit, ...]
    completeness: VectorRecallCompleteness


class VectorIndex(Protocol):
    """Candidate recall for one collection: a rebuildable index over graph authority.

    Contract:
        * Bound at open to an embedder fingerprint (``model_id``, ``vector_size``): another size
          raises :class:`~charmem.errors.DimensionMismatchError`, another model of the same size
          :class:`~charmem.errors.EmbedderMismatchError`.
        * ``upsert`` replaces a point with the same id; ``delete`` of an absent id is a no-op.
        * ``search`` orders by score descending, ties by id ascending, and reports completeness;
          scores of one :func:`~charmem.domain.retrieval.score_step` (float noise below
          ``SCORE_RESOLUTION``) are ties, so a cut at ``limit`` keeps the same candidates whether
          the index computes in float32 or float64.
        * An embedded store held by another opener raises :class:`~charmem.errors.StoreLockedError`.
        * Driver failures raise :class:`~charmem.errors.BackendError`.
    """

    @property
    def vector_size(self) -> int:
        """Dimensions of the collection's vectors (the embedder fingerprint)."""
        ...

    @property
    def model_id(self) -> str:
        """Model id of the embedder fingerprint."""
        ...

    async def upsert(self, points: Sequence[VectorPoint]) -> None:
        """Insert or replace points (vectors of ``vector_size`` finite floats)."""
        ...

    async def delete(self, ids: Sequence[MemoryId]) -> None:
        """Remove points; absent ids are ignored."""
        ...

    async def search(self, query: VectorQuery) -> VectorSearchResult:
        """Nearest points to ``query.vector`` among ``query.object_types``."""
        ...

    async def point_ids(self) -> set[MemoryId]:
        """Every point id in the collection (for consistency checks and tests)."""
        ...

    async def count(self) -> int:
        """Number of points in the collection."""
        ...

    async def close(self) -> None:
        """Release resources (and the store lock)."""
        ...


@attrs.frozen(kw_only=True)
class StatsEntry:
    """One retrieval-stats row, keyed by the id of the object or link it counts.

    Attributes:
        id: the object's or link's id (the key: writing it again never counts twice).
        kind: ``"object"`` or ``"link"``.
        key: the object type value or the relation value.
        current: whether the object is current (links: always True).
        from_id, to_id: endpoints, for links (degree counts).
    """

    id: MemoryId
    kind: str
    key: str
    current: bool = True
    from_id: MemoryId | None = None
    to_id: MemoryId | None = None


@attrs.frozen(kw_only=True)
class StatsSummary:
    """Counters: objects per type (all and current), links per relation."""

    objects: Mapping[str, int]
    current_objects: Mapping[str, int]
    links: Mapping[str, int]


class RetrievalStatsStore(Protocol):
    """Retrieval statistics for one collection: derived policy data, never authority.

    Contract: ``record`` upserts rows by id (a replay never counts twice); counts and degrees
    reflect the rows recorded; failures raise :class:`~charmem.errors.BackendError`.
    """

    async def record(self, entries: Sequence[StatsEntry]) -> None:
        """Insert or replace rows keyed by ``entry.id``."""
        ...

    async def degrees(
        self, ids: Sequence[MemoryId], *, relation: Relation | None = None
    ) -> dict[MemoryId, int]:
        """Number of links touching each id (optionally of one relation); absent ids count 0."""
        ...

    async def summary(self) -> StatsSummary:
        """The counters of the collection."""
        ...

    async def row_count(self) -> int:
        """Number of rows of the collection."""
        ...

    async def clear(self) -> None:
        """Remove every row of the collection (before ``rebuild_stats``)."""
        ...

    async def close(self) -> None:
        """Release resources."""
        ...
