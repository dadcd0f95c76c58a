"""What a process already knows about one collection's graph, so hot reads skip Oxigraph.

Reading a node back from RocksDB costs ~10-25 µs per triple (term decoding), so a retrieval that
meets a few hundred memories spent most of its time re-reading and re-decoding the same immutable
objects. :class:`GraphCache` keeps, per collection:

* **items**: decoded objects, links and lifecycle records by id, and the stored **kind** of ids.
  Both are immutable once written (stored content is never rewritten; an erasure clears the
  cache), so they are always safe to keep, even when another process writes to the same SPARQL server.
* **hints**: the kind a reference IRI read back carried for an id (a link's endpoints, an
  observation's episode, ...): almost always its stored kind, so a first read of that id binds
  one IRI instead of one per kind; a read that does not find the node under its hinted IRI asks
  again under every kind, so a wrong hint costs a query, never a wrong answer.
* **coherent** knowledge that changes as the graph grows, kept only when every write of the
  collection passes through this process's writer (the embedded store holds RocksDB's lock, so
  it does): ids known to be **absent**, the **adjacency** of an id (its link ids per relation),
  its **currency facts** (suppression and supersession instants), the **turns** of an episode
  (:meth:`charmem.ports.EpisodeTurnReader.episode_turns`) and the ``KnownAs`` **names**.
  Also, once read whole, the collection's **lifecycle index**: every ``supersedes`` link and the
  instant of every ``suppress`` record (corrections and forgetting are rare next to memories), so
  the currency of an id of known kind and its ``supersedes`` hop need no query at all; a
  collection with more of them than ``max_entries`` is not indexed (per-id queries instead).
  Likewise the ids links name before they were stored (:mod:`charmem_oxigraph._unstored`).
  An id is only known absent when a read under every kind found neither its node nor its
  tombstone, so absent ids are known not to be purged too (:meth:`GraphCache.unpurged`).
* a **census** (coherent only, optional): the kind of every item node and tombstone of the
  collection, and the ids that ``suppress`` records or ``supersedes`` links refer to before they
  were stored (under ``urn:charmem:object:``). The store takes one when a read would otherwise
  probe many unknown ids one IRI per kind (a bulk write); from then on every id is known stored
  (and of which kind), purged or absent without a query, and an object a write inserts has known
  currency facts unless such an early reference names it. It is bounded
  (:data:`CENSUS_MAX_ENTRIES` per ``max_entries``): beyond that the census is dropped.
  The writer updates them after each successful write (:meth:`GraphCache.apply_write`) and bumps a
  generation counter; a reader only stores what it read if no write happened since it started
  reading (:meth:`GraphCache.generation`), so a slow reader never puts stale knowledge back.

Every map is bounded (``max_entries`` per map, oldest entries forgotten first). All methods are
thread-safe and fast enough (dictionary work under one lock) to run on the event loop.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Final

import attrs
from charmem.domain.graph import LifecycleAction, LifecycleRecord
from charmem.domain.ids import MemoryId
from charmem.domain.model import DerivedMemory, MemoryLink, Observation, Relation, known_names
from charmem.domain.names import NameIndex
from charmem.ports import EpisodeTurn

from charmem_oxigraph import _vocab as v
from charmem_oxigraph._bounded import BoundedMap
from charmem_oxigraph._codec import StoredItem
from charmem_oxigraph._currency import NOT_STORED_FACTS, CurrencyFacts, LifecycleIndex
from charmem_oxigraph._unstored import UnstoredEndpoints

__all__ = ["CENSUS_MAX_ENTRIES", "DEFAULT_MAX_ENTRIES", "PURGED", "CurrencyFacts", "GraphCache"]

#: Entries kept per map of a collection's cache (items, kinds, absent ids, adjacency, currency).
DEFAULT_MAX_ENTRIES: Final = 50_000
#: A census holds up to this many times ``max_entries`` ids (its entries are small: a UUID's
#: integer and a shared kind string, about 80 bytes each, so at most ~40 MB). Past it a bulk
#: write probes each new id under every kind: ~150 ms more per plan of 500 memories.
CENSUS_MAX_ENTRIES: Final = 10
#: The census entry of a purged id (its node is a tombstone).
PURGED: Final = "purged"

_ALL: Final = frozenset(Relation)
_SUPERSEDES: Final = frozenset({Relation.SUPERSEDES})


def _relation_of(item: StoredItem | None) -> Relation | None:
    return item.relation if isinstance(item, MemoryLink) else None


class GraphCache:
    """Knowledge of one collection's graph held in this process (module docstring).

    Args:
        max_entries: entries kept per map (the oldest are forgotten first).
        coherent: whether every write of the collection goes through :meth:`apply_write` of this
            cache (embedded store), which makes absent ids, adjacency, currency and names safe to
            keep. ``False`` (a SPARQL server other processes may write to) keeps only immutable
            items and kinds.
    """

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES, *, coherent: bool = True) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.coherent = coherent
        self._lock = threading.Lock()
        self._generation = 0
        self._items: BoundedMap[MemoryId, StoredItem] = BoundedMap(max_entries)
        self._kinds: BoundedMap[MemoryId, str] = BoundedMap(max_entries)
        self._hints: BoundedMap[MemoryId, str] = BoundedMap(max_entries)
        self._absent: BoundedMap[MemoryId, bool] = BoundedMap(max_entries)
        # id -> (relations whose links are all listed, ids of those links)
        self._adjacency: BoundedMap[MemoryId, tuple[frozenset[Relation], tuple[MemoryId, ...]]] = BoundedMap(
            max_entries
        )
        self._facts: BoundedMap[MemoryId, CurrencyFacts] = BoundedMap(max_entries)
        self._turns: BoundedMap[MemoryId, tuple[EpisodeTurn, ...]] = BoundedMap(max_entries)
        self._names: tuple[tuple[MemoryId, MemoryId, str], ...] | None = None
        self._name_index: NameIndex | None = None  # None, or the index of _names
        self._max_entries = max_entries
        self._lifecycle: LifecycleIndex | None = None
        self._lifecycle_refused = False  # more than max_entries: stays so until clear()
        self._unstored = UnstoredEndpoints(max_entries)
        # census: UUID integer -> stored kind or PURGED, for every item node and tombstone
        self._census: dict[int, str] | None = None
        # ids referred to under ``urn:charmem:object:`` by a suppress record or a supersedes link
        self._early: set[int] = set()
        self._census_cap = max_entries * CENSUS_MAX_ENTRIES
        self._census_floor = 0  # the collection is known to hold more item nodes than this
        #: The graph is known to record the current layout version (set by a write or a check).
        self.layout_recorded = False

    # -- generation ---------------------------------------------------------------------------

    def generation(self) -> int:
        """The write count; take it before reading the store and hand it to a ``remember_*``."""
        with self._lock:
            return self._generation

    def _current(self, generation: int) -> bool:
        return self.coherent and generation == self._generation

    # -- items and kinds (immutable) ----------------------------------------------------------

    def items(self, ids: Iterable[MemoryId]) -> tuple[dict[MemoryId, StoredItem], list[MemoryId]]:
        """Cached items among ``ids`` and the ids to read from the store.

        Ids known to be absent are in neither.

        Returns:
            tuple: (items by id, in ``ids`` order; ids whose state is unknown, in ``ids`` order).
        """
        found: dict[MemoryId, StoredItem] = {}
        unknown: list[MemoryId] = []
        with self._lock:
            census = self._census
            for memory_id in ids:
                item = self._items.get(memory_id)
                if item is not None:
                    found[memory_id] = item
                elif census is not None:
                    kind = census.get(memory_id.value.int)
                    if kind is not None and kind != PURGED:  # stored, not cached: read it
                        unknown.append(memory_id)
                elif not (self.coherent and self._absent.get(memory_id)):
                    unknown.append(memory_id)
        return found, unknown

    def kinds(self, ids: Iterable[MemoryId]) -> dict[MemoryId, str]:
        """The stored kinds (``urn:charmem:<kind>:`` segment) known for ``ids``."""
        with self._lock:
            census = self._census
            if census is None:
                return {
                    memory_id: kind for memory_id in ids if (kind := self._kinds.get(memory_id)) is not None
                }
            return {
                memory_id: kind
                for memory_id in ids
                if (kind := census.get(memory_id.value.int)) is not None and kind != PURGED
            }

    def unpurged(self, ids: Iterable[MemoryId]) -> set[MemoryId]:
        """The ids among ``ids`` known not to be tombstones (coherent caches only).

        Stored ids (an erasure clears the cache) and absent ids (read under every kind, neither
        node nor tombstone found) are not purged; so is every id a census does not list as purged.
        """
        if not self.coherent:
            return set()
        with self._lock:
            census = self._census
            if census is not None:
                return {memory_id for memory_id in ids if census.get(memory_id.value.int) != PURGED}
            return {
                memory_id
                for memory_id in ids
                if self._absent.get(memory_id)
                or self._kinds.get(memory_id) is not None
                or self._items.get(memory_id) is not None
            }

    def hints(self, ids: Iterable[MemoryId]) -> dict[MemoryId, str]:
        """The kinds reference IRIs suggested for ``ids`` (guesses: see the module docstring)."""
        with self._lock:
            return {memory_id: kind for memory_id in ids if (kind := self._hints.get(memory_id)) is not None}

    def remember_hints(self, hints: Mapping[MemoryId, str]) -> None:
        """Keep the kinds reference IRIs carried (:func:`charmem_oxigraph._hints.reference_kinds`)."""
        with self._lock:
            for memory_id, kind in hints.items():
                self._hints.put(memory_id, kind)

    def remember_items(
        self, generation: int, items: Mapping[MemoryId, StoredItem], absent: Iterable[MemoryId] = ()
    ) -> None:
        """Keep items read from the store, and ids it did not hold (if no write happened since).

        Args:
            generation: :meth:`generation` taken before the read.
            items: the items read.
            absent: ids read under every kind that have neither a node nor a tombstone.
        """
        with self._lock:
            for memory_id, item in items.items():
                self._items.put(memory_id, item)
                self._kinds.put(memory_id, v.KIND_OF_CLASS[type(item)])
            if self._current(generation):
                for memory_id in absent:
                    self._absent.put(memory_id, True)

    # -- census -------------------------------------------------------------------------------

    @property
    def has_census(self) -> bool:
        """Whether a census of the collection is held."""
        with self._lock:
            return self._census is not None

    def census_limit(self, probes: int) -> int:
        """How many item nodes a census may scan instead of probing ``probes`` IRIs (0: none).

        A census costs about as much per item node as a probe per IRI, so it scans at most
        ``probes`` nodes (and at most the census bound). 0 when the cache is not coherent, already
        holds a census, or the collection is known to hold at least that many item nodes.
        """
        with self._lock:
            limit = min(probes, self._census_cap)
            if not self.coherent or self._census is not None or limit <= self._census_floor:
                return 0
            return limit

    def census_refused(self, limit: int) -> None:
        """Record that the collection holds more than ``limit`` item nodes (a census hit its cap)."""
        with self._lock:
            self._census_floor = max(self._census_floor, limit)

    def remember_census(self, generation: int, kinds: Mapping[int, str], early: Iterable[int]) -> bool:
        """Keep a census read from the store (if no write happened since ``generation``).

        Args:
            generation: :meth:`generation` taken before the census was read.
            kinds: every item node and tombstone of the collection: UUID integer -> stored kind
                (``urn:charmem:<kind>:`` segment) or :data:`PURGED`.
            early: UUID integers of the ids ``suppress`` records and ``supersedes`` links refer to
                under ``urn:charmem:object:`` (written before the id was stored).

        Returns:
            bool: whether the census is now held.
        """
        with self._lock:
            if not self._current(generation) or len(kinds) > self._census_cap:
                return False
            self._census = dict(kinds)
            self._early = set(early)
            return True

    # -- adjacency ----------------------------------------------------------------------------

    def links_of(
        self, ids: Sequence[MemoryId], relations: Sequence[Relation] | None
    ) -> tuple[dict[MemoryId, MemoryLink], list[MemoryId]]:
        """Cached links touching ``ids`` (of ``relations``; ``None``: all) and the ids to read.

        Returns:
            tuple: (links by link id; ids whose adjacency or some of whose links are not cached).
        """
        wanted = _ALL if relations is None else frozenset(relations)
        found: dict[MemoryId, MemoryLink] = {}
        unknown: list[MemoryId] = []
        if not self.coherent:
            return found, list(ids)
        items = self._items
        with self._lock:
            if wanted == _SUPERSEDES and self._lifecycle is not None:
                return self._lifecycle.links_of(ids), unknown
            for memory_id in ids:
                entry = self._adjacency.get(memory_id)
                if entry is None or not wanted <= entry[0]:
                    unknown.append(memory_id)
                    continue
                links = [items.get(link_id) for link_id in entry[1]]
                complete = [link for link in links if isinstance(link, MemoryLink)]
                if len(complete) != len(links):
                    unknown.append(memory_id)  # a link was forgotten: read the id again
                    continue
                found.update((link.id, link) for link in complete if link.relation in wanted)
        return found, unknown

    def remember_links_of(
        self,
        generation: int,
        ids: Iterable[MemoryId],
        relations: Sequence[Relation] | None,
        links: Iterable[MemoryLink],
    ) -> None:
        """Keep the complete adjacency of ``ids`` for ``relations`` read from the store.

        Args:
            generation: :meth:`generation` taken before the read.
            ids: the endpoints that were asked about.
            relations: the relations the read covered (``None``: all).
            links: every link of those relations touching any of ``ids``.
        """
        covered = _ALL if relations is None else frozenset(relations)
        link_list = list(links)
        by_end: dict[MemoryId, list[MemoryId]] = {memory_id: [] for memory_id in ids}
        for link in link_list:
            for end in {link.from_id, link.to_id}:
                if end in by_end:
                    by_end[end].append(link.id)
        with self._lock:
            for link in link_list:
                self._items.put(link.id, link)
                self._kinds.put(link.id, "link")
            if not self._current(generation):
                return
            for memory_id, link_ids in by_end.items():
                entry = self._adjacency.get(memory_id)
                relations_known = covered
                if entry is not None:  # keep the links of the other relations already known
                    others = [_relation_of(self._items.get(i)) for i in entry[1]]
                    if None not in others:  # (else a link was forgotten: keep the new read only)
                        relations_known = entry[0] | covered
                        link_ids = [
                            i for i, r in zip(entry[1], others, strict=True) if r not in covered
                        ] + link_ids
                self._adjacency.put(memory_id, (relations_known, tuple(link_ids)))

    def unstored_kinds(self, ids: Iterable[MemoryId]) -> Mapping[MemoryId, tuple[str, ...]] | None:
        """The kinds links name ``ids`` by besides their stored ones (``None``: not known)."""
        with self._lock:
            return self._unstored.kinds(ids) if self.coherent else None

    def wants_unstored(self) -> bool:
        """Whether the collection's ``vocab:unstoredEndpoint`` marks should be read now."""
        with self._lock:
            return self.coherent and self._unstored.wanted

    def remember_unstored(self, generation: int, iris: Iterable[str]) -> None:
        """Keep every marked endpoint IRI read from the store (if no write happened since)."""
        with self._lock:
            self._unstored.read(iris, current=self._current(generation))

    # -- currency -----------------------------------------------------------------------------

    def currency_facts(self, ids: Iterable[MemoryId]) -> tuple[dict[MemoryId, CurrencyFacts], list[MemoryId]]:
        """Cached currency facts among ``ids`` and the ids to read from the store."""
        found: dict[MemoryId, CurrencyFacts] = {}
        unknown: list[MemoryId] = []
        if not self.coherent:
            return found, list(ids)
        with self._lock:
            lifecycle, census = self._lifecycle, self._census
            for memory_id in ids:
                facts = self._facts.get(memory_id)
                if facts is None and lifecycle is not None:
                    kind = self._kinds.get(memory_id)
                    if kind is None and census is not None:  # complete: not in it, not stored
                        kind = census.get(memory_id.value.int, PURGED)
                    if kind is not None:
                        facts = lifecycle.facts(memory_id, stored=kind in v.OBJECT_KINDS)
                    elif self._absent.get(memory_id):
                        facts = NOT_STORED_FACTS
                if facts is None:
                    unknown.append(memory_id)
                else:
                    found[memory_id] = facts
        return found, unknown

    @property
    def max_entries(self) -> int:
        """Entries kept per map (and the largest lifecycle index kept)."""
        return self._max_entries

    def wants_lifecycle(self) -> bool:
        """Whether the lifecycle index should be read now (coherent, not read, not too large)."""
        with self._lock:
            return self.coherent and self._lifecycle is None and not self._lifecycle_refused

    def remember_lifecycle(
        self,
        generation: int,
        links: Iterable[MemoryLink],
        suppressed: Iterable[tuple[MemoryId, datetime]],
    ) -> None:
        """Keep the whole lifecycle index read from the store (if no write happened since).

        Args:
            generation: :meth:`generation` taken before the read.
            links: every ``supersedes`` link of the collection.
            suppressed: (target id, ``recorded_at``) of every ``suppress`` record.
        """
        index = LifecycleIndex()
        for link in links:
            index.add_link(link)
        for target, recorded_at in suppressed:
            index.add_suppress(target, recorded_at)
        with self._lock:
            if index.size > self._max_entries:
                self._lifecycle_refused = True
            elif self._current(generation):
                self._lifecycle = index

    def refuse_lifecycle(self) -> None:
        """Do not index this collection's lifecycle (it holds more than ``max_entries`` entries)."""
        with self._lock:
            self._lifecycle_refused = True

    def remember_currency_facts(self, generation: int, facts: Mapping[MemoryId, CurrencyFacts]) -> None:
        """Keep currency facts read from the store (if no write happened since ``generation``)."""
        with self._lock:
            if self._current(generation):
                for memory_id, value in facts.items():
                    self._facts.put(memory_id, value)

    # -- episode turns ------------------------------------------------------------------------

    def episode_turns(
        self, ids: Iterable[MemoryId]
    ) -> tuple[dict[MemoryId, list[EpisodeTurn]], list[MemoryId]]:
        """Cached turns of the episodes ``ids`` and the episodes to read.

        Returns:
            tuple: (turns by episode, episodes with turns only; episodes whose turns are unknown).
        """
        found: dict[MemoryId, list[EpisodeTurn]] = {}
        unknown: list[MemoryId] = []
        if not self.coherent:
            return found, list(ids)
        with self._lock:
            for memory_id in ids:
                turns = self._turns.get(memory_id)
                if turns is None:
                    unknown.append(memory_id)
                elif turns:
                    found[memory_id] = list(turns)
        return found, unknown

    def remember_episode_turns(
        self, generation: int, ids: Iterable[MemoryId], turns: Mapping[MemoryId, Sequence[EpisodeTurn]]
    ) -> None:
        """Keep the turns of the episodes ``ids`` read from the store (an episode missing: none).

        Only if no write happened since ``generation``; the turns' observations are known to be
        stored as observations from then on.
        """
        with self._lock:
            for listed in turns.values():
                for turn in listed:
                    self._kinds.put(turn.observation_id, "observation")
            if self._current(generation):
                for memory_id in ids:
                    self._turns.put(memory_id, tuple(turns.get(memory_id, ())))

    # -- names --------------------------------------------------------------------------------

    def names(self) -> list[tuple[MemoryId, MemoryId, str]] | None:
        """Every ``KnownAs`` assertion, if cached."""
        with self._lock:
            return None if self._names is None or not self.coherent else list(self._names)

    def remember_names(self, generation: int, names: Sequence[tuple[MemoryId, MemoryId, str]]) -> None:
        """Keep the ``KnownAs`` assertions read from the store (if no write happened since)."""
        with self._lock:
            if self._current(generation):
                self._names = tuple(names)

    def name_index(self) -> NameIndex | None:
        """The index of the ``KnownAs`` assertions, if cached."""
        with self._lock:
            return self._name_index if self.coherent else None

    def remember_name_index(self, generation: int, index: NameIndex) -> None:
        """Keep the index built from the assertions read at ``generation`` (if no write since)."""
        with self._lock:
            if self._current(generation):
                self._name_index = index

    # -- the writer ---------------------------------------------------------------------------

    def apply_write(self, inserted: Sequence[StoredItem], unstored: Iterable[str] = ()) -> None:
        """Bring coherent knowledge in step with items just written, and start a new generation.

        Called by the collection's writer (under its write lock) after the store accepted
        ``inserted``. Kinds are recorded; the ids stop being absent; a new link's endpoints forget
        their adjacency (read again on next use, so only decoded links are served); a new
        observation or ``has_observation`` link makes its episode's turns be read again; a
        ``suppress`` record or a ``supersedes`` link adds its instant to the currency facts of its
        target; a new object becomes stored in its facts; the ``KnownAs`` assertions of a new
        derived memory join the cached names (every stored assertion, current or not, as
        :meth:`charmem.ports.GraphStore.name_assertions` lists them).

        With a census, the inserted ids join it, and a new object that no earlier reference names
        (the census's ``early`` ids) gets the currency facts of a stored object with no suppression
        and no supersession, to which this write's own records and links then add; a ``suppress``
        record or ``supersedes`` link to an id neither stored nor in the write (written under
        ``urn:charmem:object:``) makes that id an early reference.

        Args:
            inserted: the objects, links and records the write stored (not those already stored).
            unstored: the endpoint IRIs its links marked ``vocab:unstoredEndpoint``.
        """
        with self._lock:
            self._generation += 1
            self._unstored.add(unstored)
            self.layout_recorded = True  # a write adds the version record when it is missing
            census = self._census
            for item in inserted:
                kind = v.KIND_OF_CLASS[type(item)]
                self._kinds.put(item.id, kind)
                self._absent.pop(item.id)
                if census is not None:
                    census[item.id.value.int] = kind
            # objects first: their facts exist before links and records add to them
            self._note_objects(
                [i for i in inserted if not isinstance(i, MemoryLink | LifecycleRecord)], census
            )
            for item in inserted:
                if isinstance(item, MemoryLink):
                    self._note_link(item, census)
                elif isinstance(item, LifecycleRecord) and item.action is LifecycleAction.SUPPRESS:
                    self._note_suppress(item, census)
            self._drop_oversized()

    def _note_objects(self, objects: Sequence[StoredItem], census: dict[int, str] | None) -> None:
        # New objects are stored in their facts; their episodes' turns and the names change.
        named: list[tuple[MemoryId, MemoryId, str]] = []
        for item in objects:
            if isinstance(item, Observation):
                self._turns.pop(item.episode_id)
            facts = self._facts.get(item.id)
            if facts is not None:
                self._facts.put(item.id, attrs.evolve(facts, stored=True))
            elif census is not None and item.id.value.int not in self._early:
                self._facts.put(item.id, CurrencyFacts(stored=True))
            if isinstance(item, DerivedMemory) and item.assertions:
                named.extend((item.id, subject, name) for subject, name in known_names(item.assertions))
        if named and self._names is not None:  # the stored assertions plus this write's
            self._names = tuple(sorted((*self._names, *named)))  # as names_from_rows sorts
        if named and self._name_index is not None:  # normalises only this write's names
            self._name_index = self._name_index.with_added(named)

    def _note_link(self, link: MemoryLink, census: dict[int, str] | None) -> None:
        # The endpoints' adjacency is read again on next use: only decoded links are cached.
        self._adjacency.pop(link.from_id)
        self._adjacency.pop(link.to_id)
        if link.relation is Relation.HAS_OBSERVATION:
            self._turns.pop(link.from_id)
        if link.relation is Relation.SUPERSEDES:
            if (facts := self._facts.get(link.to_id)) is not None:
                self._facts.put(link.to_id, facts.superseded(link.created_at))
            self._note_early(census, link.to_id)
            if self._lifecycle is not None:
                self._lifecycle.add_link(link)

    def _note_suppress(self, record: LifecycleRecord, census: dict[int, str] | None) -> None:
        if (facts := self._facts.get(record.target_id)) is not None:
            self._facts.put(record.target_id, facts.suppressed(record.recorded_at))
        self._note_early(census, record.target_id)
        if self._lifecycle is not None:
            self._lifecycle.add_suppress(record.target_id, record.recorded_at)

    def _drop_oversized(self) -> None:
        # A census or lifecycle index grown beyond its bound is dropped (and not taken again).
        if self._census is not None and len(self._census) > self._census_cap:
            self._census, self._early = None, set()
            self._census_floor = max(self._census_floor, self._census_cap)
        if self._lifecycle is not None and self._lifecycle.size > self._max_entries:
            self._lifecycle, self._lifecycle_refused = None, True

    def _note_early(self, census: dict[int, str] | None, target: MemoryId) -> None:
        # A reference to an id neither stored nor in the write was written under ``object:``.
        if census is not None and census.get(target.value.int, PURGED) == PURGED:
            self._early.add(target.value.int)

    def clear(self) -> None:
        """Forget everything (a new generation starts)."""
        with self._lock:
            self._generation += 1
            maps = (self._items, self._kinds, self._hints, self._absent, self._adjacency, self._facts)
            for lru in (*maps, self._turns):
                lru.clear()
            self._names, self._name_index = None, None
            self._lifecycle, self._lifecycle_refused = None, False
            self._census, self._early, self._census_floor = None, set(), 0
            self._unstored = UnstoredEndpoints(self._max_entries)
            self.layout_recorded = False
