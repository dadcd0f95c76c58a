"""The graph store suite's reads: currency, ``links_of``, episode turns, inventories, collections."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import pytest

from charmem.domain.graph import GraphBatch, LifecycleAction
from charmem.domain.ids import MemoryId
from charmem.domain.model import MemoryObject, ObjectType, Observation, Relation, object_type_of
from charmem.domain.names import NameIndex
from charmem.ports import CharacterRecord, EpisodeTurn, ExpansionReader, GraphStore, ObjectTypeHints
from charmem.usecases.retrieval import episode_turns
from charmem_contract import data
from charmem_contract._base import requires
from charmem_contract._graph_world import C, E, S, ids_of, sample_world
from charmem_contract.data import SEOUL, at
from charmem_contract.factories import CONTRACT_COLLECTION, StoreFactory

__all__ = ["GraphReadTests"]


class GraphReadTests:
    """Currency, ``links_of``, episode turns, inventories, collections (mixed into ``GraphStoreContract``)."""

    # -- currency --------------------------------------------------------------------------

    async def test_currency_of_stored_objects(self, graph_store: GraphStore) -> None:
        """Stored objects are current unless suppressed or superseded; suppressed beats superseded.

        Absent ids, link ids and record ids are missing from the answer; a ``forget_noted`` record
        does not suppress.

        If this fails: implement :func:`charmem.domain.rules.is_current` over ``suppress`` records
        and incoming ``supersedes`` links, and answer only for stored objects.
        """
        plain, superseded, suppressed, both, noted, newer = (
            data.derived(observation_ids=[]) for _ in range(6)
        )
        links = [
            data.link(newer.id, Relation.SUPERSEDES, superseded.id),
            data.link(newer.id, Relation.SUPERSEDES, both.id),
            data.link(plain.id, Relation.CONTRADICTS, newer.id),
        ]
        records = [
            data.record(suppressed.id),
            data.record(both.id),
            data.record(noted.id, action=LifecycleAction.FORGET_NOTED),
        ]
        objects = [plain, superseded, suppressed, both, noted, newer]
        await graph_store.write_batch(GraphBatch(objects=objects, links=links, records=records))
        absent = MemoryId.new()
        got = await graph_store.currency([*ids_of(objects), absent, links[0].id, records[0].id])
        assert got == {
            plain.id: C,
            superseded.id: S,
            suppressed.id: E,
            both.id: E,
            noted.id: C,
            newer.id: C,
        }
        assert await graph_store.currency([]) == {}

    async def test_currency_as_of_counts_only_what_was_recorded_by_then(
        self, graph_store: GraphStore
    ) -> None:
        """With ``as_of``, only supersedes links created and records recorded at or before it count.

        The bound is inclusive and compares instants, whatever their UTC offsets.

        If this fails: filter links by ``created_at <= as_of`` and records by
        ``recorded_at <= as_of`` as instants (convert offsets; do not compare strings).
        """
        old, new = data.derived(created_at=at(0)), data.derived(created_at=at(0))
        supersede = data.link(new.id, Relation.SUPERSEDES, old.id, created_at=at(10))
        suppress = data.record(old.id, recorded_at=at(20, SEOUL))
        await graph_store.write_batch(GraphBatch(objects=[old, new], links=[supersede], records=[suppress]))
        views = {
            "before the link": (at(9), C),
            "at the link (inclusive)": (at(10, SEOUL), S),
            "between": (at(15), S),
            "at the record (inclusive)": (at(20), E),
            "now": (None, E),
        }
        wrong = []
        for label, (as_of, expected) in views.items():
            got = (await graph_store.currency([old.id], as_of=as_of)).get(old.id)
            if got is not expected:
                wrong.append(f"{label} (as_of={as_of}): {got} instead of {expected}")
        assert not wrong, "as_of views are wrong:\n" + "\n".join(wrong)
        assert (await graph_store.currency([new.id], as_of=at(9)))[new.id] is C

    async def test_references_resolve_whatever_the_write_order(self, graph_store: GraphStore) -> None:
        """A link or record written before its endpoint still counts once the endpoint is stored.

        If this fails: do not bake the endpoint's type into how a link refers to it at write time
        (or resolve it when reading); ``links_of`` and ``currency`` must find it either way.
        """
        old, new = data.derived(), data.derived()
        early_link = data.link(new.id, Relation.SUPERSEDES, old.id)
        early_record = data.record(new.id)
        await graph_store.write_batch(GraphBatch(links=[early_link], records=[early_record]))
        await graph_store.write_batch(GraphBatch(objects=[old, new]))
        assert await graph_store.links_of([old.id]) == [early_link]
        assert await graph_store.currency([old.id, new.id]) == {old.id: S, new.id: E}

    # -- links_of and inventories ----------------------------------------------------------

    async def test_links_of_both_directions_each_once_sorted_by_id(self, graph_store: GraphStore) -> None:
        """``links_of`` returns links touching any given id, in either direction, once, by link id.

        If this fails: match ``from_id`` or ``to_id``, de-duplicate links whose both ends are
        asked for, and sort by :class:`~charmem.domain.ids.MemoryId`.
        """
        a, b, c, d = (data.entity() for _ in range(4))
        link_ids = sorted(data.ids("links-of", 4), reverse=True)
        ab = data.link(a.id, Relation.ASSOCIATED_WITH, b.id, id=link_ids[0])
        ca = data.link(c.id, Relation.SUPPORTS, a.id, id=link_ids[1])
        bc = data.link(b.id, Relation.CONTRADICTS, c.id, id=link_ids[2])
        cd = data.link(c.id, Relation.RESOLVES, d.id, id=link_ids[3])
        await graph_store.write_batch(GraphBatch(objects=[a, b, c, d], links=[ab, ca, bc, cd]))
        assert await graph_store.links_of([a.id]) == sorted([ab, ca], key=lambda lk: lk.id)
        assert await graph_store.links_of([a.id, b.id]) == sorted([ab, ca, bc], key=lambda lk: lk.id)
        assert await graph_store.links_of([d.id, d.id]) == [cd]
        assert await graph_store.links_of([MemoryId.new()]) == []
        assert await graph_store.links_of([]) == []

    async def test_links_of_relation_filter(self, graph_store: GraphStore) -> None:
        """``relations`` keeps only links of those relations; an empty list keeps none.

        If this fails: apply the relation filter in the query, and treat ``[]`` as "no relation"
        (not as "no filter", which is ``None``).
        """
        a, b, c = data.entity(), data.entity(), data.entity()
        supports = data.link(a.id, Relation.SUPPORTS, b.id)
        about = data.link(a.id, Relation.ABOUT, c.id)
        loop = data.link(b.id, Relation.CREATES_OPEN_LOOP, a.id)
        await graph_store.write_batch(GraphBatch(objects=[a, b, c], links=[supports, about, loop]))
        assert await graph_store.links_of([a.id], relations=[Relation.ABOUT]) == [about]
        both = await graph_store.links_of([a.id], relations=[Relation.SUPPORTS, Relation.CREATES_OPEN_LOOP])
        assert both == sorted([supports, loop], key=lambda lk: lk.id)
        assert await graph_store.links_of([a.id], relations=[]) == []
        assert await graph_store.links_of([a.id], relations=None) == sorted(
            [supports, about, loop], key=lambda lk: lk.id
        )

    async def test_links_and_turns_read_together_equal_the_two_reads(self, graph_store: GraphStore) -> None:
        """A store with :class:`~charmem.ports.ExpansionReader` answers ``links_and_turns`` as
        ``links_of`` and ``episode_turns`` answer apart, for every relation filter.

        If this fails: run the same two read plans in the one call; drop nothing and add nothing
        (unknown ids and episodes without turns give no links and no turns).
        """
        if not isinstance(graph_store, ExpansionReader):
            pytest.skip(f"{type(graph_store).__name__} has no ExpansionReader (optional capability)")
        episode, other, person = data.episode(), data.episode(), data.entity()
        turns = [data.observation(episode.id, observed_at=at(n)) for n in (1, 2, 3)]
        await graph_store.write_batch(
            GraphBatch(
                objects=[episode, other, person, *turns],
                links=[
                    *(data.link(episode.id, Relation.HAS_OBSERVATION, t.id) for t in turns),
                    data.link(episode.id, Relation.INVOLVES, person.id),
                    data.link(turns[0].id, Relation.MENTIONS, person.id),
                ],
            )
        )
        ids = [episode.id, turns[0].id, turns[1].id, MemoryId.new()]
        episodes = [episode.id, other.id, MemoryId.new()]
        every_but_mentions = [r for r in Relation if r is not Relation.MENTIONS]  # one left out
        for relations in (None, every_but_mentions, [Relation.MENTIONS], []):
            links, turns_by_episode = await graph_store.links_and_turns(
                ids, relations=relations, episode_ids=episodes
            )
            assert links == await graph_store.links_of(ids, relations=relations)
            apart = await episode_turns(graph_store, episodes)
            assert {i: sorted(map(_place, t)) for i, t in turns_by_episode.items() if t} == {
                i: sorted(map(_place, t)) for i, t in apart.items() if t
            }

    async def test_episode_turns_are_the_observations_linked_from_each_episode(
        self, graph_store: GraphStore
    ) -> None:
        """Context expansion's turn order: one turn per ``has_observation`` link to an observation
        of that episode (:func:`charmem.usecases.retrieval.episode_turns`: the store's
        :class:`~charmem.ports.EpisodeTurnReader` if it has one, else ``links_of`` and
        ``get_objects``).

        If this fails: count a link only when its ``from_id`` is the asked episode, its ``to_id``
        a stored observation whose ``episode_id`` is that episode (written before or after the
        link); keep one turn per link, whatever ``created_at``; and forget cached turns of an
        episode when a write adds an observation or a link to it.
        """
        first, second, empty, person = data.episode(), data.episode(), data.episode(), data.entity()
        early = data.observation(first.id, observed_at=at(3), created_at=at(9))
        turns = [data.observation(first.id, observed_at=at(n), created_at=at(n)) for n in (1, 2)]
        stranger = data.observation(second.id)  # of the second episode, linked from the first
        later = data.observation(second.id, observed_at=at(5))
        await graph_store.write_batch(
            GraphBatch(links=[data.link(first.id, Relation.HAS_OBSERVATION, early.id)])
        )
        await graph_store.write_batch(
            GraphBatch(
                objects=[first, second, empty, person, *turns, stranger],
                links=[
                    *(data.link(first.id, Relation.HAS_OBSERVATION, t.id) for t in turns),
                    data.link(first.id, Relation.HAS_OBSERVATION, turns[0].id),  # linked twice
                    data.link(first.id, Relation.HAS_OBSERVATION, stranger.id),
                    data.link(first.id, Relation.HAS_OBSERVATION, person.id),  # not an observation
                    data.link(first.id, Relation.INVOLVES, person.id),
                ],
            )
        )
        asked = [first.id, second.id, empty.id, MemoryId.new()]

        def place(obs: Observation) -> tuple[MemoryId, datetime, datetime]:
            return (obs.id, obs.observed_at, obs.created_at)

        async def read() -> dict[MemoryId, list[tuple[MemoryId, datetime, datetime]]]:
            found = await episode_turns(graph_store, asked)
            return {
                i: sorted((t.observation_id, t.observed_at, t.created_at) for t in found.get(i, ()))
                for i in asked
            }

        before = await read()  # the early link's observation is not stored yet
        assert before == {
            first.id: sorted(map(place, [turns[0], turns[0], turns[1]])),
            second.id: [],
            empty.id: [],
            asked[3]: [],
        }
        await graph_store.write_batch(
            GraphBatch(
                objects=[early, later], links=[data.link(second.id, Relation.HAS_OBSERVATION, later.id)]
            )
        )
        after = await read()
        assert after[first.id] == sorted(map(place, [turns[0], turns[0], turns[1], early]))
        assert after[second.id] == [place(later)]
        assert after[empty.id] == after[asked[3]] == []

    async def test_object_ids_and_link_ids_are_sorted_inventories(self, graph_store: GraphStore) -> None:
        """``object_ids`` lists stored objects (optionally by type), ``link_ids`` links; both sorted.

        Records are in neither; an object type with nothing stored gives ``[]``.

        If this fails: select by the stored kind, sort by MemoryId, and accept ``ObjectType``
        members for the filter.
        """
        batch, _ = sample_world()
        await graph_store.write_batch(batch)
        objects: Sequence[MemoryObject] = batch.objects
        assert await graph_store.object_ids() == sorted(ids_of(objects))
        derived_ids = sorted(o.id for o in objects if o.object_type is ObjectType.DERIVED)
        assert await graph_store.object_ids([ObjectType.DERIVED]) == derived_ids
        pair = [ObjectType.ENTITY, ObjectType.THREAD]
        assert await graph_store.object_ids(pair) == sorted(o.id for o in objects if o.object_type in pair)
        assert await graph_store.link_ids() == sorted(ids_of(batch.links))
        other = data.episode()
        await graph_store.write_batch(GraphBatch(objects=[other]))
        assert await graph_store.object_ids([ObjectType.EPISODE]) == sorted(
            [other.id, *(o.id for o in objects if o.object_type is ObjectType.EPISODE)]
        )
        assert await graph_store.object_ids([]) == []

    async def test_name_index_follows_the_names_written(self, graph_store: GraphStore) -> None:
        """``name_index`` is the index of ``name_assertions``, before and after names are written.

        An empty collection has an empty index; one asked, then written to (a new name, a second
        belief with a known name), answers with the new assertions too.

        If this fails: return ``NameIndex.of(await self.name_assertions())``, and when it is kept
        between calls, extend or drop it on every write that stores a ``KnownAs`` assertion.
        """
        assert await graph_store.name_index() == NameIndex()
        ada, bob = data.entity(), data.entity()
        first = data.derived(names=[(ada.id, "Ada  Lovelace")])
        await graph_store.write_batch(GraphBatch(objects=[ada, bob, first]))
        assert await graph_store.name_index() == NameIndex.of(await graph_store.name_assertions())
        later = [data.derived(names=[(bob.id, "ＢＯＢ")]), data.derived(names=[(ada.id, "ada lovelace")])]
        await graph_store.write_batch(GraphBatch(objects=later))
        index = await graph_store.name_index()
        assert index == NameIndex.of(await graph_store.name_assertions())
        found = index.occurring_in("did bob meet ADA lovelace?")
        assert sorted(subject for _belief, subject, _name in found) == sorted([ada.id, ada.id, bob.id])

    async def test_statement_count_grows_with_new_items_only(self, graph_store: GraphStore) -> None:
        """``statement_count`` grows with every new item and is unchanged by replays.

        If this fails: count the statements (or rows) of this collection only.
        """
        batch, _ = sample_world()
        await graph_store.write_batch(GraphBatch(objects=batch.objects[:2]))
        first = await graph_store.statement_count()
        assert first > 0
        await graph_store.write_batch(batch)
        second = await graph_store.statement_count()
        assert second > first
        await graph_store.write_batch(batch)
        assert await graph_store.statement_count() == second

    # -- what a reopen or a sibling collection sees ----------------------------------------

    @requires("supports_reopen")
    async def test_object_type_hints_never_change_an_answer(
        self, graph_store: GraphStore, graph_store_factory: StoreFactory[GraphStore]
    ) -> None:
        """Hints (:class:`~charmem.ports.ObjectTypeHints`), right, wrong or about absent ids and
        links, leave every answer of a freshly opened store as it was.

        Skipped for a store that takes no hints (an optional capability).

        If this fails: treat a hint as a guess. Read a hinted id under its hinted type first and,
        when it is not there, under every other type; never let a hint decide absence, currency or
        links.
        """
        if not isinstance(graph_store, ObjectTypeHints):
            pytest.skip(f"{type(graph_store).__name__} takes no ObjectTypeHints (optional capability)")
        batch, _ = sample_world()
        await graph_store.write_batch(batch)
        objects = ids_of(batch.objects)
        asked = [*objects, *ids_of(batch.links), MemoryId.new(), MemoryId.new()]

        async def answers(store: GraphStore) -> tuple[object, ...]:
            return (
                await store.get_objects(asked),
                await store.get_links(asked),
                await store.currency(asked),
                await store.links_of(objects),
            )

        expected = await answers(graph_store)
        assert len(expected[0]) == len(objects)  # type: ignore[arg-type]
        await graph_store.close()
        types = list(ObjectType)
        truth = {obj.id: types.index(object_type_of(obj)) for obj in batch.objects}
        for shift in range(len(types)):  # right for the objects once, then wrong in every way
            reopened = await graph_store_factory.open(CONTRACT_COLLECTION)
            try:
                assert isinstance(reopened, ObjectTypeHints)
                reopened.hint_object_types(
                    {i: types[(truth.get(i, n) + shift) % len(types)] for n, i in enumerate(asked)}
                )
                assert await answers(reopened) == expected
            finally:
                await reopened.close()

    @requires("supports_sibling_collections")
    async def test_collections_are_isolated(
        self, graph_store: GraphStore, graph_store_factory: StoreFactory[GraphStore]
    ) -> None:
        """Another collection on the same backing store sees none of this one's data.

        The same ids with other content are no conflict there, and counts are per collection.

        If this fails: scope every read, write, count and inventory to the collection (a named
        graph, a key prefix, a column), including the id-conflict lookup.
        """
        batch, _ = sample_world()
        await graph_store.write_batch(batch)
        sibling = await graph_store_factory.open(f"{CONTRACT_COLLECTION}-sibling")
        try:
            ids = ids_of(batch.objects)
            assert sibling.collection != graph_store.collection
            assert await sibling.statement_count() == 0
            assert await sibling.object_ids() == []
            assert await sibling.get_objects(ids) == {}
            assert await sibling.links_of(ids) == []
            assert await sibling.currency(ids) == {}
            clash = data.thread(id=ids[0], title="another collection's thread")
            await sibling.write_batch(GraphBatch(objects=[clash]))
            assert (await graph_store.get_objects([ids[0]]))[ids[0]] == batch.objects[0]
            assert await sibling.object_ids() == [ids[0]]
        finally:
            await sibling.close()

    async def test_a_collection_records_one_character_for_good(self, graph_store: GraphStore) -> None:
        """The optional :class:`~charmem.ports.CharacterRecord`: the first id recorded stays.

        If this fails: ``record_character_id`` writes only when no id is recorded and returns
        the recorded one; ``character_id`` reads it back; neither touches the collection's items.
        """
        if not isinstance(graph_store, CharacterRecord):
            pytest.skip("the store does not implement the optional CharacterRecord capability")
        first, other = MemoryId.new(), MemoryId.new()
        batch, _ = sample_world()
        await graph_store.write_batch(batch)
        objects = await graph_store.object_ids()
        assert await graph_store.character_id() is None
        assert await graph_store.record_character_id(first) == first
        assert await graph_store.record_character_id(other) == first
        assert await graph_store.character_id() == first
        assert await graph_store.object_ids() == objects

    @requires("supports_reopen")
    async def test_the_character_record_survives_a_reopen(
        self, graph_store: GraphStore, graph_store_factory: StoreFactory[GraphStore]
    ) -> None:
        """A reopened store reads the recorded character id and keeps refusing to replace it.

        If this fails: keep the record with the collection's data (and in its exports).
        """
        if not isinstance(graph_store, CharacterRecord):
            pytest.skip("the store does not implement the optional CharacterRecord capability")
        first = MemoryId.new()
        assert await graph_store.record_character_id(first) == first
        await graph_store.close()
        reopened = await graph_store_factory.open(CONTRACT_COLLECTION)
        try:
            assert isinstance(reopened, CharacterRecord)
            assert await reopened.character_id() == first
            assert await reopened.record_character_id(MemoryId.new()) == first
        finally:
            await reopened.close()


def _place(turn: EpisodeTurn) -> tuple[MemoryId, datetime, datetime]:
    return (turn.observation_id, turn.observed_at, turn.created_at)
