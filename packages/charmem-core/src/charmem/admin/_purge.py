"""``purge``: out-of-band erasure of memories for personal-data obligations (GDPR/CCPA deletion).

The memory operations never delete (docs/concepts/lifecycle.md, "Append-only memory": forgetting
suppresses, correcting supersedes). Applications with erasure obligations need an operational
action against the backing stores instead, covering every store and tombstoning the provenance
references that would otherwise dangle. This is that action. It is destructive, it is outside the
memory-permanence rule, and it is deliberately not a method of the memory facade.

What :func:`purge` does, for each memory object named (episode, observation, notion, thread,
derived memory):

* **Graph authority** (one atomic :meth:`~charmem.ports.GraphStore.erase`): every statement of
  the object goes (its text, summary, title, raw reference, names it asserts...), with every link
  touching it and every lifecycle record about it (their rationales may repeat the personal data).
  The object's node is replaced by a :class:`~charmem.domain.graph.Tombstone`: its id, its object
  type and the purge time, nothing else ("something was here, purged at T").
* **Provenance** of surviving memories is not rewritten: a derived memory grounded on a purged
  episode keeps the episode's id among its sources, and that id now resolves to the tombstone
  (the derived memory stays, current or not as before, and is still recalled with its own text).
  The same holds for a record's ``related_ids`` (a suppression cascaded from a purged episode
  stays in force), an observation's episode, an episode's participants and so on.
* **Currency of survivors never changes**: a ``supersedes`` link *from* a purged memory *to* a
  surviving one is kept (it holds ids and a time, no text), so purging a correction does not
  bring the corrected belief back, as forgetting a correction never does.
* **Candidate recall**: the purged ids' points are deleted from the vector index.
* **Retrieval statistics**: rebuilt from the graph (rows hold ids and types, never text).
* **Never again**: writes that name a purged id (a replayed plan from
  :meth:`~charmem.RememberWritePlan.from_json`, a replayed correction, a link, a forget) are
  refused with :class:`~charmem.errors.PurgedMemoryError`; a new memory cannot cite it as a source,
  subject or thread, and a correction never inherits it.
* Then :func:`charmem.admin.check` runs and its report is returned.

What stays: memories that are *not* named, even when their own text repeats the personal data
(a derived memory paraphrasing a purged observation, the observation of a purged episode, a
rationale of a record about a survivor). Purge them too: :attr:`PurgeReport.linked_ids` lists the
survivors that were linked to the purged memories, a starting point for that review. Backups made
before the purge (``charmem export``) still contain the data: purge restored copies again, or
destroy the backups. Storage engines may keep deleted bytes until they compact: the embedded
Oxigraph store is asked to compact after the erasure; for the Qdrant Edge shard, ``charmem
rebuild-vectors --drop`` re-creates it from the (purged) graph; SPARQL and Qdrant servers keep
whatever their journals and snapshots keep.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from charmem.admin._check import CheckReport, check_stores
from charmem.domain.graph import GraphErasure, LifecycleRecord, Tombstone
from charmem.domain.ids import MemoryId, as_memory_id
from charmem.domain.model import MemoryLink, MemoryObject, Relation
from charmem.errors import BackendError, PurgeTargetError
from charmem.log import get_logger
from charmem.memory import CharacterMemory
from charmem.ports import GraphStore
from charmem.usecases.commit import rebuild_stats
from charmem.usecases.store_writes import exclusive_writes, finish_write

__all__ = ["PurgeReport", "purge"]

log = get_logger("charmem.admin")


@attrs.frozen(kw_only=True)
class PurgeReport:
    """What :func:`purge` removed, kept and found.

    Attributes:
        collection: the collection purged.
        purged_at: the instant written into the new tombstones (timezone-aware).
        purged_ids: objects erased by this call, sorted.
        already_purged_ids: ids named that were tombstones already (their vectors were deleted
            and stats rebuilt again, nothing else), sorted.
        removed_link_ids: links erased with the objects, sorted.
        removed_record_ids: lifecycle records about the objects that were erased, sorted.
        kept_link_ids: ``supersedes`` links from a purged memory to a surviving one, kept so the
            survivor stays superseded, sorted.
        linked_ids: surviving objects that were linked to a purged one (their references now
            resolve to tombstones; review them for copies of the personal data), sorted.
        stats_rows: rows written by the statistics rebuild (count).
        check: the consistency check run afterwards.
    """

    collection: str
    purged_at: datetime
    purged_ids: tuple[MemoryId, ...]
    already_purged_ids: tuple[MemoryId, ...]
    removed_link_ids: tuple[MemoryId, ...]
    removed_record_ids: tuple[MemoryId, ...]
    kept_link_ids: tuple[MemoryId, ...]
    linked_ids: tuple[MemoryId, ...]
    stats_rows: int
    check: CheckReport

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types (ids as strings, the instant in ISO 8601, the check's own dict)."""

        def ids(values: Sequence[MemoryId]) -> list[str]:
            return [str(i) for i in values]

        return {
            "collection": self.collection,
            "purged_at": self.purged_at.isoformat(),
            "purged_ids": ids(self.purged_ids),
            "already_purged_ids": ids(self.already_purged_ids),
            "removed_link_ids": ids(self.removed_link_ids),
            "removed_record_ids": ids(self.removed_record_ids),
            "kept_link_ids": ids(self.kept_link_ids),
            "linked_ids": ids(self.linked_ids),
            "stats_rows": self.stats_rows,
            "check": self.check.to_dict(),
        }


