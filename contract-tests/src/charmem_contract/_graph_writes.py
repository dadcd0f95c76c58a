"""The graph store suite's writes: round trips, idempotence, id conflicts, atomic batches."""

from __future__ import annotations

import asyncio

import pytest

from charmem.domain.graph import GraphBatch, LifecycleAction
from charmem.domain.ids import MemoryId
from charmem.domain.model import Relation
from charmem.domain.rules import canonical_content, content_equal
from charmem.errors import BackendError, IdConflictError
from charmem.ports import GraphStore
from charmem_contract import data
from charmem_contract._graph_world import fields_of, ids_of, sample_world
from charmem_contract.data import SEOUL, at

__all__ = ["GraphWriteTests"]


class GraphWriteTests:
    """Round trips, idempotence, id conflicts and atomic batches (mixed into ``GraphStoreContract``)."""

    # -- round trips -----------------------------------------------------------------------

    async def test_objects_and_links_read_back_equal(self, graph_store: GraphStore) -> None:
        """Every object type and link reads back ``==`` (and with equal canonical content).

        If this fails: check the encoding of the field named in the diff (id lists, optional
        fields, salience 0.0 and 1.0, ``given_by_application``, assertions, thread status,
        ``rationale`` of links) and that datetimes keep their UTC offset.
        """
        batch, _ = sample_world()
        await graph_store.write_batch(batch)
        objects = await graph_store.get_objects(ids_of(batch.objects))
        for obj in batch.objects:
            assert obj.id in objects, f"{obj.object_type.value} {obj.id} was not read back"
            back = objects[obj.id]
            assert type(back) is type(obj)
            assert back == obj
            assert canonical_content(back) == canonical_content(obj)
            assert back.created_at.utcoffset() == obj.created_at.utcoffset(), "UTC offset lost"
        links = await graph_store.get_links(ids_of(batch.links))
        assert [links[i] for i in ids_of(batch.links)] == list(batch.links)

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
                back = await graph_store.get_objects(ids_of(batch.objects))
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
        batch, _ = sample_world()
        await graph_store.write_batch(batch)
        everything = [*ids_of(batch.objects), *ids_of(batch.links), *ids_of(batch.records), MemoryId.new()]
        objects = await graph_store.get_objects(everything)
        assert set(objects) == set(ids_of(batch.objects))
        links = await graph_store.get_links(everything)
        assert set(links) == set(ids_of(batch.links))
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
        batch, _ = sample_world()
        first = await graph_store.write_batch(batch)
        every = [*ids_of(batch.objects), *ids_of(batch.links), *ids_of(batch.records)]
        assert list(first.inserted_ids) == every
        assert list(first.existing_ids) == []
        count = await graph_store.statement_count()
        again = await graph_store.write_batch(batch)
        assert list(again.inserted_ids) == []
        assert list(again.existing_ids) == every
        assert await graph_store.statement_count() == count, "a replay changed the statement count"
        shifted = batch.objects[1]
        moved = type(shifted)(**{**fields_of(shifted), "created_at": shifted.created_at.astimezone(SEOUL)})
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
        batch, _ = sample_world()
        conflicting = data.record(target.id, id=stored_record.id, rationale="second")
        doomed = GraphBatch(objects=batch.objects, links=batch.links, records=[*batch.records, conflicting])
        with pytest.raises(IdConflictError):
            await graph_store.write_batch(doomed)
        leftovers = await graph_store.get_objects(ids_of(batch.objects))
        assert leftovers == {}, f"a refused batch left {len(leftovers)} of its objects behind"
        assert await graph_store.get_links(ids_of(batch.links)) == {}, "a refused batch left links behind"
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
