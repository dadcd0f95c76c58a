"""The cached read algorithm both graph stores share, free of I/O.

Every read of the graph port is written here once, as a *plan*: a generator that yields the SPARQL
SELECT text of each query it needs and is sent that query's rows back, consulting and feeding the
collection's :class:`~charmem_oxigraph._cache.GraphCache` in between (items and kinds, kind
hints, absent ids, the census, the lifecycle index, adjacency, currency facts, turns, names). A
plan the cache answers entirely yields nothing. :class:`GraphReader` holds the plans of one
collection; :class:`CachedGraphStore` implements the port's reads over them, and a transport only runs
plans (``_read``): the embedded store against pyoxigraph, the service store over HTTP.

A cache that is not coherent (a SPARQL server other processes may write to) answers only from
immutable knowledge, so the same plans read every changing fact from the store there.
"""

from __future__ import annotations

import abc
from collections.abc import Generator, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Final, Self, TypeAlias, TypeVar

import attrs
from charmem.domain.graph import GraphErasure, LifecycleRecord, Tombstone
from charmem.domain.ids import MemoryId, as_memory_id
from charmem.domain.model import MemoryLink, MemoryObject, ObjectType, Relation
from charmem.domain.names import NameIndex
from charmem.domain.occasions import Occasion, OccasionQuery
from charmem.domain.retrieval import CurrencyStatus
from charmem.ports import EpisodeTurn
from pyoxigraph import NamedNode

from charmem_oxigraph import _logic as lg
from charmem_oxigraph import _queries as q
from charmem_oxigraph import _vocab as v
from charmem_oxigraph import _writing as wr
from charmem_oxigraph._cache import GraphCache
from charmem_oxigraph._character import recorded as recorded_character
from charmem_oxigraph._codec import NodeTriples, StoredItem
from charmem_oxigraph._hints import reference_kinds
from charmem_oxigraph._iris import (
    STORED_KINDS,
    class_iris,
    currency_iris,
    endpoint_iris,
    episode_turn_iris,
    iris,
    kind_hints,
    node_iris,
    relation_iris,
    retry_iris,
    unique,
)
from charmem_oxigraph._layout import CURRENT_LAYOUT, LayoutState, layout_state, version_line
from charmem_oxigraph._occasions import occasions_from_rows, occasions_query

__all__ = ["CENSUS_MIN_PROBES", "CachedGraphStore", "GraphReader", "Plan", "WritePlan"]

T = TypeVar("T")

#: A read plan: yields SPARQL SELECT texts, is sent each one's rows, returns the answer.
Plan: TypeAlias = Generator[str, list[lg.Row], T]
#: What a write's check returns: inserted ids, ids stored with equal content, N-Triples lines,
#: and the endpoint IRIs its links mark ``vocab:unstoredEndpoint``.
WritePlan: TypeAlias = tuple[list[MemoryId], list[MemoryId], list[str], list[str]]

#: A read that would probe at least this many IRIs (ids of unknown kind, one IRI per kind) may
#: take a census of the collection instead (:meth:`GraphReader.census`). A census scans at most as
#: many item nodes as the read would probe, so it never costs much more than the probe; once held,
#: the writer keeps it, so a small collection (a new one, or one written in sessions) gets it on
#: its first such read and then answers every later check from memory.
CENSUS_MIN_PROBES: Final = 64

#: The size a name index build is reported with: it covers every name, so the embedded store
#: builds it in a worker thread, never on the event loop (``size`` above its on-loop bound).
_EVERY_NAME: Final = 1 << 62


