"""The graph-authority ports: the memory port, the admin port, and four optional capabilities.

A graph store is one object that fulfils both ports (:class:`GraphStore`). They are split by who
needs them: :class:`MemoryGraphStore` is what the memory operations read and write (remember,
correct, forget, link, retrieve); :class:`AdminGraphStore` holds the whole-collection operations
(enumeration, statement counts, backup, restore and erasure) that only the operational tools use:
:mod:`charmem.admin` and the rebuilds of derived data. The facade offers no enumeration.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
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
from charmem.domain.names import NameIndex
from charmem.domain.retrieval import CurrencyStatus

__all__ = [
    "AdminGraphStore",
    "CharacterRecord",
    "EpisodeTurn",
    "EpisodeTurnReader",
    "ExpansionReader",
    "GraphStore",
    "MemoryGraphStore",
    "ObjectTypeHints",
    "RacedWrites",
    "WriterExclusion",
]


class MemoryGraphStore(Protocol):
    """The memory port: graph authority as the memory operations use it, for one collection.

    Objects, links and lifecycle records go in as atomic batches and come out by id, by endpoint
    or as currency; nothing is ever rewritten.

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
          :meth:`AdminGraphStore.erase`, the out-of-band purge of ``charmem.admin.purge``
          (personal-data erasure, docs/operations.md, purge).
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
        """Currency of stored objects: current unless suppressed or superseded; suppressed wins.

        Only records and ``supersedes`` links recorded at or before ``as_of`` count when it is
        given. Absent ids are missing from the dict.
        """
        ...

    async def name_assertions(self) -> list[tuple[MemoryId, MemoryId, str]]:
        """Every stored ``KnownAs`` assertion as ``(belief_id, subject_id, name)``, sorted.

        Includes beliefs that are no longer current; callers filter with :meth:`currency`.
        """
        ...

    async def name_index(self) -> NameIndex:
        """The :class:`~charmem.domain.names.NameIndex` of :meth:`name_assertions`.

        Retrieval asks it on every query for the names the query mentions: a store keeps it
        between calls and in step with its writes, so that asking it does not cost work in the
        number of names (building it does, once).
        """
        ...

    async def tombstones(self, ids: Sequence[MemoryId] | None = None) -> dict[MemoryId, Tombstone]:
        """The tombstones of purged objects among ``ids`` (``None``: every tombstone), by id.

        Ids that were never purged are missing from the dict. Write validation asks it so that a
        replay cannot bring a purged memory back (``charmem.admin.purge``); the operational tools
        list every tombstone with no ``ids``.
        """
        ...

    async def close(self) -> None:
        """Release resources. Acknowledged writes are already durable."""
        ...


