"""The graph authority suite: :class:`GraphStoreContract` (the :class:`~charmem.ports.GraphStore` port)."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar

import attrs
import pytest

from charmem.domain.graph import GraphBatch, GraphErasure, LifecycleAction, Tombstone
from charmem.domain.ids import MemoryId
from charmem.domain.model import (
    DerivedType,
    MemoryLink,
    MemoryObject,
    ObjectType,
    Observation,
    Relation,
    ThreadStatus,
    object_type_of,
)
from charmem.domain.retrieval import CurrencyStatus
from charmem.domain.rules import canonical_content, content_equal
from charmem.errors import (
    BackendError,
    BackupFormatError,
    CollectionNotEmptyError,
    IdConflictError,
    PurgedMemoryError,
    StoreLockedError,
)
from charmem.ports import GraphStore, ObjectTypeHints
from charmem.usecases.retrieval import episode_turns
from charmem_contract import data
from charmem_contract._base import ContractSuite, requires
from charmem_contract.data import SEOUL, at

__all__ = ["GraphStoreContract"]

S, E = CurrencyStatus.SUPERSEDED, CurrencyStatus.SUPPRESSED
C = CurrencyStatus.CURRENT


def _world() -> tuple[GraphBatch, dict[str, Any]]:
    """One object of every type with every optional field set, and links and a record."""
    person = data.entity(entity_type="person")
    place = data.entity(entity_type="place", created_at=at(1, SEOUL))
    garden = data.thread(title="garden", summary="the allotment", status=ThreadStatus.DORMANT)
    visit = data.episode(
        summary="a visit to the allotment",
        participant_entity_ids=[place.id, person.id],
        thread_ids=[garden.id],
        raw_ref="chat:42#7",
        salience=0.75,
        occurred_at=at(-60, SEOUL),
    )
    turn = data.observation(
        visit.id,
        text="we planted tomatoes",
        speaker_entity_id=person.id,
        mentioned_entity_ids=[place.id],
        raw_ref="chat:42#8",
        salience=1.0,
    )
    belief = data.derived(
        derived_type=DerivedType.USER_PREFERENCE,
        text="likes tomatoes",
        observation_ids=[turn.id],
        episode_ids=[visit.id],
        thread_ids=[garden.id],
        salience=0.0,
    )
    name = data.derived(
        derived_type=DerivedType.CLAIM,
        text="the person is called Mina",
        names=[(person.id, "Mina"), (person.id, "Mina Park")],
        given_by_application=True,
    )
    newer = data.derived(text="likes cherry tomatoes", observation_ids=[turn.id], supersedes=[belief.id])
    links = [
        data.link(visit.id, Relation.HAS_OBSERVATION, turn.id),
        data.link(newer.id, Relation.SUPERSEDES, belief.id, created_at=at(5)),
        data.link(belief.id, Relation.SUPPORTS, name.id, rationale="said so twice"),
    ]
    records = [data.record(name.id, action=LifecycleAction.FORGET_NOTED, recorded_at=at(7))]
    batch = GraphBatch(
        objects=[person, place, garden, visit, turn, belief, name, newer], links=links, records=records
    )
    return batch, {"person": person, "visit": visit, "turn": turn, "belief": belief, "newer": newer}


def _ids(items: Sequence[Any]) -> list[MemoryId]:
    return [item.id for item in items]


def _fields(obj: MemoryObject | MemoryLink) -> dict[str, Any]:
    return attrs.asdict(obj, recurse=False)


class GraphStoreContract(ContractSuite, suite=True):
    """Contract suite of :class:`charmem.ports.GraphStore`.

    Subclass it as ``TestMyGraphStore`` and override the fixture ``graph_store`` to yield an
    empty, open store bound to a fresh collection (its own temporary directory or in-memory
    store), closed in ``finally``. Switch off what the adapter does not claim::

        class TestMyGraphStore(GraphStoreContract):
            supports_lock = False

            @pytest.fixture
            async def graph_store(self, tmp_path):
                store = await MyGraphStore.open(tmp_path / "graph", "contract")
                try:
                    yield store
                finally:
                    await store.close()

            async def reopen(self, store):
                return await MyGraphStore.open(store.path, store.collection)

    Hooks (needed only when their flag is on): :meth:`reopen`, :meth:`open_competitor`,
    :meth:`open_sibling`.
    """

    capabilities: ClassVar[dict[str, str]] = {
        "supports_reopen": "keeps its data across close() and a new opener (implement reopen())",
        "supports_lock": (
            "refuses a second opener of the same store with StoreLockedError while it is open "
            "(implement open_competitor())"
        ),
        "supports_sibling_collections": (
            "holds other collections in the same backing store, isolated from this one "
            "(implement open_sibling())"
        ),
        "supports_closed_errors": "raises BackendError when used after close()",
        "supports_restore": (
            "restores its own export_graph dump into an empty store of the same collection on "
            "another backing store (implement open_twin())"
        ),
    }
    optional_capabilities: ClassVar[frozenset[str]] = frozenset(capabilities)
    minimum_passing: ClassVar[int] = 20

    supports_reopen: ClassVar[bool] = True
    supports_lock: ClassVar[bool] = True
    supports_sibling_collections: ClassVar[bool] = True
    supports_closed_errors: ClassVar[bool] = True

    # -- what an adapter provides ----------------------------------------------------------

    @pytest.fixture
    def graph_store(self) -> GraphStore:
        """Override: yield an empty, open graph store of a fresh collection; close it afterwards."""
        raise NotImplementedError(
            f"{type(self).__name__} must override the graph_store fixture to yield an empty, open "
            "GraphStore (and close it in finally)"
        )

    async def reopen(self, store: GraphStore) -> GraphStore:
        """Open the same collection of the same backing store again (``store`` is closed).

        Needed when ``supports_reopen`` is on. The returned store is closed by the suite.
        """
        raise NotImplementedError(
            f"{type(self).__name__} sets supports_reopen = True but does not implement reopen(); "
            "implement it or set supports_reopen = False"
        )

    async def open_competitor(self, store: GraphStore) -> None:
        """Open the store behind ``store`` as an independent opener would, then close it again.

        Needed when ``supports_lock`` is on. Raise whatever that opener raises (for a lock held
        per process, open it from a child process and re-raise its error as
        :class:`~charmem.errors.StoreLockedError`).
        """
        raise NotImplementedError(
            f"{type(self).__name__} sets supports_lock = True but does not implement "
            "open_competitor(); implement it or set supports_lock = False"
        )

    async def open_sibling(self, store: GraphStore, collection: str) -> GraphStore:
        """Open ``collection`` on the backing store of ``store`` (closed by the suite).

        Needed when ``supports_sibling_collections`` is on.
        """
        raise NotImplementedError(
            f"{type(self).__name__} sets supports_sibling_collections = True but does not implement "
            "open_sibling(); implement it or set supports_sibling_collections = False"
        )

    async def open_twin(self, store: GraphStore, collection: str) -> GraphStore:
        """Open an empty store of ``collection`` on *another* backing store (closed by the suite).

        Needed when ``supports_restore`` is on: the restore target of an export (a new directory,
        a new in-memory store, another server).
        """
        raise NotImplementedError(
            f"{type(self).__name__} sets supports_restore = True but does not implement open_twin(); "
            "implement it or set supports_restore = False"
        )

    # -- the canary ------------------------------------------------------------------------

    async def test_fixture_starts_empty(self, graph_store: GraphStore) -> None:
        """The fixture yields an empty store bound to a valid collection.

        If this fails: the ``graph_store`` fixture must give every test a fresh store (a new
        temporary directory, a new in-memory store or a new collection), not one shared with other
        tests; every other result of the suite is meaningless until it does.
        """
        assert isinstance(graph_store.collection, str) and graph_store.collection
        assert await graph_store.statement_count() == 0, "the graph_store fixture is not empty"
        assert await graph_store.object_ids() == [], "the graph_store fixture already holds objects"
        assert await graph_store.link_ids() == [], "the graph_store fixture already holds links"

    # -- round trips -----------------------------------------------------------------------

    async def test_objects_and_links_read_back_equal(self, graph_store: GraphStore) -> None:
        """Every object type and link reads back ``==`` (and with equal canonical content).

        If this fails: check the encoding of the field named in the diff (id lists, optional
        fields, salience 0.0 and 1.0, ``given_by_application``, assertions, thread status,
        ``rationale`` of links) and that datetimes keep their UTC offset.
        """
        batch, _ = _world()
        await graph_store.write_batch(batch)
        objects = await graph_store.get_objects(_ids(batch.objects))
        for obj in batch.objects:
            assert obj.id in objects, f"{obj.object_type.value} {obj.id} was not read back"
            back = objects[obj.id]
            assert type(back) is type(obj)
            assert back == obj
            assert canonical_content(back) == canonical_content(obj)
            assert back.created_at.utcoffset() == obj.created_at.utcoffset(), "UTC offset lost"
        links = await graph_store.get_links(_ids(batch.links))
        assert [links[i] for i in _ids(batch.links)] == list(batch.links)

    async def test_hostile_strings_round_trip_byte_identical(self, graph_store: GraphStore) -> None:
        """Text with quotes, braces, backslashes, NUL, emoji, Korean... reads back byte-identical.

        Every string of :data:`charmem_contract.data.HOSTILE_STRINGS` is written into every text
        field (observation text, episode summary and raw_ref, thread title, entity type, derived
        text, KnownAs name, link and record rationale).

        If this fails: memory text must always be data. Serialise it with the driver's own literal
        or parameter API (never spliced into a query by hand) and check the listed strings.
        """
        mismatches: list[str] = []
        for text in data.HOSTILE_STRINGS:
            person = data.entity(entity_type=text)
            ep = data.episode(summary=text, raw_ref=text)
            obs = data.observation(ep.id, text=text, raw_ref=text)
            grove = data.thread(title=text, summary=text)
            belief = data.derived(text=text, names=[(person.id, text)], given_by_application=True)
            lk = data.link(ep.id, Relation.HAS_OBSERVATION, obs.id, rationale=text)
            rec = data.record(belief.id, rationale=text)
            batch = GraphBatch(objects=[person, ep, obs, grove, belief], links=[lk], records=[rec])
            try:
                await graph_store.write_batch(batch)
                back = await graph_store.get_objects(_ids(batch.objects))
                links = await graph_store.get_links([lk.id])
                records = await graph_store.get_records([belief.id])
            except BackendError as exc:
                mismatches.append(f"{text!r}: {type(exc).__name__}: {exc}")
                continue
            for obj in batch.objects:
                if back.get(obj.id) != obj:
                    mismatches.append(f"{text!r}: {obj.object_type.value} read back as {back.get(obj.id)!r}")
            if links.get(lk.id) != lk:
                mismatches.append(f"{text!r}: link read back as {links.get(lk.id)!r}")
            if records != [rec]:
                mismatches.append(f"{text!r}: record read back as {records!r}")
        assert not mismatches, "hostile strings did not round-trip:\n" + "\n".join(mismatches)

    async def test_records_are_ordered_by_recorded_at_then_id(self, graph_store: GraphStore) -> None:
        """``get_records`` returns records about the targets only, by (recorded_at, id).

        If this fails: sort by the instant (not by its string with offsets: 10:00+09:00 is before
        02:00Z) and then by id, and select records by ``target_id``.
        """
        target, other = data.entity(), data.entity()
        record_ids = sorted(data.ids("records", 3), reverse=True)
        late = data.record(target.id, id=record_ids[0], recorded_at=at(30))
        early_seoul = data.record(target.id, id=record_ids[1], recorded_at=at(10, SEOUL))
        early_utc = data.record(
            target.id, id=record_ids[2], recorded_at=at(10), action=LifecycleAction.FORGET_NOTED
        )
        elsewhere = data.record(other.id)
        await graph_store.write_batch(
            GraphBatch(objects=[target, other], records=[late, early_seoul, early_utc, elsewhere])
        )
        got = await graph_store.get_records([target.id])
        expected = sorted([late, early_seoul, early_utc], key=lambda r: (r.recorded_at, r.id))
        assert got == expected
        assert await graph_store.get_records([]) == []

    async def test_kinds_do_not_leak_between_getters(self, graph_store: GraphStore) -> None:
        """``get_objects`` returns no links or records, ``get_links`` no objects; absent ids are missing.

        If this fails: filter by the stored kind of each id, not only by id.
        """
        batch, _ = _world()
        await graph_store.write_batch(batch)
        everything = [*_ids(batch.objects), *_ids(batch.links), *_ids(batch.records), MemoryId.new()]
        objects = await graph_store.get_objects(everything)
        assert set(objects) == set(_ids(batch.objects))
        links = await graph_store.get_links(everything)
        assert set(links) == set(_ids(batch.links))
        assert await graph_store.get_objects([]) == {}
        assert await graph_store.get_links([]) == {}

    # -- idempotence and conflicts ---------------------------------------------------------

    async def test_replay_of_equal_content_is_skipped(self, graph_store: GraphStore) -> None:
        """Writing a batch again reports every id as existing and writes nothing more.

        Equal content is judged on the canonical encoding: the same instant in another UTC offset
        is the same content, not a conflict.

        If this fails: look ids up before writing, compare with
        :func:`charmem.domain.rules.content_equal` (UTC-normalised instants), and report
        ``inserted_ids`` / ``existing_ids`` in batch order.
        """
        batch, _ = _world()
        first = await graph_store.write_batch(batch)
        every = [*_ids(batch.objects), *_ids(batch.links), *_ids(batch.records)]
        assert list(first.inserted_ids) == every
        assert list(first.existing_ids) == []
        count = await graph_store.statement_count()
        again = await graph_store.write_batch(batch)
        assert list(again.inserted_ids) == []
        assert list(again.existing_ids) == every
        assert await graph_store.statement_count() == count, "a replay changed the statement count"
        shifted = batch.objects[1]
        moved = type(shifted)(**{**_fields(shifted), "created_at": shifted.created_at.astimezone(SEOUL)})
        assert content_equal(moved, shifted)
        result = await graph_store.write_batch(GraphBatch(objects=[moved]))
        assert list(result.existing_ids) == [moved.id]
        assert await graph_store.statement_count() == count

    async def test_empty_batch_writes_nothing(self, graph_store: GraphStore) -> None:
        """An empty batch succeeds and reports nothing.

        If this fails: return an empty ``GraphWriteResult`` for an empty batch.
        """
        result = await graph_store.write_batch(GraphBatch())
        assert list(result.inserted_ids) == [] and list(result.existing_ids) == []
        assert await graph_store.statement_count() == 0

    async def test_id_conflict_refuses_the_whole_batch(self, graph_store: GraphStore) -> None:
        """An id stored with different content raises IdConflictError naming it; nothing is written.

        If this fails: compare every item of the batch with what is stored before writing any of
        them, raise :class:`~charmem.errors.IdConflictError` with ``ids`` holding the conflicting
        ids (canonical strings), and write nothing of the batch.
        """
        stored = data.episode(summary="the first version")
        await graph_store.write_batch(GraphBatch(objects=[stored]))
        count = await graph_store.statement_count()
        fresh = data.entity()
        changed = data.episode(id=stored.id, summary="a different version")
        with pytest.raises(IdConflictError) as caught:
            await graph_store.write_batch(GraphBatch(objects=[fresh, changed]))
        assert str(stored.id) in caught.value.ids, f"IdConflictError.ids = {caught.value.ids}"
        assert await graph_store.statement_count() == count, "a refused batch changed the store"
        assert await graph_store.get_objects([fresh.id]) == {}, "a refused batch wrote its new objects"
        assert (await graph_store.get_objects([stored.id]))[stored.id] == stored

    async def test_id_conflicts_across_objects_links_and_records(self, graph_store: GraphStore) -> None:
        """An id is unique across object types, links and records: reusing it as another kind conflicts.

        If this fails: look a batch's ids up under every kind (each object type, link, record), not
        only under the kind being written.
        """
        anchor_a, anchor_b = data.entity(), data.entity()
        await graph_store.write_batch(GraphBatch(objects=[anchor_a, anchor_b]))

        def as_kind(kind: str, memory_id: MemoryId) -> GraphBatch:
            if kind == "link":
                return GraphBatch(
                    links=[data.link(anchor_a.id, Relation.ASSOCIATED_WITH, anchor_b.id, id=memory_id)]
                )
            if kind == "record":
                return GraphBatch(records=[data.record(anchor_a.id, id=memory_id)])
            if kind == "entity":
                return GraphBatch(objects=[data.entity(id=memory_id)])
            if kind == "episode":
                return GraphBatch(objects=[data.episode(id=memory_id)])
            return GraphBatch(objects=[data.thread(id=memory_id)])

        pairs = [
            ("entity", "episode"),
            ("episode", "thread"),
            ("entity", "link"),
            ("link", "entity"),
            ("record", "episode"),
            ("episode", "record"),
            ("link", "record"),
            ("record", "link"),
        ]
        accepted: list[str] = []
        for first, second in pairs:
            memory_id = MemoryId.new()
            await graph_store.write_batch(as_kind(first, memory_id))
            count = await graph_store.statement_count()
            try:
                await graph_store.write_batch(as_kind(second, memory_id))
            except IdConflictError:
                if await graph_store.statement_count() != count:
                    accepted.append(f"{first} then {second}: refused but the store changed")
            else:
                accepted.append(f"an id stored as a {first} was accepted again as a {second}")
        assert not accepted, "ids must be unique across kinds:\n" + "\n".join(accepted)

    async def test_same_id_twice_in_one_batch_with_different_content_conflicts(
        self, graph_store: GraphStore
    ) -> None:
        """A batch holding one id twice with different content is refused; equal twice is fine.

        If this fails: check the batch against itself as well as against the store.
        """
        one = data.entity(entity_type="person")
        other = data.entity(id=one.id, entity_type="place")
        with pytest.raises(IdConflictError):
            await graph_store.write_batch(GraphBatch(objects=[one, other]))
        assert await graph_store.statement_count() == 0
        result = await graph_store.write_batch(GraphBatch(objects=[one, one]))
        assert one.id in result.inserted_ids
        assert (await graph_store.get_objects([one.id]))[one.id] == one

    async def test_atomic_batch_leaves_nothing(self, graph_store: GraphStore) -> None:
        """A batch refused by its last item leaves none of its earlier items behind.

        The batch holds new objects, new links and new records, and its very last item (a record)
        conflicts with a stored one.

        If this fails: the adapter writes items one by one. Check the whole batch first, then write
        every new item in one transaction (or roll back on failure).
        """
        target = data.entity()
        stored_record = data.record(target.id, rationale="first")
        await graph_store.write_batch(GraphBatch(objects=[target], records=[stored_record]))
        count = await graph_store.statement_count()
        batch, _ = _world()
        conflicting = data.record(target.id, id=stored_record.id, rationale="second")
        doomed = GraphBatch(objects=batch.objects, links=batch.links, records=[*batch.records, conflicting])
        with pytest.raises(IdConflictError):
            await graph_store.write_batch(doomed)
        leftovers = await graph_store.get_objects(_ids(batch.objects))
        assert leftovers == {}, f"a refused batch left {len(leftovers)} of its objects behind"
        assert await graph_store.get_links(_ids(batch.links)) == {}, "a refused batch left links behind"
        assert await graph_store.statement_count() == count, "a refused batch changed the statement count"
        assert await graph_store.get_records([target.id]) == [stored_record]

    async def test_concurrent_writers_are_serialised(self, graph_store: GraphStore) -> None:
        """Concurrent batches claiming one new id with different content: exactly one wins.

        If this fails: the check-then-write of ``write_batch`` interleaves with another writer.
        Hold a writer lock (per backing store, across threads) around the lookup and the write.
        """
        memory_id = MemoryId.new()
        contenders = [data.episode(id=memory_id, summary=f"version {n}") for n in range(8)]
        outcomes = await asyncio.gather(
            *(graph_store.write_batch(GraphBatch(objects=[c])) for c in contenders), return_exceptions=True
        )
        winners = [c for c, o in zip(contenders, outcomes, strict=True) if not isinstance(o, BaseException)]
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        assert len(winners) == 1, f"{len(winners)} of 8 conflicting concurrent writes succeeded"
        assert all(isinstance(e, IdConflictError) for e in errors), f"unexpected errors: {errors!r}"
        assert (await graph_store.get_objects([memory_id]))[memory_id] == winners[0]

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
        got = await graph_store.currency([*_ids(objects), absent, links[0].id, records[0].id])
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
        batch, _ = _world()
        await graph_store.write_batch(batch)
        objects: Sequence[MemoryObject] = batch.objects
        assert await graph_store.object_ids() == sorted(_ids(objects))
        derived_ids = sorted(o.id for o in objects if o.object_type is ObjectType.DERIVED)
        assert await graph_store.object_ids([ObjectType.DERIVED]) == derived_ids
        pair = [ObjectType.ENTITY, ObjectType.THREAD]
        assert await graph_store.object_ids(pair) == sorted(o.id for o in objects if o.object_type in pair)
        assert await graph_store.link_ids() == sorted(_ids(batch.links))
        other = data.episode()
        await graph_store.write_batch(GraphBatch(objects=[other]))
        assert await graph_store.object_ids([ObjectType.EPISODE]) == sorted(
            [other.id, *(o.id for o in objects if o.object_type is ObjectType.EPISODE)]
        )
        assert await graph_store.object_ids([]) == []

    async def test_statement_count_grows_with_new_items_only(self, graph_store: GraphStore) -> None:
        """``statement_count`` grows with every new item and is unchanged by replays.

        If this fails: count the statements (or rows) of this collection only.
        """
        batch, _ = _world()
        await graph_store.write_batch(GraphBatch(objects=batch.objects[:2]))
        first = await graph_store.statement_count()
        assert first > 0
        await graph_store.write_batch(batch)
        second = await graph_store.statement_count()
        assert second > first
        await graph_store.write_batch(batch)
        assert await graph_store.statement_count() == second

    # -- capabilities ----------------------------------------------------------------------

    @requires("supports_reopen")
    async def test_reopen_after_close_keeps_everything(self, graph_store: GraphStore) -> None:
        """After ``close()``, a new opener of the same collection reads everything back.

        If this fails: check that writes are durable when acknowledged (flush, fsync, WAL), that
        close releases the store, and that :meth:`reopen` opens the same path and collection.
        """
        batch, _ = _world()
        await graph_store.write_batch(batch)
        hostile = data.observation(batch.objects[3].id, text="\n".join(data.HOSTILE_STRINGS))
        await graph_store.write_batch(GraphBatch(objects=[hostile]))
        count = await graph_store.statement_count()
        await graph_store.close()
        reopened = await self.reopen(graph_store)
        try:
            assert await reopened.statement_count() == count
            objects = await reopened.get_objects([*_ids(batch.objects), hostile.id])
            assert [objects.get(i) for i in _ids(batch.objects)] == list(batch.objects)
            assert objects.get(hostile.id) == hostile
            assert await reopened.link_ids() == sorted(_ids(batch.links))
            assert await reopened.get_records([batch.records[0].target_id]) == list(batch.records)
            again = await reopened.write_batch(batch)
            assert list(again.inserted_ids) == []
        finally:
            await reopened.close()

    @requires("supports_reopen")
    async def test_object_type_hints_never_change_an_answer(self, graph_store: GraphStore) -> None:
        """Hints (:class:`~charmem.ports.ObjectTypeHints`), right, wrong or about absent ids and
        links, leave every answer of a freshly opened store as it was.

        Skipped for a store that takes no hints (an optional capability).

        If this fails: treat a hint as a guess. Read a hinted id under its hinted type first and,
        when it is not there, under every other type; never let a hint decide absence, currency or
        links.
        """
        if not isinstance(graph_store, ObjectTypeHints):
            pytest.skip(f"{type(graph_store).__name__} takes no ObjectTypeHints (optional capability)")
        batch, _ = _world()
        await graph_store.write_batch(batch)
        objects = _ids(batch.objects)
        asked = [*objects, *_ids(batch.links), MemoryId.new(), MemoryId.new()]

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
            reopened = await self.reopen(graph_store)
            try:
                assert isinstance(reopened, ObjectTypeHints)
                reopened.hint_object_types(
                    {i: types[(truth.get(i, n) + shift) % len(types)] for n, i in enumerate(asked)}
                )
                assert await answers(reopened) == expected
            finally:
                await reopened.close()

    @requires("supports_lock")
    async def test_second_opener_gets_store_locked_error(self, graph_store: GraphStore) -> None:
        """While the store is open, another opener gets StoreLockedError (quickly); after close it opens.

        If this fails: translate the driver's lock error into
        :class:`~charmem.errors.StoreLockedError` (with a bounded retry, seconds not minutes), and
        release the lock in ``close()``.
        """
        await graph_store.write_batch(GraphBatch(objects=[data.entity()]))
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(StoreLockedError):
            await self.open_competitor(graph_store)
        assert loop.time() - started < 30, "the lock error took more than 30 s"
        await graph_store.close()
        await self.open_competitor(graph_store)

    @requires("supports_sibling_collections")
    async def test_collections_are_isolated(self, graph_store: GraphStore) -> None:
        """Another collection on the same backing store sees none of this one's data.

        The same ids with other content are no conflict there, and counts are per collection.

        If this fails: scope every read, write, count and inventory to the collection (a named
        graph, a key prefix, a column), including the id-conflict lookup.
        """
        batch, _ = _world()
        await graph_store.write_batch(batch)
        sibling = await self.open_sibling(graph_store, f"{graph_store.collection}-sibling")
        try:
            ids = _ids(batch.objects)
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

    @requires("supports_closed_errors")
    async def test_use_after_close_raises_backend_error(self, graph_store: GraphStore) -> None:
        """After ``close()``, reads and writes raise BackendError, not a driver error; close is idempotent.

        If this fails: check for a closed handle before each call and raise
        :class:`~charmem.errors.BackendError` saying the store is closed.
        """
        await graph_store.close()
        await graph_store.close()
        with pytest.raises(BackendError):
            await graph_store.write_batch(GraphBatch(objects=[data.entity()]))
        with pytest.raises(BackendError):
            await graph_store.get_objects([MemoryId.new()])

    # -- erasure (the out-of-band purge) ---------------------------------------------------

    async def _erase_world(self, graph_store: GraphStore) -> dict[str, Any]:
        """The world of :func:`_world` plus two records, then an erasure of two objects.

        Erased: the observation ``turn`` (with its ``has_observation`` link and the record
        targeting it) and the derived memory ``newer``, whose ``supersedes`` link to ``belief`` is
        kept (its ``from`` now refers to a tombstone, and ``belief`` stays superseded).
        """
        batch, world = _world()
        turn, newer, visit = world["turn"], world["newer"], world["visit"]
        about_turn = data.record(turn.id, rationale="suppress the turn")
        cascade = data.record(visit.id, related_ids=[turn.id], recorded_at=at(8))
        await graph_store.write_batch(batch)
        await graph_store.write_batch(GraphBatch(records=[about_turn, cascade]))
        has_observation, supersede, supports = batch.links
        purged_at = at(90, SEOUL)
        erasure = GraphErasure(
            tombstones=[
                Tombstone(id=turn.id, object_type=ObjectType.OBSERVATION, purged_at=purged_at),
                Tombstone(id=newer.id, object_type=ObjectType.DERIVED, purged_at=purged_at),
            ],
            link_ids=[has_observation.id],
            record_ids=[about_turn.id],
        )
        before = await graph_store.statement_count()
        await graph_store.erase(erasure)
        return {
            **world,
            "batch": batch,
            "erasure": erasure,
            "before": before,
            "cascade": cascade,
            "kept_links": sorted([supersede, supports], key=lambda lk: lk.id),
            "supersede": supersede,
            "survivors": [o for o in batch.objects if o.id not in (turn.id, newer.id)],
        }

    async def test_erase_removes_items_and_leaves_tombstones(self, graph_store: GraphStore) -> None:
        """``erase`` removes the listed objects, links and records; tombstones stay; the rest reads back.

        Erased objects vanish from ``get_objects``, ``currency`` and ``object_ids``; erased links
        and records from ``get_links``, ``link_ids`` and ``get_records``. Statements of surviving
        items that refer to an erased id are kept (a derived memory's source, a record's
        ``related_ids``, the ``from`` of a kept ``supersedes`` link, whose target stays
        superseded). ``tombstones`` answers for the erased ids (and lists all with ``None``).

        If this fails: remove only what describes the erased nodes (their fields and assertion
        nodes, the listed links with their direct edges, the listed records), not statements of
        other nodes that mention them; store each tombstone (id, object type, ``purged_at`` with
        its offset) and answer ``tombstones`` from them.
        """
        w = await self._erase_world(graph_store)
        turn, newer, belief, visit = w["turn"], w["newer"], w["belief"], w["visit"]
        erased = [turn.id, newer.id]
        assert await graph_store.get_objects(erased) == {}, "erased objects still read back"
        assert await graph_store.currency(erased) == {}, "erased objects still have a currency"
        assert await graph_store.object_ids() == sorted(o.id for o in w["survivors"])
        survivors = await graph_store.get_objects(_ids(w["survivors"]))
        assert [survivors.get(o.id) for o in w["survivors"]] == w["survivors"], (
            "a surviving object changed (references to erased ids must be kept as they were)"
        )
        assert await graph_store.link_ids() == _ids(w["kept_links"])
        assert await graph_store.get_links(list(w["erasure"].link_ids)) == {}
        assert await graph_store.links_of([belief.id]) == w["kept_links"]
        assert await graph_store.get_records([turn.id]) == []
        assert await graph_store.get_records([visit.id]) == [w["cascade"]]
        currency = await graph_store.currency([belief.id, visit.id])
        assert currency == {belief.id: S, visit.id: E}, "erasure changed a survivor's currency"
        expected = {t.id: t for t in w["erasure"].tombstones}
        absent = MemoryId.new()
        got = await graph_store.tombstones([newer.id, belief.id, absent, turn.id])
        assert got == {newer.id: expected[newer.id], turn.id: expected[turn.id]}
        assert got[turn.id].purged_at.utcoffset() == SEOUL.utcoffset(None), "purged_at lost its offset"
        assert await graph_store.tombstones() == dict(sorted(expected.items()))
        assert await graph_store.tombstones([]) == {}
        count = await graph_store.statement_count()
        assert 0 < count < w["before"], f"statement count {w['before']} -> {count} after the erasure"

    async def test_erase_again_is_harmless_and_keeps_the_first_time(self, graph_store: GraphStore) -> None:
        """Applying an erasure again (even with a later ``purged_at``) changes nothing.

        If this fails: skip tombstones that exist already (do not rewrite their ``purged_at``) and
        treat absent links and records as already erased.
        """
        w = await self._erase_world(graph_store)
        count = await graph_store.statement_count()
        first = await graph_store.tombstones()
        later = [attrs.evolve(t, purged_at=at(500)) for t in w["erasure"].tombstones]
        await graph_store.erase(attrs.evolve(w["erasure"], tombstones=later))
        assert await graph_store.tombstones() == first
        assert await graph_store.statement_count() == count
        await graph_store.erase(GraphErasure())
        assert await graph_store.statement_count() == count

    async def test_write_batch_refuses_purged_ids(self, graph_store: GraphStore) -> None:
        """A batch holding an erased id (same content, other content, or as a link) is refused whole.

        If this fails: look the batch's ids up among the tombstones in the same check as the id
        conflicts and raise :class:`~charmem.errors.PurgedMemoryError` naming them (``ids``),
        writing nothing.
        """
        w = await self._erase_world(graph_store)
        turn, person = w["turn"], w["person"]
        count = await graph_store.statement_count()
        fresh = data.entity()
        attempts = {
            "the same object again": GraphBatch(objects=[fresh, turn]),
            "other content under its id": GraphBatch(objects=[fresh, data.entity(id=turn.id)]),
            "a link under its id": GraphBatch(
                objects=[fresh],
                links=[data.link(person.id, Relation.ASSOCIATED_WITH, fresh.id, id=turn.id)],
            ),
        }
        accepted: list[str] = []
        for label, batch in attempts.items():
            try:
                await graph_store.write_batch(batch)
            except PurgedMemoryError as exc:
                if str(turn.id) not in exc.ids:
                    accepted.append(f"{label}: refused, but PurgedMemoryError.ids = {exc.ids}")
            else:
                accepted.append(label)
        assert not accepted, f"a purged id was written again, or not named: {accepted}"
        assert await graph_store.statement_count() == count, "a refused batch changed the store"
        assert await graph_store.get_objects([fresh.id]) == {}, "a refused batch wrote its new objects"

    # -- export and import (backup and restore) --------------------------------------------

    @requires("supports_restore")
    async def test_export_then_import_restores_every_read(self, graph_store: GraphStore) -> None:
        """A dump loaded into an empty store of the same collection answers every read alike.

        The dump holds objects (hostile text included), links, records and tombstones; the twin
        then refuses purged ids, and a second import into it is refused as not empty.

        If this fails: write every statement of the collection in ``export_graph`` (tombstones
        too) with the driver's serialiser, load it in ``import_graph`` in one transaction, and
        report the same statement count on both sides.
        """
        w = await self._erase_world(graph_store)
        hostile = data.observation(w["visit"].id, text="\n".join(data.HOSTILE_STRINGS))
        await graph_store.write_batch(GraphBatch(objects=[hostile]))
        out = io.BytesIO()
        exported = await graph_store.export_graph(out)
        count = await graph_store.statement_count()
        assert exported.statements == count, f"exported {exported.statements} of {count} statements"
        twin = await self.open_twin(graph_store, graph_store.collection)
        try:
            assert await twin.statement_count() == 0, "open_twin must give an empty store"
            loaded = await twin.import_graph(io.BytesIO(out.getvalue()), exported.media_type)
            assert loaded == count
            assert await twin.statement_count() == count
            object_ids = await graph_store.object_ids()
            assert await twin.object_ids() == object_ids
            assert await twin.get_objects(object_ids) == await graph_store.get_objects(object_ids)
            assert (await twin.get_objects([hostile.id]))[hostile.id] == hostile
            link_ids = await graph_store.link_ids()
            assert await twin.link_ids() == link_ids
            assert await twin.get_links(link_ids) == await graph_store.get_links(link_ids)
            every = [*object_ids, *(t.id for t in w["erasure"].tombstones)]
            assert await twin.links_of(every) == await graph_store.links_of(every)
            assert await twin.get_records(every) == await graph_store.get_records(every)
            assert await twin.currency(every) == await graph_store.currency(every)
            for as_of in (at(6), at(9)):
                assert await twin.currency(every, as_of=as_of) == await graph_store.currency(
                    every, as_of=as_of
                )
            assert await twin.tombstones() == await graph_store.tombstones()
            assert await twin.name_assertions() == await graph_store.name_assertions()
            with pytest.raises(PurgedMemoryError):
                await twin.write_batch(GraphBatch(objects=[w["turn"]]))
            with pytest.raises(CollectionNotEmptyError):
                await twin.import_graph(io.BytesIO(out.getvalue()), exported.media_type)
            assert await twin.statement_count() == count
        finally:
            await twin.close()

    @requires("supports_restore")
    async def test_import_refuses_what_it_cannot_restore(self, graph_store: GraphStore) -> None:
        """Import refuses a non-empty collection, another media type, garbage, another collection.

        Each refusal is typed (:class:`~charmem.errors.CollectionNotEmptyError` or
        :class:`~charmem.errors.BackupFormatError`) and writes nothing.

        If this fails: check emptiness under the writer lock before loading; parse and check the
        whole dump (its collection, its syntax) inside the one transaction, or before it.
        """
        batch, _ = _world()
        await graph_store.write_batch(batch)
        out = io.BytesIO()
        exported = await graph_store.export_graph(out)
        dump = out.getvalue()
        count = await graph_store.statement_count()
        with pytest.raises(CollectionNotEmptyError) as caught:
            await graph_store.import_graph(io.BytesIO(dump), exported.media_type)
        assert caught.value.collection == graph_store.collection
        assert await graph_store.statement_count() == count
        twin = await self.open_twin(graph_store, graph_store.collection)
        other = await self.open_twin(graph_store, f"{graph_store.collection}-other")
        try:
            refusals = {
                "an unknown media type": (twin, dump, "application/x-unknown"),
                "bytes that are no dump": (twin, b"\x00 this is not a dump {\n", exported.media_type),
                "the dump of another collection": (other, dump, exported.media_type),
            }
            accepted: list[str] = []
            for label, (target, raw, media_type) in refusals.items():
                try:
                    await target.import_graph(io.BytesIO(raw), media_type)
                except BackupFormatError:
                    pass
                else:
                    accepted.append(label)
                if await target.statement_count() != 0:
                    accepted.append(f"{label}: refused, but statements were written")
            assert not accepted, f"import accepted what it cannot restore: {accepted}"
        finally:
            await twin.close()
            await other.close()
