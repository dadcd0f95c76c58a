"""``LifecycleContract``: the append-only lifecycle of the memory facade, over any stack.

Correction, forgetting, links, supersession and its ordering rules, names of notions, ``as_of``
views and the identity of memories across replays: what the lifecycle promises, checked on any
composition of adapters. Subclass it as ``TestXxx`` and override the one fixture
``memory_factory`` (a :class:`~charmem_contract.factories.MemoryFactory`, as for the facade
suite); two collections of one test share its stores.

Every mutating call goes through :class:`MonotonicMemory`, which checks that the graph's
statement count never decreases: nothing is ever deleted.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, ClassVar

import pytest

from charmem import (
    CharacterMemory,
    CorrectionTarget,
    CorrectMemoryDraft,
    CurrencyStatus,
    DerivedMemoryDraft,
    DerivedType,
    ForgetMemoryDraft,
    LinkDraft,
    MemoryId,
    Relation,
    RememberInput,
    RepairMarker,
    ReplacementDerivedMemoryDraft,
    RetrievalContext,
    VectorOperation,
)
from charmem.testing import FaultyVectorIndex, stores_of
from charmem_contract._base import ContractSuite
from charmem_contract._lifecycle_correct import LifecycleCorrectionTests
from charmem_contract._lifecycle_forget import LifecycleForgetTests
from charmem_contract._lifecycle_rules import LifecycleRulesTests
from charmem_contract._lifecycle_steps import T0
from charmem_contract.factories import MemoryFactory

__all__ = ["LifecycleContract", "MonotonicMemory"]


class MonotonicMemory:
    """Wraps a memory; after every mutating call, the graph statement count must not decrease."""

    MUTATING = frozenset({"remember", "commit", "correct", "forget", "link", "rebuild_stats"})

    def __init__(self, memory: CharacterMemory) -> None:
        self.inner = memory
        self.last = 0

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.inner, name)
        if name not in self.MUTATING:
            return target

        async def checked(*args: Any, **kwargs: Any) -> Any:
            try:
                return await target(*args, **kwargs)
            finally:
                now = await stores_of(self.inner).graph.statement_count()
                assert now >= self.last, f"{name} decreased the graph from {self.last} to {now} statements"
                self.last = now

        return checked


class LifecycleContract(
    LifecycleCorrectionTests, LifecycleForgetTests, LifecycleRulesTests, ContractSuite, suite=True
):
    """Lifecycle behaviour every composition of adapters must show (correct, forget, link).

    The corrections are in :class:`~charmem_contract._lifecycle_correct.LifecycleCorrectionTests`,
    forgetting in :class:`~charmem_contract._lifecycle_forget.LifecycleForgetTests`, the ordering
    rules (acyclic supersession, successors in one write, records in time order) in
    :class:`~charmem_contract._lifecycle_rules.LifecycleRulesTests`.

    No capability may be switched off: every stack must run all of it (the guard checks).
    """

    minimum_passing: ClassVar[int] = 36

    @pytest.fixture
    def memory_factory(self) -> MemoryFactory:
        """Override: yield a MemoryFactory over the test's own stores; close what it opened afterwards."""
        raise NotImplementedError(
            f"{type(self).__name__} must override the memory_factory fixture to yield a "
            "charmem_contract.MemoryFactory (see charmem_contract.memory_factory)"
        )

    @pytest.fixture
    async def memory(self, memory_factory: MemoryFactory) -> MonotonicMemory:
        """The memory of collection ``lifecycle``, wrapped so no operation may shrink the graph."""
        return MonotonicMemory(await memory_factory.open("lifecycle"))

    # -- the canary ------------------------------------------------------------------------

    async def test_fixture_starts_empty(self, memory: Any) -> None:
        """The factory opens an empty memory: no statement, point or stats row, nothing recalled.

        If this fails: the ``memory_factory`` fixture must open every test's stores fresh (a new
        temporary directory, a new server), not shared with other tests.
        """
        assert await stores_of(memory).graph.statement_count() == 0, (
            "the memory_factory's stores are not empty"
        )
        assert await stores_of(memory).vectors.count() == 0
        assert await stores_of(memory).stats.row_count() == 0
        pack = await memory.retrieve("anything at all about the garden")
        assert pack.items == () and pack.omissions == ()

    # -- repair ----------------------------------------------------------------------------

    async def test_vector_delete_failure_is_repaired_by_replaying_the_correction(self, memory: Any) -> None:
        """Vector-delete failures come back as a VectorMaintenance marker with the failed Delete;
        graph filtering keeps the stale candidate out of every pack; replaying repairs the delete.

        If this fails: ``delete`` must be idempotent and ``search`` must still find stale points.
        """
        _e, _o, claim = await self._grounded_belief(
            memory, "The wifi password is swordfish.", "Wifi password is swordfish."
        )
        real = stores_of(memory.inner).vectors
        faulty = FaultyVectorIndex(real)
        memory.inner._vectors = faulty
        try:
            faulty.fail("delete", on_call=1)
            draft = CorrectMemoryDraft(CorrectionTarget.derived_memory(claim), "Changed.").with_replacement(
                ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "Wifi password is marlin.")
            )
            outcome = await memory.correct(draft)
            [marker] = outcome.repair_markers
            assert isinstance(marker, RepairMarker.VectorMaintenance)
            assert marker.operation is VectorOperation.DELETE
            assert claim in marker.ids
            assert claim in await real.point_ids()
            pack = await memory.retrieve("wifi password swordfish")
            assert claim not in {item.id for item in pack.items}
            assert {o.id: o.reason for o in pack.omissions}.get(claim) == "superseded"
            repaired = await memory.correct(draft)
            assert repaired.repair_markers == ()
            assert claim not in await real.point_ids()
        finally:
            memory.inner._vectors = real

    async def test_replaying_an_old_plan_never_reindexes_a_superseded_memory(self, memory: Any) -> None:
        """Replaying an older plan consults graph currency before indexing.

        If this fails: nothing adapter-specific.
        """
        plan = await memory.prepare(
            RememberInput("Favourite colour is red.", occurred_at=T0).with_derived_memory(
                DerivedMemoryDraft(DerivedType.USER_PREFERENCE, "Likes red.")
            )
        )
        await memory.commit(plan)
        claim = plan.object_ids[-1]
        await memory.correct(
            CorrectMemoryDraft(CorrectionTarget.derived_memory(claim), "Now blue.").with_replacement(
                ReplacementDerivedMemoryDraft(DerivedType.USER_PREFERENCE, "Likes blue.")
            )
        )
        await memory.commit(plan)
        assert claim not in await stores_of(memory).vectors.point_ids()

    # -- stats, names, time ----------------------------------------------------------------

    async def test_stats_follow_every_operation_and_rebuild_recomputes_them(self, memory: Any) -> None:
        """Retrieval-stat counters are updated by commit, correct, forget and link, and
        ``rebuild_stats`` recomputes the same counters from the graph.

        If this fails: ``object_ids``/``link_ids`` must list the whole collection.
        """
        _e, _o, claim = await self._grounded_belief(memory, "Plays chess.", "Plays chess.")
        _e2, _o2, other = await self._grounded_belief(memory, "Plays go.", "Plays go.")
        await memory.correct(
            CorrectMemoryDraft(CorrectionTarget.derived_memory(claim), "Checkers.").with_replacement(
                ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "Plays checkers.")
            )
        )
        await memory.forget(ForgetMemoryDraft.suppress(other, "Private."))
        await memory.link(LinkDraft(_o, Relation.ASSOCIATED_WITH, _o2))
        incremental = await stores_of(memory).stats.summary()
        assert incremental.objects["derived"] == 3
        assert incremental.current_objects["derived"] == 1
        assert incremental.links["associated_with"] == 1
        rows = await memory.rebuild_stats()
        assert rows == await stores_of(memory).stats.row_count()
        assert await stores_of(memory).stats.summary() == incremental

    async def test_names_match_ignoring_case_width_and_spacing_but_not_sharp_s(self, memory: Any) -> None:
        """Names retain their spelling and match ignoring case, width and spacing; Straße and
        STRASSE still differ. A notion named in the query is recalled through the graph.

        If this fails: ``name_assertions`` must return every KnownAs assertion.
        """
        street, _b = await self._notion_with_name(memory, "Straße")
        person, _b2 = await self._notion_with_name(memory, "Mary  Ann")
        await memory.remember(RememberInput("Lunch plans.", occurred_at=T0, mentioned_entity_ids=[person]))
        pack = await memory.retrieve("did ＭＡＲＹ ann call?")
        assert {e.id: e.names for e in pack.entities}.get(person) == ("Mary  Ann",)
        assert any("named_notion" in item.signals for item in pack.items)
        shouting = await memory.retrieve("STRASSE")
        assert not [i for i in shouting.items if "named_notion" in i.signals and street in i.entity_ids]
        exact = await memory.retrieve("straße")
        assert [i for i in exact.items if "named_notion" in i.signals and street in i.entity_ids]

    async def test_a_name_that_is_an_ordinary_word_counts_where_the_query_means_the_name(
        self, memory: Any
    ) -> None:
        """A notion known as "Will": "When will my flight leave?" uses the word, and brings none
        of Will's memories through the name; "What did Will say?" means the name.

        If this fails: ``name_index`` must return every KnownAs assertion with its name as
        spelled (the case of the query is read against it).
        """
        will, _b = await self._notion_with_name(memory, "Will")
        await memory.remember(
            RememberInput("Our chat about gardening tools.", occurred_at=T0, mentioned_entity_ids=[will])
        )
        word = await memory.retrieve("When will my flight leave?")
        assert not [i for i in word.items if "named_notion" in i.signals]
        name = await memory.retrieve("What did Will say?")
        assert [i for i in name.items if "named_notion" in i.signals and will in i.entity_ids]

    async def test_as_of_shows_what_the_character_believed_then(self, memory: Any) -> None:
        """``as_of`` reads lifecycle records at their record time: before a correction the old
        belief is current; after it, the replacement.

        If this fails: ``currency(as_of=...)`` must ignore later records and links.
        """
        _e, _o, claim = await self._grounded_belief(memory, "Lives in Oslo.", "Lives in Oslo.", created_at=T0)
        later = T0 + timedelta(days=30)
        outcome = await memory.correct(
            CorrectMemoryDraft(
                CorrectionTarget.derived_memory(claim), "Moved.", recorded_at=later
            ).with_replacement(ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "Lives in Bergen."))
        )
        [replacement] = outcome.replacement_ids
        then = await memory.retrieve(
            RetrievalContext(query="Lives in Oslo Bergen", as_of=T0 + timedelta(days=1))
        )
        ids = {item.id for item in then.items}
        assert replacement not in ids
        assert (await stores_of(memory).graph.currency([claim], as_of=T0 + timedelta(days=1)))[
            claim
        ] is CurrencyStatus.CURRENT
        now = await memory.retrieve(RetrievalContext(query="Lives in Oslo Bergen"))
        assert replacement in {item.id for item in now.items}
        assert claim not in {item.id for item in now.items}

    # -- collections -----------------------------------------------------------------------

    async def test_forgetting_in_one_collection_leaves_another_untouched(
        self, memory_factory: MemoryFactory
    ) -> None:
        """Lifecycle operations stay inside their collection, even when stores are shared.

        If this fails: every query and write must be scoped to the collection's graph.
        """
        first = await memory_factory.open("lifecycle-one")
        second = await memory_factory.open("lifecycle-two")
        shared_id = MemoryId.deterministic("both", "observation")
        for memory in (first, second):
            await memory.remember(
                RememberInput("Same words in both.", observation_id=shared_id, occurred_at=T0)
            )
        await first.forget(ForgetMemoryDraft.suppress(shared_id, "Only here."))
        assert (await stores_of(first).graph.currency([shared_id]))[shared_id] is CurrencyStatus.SUPPRESSED
        assert (await stores_of(second).graph.currency([shared_id]))[shared_id] is CurrencyStatus.CURRENT
        assert shared_id in await stores_of(second).vectors.point_ids()