def _kept(link: MemoryLink, purging: set[MemoryId]) -> bool:
    """Whether a link touching purged memories stays: a supersedes link into a survivor."""
    return link.relation is Relation.SUPERSEDES and link.from_id in purging and link.to_id not in purging


async def purge(
    memory: CharacterMemory,
    ids: Sequence[MemoryId | str],
    *,
    purged_at: datetime | None = None,
) -> PurgeReport:
    """Erase memory objects from every store for good, leaving tombstones (see the module notes).

    Destructive and outside the memory-permanence rule: use it to honour a personal-data erasure
    request, never as a way to forget (that is :meth:`CharacterMemory.forget`). Holds the memory's
    writer lock throughout (:meth:`CharacterMemory.exclusive`). Every id is checked before
    anything is written. Running it again with the same ids is harmless and finishes a purge that
    failed after the graph step (vectors, statistics).

    Args:
        memory: an open memory of the collection (its graph, vectors and stats are used directly).
        ids: ids of memory objects (episodes, observations, notions, threads, derived memories);
            ``MemoryId`` values or UUID strings. Links and lifecycle records are not named: they go
            with the objects they touch or are about.
        purged_at: the instant written into the tombstones (timezone-aware; default: the memory's
            clock).

    Returns:
        PurgeReport: what was erased and kept, and the consistency check made afterwards.

    Raises:
        PurgeTargetError: no id given, or an id is unknown (neither stored nor purged), a link or
            otherwise not a memory object; ``reasons`` says why for each; nothing was written.
        DraftValidationError: an id is not a UUID, or ``purged_at`` is naive; nothing was written.
        BackendError: a store failed. If the graph step failed, nothing was erased; if a later step
            failed, the graph is purged: run the same purge again to finish.
    """
    wanted = sorted({as_memory_id(i) for i in ids})
    if not wanted:
        raise PurgeTargetError("name at least one memory object to purge", reasons={})
    stores = memory._stores
    graph = stores.graph
    async with memory.exclusive(), exclusive_writes(graph):  # writers of every process wait
        when = purged_at or memory.clock.now()
        objects, already = await _purge_targets(graph, wanted, memory.collection)
        touching = await graph.links_of(sorted(objects)) if objects else []
        records = await graph.get_records(sorted(objects)) if objects else []
        erasure = _GraphPurge.of(objects, touching, records, when)
        await finish_write(graph.erase(erasure.erasure))
        log.warning(
            "memories_purged",
            collection=memory.collection,
            purged=len(objects),
            already_purged=len(already),
            links=len(erasure.erasure.link_ids),
            records=len(records),
        )
        rows = await _purge_derived_data(memory, wanted)
        report = await check_stores(graph, stores.vectors, stores.stats)
    return PurgeReport(
        collection=memory.collection,
        purged_at=when,
        purged_ids=tuple(sorted(objects)),
        already_purged_ids=tuple(sorted(already)),
        removed_link_ids=tuple(erasure.erasure.link_ids),
        removed_record_ids=tuple(erasure.erasure.record_ids),
        kept_link_ids=erasure.kept_link_ids,
        linked_ids=erasure.linked_ids,
        stats_rows=rows,
        check=report,
    )


