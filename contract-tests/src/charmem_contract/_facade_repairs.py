"""The facade suite's retrieval and repairable writes, checked inside the stores."""

from __future__ import annotations

from datetime import timedelta
from typing import cast

import pytest

from charmem import (
    CharacterMemory,
    DerivedMemoryDraft,
    DerivedType,
    MemoryId,
    ObjectType,
    RememberDrafts,
    RememberInput,
    RepairMarker,
    RetrievalContext,
    VectorOperation,
)
from charmem.errors import BackendError
from charmem.ports import GraphStore, RetrievalStatsStore, VectorIndex, VectorPoint
from charmem.testing import FaultyGraphStore, FaultyStatsStore, FaultyVectorIndex, stores_of
from charmem_contract import data
from charmem_contract._base import requires
from charmem_contract._facade_steps import AT_T0, NOW, session_drafts, store_counts
from charmem_contract._state_machine import pack_signature
from charmem_contract.data import T0
from charmem_contract.factories import MemoryFactory

__all__ = ["WhiteBoxRecallTests"]


class WhiteBoxRecallTests:
    """Retrieval and repairable writes checked inside the stores (mixed into ``CharacterMemoryContract``)."""

    # -- retrieval -------------------------------------------------------------------------

    async def test_graph_authority_omits_points_the_graph_does_not_hold(
        self, memory: CharacterMemory
    ) -> None:
        """A vector point with no object in the graph is omitted (``not_in_graph``), never an item.

        If this fails: ``get_objects`` of the graph store returned something for an id it does
        not hold, or the vector index returned the wrong id for a point.
        """
        await memory.remember(RememberInput("we planted tomatoes", occurred_at=T0), AT_T0)
        stray = MemoryId.new()
        vector = await memory.embedder.embed_query("a stray point about tomatoes")
        await stores_of(memory).vectors.upsert(
            [VectorPoint(id=stray, object_type=ObjectType.OBSERVATION, vector=vector)]
        )
        pack = await memory.retrieve(RetrievalContext(query="a stray point about tomatoes"))
        assert stray not in [item.id for item in pack.items]
        assert (stray, "not_in_graph") in [(o.id, o.reason) for o in pack.omissions]
        assert pack.items, "the real memory should still be recalled"

    async def test_graph_authority_omits_stale_points_of_superseded_memories(
        self, memory: CharacterMemory
    ) -> None:
        """A point left in the index for a superseded memory is omitted with reason ``superseded``.

        If this fails: the graph store's ``currency`` does not see the ``supersedes`` link.
        """
        plan = await memory.prepare(
            RememberInput("tea in the morning", occurred_at=T0).with_derived_memory(
                DerivedMemoryDraft(DerivedType.USER_PREFERENCE, "drinks green tea")
            ),
            NOW,
        )
        await memory.commit(plan)
        old, turn = plan.object_ids[-1], plan.object_ids[1]
        await memory.remember(
            RememberDrafts(
                derived=[
                    DerivedMemoryDraft(
                        DerivedType.USER_PREFERENCE,
                        "drinks black tea",
                        observation_ids=[turn],
                        supersedes=[old],
                    )
                ]
            ),
            AT_T0,
        )
        vector = (await memory.embedder.embed_documents(["drinks green tea"]))[0]
        await stores_of(memory).vectors.upsert(
            [VectorPoint(id=old, object_type=ObjectType.DERIVED, vector=vector, text="drinks green tea")]
        )
        pack = await memory.retrieve(RetrievalContext(query="drinks green tea"))
        assert old not in [item.id for item in pack.items]
        assert (old, "superseded") in [(o.id, o.reason) for o in pack.omissions]

    async def test_hostile_strings_round_trip_through_the_facade(self, memory: CharacterMemory) -> None:
        """Hostile memory text is stored and recalled byte-identical through every store.

        If this fails: an adapter mangles text (escaping, normalisation, NUL truncation); the
        listed strings show which.
        """
        wrong = []
        for minute, text in enumerate(data.HOSTILE_STRINGS):
            outcome = await memory.remember(
                RememberInput(text, occurred_at=T0 + timedelta(minutes=minute)).with_derived_memory(
                    DerivedMemoryDraft(DerivedType.REFLECTION, text)
                ),
                AT_T0,
            )
            stored = await stores_of(memory).graph.get_objects(list(outcome.object_ids))
            texts = [getattr(obj, "text", None) for obj in stored.values()]
            if texts.count(text) != 2:
                wrong.append(f"{text!r}: stored as {texts!r}")
            pack = await memory.retrieve(RetrievalContext(query=text))
            if text not in [item.text for item in pack.items]:
                wrong.append(f"{text!r}: not recalled verbatim ({[i.text for i in pack.items][:3]!r})")
        assert not wrong, "hostile strings did not round-trip:\n" + "\n".join(wrong)

    async def test_collections_are_isolated(self, memory_factory: MemoryFactory) -> None:
        """Two collections on the same stores see nothing of each other; reused ids do not conflict.

        If this fails: an adapter does not scope reads, writes or counts to its collection.
        """
        left, right = await memory_factory.open("left"), await memory_factory.open("right")
        drafts, _ = session_drafts("isolated", ["we planted tomatoes"])
        await left.remember(drafts, AT_T0)
        assert await store_counts(right) == (0, 0, 0)
        assert (await right.retrieve(RetrievalContext(query="tomatoes"))).items == ()
        other, _ = session_drafts("isolated", ["we planted potatoes"])
        outcome = await right.remember(other, AT_T0)
        assert outcome.repair_markers == ()

    @requires("supports_reopen")
    async def test_reopen_keeps_memories_and_recall(self, memory_factory: MemoryFactory) -> None:
        """A collection opened again recalls the same pack, and replays stay idempotent.

        If this fails: one of the stores is not durable on acknowledgement or the factory does not
        reopen the same paths.
        """
        memory = await memory_factory.open("reopen")
        drafts, _ = session_drafts(
            "reopen", ["we planted tomatoes", "it started to rain", "\n".join(data.HOSTILE_STRINGS)]
        )
        plan = await memory.prepare(drafts, NOW)
        await memory.commit(plan)
        context = RetrievalContext(query="tomatoes in the rain")
        before, counts = pack_signature(await memory.retrieve(context)), await store_counts(memory)
        await memory.close()
        reopened = await memory_factory.open("reopen")
        assert pack_signature(await reopened.retrieve(context)) == before
        await reopened.commit(plan)
        assert await store_counts(reopened) == counts

    async def test_episode_vector_only_when_its_summary_differs(self, memory: CharacterMemory) -> None:
        """The convenience path indexes the observation, and the episode only for a distinct summary.

        If this fails: the vector index's ``count`` or ``point_ids`` is wrong after upserts.
        """
        await memory.remember(RememberInput("rain all day", occurred_at=T0), AT_T0)
        await memory.remember(
            RememberInput("rain all night", occurred_at=T0, summary="rain all night"), AT_T0
        )
        assert await stores_of(memory).vectors.count() == 2
        await memory.remember(
            RememberInput("sun at last", occurred_at=T0, summary="the weather turned"), AT_T0
        )
        assert await stores_of(memory).vectors.count() == 4

    # -- repairable writes -----------------------------------------------------------------

    def _wrapped(
        self,
        memory: CharacterMemory,
        *,
        graph: FaultyGraphStore | None = None,
        vectors: FaultyVectorIndex | None = None,
        stats: FaultyStatsStore | None = None,
    ) -> CharacterMemory:
        """The same stores, some behind fault-injecting wrappers (not closed separately)."""
        return CharacterMemory(
            graph=cast(GraphStore, graph or stores_of(memory).graph),
            vectors=cast(VectorIndex, vectors or stores_of(memory).vectors),
            embedder=memory.embedder,
            stats=cast(RetrievalStatsStore, stats or stores_of(memory).stats),
            collection=memory.collection,
        )

    async def test_failed_vector_upsert_gives_a_marker_and_replay_repairs_it(
        self, memory: CharacterMemory
    ) -> None:
        """A failing vector upsert after the graph write comes back as a repair marker; replay repairs.

        If this fails: the vector index raised something other than an exception the commit can
        report, or an upsert after a failed one does not store the points.
        """
        faulty = FaultyVectorIndex(stores_of(memory).vectors)
        wrapped = self._wrapped(memory, vectors=faulty)
        plan = await wrapped.prepare(
            RememberInput("the kettle broke", occurred_at=T0, summary="kitchen trouble"), NOW
        )
        faulty.fail("upsert", always=True)
        outcome = await wrapped.commit(plan)
        [marker] = outcome.repair_markers
        assert (
            isinstance(marker, RepairMarker.VectorMaintenance) and marker.operation is VectorOperation.UPSERT
        )
        assert set(marker.ids) == {e.id for e in plan.index_entries}
        assert await stores_of(memory).graph.object_ids() == sorted(plan.object_ids), (
            "the graph write must stand"
        )
        assert await stores_of(memory).vectors.count() == 0
        faulty.heal()
        repaired = await wrapped.commit(plan)
        assert repaired.repair_markers == ()
        assert await stores_of(memory).vectors.point_ids() == {e.id for e in plan.index_entries}

    async def test_failed_stats_update_gives_a_marker_and_replay_repairs_it(
        self, memory: CharacterMemory
    ) -> None:
        """A failing stats write comes back as a repair marker; replay repairs it and counts once.

        If this fails: the stats store half-applied a failed ``record`` or counted a replay twice.
        """
        faulty = FaultyStatsStore(stores_of(memory).stats)
        wrapped = self._wrapped(memory, stats=faulty)
        drafts, _ = session_drafts("stats-fault", ["we planted tomatoes"])
        plan = await wrapped.prepare(drafts, NOW)
        faulty.fail("record", always=True)
        outcome = await wrapped.commit(plan)
        assert [type(m) for m in outcome.repair_markers] == [RepairMarker.StatsMaintenance]
        assert await stores_of(memory).stats.row_count() == 0
        faulty.heal()
        assert (await wrapped.commit(plan)).repair_markers == ()
        rows = await stores_of(memory).stats.row_count()
        assert rows == len(plan.objects) + len(plan.links) + len(plan.derived_links)
        await wrapped.commit(plan)
        assert await stores_of(memory).stats.row_count() == rows

    async def test_failed_vector_delete_of_a_superseded_memory_is_repaired_by_replay(
        self, memory: CharacterMemory
    ) -> None:
        """If removing a superseded memory's vector fails, recall still omits it and replay removes it.

        If this fails: check the vector index's ``delete`` after a failed one, and that the
        graph's ``currency`` makes recall omit the stale point meanwhile.
        """
        first = await memory.prepare(
            RememberInput("I moved to Busan", occurred_at=T0).with_derived_memory(
                DerivedMemoryDraft(DerivedType.CLAIM, "lives in Busan")
            ),
            NOW,
        )
        await memory.commit(first)
        old, turn = first.object_ids[-1], first.object_ids[1]
        faulty = FaultyVectorIndex(stores_of(memory).vectors)
        wrapped = self._wrapped(memory, vectors=faulty)
        plan = await wrapped.prepare(
            RememberDrafts(
                derived=[
                    DerivedMemoryDraft(
                        DerivedType.CLAIM, "lives in Seoul", observation_ids=[turn], supersedes=[old]
                    )
                ]
            ),
            NOW,
        )
        faulty.fail("delete", always=True)
        outcome = await wrapped.commit(plan)
        [marker] = outcome.repair_markers
        assert (
            isinstance(marker, RepairMarker.VectorMaintenance) and marker.operation is VectorOperation.DELETE
        )
        assert old in marker.ids and old in await stores_of(memory).vectors.point_ids()
        pack = await memory.retrieve(RetrievalContext(query="lives in Busan"))
        assert old not in [i.id for i in pack.items]
        faulty.heal()
        assert (await wrapped.commit(plan)).repair_markers == ()
        assert old not in await stores_of(memory).vectors.point_ids()

    async def test_failed_graph_write_writes_nothing_anywhere(self, memory: CharacterMemory) -> None:
        """When the graph batch fails, commit raises BackendError and no store changes.

        If this fails: vectors or stats were written before the graph batch succeeded.
        """
        faulty = FaultyGraphStore(stores_of(memory).graph)
        wrapped = self._wrapped(memory, graph=faulty)
        faulty.fail("write_batch", always=True)
        with pytest.raises(BackendError):
            await wrapped.remember(RememberInput("this never lands", occurred_at=T0), AT_T0)
        assert await store_counts(memory) == (0, 0, 0)