@attrs.frozen
class GraphReader:
    """The read plans of one collection: its cache and its named graph.

    Attributes:
        cache: what this process knows of the collection's graph.
        graph: the collection's named graph IRI, ``urn:charmem:collection:<name>``.
    """

    cache: GraphCache
    graph: str

    def items(
        self, ids: Sequence[MemoryId], kinds: Sequence[str], *, records: bool = False
    ) -> Plan[dict[MemoryId, StoredItem]]:
        """The stored items among ``ids``: cached ones, the rest in one query (then cached).

        An id of unknown kind is probed under each of ``kinds``; a coherent cache probes every
        stored kind instead, so an id found under none (and no tombstone) is known absent. An id
        a reference hinted is read under that one IRI first, then under every other kind if it is
        not there. When the probe would bind at least :data:`CENSUS_MIN_PROBES` IRIs, a census
        (:meth:`census`) may answer instead.

        With ``records``, when every id's kind is known or hinted, the first query reads only each
        node's type and record literal under that one IRI (a row per node, not one per triple),
        and the ids it misses are read whole under every kind (tombstones, damaged nodes, wrong
        hints): for reads of ids that are almost always stored (objects candidate recall found),
        not for a write's check of new ids. A node's references are not read then: only links
        and records hold reference triples, and they are not read so.
        """
        cache = self.cache
        found, unknown = cache.items(ids)
        if not unknown:
            return found
        kinds = STORED_KINDS if cache.coherent else kinds
        generation = cache.generation()
        known = cache.kinds(unknown)
        hinted = cache.hints(i for i in unknown if i not in known)
        # IRIs to bind: one per id of known or hinted kind, one per kind for the others
        probes = len(unknown) + (len(unknown) - len(known) - len(hinted)) * (len(kinds) - 1)
        if probes >= CENSUS_MIN_PROBES and (yield from self.census(probes)):
            return (yield from self.items(ids, kinds, records=records))  # every kind is known now
        records = records and len(known) + len(hinted) == len(unknown)  # one IRI per id
        nodes, purged = yield from self._lookup(unknown, known, hinted, kinds, records=records)
        read = lg.decode_nodes(nodes)
        # An id not found is absent unless it is a tombstone (kept by a coherent cache only,
        # which probed every kind).
        absent = [i for i in unknown if i not in read and i not in purged]
        cache.remember_items(generation, read, absent=absent)
        cache.remember_hints(reference_kinds(nodes.values()))
        found.update(read)
        return found

    def _lookup(
        self,
        unknown: Sequence[MemoryId],
        known: Mapping[MemoryId, str],
        hinted: Mapping[MemoryId, str],
        kinds: Sequence[str],
        *,
        records: bool,
    ) -> Plan[tuple[dict[MemoryId, NodeTriples], set[MemoryId]]]:
        """The stored nodes and the tombstones among ``unknown`` (:meth:`items`): one or two queries."""
        bound = node_iris(unknown, {**hinted, **known}, kinds)
        if records:
            nodes, purged = lg.record_lookup((yield q.node_records(self.graph, bound)))
            again = node_iris([i for i in unknown if i not in nodes], known, kinds)
        else:
            nodes, purged = lg.read_lookup((yield q.nodes(self.graph, bound)))
            again = retry_iris([i for i in hinted if i not in nodes], hinted, kinds)
        if again:  # not found as bound (or, with records, maybe no item): read whole, every kind
            more, more_purged = lg.read_lookup((yield q.nodes(self.graph, again)))
            nodes.update(more)
            purged |= more_purged
        return nodes, purged

    def census(self, probes: int) -> Plan[bool]:
        """Read the census of the collection (:class:`GraphCache`) instead of ``probes`` lookups.

        Scans at most ``probes`` item nodes (a census costs about as much per node as a probe per
        IRI); a collection holding more is remembered as too large for censuses of that size.

        Returns:
            bool: whether the cache now holds a census.
        """
        cache = self.cache
        limit = cache.census_limit(probes)
        if not limit:
            return False
        generation = cache.generation()
        rows = yield q.census(self.graph, limit + 1)
        if len(rows) > limit:
            cache.census_refused(limit)
            return False
        census = lg.census_from_rows(rows)
        early = lg.early_from_rows((yield q.early_references(self.graph)))
        return cache.remember_census(generation, census, early)

    def lifecycle(self) -> Plan[None]:
        """Read the collection's lifecycle index into the cache if it wants it (three queries).

        Every ``supersedes`` link and ``suppress`` instant, unless there are more than the cache
        keeps (then currency and the supersedes hop keep reading per id).
        """
        cache = self.cache
        if not cache.wants_lifecycle():
            return
        generation = cache.generation()
        if lg.lifecycle_size((yield q.lifecycle_count(self.graph))) > cache.max_entries:
            cache.refuse_lifecycle()
            return
        links, _hints = lg.node_links_and_hints((yield q.superseding_links(self.graph)))
        suppressed = lg.suppress_from_rows((yield q.suppress_instants(self.graph)))
        cache.remember_lifecycle(generation, links, suppressed)

    def unstored(self) -> Plan[None]:
        """Read every ``vocab:unstoredEndpoint`` mark into the cache if it wants them (one query).

        Unless there are more than the cache keeps (then link reads keep binding every kind).
        """
        cache = self.cache
        if cache.wants_unstored():
            generation = cache.generation()
            rows = yield q.unstored_endpoints(self.graph, cache.max_entries + 1)
            cache.remember_unstored(generation, (row["x"].value for row in rows))

    def objects(self, wanted: Sequence[MemoryId]) -> Plan[dict[MemoryId, MemoryObject]]:
        """The memory objects among ``wanted`` (unique ids), in request order."""
        return lg.objects_only(wanted, (yield from self.items(wanted, v.OBJECT_KINDS, records=True)))

    def links(self, wanted: Sequence[MemoryId]) -> Plan[dict[MemoryId, MemoryLink]]:
        """The links among ``wanted`` (unique ids), in request order."""
        return lg.links_only(wanted, (yield from self.items(wanted, ("link",))))

    def records(self, wanted: Sequence[MemoryId]) -> Plan[list[LifecycleRecord]]:
        """The lifecycle records about ``wanted`` (unique ids), by (``recorded_at``, ``id``)."""
        if not wanted:
            return []
        return lg.records_from_rows((yield q.records_about(self.graph, iris(wanted, v.NODE_KINDS))))

    def every_item(self) -> Plan[None]:
        """Decode every stored object, link, lifecycle record and tombstone, as reads do.

        Raises:
            CorruptNodeError: a node does not decode (the message names it and what is wrong).
        """
        objects = yield from self.typed_ids(class_iris(None))
        yield from self.objects(objects)
        yield from self.links((yield from self.typed_ids([v.VOCAB + v.CLASS_OF_KIND["link"]])))
        yield from self.records(objects)
        yield from self.tombstones(None)

    def links_of(
        self, wanted: Sequence[MemoryId], chosen: Sequence[Relation] | None
    ) -> Plan[list[MemoryLink]]:
        """Links touching ``wanted`` (unique ids) of the ``chosen`` relations (``None``: all), by id.

        The cached adjacency first; the ``supersedes`` hop from the lifecycle index once read;
        the ids left in one query, whose answer becomes their adjacency (binding one IRI per id of
        known kind once a coherent cache knows every ``vocab:unstoredEndpoint`` mark).
        """
        if not wanted or (chosen is not None and not chosen):
            return []
        cache = self.cache
        found, unknown = cache.links_of(wanted, chosen)
        if unknown and chosen == (Relation.SUPERSEDES,):
            yield from self.lifecycle()
            found, unknown = cache.links_of(wanted, chosen)
        if unknown:
            yield from self.unstored()
            generation = cache.generation()
            marked = cache.unstored_kinds(unknown)
            from_iris, to_iris = endpoint_iris(unknown, cache.kinds(unknown), chosen, marked)
            query = q.links_of(self.graph, from_iris, to_iris, relation_iris(chosen))
            links, hints = lg.links_and_hints((yield query))
            links = lg.of_relations(links, chosen)  # the query may not filter (relation_iris)
            cache.remember_links_of(generation, unknown, chosen, links)
            cache.remember_hints(hints)
            found.update((link.id, link) for link in links)
        return sorted(found.values(), key=lg.BY_LINK_ID)

    def currency(
        self, wanted: Sequence[MemoryId], as_of: datetime | None
    ) -> Plan[dict[MemoryId, CurrencyStatus]]:
        """Currency of the stored objects among ``wanted`` (unique ids) as of ``as_of``.

        Cached facts first, then the lifecycle index (facts of every id of known kind), then one
        query for the ids left (:func:`charmem_oxigraph._logic.currency_from_facts`).
        """
        if not wanted:
            return {}
        cache = self.cache
        found, unknown = cache.currency_facts(wanted)
        if unknown:
            yield from self.lifecycle()
            more, unknown = cache.currency_facts(unknown)
            found.update(more)
        if unknown:
            generation = cache.generation()
            rows = yield q.currency(self.graph, currency_iris(unknown, cache.kinds(unknown)))
            facts = lg.facts_from_rows(unknown, rows)
            cache.remember_currency_facts(generation, facts)
            found.update(facts)
        return lg.currency_from_facts(wanted, found, as_of)

    def episode_turns(self, wanted: Sequence[MemoryId]) -> Plan[dict[MemoryId, list[EpisodeTurn]]]:
        """The turns of the episodes ``wanted`` (unique ids); episodes without turns are missing."""
        cache = self.cache
        found, unknown = cache.episode_turns(wanted)
        if unknown:
            generation = cache.generation()
            bound = episode_turn_iris(unknown, cache.kinds(unknown))
            turns = lg.turns_from_rows((yield q.episode_turns(self.graph, bound))) if bound else {}
            cache.remember_episode_turns(generation, unknown, turns)
            found.update(turns)
        return {i: found[i] for i in wanted if i in found}

    def links_and_turns(
        self, wanted: Sequence[MemoryId], chosen: Sequence[Relation] | None, episodes: Sequence[MemoryId]
    ) -> Plan[tuple[list[MemoryLink], dict[MemoryId, list[EpisodeTurn]]]]:
        """:meth:`links_of` and then :meth:`episode_turns`, as one plan (one worker-thread trip)."""
        links = yield from self.links_of(wanted, chosen)
        return links, (yield from self.episode_turns(episodes))

    def occasions(self, query: OccasionQuery) -> Plan[list[Occasion]]:
        """The episodes meeting ``query``, newest first (read each time: the cache keeps none)."""
        return occasions_from_rows((yield occasions_query(self.graph, query)))

    def statement_count(self) -> Plan[int]:
        """The number of triples in the collection's named graph."""
        return lg.count_from_rows((yield q.statement_count(self.graph)))

    def typed_ids(self, classes: Sequence[str]) -> Plan[list[MemoryId]]:
        """The sorted ids of every node typed as one of ``classes`` (class IRIs)."""
        return lg.ids_from_rows((yield q.typed_nodes(self.graph, classes)))

    def names(self) -> Plan[list[tuple[MemoryId, MemoryId, str]]]:
        """Every ``KnownAs`` assertion as ``(belief_id, subject_id, name)``, sorted."""
        cache = self.cache
        names = cache.names()
        if names is None:
            generation = cache.generation()
            names = lg.names_from_rows((yield q.name_assertions(self.graph)))
            cache.remember_names(generation, names)
        return names

    def name_index(self) -> Plan[NameIndex]:
        """The :class:`~charmem.domain.names.NameIndex` of every ``KnownAs`` assertion."""
        cache = self.cache
        index = cache.name_index()
        if index is None:
            generation = cache.generation()
            index = NameIndex.of((yield from self.names()))
            cache.remember_name_index(generation, index)
        return index

    def tombstones(self, wanted: Sequence[MemoryId] | None) -> Plan[dict[MemoryId, Tombstone]]:
        """Tombstones among ``wanted`` (unique ids; ``None``: all), in request order (all: by id).

        Ids the cache knows are not purged (stored, or read as absent) are not looked up.
        """
        if wanted is not None:
            clean = self.cache.unpurged(wanted)
            wanted = [i for i in wanted if i not in clean]
            if not wanted:
                return {}
        rows = yield q.tombstones(self.graph, None if wanted is None else iris(wanted, v.OBJECT_KINDS))
        found = lg.tombstones_from_rows(rows)
        return found if wanted is None else {i: found[i] for i in wanted if i in found}

    def check_write(self, prepared: wr.PreparedBatch) -> Plan[WritePlan]:
        """The check half of a write: what is stored, of which kind, or purged among its ids.

        One read of the batch's items and of the referenced ids of unknown kind, one of the
        tombstones among the batch's ids, then :func:`charmem_oxigraph._writing.plan_write`; the
        first write into an empty collection also records the layout version
        (:func:`charmem_oxigraph._layout.version_line`). The marked endpoint IRIs
        (:func:`charmem_oxigraph._writing.unstored_endpoints`) are for
        :meth:`GraphCache.apply_write`.

        Raises:
            PurgedMemoryError: an id of the batch was purged.
            IdConflictError: an id is stored (as any kind) with different content.
        """
        references = prepared.lookup[len(prepared.items) :]
        kinds = self.cache.kinds(references)
        lookup = [*prepared.items, *(i for i in references if i not in kinds)]
        found = yield from self.items(lookup, STORED_KINDS)
        kinds.update((i, v.KIND_OF_CLASS[type(item)]) for i, item in found.items())
        stored = {i: found[i] for i in prepared.items if i in found}
        purged = set((yield from self.tombstones(list(prepared.items))))
        inserted, existing, lines = wr.plan_write(prepared, stored, kinds, purged)
        if lines and not self.cache.layout_recorded and not (yield q.layout_version(self.graph)):
            lines.append(version_line(self.graph))  # the first write into an empty collection
        unstored = [iri for _link, iri in wr.unstored_endpoints(prepared, inserted, kinds)]
        return inserted, existing, lines, unstored

    def raced(self) -> Plan[list[wr.Settlement]]:
        """How each id stored with several records would be settled (one query)."""
        return [wr.settle_raced(node) for node in lg.group_rows((yield q.raced_nodes(self.graph)))]

    def layout(self) -> Plan[LayoutState]:
        """The collection's :class:`~charmem_oxigraph._layout.LayoutState` (kept once current)."""
        if self.cache.layout_recorded:
            return LayoutState(CURRENT_LAYOUT, has_data=True)
        state = yield from layout_state(self.graph)
        if state.found == CURRENT_LAYOUT:
            self.cache.layout_recorded = True
        return state

    def erase_update(self, erasure: GraphErasure) -> Plan[str | None]:
        """The SPARQL update applying ``erasure``, skipping ids that are tombstones already."""
        ids = unique(t.id for t in erasure.tombstones)
        already = set((yield from self.tombstones(ids))) if ids else set()
        return wr.erase_update(NamedNode(self.graph), erasure, already)