async def _purge_targets(
    graph: GraphStore, wanted: Sequence[MemoryId], collection: str
) -> tuple[dict[MemoryId, MemoryObject], set[MemoryId]]:
    """The stored objects among ``wanted`` and the ids that are tombstones already.

    Raises:
        PurgeTargetError: an id is neither (unknown, or a link); nothing was written.
    """
    objects = dict(await graph.get_objects(wanted))
    already = set(await graph.tombstones([i for i in wanted if i not in objects]))
    unknown = [i for i in wanted if i not in objects and i not in already]
    if not unknown:
        return objects, already
    links = await graph.get_links(unknown)
    reasons = {
        str(i): (
            "is a link; links are purged together with the memory objects they join"
            if i in links
            else f"no memory object with this id is stored (or purged) in collection {collection!r}"
        )
        for i in unknown
    }
    raise PurgeTargetError(
        f"{len(unknown)} id(s) cannot be purged, e.g. {unknown[0]}: {reasons[str(unknown[0])]}; "
        "nothing was written",
        reasons=reasons,
    )


@attrs.frozen(kw_only=True)
class _GraphPurge:
    """What purging some objects erases from the graph, and what it keeps (pure).

    Attributes:
        erasure: the tombstones, links and records to erase, in one graph call.
        kept_link_ids: ``supersedes`` links from a purged memory into a survivor, sorted.
        linked_ids: surviving objects linked to a purged one, sorted.
    """

    erasure: GraphErasure
    kept_link_ids: tuple[MemoryId, ...]
    linked_ids: tuple[MemoryId, ...]

    @classmethod
    def of(
        cls,
        objects: Mapping[MemoryId, MemoryObject],
        touching: Sequence[MemoryLink],
        records: Sequence[LifecycleRecord],
        when: datetime,
    ) -> _GraphPurge:
        """Plan the erasure of ``objects`` with the links touching them and their records."""
        purging = set(objects)
        removed = [link for link in touching if not _kept(link, purging)]
        linked = {end for link in touching for end in (link.from_id, link.to_id)} - purging
        return cls(
            erasure=GraphErasure(
                tombstones=[
                    Tombstone(id=memory_id, object_type=obj.object_type, purged_at=when)
                    for memory_id, obj in sorted(objects.items())
                ],
                link_ids=[link.id for link in removed],
                record_ids=[record.id for record in records],
            ),
            kept_link_ids=tuple(sorted(link.id for link in touching if _kept(link, purging))),
            linked_ids=tuple(sorted(linked)),
        )


async def _purge_derived_data(memory: CharacterMemory, wanted: Sequence[MemoryId]) -> int:
    """Delete the purged ids' vectors and rebuild the statistics; the rows written (count).

    Raises:
        BackendError: a store failed; the graph is purged already, so the message says to run the
            same purge again.
    """
    stores = memory._stores
    try:
        await finish_write(stores.vectors.delete(wanted))
        return await rebuild_stats(stores.graph, stores.stats)
    except BackendError as exc:
        raise BackendError(
            f"the graph of collection {memory.collection!r} is purged, but {exc}; run the same "
            "purge again to finish removing the vectors and rebuilding the statistics"
        ) from exc
