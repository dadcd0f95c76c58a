"""The graph store suite's erasure, export and import: what ``charmem.admin`` relies on."""

from __future__ import annotations

import io
from typing import Any

import attrs
import pytest

from charmem.domain.graph import GraphBatch, GraphErasure
from charmem.domain.ids import MemoryId
from charmem.domain.model import MemoryObject, Relation
from charmem.errors import BackupFormatError, CollectionNotEmptyError, PurgedMemoryError
from charmem.ports import GraphStore
from charmem_contract import data
from charmem_contract._base import requires
from charmem_contract._graph_world import E, S, erase_world, ids_of, sample_world
from charmem_contract.data import SEOUL, at
from charmem_contract.factories import CONTRACT_COLLECTION, StoreFactory

__all__ = ["GraphErasureTests"]


class GraphErasureTests:
    """Erase (the out-of-band purge), export and import (mixed into ``GraphStoreContract``)."""

    # -- erasure (the out-of-band purge) ---------------------------------------------------

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
        w = await erase_world(graph_store)
        await _assert_erased_items_are_gone(graph_store, w)
        await _assert_tombstones_stand_for_them(graph_store, w)
        count = await graph_store.statement_count()
        assert 0 < count < w["before"], f"statement count {w['before']} -> {count} after the erasure"

    async def test_erase_again_is_harmless_and_keeps_the_first_time(self, graph_store: GraphStore) -> None:
        """Applying an erasure again (even with a later ``purged_at``) changes nothing.

        If this fails: skip tombstones that exist already (do not rewrite their ``purged_at``) and
        treat absent links and records as already erased.
        """
        w = await erase_world(graph_store)
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
        w = await erase_world(graph_store)
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
    async def test_export_then_import_restores_every_read(
        self, graph_store: GraphStore, graph_store_factory: StoreFactory[GraphStore]
    ) -> None:
        """A dump loaded into an empty store of the same collection answers every read alike.

        The dump holds objects (hostile text included), links, records and tombstones; the twin
        then refuses purged ids, and a second import into it is refused as not empty.

        If this fails: write every statement of the collection in ``export_graph`` (tombstones
        too) with the driver's serialiser, load it in ``import_graph`` in one transaction, and
        report the same statement count on both sides.
        """
        w = await erase_world(graph_store)
        hostile = data.observation(w["visit"].id, text="\n".join(data.HOSTILE_STRINGS))
        await graph_store.write_batch(GraphBatch(objects=[hostile]))
        out = io.BytesIO()
        exported = await graph_store.export_graph(out)
        count = await graph_store.statement_count()
        assert exported.statements == count, f"exported {exported.statements} of {count} statements"
        twin = await graph_store_factory.open(CONTRACT_COLLECTION, store="twin")
        assert await twin.statement_count() == 0, "the factory's store 'twin' must start empty"
        loaded = await twin.import_graph(io.BytesIO(out.getvalue()), exported.media_type)
        assert loaded == count
        assert await twin.statement_count() == count
        await _assert_twin_reads_alike(twin, graph_store, w, hostile)
        with pytest.raises(PurgedMemoryError):
            await twin.write_batch(GraphBatch(objects=[w["turn"]]))
        with pytest.raises(CollectionNotEmptyError):
            await twin.import_graph(io.BytesIO(out.getvalue()), exported.media_type)
        assert await twin.statement_count() == count

    @requires("supports_restore")
    async def test_import_refuses_what_it_cannot_restore(
        self, graph_store: GraphStore, graph_store_factory: StoreFactory[GraphStore]
    ) -> None:
        """Import refuses a non-empty collection, another media type, garbage, another collection.

        Each refusal is typed (:class:`~charmem.errors.CollectionNotEmptyError` or
        :class:`~charmem.errors.BackupFormatError`) and writes nothing.

        If this fails: check emptiness under the writer lock before loading; parse and check the
        whole dump (its collection, its syntax) inside the one transaction, or before it.
        """
        batch, _ = sample_world()
        await graph_store.write_batch(batch)
        out = io.BytesIO()
        exported = await graph_store.export_graph(out)
        dump = out.getvalue()
        count = await graph_store.statement_count()
        with pytest.raises(CollectionNotEmptyError) as caught:
            await graph_store.import_graph(io.BytesIO(dump), exported.media_type)
        assert caught.value.collection == graph_store.collection
        assert await graph_store.statement_count() == count
        twin = await graph_store_factory.open(CONTRACT_COLLECTION, store="twin")
        other = await graph_store_factory.open(f"{CONTRACT_COLLECTION}-other", store="twin")
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


async def _assert_erased_items_are_gone(graph_store: GraphStore, w: dict[str, Any]) -> None:
    """Erased objects, links and records read as absent; survivors, their links and currency as before."""
    turn, newer, belief, visit = w["turn"], w["newer"], w["belief"], w["visit"]
    erased = [turn.id, newer.id]
    assert await graph_store.get_objects(erased) == {}, "erased objects still read back"
    assert await graph_store.currency(erased) == {}, "erased objects still have a currency"
    assert await graph_store.object_ids() == sorted(o.id for o in w["survivors"])
    survivors = await graph_store.get_objects(ids_of(w["survivors"]))
    assert [survivors.get(o.id) for o in w["survivors"]] == w["survivors"], (
        "a surviving object changed (references to erased ids must be kept as they were)"
    )
    assert await graph_store.link_ids() == ids_of(w["kept_links"])
    assert await graph_store.get_links(list(w["erasure"].link_ids)) == {}
    assert await graph_store.links_of([belief.id]) == w["kept_links"]
    assert await graph_store.get_records([turn.id]) == []
    assert await graph_store.get_records([visit.id]) == [w["cascade"]]
    currency = await graph_store.currency([belief.id, visit.id])
    assert currency == {belief.id: S, visit.id: E}, "erasure changed a survivor's currency"


async def _assert_tombstones_stand_for_them(graph_store: GraphStore, w: dict[str, Any]) -> None:
    """``tombstones`` answers for the erased ids (offset kept), lists all, and nothing for ``[]``."""
    turn, newer, belief = w["turn"], w["newer"], w["belief"]
    expected = {t.id: t for t in w["erasure"].tombstones}
    absent = MemoryId.new()
    got = await graph_store.tombstones([newer.id, belief.id, absent, turn.id])
    assert got == {newer.id: expected[newer.id], turn.id: expected[turn.id]}
    assert got[turn.id].purged_at.utcoffset() == SEOUL.utcoffset(None), "purged_at lost its offset"
    assert await graph_store.tombstones() == dict(sorted(expected.items()))
    assert await graph_store.tombstones([]) == {}


async def _assert_twin_reads_alike(
    twin: GraphStore, graph_store: GraphStore, w: dict[str, Any], hostile: MemoryObject
) -> None:
    """Every read of ``twin`` (restored from ``graph_store``'s export) answers as ``graph_store``'s."""
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
        assert await twin.currency(every, as_of=as_of) == await graph_store.currency(every, as_of=as_of)
    assert await twin.tombstones() == await graph_store.tombstones()
    assert await twin.name_assertions() == await graph_store.name_assertions()
    assert await twin.name_index() == await graph_store.name_index()