class AdminGraphStore(Protocol):
    """The admin port: whole-collection operations, for the operational tools only.

    :mod:`charmem.admin` (check, repair, export, import, purge) and the rebuilds of derived data
    (vectors and statistics) use these; the memory operations never do.

    Contract:
        * ``export_graph`` / ``import_graph`` copy a whole collection between stores of the same
          adapter family (backup and restore).
        * ``erase`` is the only operation that removes anything (see there).
        * Driver failures raise :class:`~charmem.errors.BackendError`.
    """

    async def statement_count(self) -> int:
        """Number of stored statements of the collection, in the adapter's own unit (>= 0).

        Zero when the collection holds nothing; the operational tools use it to tell an empty
        or missing collection from one that holds memories, and report it.
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

    async def erase(self, erasure: GraphErasure) -> None:
        """Remove objects, links and records for good and leave tombstones (out-of-band purge).

        Contract: atomic (everything of ``erasure`` or nothing); for each tombstone, everything
        stored *about* that object goes (its fields, its assertions) and the tombstone is stored
        under its id; the listed links and records go entirely, with whatever the store keeps to
        answer ``links_of`` for them. What *other* items say that merely refers to an erased id
        (a surviving derived memory's source ids, a kept link's endpoint, a kept record's
        ``related_ids``) is kept: it now refers to the tombstone. Ids that are already
        tombstones and absent links or records are skipped, so an erasure can be applied again.
        Afterwards ``get_objects``, ``currency``, ``object_ids`` and ``get_records`` no longer see
        the erased items, ``get_links`` / ``links_of`` / ``link_ids`` no longer see the erased
        links, and ``tombstones`` and ``write_batch`` see the tombstones.

        Only ``charmem.admin.purge`` calls it; it is never a memory operation.

        Raises:
            BackendError: the store failed; nothing was erased.
        """
        ...

    async def export_graph(self, out: BinaryIO) -> GraphExport:
        """Write everything stored for the collection (tombstones included) to ``out``.

        The bytes are in the adapter's dump format (``GraphExport.media_type``), read as one
        consistent view. Writing does not close ``out``.

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
                parse, they hold statements of another collection, or a stored item in them would
                not decode on a read (the message names it); nothing written.
            BackendError: the store failed; nothing written.
        """
        ...


class GraphStore(MemoryGraphStore, AdminGraphStore, Protocol):
    """The graph authority for one collection: the memory port and the admin port together.

    What a graph adapter implements and what :class:`~charmem.CharacterMemory` holds; see
    :class:`MemoryGraphStore` and :class:`AdminGraphStore` for the contract of each method.
    """


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
        contract (callers sort by ``(observed_at, observation_id)``). An asked id is an episode
        (stored as one, or not stored yet); an id stored as another type has no turns (the
        write path never links an observation from one).

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
class ExpansionReader(Protocol):
    """Optional :class:`GraphStore` capability: expansion's two reads in one call.

    Expansion (``charmem.usecases.retrieval``) reads the links around its roots and the turns of
    the root observations' episodes; neither depends on the other. A graph store whose reads
    each cost a hand-off to a worker thread answers both in one (the Oxigraph stores). Graph
    stores without it are asked ``links_of`` and then ``episode_turns``, with the same result.
    """

    async def links_and_turns(
        self,
        ids: Sequence[MemoryId],
        *,
        relations: Sequence[Relation] | None,
        episode_ids: Sequence[MemoryId],
    ) -> tuple[list[MemoryLink], dict[MemoryId, list[EpisodeTurn]]]:
        """``links_of(ids, relations=relations)`` and ``episode_turns(episode_ids)`` at once.

        Contract: each answer equals the one the two calls give (:meth:`MemoryGraphStore.links_of`,
        :meth:`EpisodeTurnReader.episode_turns`, whose contracts apply).

        Args:
            ids: the ids whose links are wanted.
            relations: only links of these relations (``None``: any).
            episode_ids: the episodes whose turns are wanted.

        Returns:
            tuple: (the links, by id; the turns by episode id).

        Raises:
            ValueError: a relation is not a :class:`~charmem.domain.model.Relation`.
            BackendError: the store failed.
        """
        ...


@runtime_checkable
class CharacterRecord(Protocol):
    """Optional :class:`GraphStore` capability: the character a collection belongs to.

    A collection records at most one character id (the notion id of the character whose memory
    it is), kept with the graph so an export carries it. ``CharacterMemory.open(...,
    character_id=...)`` records it on first open and refuses another one afterwards.
    """

    async def character_id(self) -> MemoryId | None:
        """The recorded character id (``None``: none recorded).

        Raises:
            BackendError: the store failed.
        """
        ...

    async def record_character_id(self, character_id: MemoryId) -> MemoryId:
        """Record ``character_id`` unless an id is recorded already; return the recorded id.

        Contract: atomic against other writers of the collection (two openers racing with
        different ids end with one recorded id, which both get back); never replaces an id.

        Raises:
            BackendError: the store failed; nothing was recorded.
        """
        ...


@runtime_checkable
class ObjectTypeHints(Protocol):
    """Optional :class:`GraphStore` capability: take the object types candidate recall reported.

    The vector index keeps each point's object type (:class:`~charmem.ports.VectorHit`);
    retrieval passes them on before it reads the recalled memories. A graph store whose address
    of a stored object depends on its type then reads an object of known type with one lookup
    instead of one per possible type. Graph stores without it answer the same, only slower.

    Why a port of its own, although only one adapter family needs it: the hint is a cost, not a
    meaning. Passing the types as an argument of :meth:`MemoryGraphStore.get_objects` would put
    a storage detail into the memory port every adapter implements and every use case calls,
    and each caller would need the types at hand; as an optional, advisory capability it costs
    the other adapters nothing, retrieval gives it in one place, and a store that ignores it,
    or gets it wrong, still answers the same. The contract suite checks exactly that.
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


@runtime_checkable
class WriterExclusion(Protocol):
    """Optional capability: a graph store other processes write to can hold their writers off.

    The write path checks what is stored, then writes (an id stored with other content, a memory
    that already has a successor, a purged id, an endpoint that is not stored). A store written by
    one process gets that right with the facade's writer lock; a store shared by several processes
    (a SPARQL server) offers :meth:`exclusive_writes`, and each check-then-write of the write path
    runs inside it, so what a single process refuses is refused across processes too, with the
    same error. A store without it (embedded, reference) is written by one process.
    """

    def exclusive_writes(self) -> AbstractAsyncContextManager[None]:
        """Hold the collection's writers (of every process) off until the block ends.

        While held, no other holder's check or write runs; ``write_batch`` and ``erase`` called
        inside the block (also from tasks it starts) write under it. Re-entering it inside the
        block does not wait.

        Raises:
            BackendError: the exclusion could not be had (the server failed, or another holder
                kept it too long), or it was lost while held; nothing was written unless the
                message says otherwise.
        """
        ...


@runtime_checkable
class RacedWrites(Protocol):
    """Optional capability of a store with :class:`WriterExclusion`: finding and settling raced writes.

    A writer whose exclusion was lost while it wrote (paused longer than its lease) may have stored
    an id another writer stored with other content meanwhile; the store then holds both contents
    under one id, which reads cannot decode. ``charmem.admin.check`` reports such ids and
    ``charmem.admin.repair`` settles them.
    """

    async def raced_writes(self) -> list[MemoryId]:
        """The ids stored with more than one content (reads only).

        Raises:
            BackendError: the store failed.
        """
        ...

    async def settle_raced_writes(self) -> list[MemoryId]:
        """Keep one content per raced id, by a rule every process computes alike; remove the others.

        What a losing content stored and the kept one does not is removed; what both store stays.
        Runs under the store's writer exclusion; settling again finds nothing to do.

        Returns:
            list[MemoryId]: the ids settled.

        Raises:
            BackendError: the store failed; nothing, or every settlement, was written.
        """
        ...