class CachedGraphStore(abc.ABC):
    """What both graph stores share of :class:`charmem.ports.GraphStore`: every read, over plans.

    Also :class:`charmem.ports.EpisodeTurnReader`, :class:`charmem.ports.ExpansionReader` and
    :class:`charmem.ports.ObjectTypeHints`. A
    transport sets ``_collection`` and ``_graph_iri``, and provides :attr:`closed`,
    :meth:`_reader`, :meth:`_read` (how a plan runs), the writes and :meth:`close`. Every argument
    is checked here, before a plan runs, so a transport's error translation only ever sees
    failures of the store or of stored data.
    """

    _collection: str
    _graph_iri: str

    @property
    def collection(self) -> str:
        """The collection name."""
        return self._collection

    @property
    def graph_iri(self) -> str:
        """The collection's named graph, ``urn:charmem:collection:<name>``."""
        return self._graph_iri

    @property
    @abc.abstractmethod
    def closed(self) -> bool:
        """Whether the store was closed."""

    @abc.abstractmethod
    def _reader(self) -> GraphReader:
        """The plans of this collection (raises ``BackendError`` when they cannot run)."""

    @abc.abstractmethod
    async def _read(self, action: str, plan: Plan[T], size: int) -> T:
        """Run ``plan`` to its answer; ``action`` names it in errors, ``size`` counts its ids."""

    @abc.abstractmethod
    async def close(self) -> None:
        """See :meth:`charmem.ports.GraphStore.close`."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @abc.abstractmethod
    async def _record_character(self, character_id: MemoryId) -> MemoryId:
        """Run :func:`charmem_oxigraph._character.record` and write its lines, as one writer."""

    async def character_id(self) -> MemoryId | None:
        """See :meth:`charmem.ports.CharacterRecord.character_id` (one query).

        Raises:
            BackendError: the store failed, or it records several ids or one that is no UUID.
        """
        return await self._read("read the character id", recorded_character(self._graph_iri), 0)

    async def record_character_id(self, character_id: MemoryId) -> MemoryId:
        """See :meth:`charmem.ports.CharacterRecord.record_character_id`.

        The read, then the write (only when none is recorded), run under the store's writer
        exclusion.

        Raises:
            ValueError: ``character_id`` is not a memory id.
            BackendError: the store failed; nothing was recorded.
        """
        return await self._record_character(as_memory_id(character_id))

    def hint_object_types(self, types: Mapping[MemoryId, ObjectType]) -> None:
        """Keep the object types candidate recall reported as kind hints (advisory, no I/O).

        See :class:`charmem.ports.ObjectTypeHints`: a first read of a hinted id binds its one node
        IRI instead of one per kind; a wrong hint costs a second query, never another answer.
        Ignored once the store is closed.

        Raises:
            ValueError: a value is not an object type.
        """
        if not self.closed:
            self._reader().cache.remember_hints(kind_hints(types))

    async def get_objects(self, ids: Sequence[MemoryId]) -> dict[MemoryId, MemoryObject]:
        """See :meth:`charmem.ports.GraphStore.get_objects`; cached objects need no query."""
        wanted = unique(ids)
        return await self._read("read objects", self._reader().objects(wanted), len(wanted))

    async def get_links(self, ids: Sequence[MemoryId]) -> dict[MemoryId, MemoryLink]:
        """See :meth:`charmem.ports.GraphStore.get_links`; cached links need no query."""
        wanted = unique(ids)
        return await self._read("read links", self._reader().links(wanted), len(wanted))

    async def get_records(self, target_ids: Sequence[MemoryId]) -> list[LifecycleRecord]:
        """See :meth:`charmem.ports.GraphStore.get_records` (one query, never cached)."""
        wanted = unique(target_ids)
        return await self._read("read lifecycle records", self._reader().records(wanted), len(wanted))

    async def links_of(
        self, ids: Sequence[MemoryId], *, relations: Sequence[Relation] | None = None
    ) -> list[MemoryLink]:
        """See :meth:`charmem.ports.GraphStore.links_of`; cached adjacency needs no query.

        Raises:
            ValueError: a relation is not a :class:`~charmem.domain.model.Relation`.
        """
        chosen = None if relations is None else tuple(dict.fromkeys(Relation(r) for r in relations))
        wanted = unique(ids)
        return await self._read("read links", self._reader().links_of(wanted, chosen), len(wanted))

    async def currency(
        self, ids: Sequence[MemoryId], *, as_of: datetime | None = None
    ) -> dict[MemoryId, CurrencyStatus]:
        """See :meth:`charmem.ports.GraphStore.currency`: suppressed beats superseded.

        An object is suppressed iff a ``suppress`` lifecycle record targets it, superseded iff a
        ``supersedes`` link points at it; with ``as_of`` only records with ``recorded_at <= as_of``
        and links with ``created_at <= as_of`` count (:func:`charmem.domain.rules.is_current`).

        Raises:
            ValueError: ``as_of`` is naive.
        """
        lg.check_as_of(as_of)
        wanted = unique(ids)
        return await self._read("read currency", self._reader().currency(wanted, as_of), len(wanted))

    async def episode_turns(self, episode_ids: Sequence[MemoryId]) -> dict[MemoryId, list[EpisodeTurn]]:
        """See :meth:`charmem.ports.EpisodeTurnReader.episode_turns`, in one query.

        Reads only the order fields of the episodes' observations (not whole links and objects);
        a coherent cache keeps each episode's turns until a write adds an observation or a
        ``has_observation`` link to it.
        """
        wanted = unique(episode_ids)
        return await self._read("read episode turns", self._reader().episode_turns(wanted), len(wanted))

    async def links_and_turns(
        self,
        ids: Sequence[MemoryId],
        *,
        relations: Sequence[Relation] | None,
        episode_ids: Sequence[MemoryId],
    ) -> tuple[list[MemoryLink], dict[MemoryId, list[EpisodeTurn]]]:
        """See :meth:`charmem.ports.ExpansionReader.links_and_turns`: one hand-off for both reads.

        Raises:
            ValueError: a relation is not a :class:`~charmem.domain.model.Relation`.
        """
        chosen = None if relations is None else tuple(dict.fromkeys(Relation(r) for r in relations))
        wanted, episodes = unique(ids), unique(episode_ids)
        plan = self._reader().links_and_turns(wanted, chosen, episodes)
        return await self._read("read links and turns", plan, len(wanted) + len(episodes))

    async def occasions(self, query: OccasionQuery) -> list[Occasion]:
        """See :meth:`charmem.ports.OccasionReader.occasions`, in one query."""
        return await self._read("read occasions", self._reader().occasions(query), query.limit)

    async def statement_count(self) -> int:
        """See :meth:`charmem.ports.GraphStore.statement_count` (the collection's named graph only)."""
        return await self._read("count statements", self._reader().statement_count(), 0)

    async def object_ids(self, object_types: Sequence[ObjectType] | None = None) -> list[MemoryId]:
        """See :meth:`charmem.ports.GraphStore.object_ids` (operational tools, never recall)."""
        classes = class_iris(object_types)
        return await self._read("list object ids", self._reader().typed_ids(classes), 0)

    async def link_ids(self) -> list[MemoryId]:
        """See :meth:`charmem.ports.GraphStore.link_ids` (operational tools)."""
        classes = [v.VOCAB + v.CLASS_OF_KIND["link"]]
        return await self._read("list link ids", self._reader().typed_ids(classes), 0)

    async def name_assertions(self) -> list[tuple[MemoryId, MemoryId, str]]:
        """See :meth:`charmem.ports.GraphStore.name_assertions`; a coherent cache keeps them."""
        return await self._read("read names", self._reader().names(), 0)

    async def name_index(self) -> NameIndex:
        """See :meth:`charmem.ports.GraphStore.name_index`; a coherent cache keeps it.

        Kept, it is answered at once; built (work in the number of names), it is built off the
        event loop by the embedded store (``_EVERY_NAME`` ids) and kept.
        """
        reader = self._reader()
        index = reader.cache.name_index()
        if index is not None:
            return index
        return await self._read("index names", reader.name_index(), _EVERY_NAME)

    async def tombstones(self, ids: Sequence[MemoryId] | None = None) -> dict[MemoryId, Tombstone]:
        """See :meth:`charmem.ports.GraphStore.tombstones`.

        A tombstone is the node ``urn:charmem:<kind>:<uuid>`` of the purged object, reduced to
        ``rdf:type vocab:Tombstone`` and ``vocab:purgedAt``. Ids a coherent cache knows are not
        purged (stored, or read as absent) are not looked up.
        """
        wanted = None if ids is None else unique(ids)
        size = 0 if wanted is None else len(wanted)
        return await self._read("read tombstones", self._reader().tombstones(wanted), size)
