"""``LifecycleContract``: the append-only lifecycle of the memory facade, over any stack.

Every sentence of the spec's sections "Memory permanence and data erasure", "Notions and naming
beliefs" and "Memory identity across restarts" has at least one test here. Subclass it as
``TestXxx`` and override :meth:`LifecycleContract.make_memory` (and, for stacks whose stores can
hold several collections, :meth:`LifecycleContract.make_other_memory`).

Every mutating call goes through :class:`MonotonicMemory`, which checks that the graph's
statement count never decreases: nothing is ever deleted.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import pytest

from charmem import (
    BeliefAssertion,
    CharacterMemory,
    CorrectionTarget,
    CorrectMemoryDraft,
    CurrencyStatus,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    EpisodeDraft,
    ExternalSourceReference,
    ForgetMemoryDraft,
    IdConflictError,
    KnownAs,
    LifecycleErrorKind,
    LifecycleValidationError,
    LinkDraft,
    MemoryId,
    ObservationDraft,
    PlanValidationError,
    Relation,
    RememberDrafts,
    RememberInput,
    RepairMarker,
    ReplacementDerivedMemoryDraft,
    RetrievalContext,
    SourceProvenanceReference,
    ThreadDraft,
    ThreadStatus,
    VectorOperation,
)
from charmem.testing import FaultyVectorIndex, stores_of
from charmem_contract._base import ContractSuite
from charmem_contract._lifecycle_rules import LifecycleRulesTests

__all__ = ["LifecycleContract", "MonotonicMemory"]

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


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


class LifecycleContract(LifecycleRulesTests, ContractSuite, abc.ABC, suite=True):
    """Lifecycle behaviour every composition of adapters must show (correct, forget, link).

    The ordering rules (acyclic supersession, successors in one write, records in time order) are
    in :class:`~charmem_contract._lifecycle_rules.LifecycleRulesTests`.

    No capability may be switched off: every stack must run all of it (the guard checks).
    """

    minimum_passing: ClassVar[int] = 24

    @abc.abstractmethod
    def make_memory(self, collection: str) -> AsyncIterator[CharacterMemory]:
        """Yield an open, empty memory for ``collection`` and close it afterwards.

        Implement as an async generator; :meth:`make_other_memory` uses it for a second
        collection in the same stores when :attr:`shares_stores` is true.
        """

    #: Whether two collections of this stack live in the same stores (so isolation is tested).
    shares_stores: bool = False

    @pytest.fixture
    async def memory(self) -> AsyncIterator[MonotonicMemory]:
        """The memory under test, wrapped so no operation may shrink the graph."""
        async for memory in self.make_memory("lifecycle"):
            yield MonotonicMemory(memory)

    # ------------------------------------------------------------------ helpers

    @staticmethod
    async def _notion_with_name(memory: Any, name: str) -> tuple[MemoryId, MemoryId]:
        notion, belief = MemoryId.new(), MemoryId.new()
        await memory.remember(
            RememberDrafts(
                entities=[EntityDraft(id=notion, entity_type="person", created_at=T0)],
                derived=[
                    DerivedMemoryDraft(
                        DerivedType.REFLECTION,
                        f"I know this notion as {name}.",
                        id=belief,
                        entity_ids=[notion],
                        assertions=[BeliefAssertion(notion, KnownAs(name))],
                        given_by_application=True,
                        created_at=T0,
                    )
                ],
            )
        )
        return notion, belief

    @staticmethod
    async def _grounded_belief(
        memory: Any, text: str, belief: str, *, created_at: datetime | None = None
    ) -> tuple[MemoryId, MemoryId, MemoryId]:
        """An episode with one observation and a claim derived from it: (episode, obs, claim).

        ``created_at`` defaults to the memory's clock (for all three).
        """
        outcome = await memory.remember(
            RememberInput(text, occurred_at=T0, created_at=created_at).with_derived_memory(
                DerivedMemoryDraft(DerivedType.CLAIM, belief, created_at=created_at)
            )
        )
        episode, observation, claim = outcome.object_ids
        return episode, observation, claim

    @staticmethod
    async def _status(memory: Any, memory_id: MemoryId) -> CurrencyStatus | None:
        statuses: dict[MemoryId, CurrencyStatus] = await stores_of(memory).graph.currency([memory_id])
        return statuses.get(memory_id)

    # ------------------------------------------------------------------ supersession

    async def test_rename_is_supersession_old_belief_stays_new_is_current(self, memory: Any) -> None:
        """A rename is an ordinary supersession: the old name belief is kept as history and is no
        longer current; the new one is current and the pack names the notion by it.

        Adapter authors: check that ``supersedes`` links written in a batch count in ``currency``.
        """
        notion, old = await self._notion_with_name(memory, "Al")
        renamed = DerivedMemoryDraft(
            DerivedType.REFLECTION,
            "I know this notion as Bob.",
            entity_ids=[notion],
            assertions=[BeliefAssertion(notion, KnownAs("Bob"))],
            given_by_application=True,
            supersedes=[old],
        )
        outcome = await memory.remember(
            RememberInput("The application gives the name Bob.").with_derived_memory(renamed)
        )
        new = outcome.object_ids[-1]
        assert await self._status(memory, old) is CurrencyStatus.SUPERSEDED
        assert await self._status(memory, new) is CurrencyStatus.CURRENT
        assert (await stores_of(memory).graph.get_objects([old]))[old].text == "I know this notion as Al."
        pack = await memory.retrieve(RetrievalContext(query="Bob", focus_entity_ids=[notion]))
        names = {e.id: e.names for e in pack.entities}
        assert names[notion] == ("Bob",)
        assert old not in await stores_of(memory).vectors.point_ids()

    async def test_correction_supersedes_and_keeps_the_predecessor_unsuppressed(self, memory: Any) -> None:
        """Correction leaves the predecessor stored, unsuppressed and superseded; the replacement
        inherits entity_ids and thread_ids and is grounded on the target's sources.

        Adapter authors: check ``get_records`` and ``currency`` (no suppression record appears).
        """
        _episode, observation, claim = await self._grounded_belief(
            memory, "I moved to Lisbon in May.", "Lives in Lisbon."
        )
        outcome = await memory.correct(
            CorrectMemoryDraft(
                CorrectionTarget.derived_memory(claim), "They said Porto, not Lisbon."
            ).with_replacement(ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "Lives in Porto."))
        )
        [replacement_id] = outcome.replacement_ids
        assert set(outcome.graph_mutated_object_ids) == {claim, replacement_id}
        replacement = (await stores_of(memory).graph.get_objects([replacement_id]))[replacement_id]
        assert replacement.observation_ids == (observation,)
        assert replacement.supersedes == (claim,)
        assert await self._status(memory, claim) is CurrencyStatus.SUPERSEDED
        records = await stores_of(memory).graph.get_records([claim])
        assert [r.action.value for r in records] == ["correct"]
        assert claim not in await stores_of(memory).vectors.point_ids()
        assert replacement_id in await stores_of(memory).vectors.point_ids()

    async def test_replaying_a_correction_creates_no_second_replacement_or_link(self, memory: Any) -> None:
        """Replacement ids derive from the target and the replacement's content, so replaying a
        correction (even at another time) writes nothing new.

        Adapter authors: check equal-content replays are accepted without new statements.
        """
        _e, _o, claim = await self._grounded_belief(memory, "Coffee at nine.", "Drinks coffee at nine.")
        draft = CorrectMemoryDraft(CorrectionTarget.derived_memory(claim), "It was tea.").with_replacement(
            ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "Drinks tea at nine.")
        )
        first = await memory.correct(draft)
        count = await stores_of(memory).graph.statement_count()
        links = await stores_of(memory).graph.link_ids()
        second = await memory.correct(draft)
        assert second.replacement_ids == first.replacement_ids
        assert await stores_of(memory).graph.statement_count() == count
        assert await stores_of(memory).graph.link_ids() == links

    async def test_forgetting_a_correction_does_not_restore_the_older_belief(self, memory: Any) -> None:
        """Even a suppressed successor still supersedes its predecessor.

        Adapter authors: currency must count a supersedes link whatever its source's state.
        """
        _e, _o, claim = await self._grounded_belief(memory, "Born in 1990.", "Was born in 1990.")
        outcome = await memory.correct(
            CorrectMemoryDraft(CorrectionTarget.derived_memory(claim), "Typo.").with_replacement(
                ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "Was born in 1991.")
            )
        )
        [replacement] = outcome.replacement_ids
        await memory.forget(ForgetMemoryDraft.suppress(replacement, "The user asked to forget it."))
        assert await self._status(memory, replacement) is CurrencyStatus.SUPPRESSED
        assert await self._status(memory, claim) is CurrencyStatus.SUPERSEDED
        pack = await memory.retrieve("born in 1990")
        assert claim not in {item.id for item in pack.items}

    async def test_superseded_and_suppressed_is_reported_as_suppressed(self, memory: Any) -> None:
        """Default retrieval reports a superseded predecessor as superseded; when it is also
        suppressed, suppression takes precedence.

        Adapter authors: ``currency`` must return SUPPRESSED for a superseded, suppressed memory.
        """
        _e, _o, claim = await self._grounded_belief(
            memory, "The cat is called Miso.", "The cat is called Miso."
        )
        outcome = await memory.correct(
            CorrectMemoryDraft(CorrectionTarget.derived_memory(claim), "Misheard.").with_replacement(
                ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "The cat is called Mochi.")
            )
        )
        [replacement] = outcome.replacement_ids
        pack = await memory.retrieve("What is the cat called, Mochi?")
        assert replacement in {item.id for item in pack.items}
        assert {o.id: o.reason for o in pack.omissions}.get(claim) == "superseded"
        await memory.forget(ForgetMemoryDraft.suppress(claim, "Never mention the old name."))
        pack = await memory.retrieve("What is the cat called, Mochi?")
        assert {o.id: o.reason for o in pack.omissions}.get(claim) == "suppressed"

    async def test_include_superseded_and_include_suppressed_return_items_with_status(
        self, memory: Any
    ) -> None:
        """Superseded memories stay reachable from successors with include_superseded; suppressed
        ones need include_suppressed.

        Adapter authors: check ``links_of`` with ``relations=[SUPERSEDES]`` finds both directions.
        """
        _e, _o, claim = await self._grounded_belief(memory, "Works at the bakery.", "Works at the bakery.")
        outcome = await memory.correct(
            CorrectMemoryDraft(CorrectionTarget.derived_memory(claim), "Changed jobs.").with_replacement(
                ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "Works at the library now.")
            )
        )
        pack = await memory.retrieve(RetrievalContext(query="works at the library", include_superseded=True))
        statuses = {item.id: item.status for item in pack.items}
        assert statuses.get(claim) is CurrencyStatus.SUPERSEDED
        assert statuses.get(outcome.replacement_ids[0]) is CurrencyStatus.CURRENT
        await memory.forget(ForgetMemoryDraft.suppress(outcome.replacement_ids[0], "Private."))
        hidden = await memory.retrieve(RetrievalContext(query="works at the library"))
        assert outcome.replacement_ids[0] not in {item.id for item in hidden.items}
        shown = await memory.retrieve(
            RetrievalContext(query="works at the library", include_suppressed=True, include_superseded=True)
        )
        statuses = {item.id: item.status for item in shown.items}
        assert statuses.get(outcome.replacement_ids[0]) is CurrencyStatus.SUPPRESSED

    async def test_caller_authored_supersedes_links_are_rejected(self, memory: Any) -> None:
        """Caller-authored Supersedes links are rejected, through ``link`` as in a plan.

        Adapter authors: nothing to check in the adapter; this is core validation.
        """
        _e, _o, a = await self._grounded_belief(memory, "one", "first belief")
        _e, _o, b = await self._grounded_belief(memory, "two", "second belief")
        before = await stores_of(memory).graph.statement_count()
        with pytest.raises(PlanValidationError, match="supersedes"):
            await memory.link(LinkDraft(a, Relation.SUPERSEDES, b))
        assert await stores_of(memory).graph.statement_count() == before

    async def test_a_link_id_reused_for_another_relation_is_rejected(self, memory: Any) -> None:
        """Existing link ids reject different content, including another relation.

        Adapter authors: ``write_batch`` must raise IdConflictError for a link id with other content.
        """
        _e, _o, a = await self._grounded_belief(memory, "one", "first belief")
        _e, _o, b = await self._grounded_belief(memory, "two", "second belief")
        link_id = MemoryId.new()
        outcome = await memory.link(LinkDraft(a, Relation.SUPPORTS, b, id=link_id, rationale="agree"))
        assert outcome.link.id == link_id
        again = await memory.link(LinkDraft(a, Relation.SUPPORTS, b, id=link_id, rationale="agree"))
        assert again.link == outcome.link
        before = await stores_of(memory).graph.statement_count()
        with pytest.raises(IdConflictError):
            await memory.link(LinkDraft(a, Relation.CONTRADICTS, b, id=link_id, rationale="agree"))
        assert await stores_of(memory).graph.statement_count() == before

    async def test_a_generated_supersedes_link_id_cannot_be_replaced_by_another_relation(
        self, memory: Any
    ) -> None:
        """Attempts to replace a generated Supersedes link with another relation are rejected.

        Adapter authors: link ids are unique across relations.
        """
        _e, _o, claim = await self._grounded_belief(memory, "x", "old view")
        outcome = await memory.correct(
            CorrectMemoryDraft(CorrectionTarget.derived_memory(claim), "new view").with_replacement(
                ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "new view")
            )
        )
        [replacement] = outcome.replacement_ids
        links = await stores_of(memory).graph.links_of([claim], relations=[Relation.SUPERSEDES])
        [generated] = links
        with pytest.raises(IdConflictError):
            await memory.link(LinkDraft(replacement, Relation.ASSOCIATED_WITH, claim, id=generated.id))

    # ------------------------------------------------------------------ correction by target kind

    async def test_correcting_a_source_object_supersedes_it_and_keeps_it_as_provenance(
        self, memory: Any
    ) -> None:
        """An episode or observation target is kept as provenance, superseded, and leaves the vector
        index; the replacement is grounded on it and inherits its mentions as entity_ids.

        Adapter authors: currency applies to observations too.
        """
        notion, _belief = await self._notion_with_name(memory, "Rita")
        outcome = await memory.remember(
            RememberInput("Rita lives in Rome.", occurred_at=T0, mentioned_entity_ids=[notion])
        )
        observation = outcome.object_ids[1]
        corrected = await memory.correct(
            CorrectMemoryDraft(CorrectionTarget.source_object(observation), "Rita lives in Milan, not Rome.")
        )
        [replacement_id] = corrected.replacement_ids
        replacement = (await stores_of(memory).graph.get_objects([replacement_id]))[replacement_id]
        assert replacement.observation_ids == (observation,)
        assert notion in replacement.entity_ids
        assert replacement.text == "Rita lives in Milan, not Rome."
        assert await self._status(memory, observation) is CurrencyStatus.SUPERSEDED
        assert observation in await stores_of(memory).graph.get_objects([observation])
        assert observation not in await stores_of(memory).vectors.point_ids()

    async def test_given_belief_correction_with_declared_assertions_and_external_origin(
        self, memory: Any
    ) -> None:
        """To change a given belief through correct, declare the replacement's assertions and
        grounding; the given marker and old assertions are never copied.

        Adapter authors: lifecycle records must keep ``external_refs``.
        """
        notion, belief = await self._notion_with_name(memory, "Bob")
        origin = SourceProvenanceReference(
            external_refs=[ExternalSourceReference.source("application:name-change")]
        )
        replacement = ReplacementDerivedMemoryDraft(
            DerivedType.CORRECTION,
            "The name is Carol.",
            entity_ids=[notion],
            assertions=[BeliefAssertion(notion, KnownAs("Carol"))],
            given_by_application=True,
            correction_origin_provenance=origin,
        )
        outcome = await memory.correct(
            CorrectMemoryDraft(
                CorrectionTarget.derived_memory(belief), "Update the given name.", correction_origin=origin
            ).with_replacement(replacement)
        )
        [new] = outcome.replacement_ids
        stored = (await stores_of(memory).graph.get_objects([new]))[new]
        assert stored.given_by_application
        assert stored.source_ids == ()
        assert [a.predicate.name for a in stored.assertions] == ["Carol"]
        [record] = await stores_of(memory).graph.get_records([belief])
        assert record.external_refs == ("application:name-change",)
        pack = await memory.retrieve(RetrievalContext(query="Carol", focus_entity_ids=[notion]))
        assert {e.id: e.names for e in pack.entities}[notion] == ("Carol",)

    async def test_rationale_only_correction_of_a_given_belief_raises_missing_given_replacement(
        self, memory: Any
    ) -> None:
        """A rationale-only correction with no source experiences returns MissingGivenReplacement.

        Adapter authors: nothing may be written (statement count unchanged).
        """
        _notion, belief = await self._notion_with_name(memory, "Bob")
        before = await stores_of(memory).graph.statement_count()
        with pytest.raises(LifecycleValidationError) as info:
            await memory.correct(CorrectMemoryDraft(CorrectionTarget.derived_memory(belief), "Wrong name."))
        assert info.value.kind is LifecycleErrorKind.MISSING_GIVEN_REPLACEMENT
        assert await stores_of(memory).graph.statement_count() == before

    @pytest.mark.parametrize(
        ("case", "kind"),
        [
            ("blank_rationale", LifecycleErrorKind.EMPTY_RATIONALE),
            ("empty_origin", LifecycleErrorKind.EMPTY_CORRECTION_ORIGIN),
            ("blank_replacement", LifecycleErrorKind.EMPTY_REPLACEMENT_TEXT),
            ("unknown_target", LifecycleErrorKind.MISSING_CORRECTION_TARGET),
            ("entity_target", LifecycleErrorKind.UNSUPPORTED_LIFECYCLE_TARGET),
            ("thread_target", LifecycleErrorKind.UNSUPPORTED_LIFECYCLE_TARGET),
            ("link_target", LifecycleErrorKind.UNSUPPORTED_LIFECYCLE_TARGET),
            ("wrong_subject", LifecycleErrorKind.INVALID_BELIEF),
            ("given_without_source", LifecycleErrorKind.MISSING_REPLACEMENT_SOURCE),
        ],
    )
    async def test_correction_errors_by_kind_write_nothing(
        self, memory: Any, case: str, kind: LifecycleErrorKind
    ) -> None:
        """Each refused correction raises LifecycleValidationError with the spec's kind.

        Adapter authors: nothing may be written (statement count unchanged).
        """
        notion, given = await self._notion_with_name(memory, "Kim")
        _e, _o, claim = await self._grounded_belief(memory, "Kim likes jazz.", "Kim likes jazz.")
        thread = MemoryId.new()
        await memory.remember(RememberDrafts(threads=[ThreadDraft(id=thread, title="Music", created_at=T0)]))
        [about] = await stores_of(memory).graph.links_of([given], relations=[Relation.ABOUT])
        replacement = ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "Kim likes blues.")
        drafts = {
            "blank_rationale": CorrectMemoryDraft(CorrectionTarget.derived_memory(claim), "  "),
            "empty_origin": CorrectMemoryDraft(
                CorrectionTarget.derived_memory(claim), "why", correction_origin=SourceProvenanceReference()
            ),
            "blank_replacement": CorrectMemoryDraft(
                CorrectionTarget.derived_memory(claim), "why"
            ).with_replacement(ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, " ")),
            "unknown_target": CorrectMemoryDraft(CorrectionTarget.derived_memory(MemoryId.new()), "why"),
            "entity_target": CorrectMemoryDraft(CorrectionTarget.derived_memory(notion), "why"),
            "thread_target": CorrectMemoryDraft(CorrectionTarget.source_object(thread), "why"),
            "link_target": CorrectMemoryDraft(CorrectionTarget.derived_memory(about.id), "why"),
            "wrong_subject": CorrectMemoryDraft(
                CorrectionTarget.derived_memory(claim), "why"
            ).with_replacement(
                ReplacementDerivedMemoryDraft(
                    DerivedType.CORRECTION, "x", assertions=[BeliefAssertion(MemoryId.new(), KnownAs("Zed"))]
                )
            ),
            "given_without_source": CorrectMemoryDraft(
                CorrectionTarget.derived_memory(given), "why"
            ).with_replacement(replacement),
        }
        before = await stores_of(memory).graph.statement_count()
        with pytest.raises(LifecycleValidationError) as info:
            await memory.correct(drafts[case])
        assert info.value.kind is kind
        assert await stores_of(memory).graph.statement_count() == before

    # ------------------------------------------------------------------ forget

    async def test_forget_suppresses_the_target_and_what_was_derived_from_it(self, memory: Any) -> None:
        """Forgetting an observation suppresses it and, by default, the derived memories grounded on
        it; the episode stays current; vectors of the suppressed leave the index.

        Adapter authors: ``links_of`` with DERIVED_FROM must find incoming links.
        """
        episode, observation, claim = await self._grounded_belief(memory, "My PIN is 1234.", "PIN is 1234.")
        outcome = await memory.forget(ForgetMemoryDraft.suppress(observation, "Sensitive."))
        assert set(outcome.graph_mutated_object_ids) == {observation, claim}
        assert await self._status(memory, observation) is CurrencyStatus.SUPPRESSED
        assert await self._status(memory, claim) is CurrencyStatus.SUPPRESSED
        assert await self._status(memory, episode) is CurrencyStatus.CURRENT
        points = await stores_of(memory).vectors.point_ids()
        assert observation not in points
        assert claim not in points
        pack = await memory.retrieve("What is my PIN?")
        assert {observation, claim}.isdisjoint({item.id for item in pack.items})

    async def test_forget_without_cascade_keeps_derived_memories(self, memory: Any) -> None:
        """``apply_to_derived_from_target=False`` suppresses only the target.

        Adapter authors: nothing adapter-specific.
        """
        _e, observation, claim = await self._grounded_belief(memory, "I run on Sundays.", "Runs on Sundays.")
        await memory.forget(
            ForgetMemoryDraft.suppress(observation, "Only the wording.", apply_to_derived_from_target=False)
        )
        assert await self._status(memory, claim) is CurrencyStatus.CURRENT

    async def test_thread_forget_with_and_without_member_cascade(self, memory: Any) -> None:
        """Forgetting a thread leaves its status and vector; apply_to_thread_members suppresses its
        interpreted members and removes their vectors; source objects stay.

        Adapter authors: ``links_of`` with PART_OF_THREAD must find the members.
        """
        thread = MemoryId.new()
        episode = MemoryId.new()
        observation = MemoryId.new()
        member = MemoryId.new()
        await memory.remember(
            RememberDrafts(
                threads=[
                    ThreadDraft(id=thread, title="Garden project", summary="Raised beds", created_at=T0)
                ],
                episodes=[EpisodeDraft(id=episode, occurred_at=T0, thread_ids=[thread], created_at=T0)],
                observations=[
                    ObservationDraft(
                        id=observation, text="We built the beds.", episode_id=episode, created_at=T0
                    )
                ],
                derived=[
                    DerivedMemoryDraft(
                        DerivedType.PROJECT_NOTE,
                        "Beds are built.",
                        id=member,
                        observation_ids=[observation],
                        thread_ids=[thread],
                        created_at=T0,
                    )
                ],
            )
        )
        await memory.forget(ForgetMemoryDraft.suppress(thread, "Drop the topic."))
        assert await self._status(memory, thread) is CurrencyStatus.CURRENT
        assert await self._status(memory, member) is CurrencyStatus.CURRENT
        assert thread in await stores_of(memory).vectors.point_ids()
        stored = (await stores_of(memory).graph.get_objects([thread]))[thread]
        assert stored.status is ThreadStatus.ACTIVE
        await memory.forget(
            ForgetMemoryDraft.suppress(thread, "Drop its notes too.", apply_to_thread_members=True)
        )
        assert await self._status(memory, member) is CurrencyStatus.SUPPRESSED
        assert member not in await stores_of(memory).vectors.point_ids()
        assert await self._status(memory, episode) is CurrencyStatus.CURRENT
        assert await self._status(memory, observation) is CurrencyStatus.CURRENT
        assert thread in await stores_of(memory).vectors.point_ids()

    @pytest.mark.parametrize("case", ["blank", "unknown", "entity", "link"])
    async def test_forget_errors(self, memory: Any, case: str) -> None:
        """Forget refuses a blank rationale, an unknown target, a notion and a link.

        Adapter authors: nothing may be written.
        """
        notion, belief = await self._notion_with_name(memory, "Ana")
        [about] = await stores_of(memory).graph.links_of([belief], relations=[Relation.ABOUT])
        drafts = {
            "blank": (ForgetMemoryDraft.suppress(belief, " "), LifecycleErrorKind.EMPTY_RATIONALE),
            "unknown": (
                ForgetMemoryDraft.suppress(MemoryId.new(), "x"),
                LifecycleErrorKind.MISSING_FORGET_TARGET,
            ),
            "entity": (
                ForgetMemoryDraft.suppress(notion, "x"),
                LifecycleErrorKind.UNSUPPORTED_LIFECYCLE_TARGET,
            ),
            "link": (
                ForgetMemoryDraft.suppress(about.id, "x"),
                LifecycleErrorKind.UNSUPPORTED_LIFECYCLE_TARGET,
            ),
        }
        draft, kind = drafts[case]
        before = await stores_of(memory).graph.statement_count()
        with pytest.raises(LifecycleValidationError) as info:
            await memory.forget(draft)
        assert info.value.kind is kind
        assert await stores_of(memory).graph.statement_count() == before

    async def test_replaying_a_forget_writes_nothing_new(self, memory: Any) -> None:
        """The same forget applied twice (at another time) adds no second record.

        Adapter authors: equal-content replays are accepted.
        """
        _e, _o, claim = await self._grounded_belief(memory, "a secret", "knows a secret")
        await memory.forget(ForgetMemoryDraft.suppress(claim, "Private."))
        count = await stores_of(memory).graph.statement_count()
        await memory.forget(ForgetMemoryDraft.suppress(claim, "Private."))
        assert await stores_of(memory).graph.statement_count() == count

    # ------------------------------------------------------------------ forgetting what was said

    @staticmethod
    async def _recalled(
        memory: Any, query: str, **options: Any
    ) -> tuple[dict[MemoryId, Any], dict[MemoryId, str]]:
        """(item statuses by id, omission reasons by id) of one retrieval."""
        pack = await memory.retrieve(RetrievalContext(query=query, **options))
        return {item.id: item.status for item in pack.items}, {o.id: o.reason for o in pack.omissions}

    async def test_forgetting_a_remembered_message_forgets_what_was_said(self, memory: Any) -> None:
        """Forgetting the episode ``remember(RememberInput(...))`` created suppresses its
        observation (its part) and the beliefs grounded on them: none is recalled, and their
        vectors left candidate recall (a stale point would come back as a ``suppressed`` omission).

        Adapter authors: ``links_of`` with HAS_OBSERVATION must find an episode's observations.
        """
        text = "My sister Ana is visiting from Porto next week."
        outcome = await memory.remember(
            RememberInput(text, occurred_at=T0).with_derived_memory(
                DerivedMemoryDraft(DerivedType.CLAIM, "Ana visits from Porto next week.")
            )
        )
        [episode], [observation], [claim] = outcome.episode_ids, outcome.observation_ids, outcome.derived_ids
        items, _ = await self._recalled(memory, text)
        assert observation in items
        forgotten = await memory.forget(ForgetMemoryDraft.suppress(episode, "Ana asked us to forget it."))
        assert set(forgotten.graph_mutated_object_ids) == {episode, observation, claim}
        for query in (text, "Ana visits from Porto next week."):
            items, omitted = await self._recalled(memory, query)
            assert {observation, claim}.isdisjoint(items), query
            assert {observation, claim}.isdisjoint(omitted), f"a vector stayed in candidate recall: {query}"

    async def test_forgetting_an_episode_reaches_beliefs_grounded_on_its_observations(
        self, memory: Any
    ) -> None:
        """``apply_to_derived_from_target`` covers what is grounded on the episode's observations
        (forgotten with it); switched off, those beliefs stay current while the utterance goes;
        ``apply_to_episode_observations=False`` keeps the utterance too.

        Adapter authors: ``links_of`` with DERIVED_FROM must find links into several ids at once.
        """
        worlds = []
        for n in range(3):
            episode, observation, belief = (MemoryId.new() for _ in range(3))
            text, note = f"We repainted the boat blue, round {n}.", f"The boat is blue, round {n}."
            await memory.remember(
                RememberDrafts(
                    episodes=[EpisodeDraft(id=episode, occurred_at=T0, created_at=T0)],
                    observations=[
                        ObservationDraft(id=observation, text=text, episode_id=episode, created_at=T0)
                    ],
                    derived=[
                        DerivedMemoryDraft(
                            DerivedType.PROJECT_NOTE,
                            note,
                            id=belief,
                            observation_ids=[observation],
                            created_at=T0,
                        )
                    ],
                )
            )
            worlds.append((episode, observation, belief, text, note))
        drafts = [
            ForgetMemoryDraft.suppress(worlds[0][0], "Forget the day."),
            ForgetMemoryDraft.suppress(
                worlds[1][0], "Forget the words only.", apply_to_derived_from_target=False
            ),
            ForgetMemoryDraft.suppress(
                worlds[2][0], "Forget the event.", apply_to_episode_observations=False
            ),
        ]
        for draft in drafts:
            await memory.forget(draft)
        expected = [(False, False), (False, True), (True, True)]  # (utterance, belief) recalled
        for (_episode, observation, belief, text, note), (said, believed) in zip(
            worlds, expected, strict=True
        ):
            items, _ = await self._recalled(memory, text)
            assert (observation in items) is said, text
            items, _ = await self._recalled(memory, note)
            assert (belief in items) is believed, note

    async def test_forgetting_a_thread_never_reaches_sources(self, memory: Any) -> None:
        """Thread forgetting (even with its members) suppresses derived members only: the
        episodes and observations in it stay recalled.

        Adapter authors: nothing adapter-specific.
        """
        thread, episode, observation = MemoryId.new(), MemoryId.new(), MemoryId.new()
        text = "We planted the raised beds with garlic."
        await memory.remember(
            RememberDrafts(
                threads=[ThreadDraft(id=thread, title="Garden", created_at=T0)],
                episodes=[
                    EpisodeDraft(
                        id=episode, occurred_at=T0, summary="garden day", thread_ids=[thread], created_at=T0
                    )
                ],
                observations=[ObservationDraft(id=observation, text=text, episode_id=episode, created_at=T0)],
            )
        )
        await memory.forget(
            ForgetMemoryDraft.suppress(thread, "Drop the topic.", apply_to_thread_members=True)
        )
        items, _ = await self._recalled(memory, text)
        assert observation in items
        items, _ = await self._recalled(memory, "garden day")
        assert episode in items

    # ------------------------------------------------------------------ non-current beliefs of a notion

    async def _forgotten_replaced_belief(self, memory: Any) -> tuple[MemoryId, MemoryId, MemoryId]:
        """Notion Ana (named), given belief B1 about her, corrected to B2, B2 forgotten: (ana, b1, b2)."""
        ana, _name = await self._notion_with_name(memory, "Ana")
        first = MemoryId.new()
        await memory.remember(
            RememberDrafts(
                derived=[
                    DerivedMemoryDraft(
                        DerivedType.USER_PREFERENCE,
                        "She loves jazz records.",
                        id=first,
                        entity_ids=[ana],
                        given_by_application=True,
                        created_at=T0,
                    )
                ]
            )
        )
        said = await memory.remember(RememberInput("Ana said she only listens to opera now.", occurred_at=T0))
        corrected = await memory.correct(
            CorrectMemoryDraft(
                CorrectionTarget.derived_memory(first),
                "She changed her taste.",
                correction_origin=SourceProvenanceReference(observation_ids=said.observation_ids),
            ).with_replacement(
                ReplacementDerivedMemoryDraft(
                    DerivedType.USER_PREFERENCE, "She loves opera.", entity_ids=[ana]
                )
            )
        )
        [second] = corrected.replacement_ids
        await memory.forget(ForgetMemoryDraft.suppress(second, "She asked us not to keep it."))
        return ana, first, second

    @pytest.mark.parametrize("road", ["focus_entity", "named_notion"])
    async def test_forgotten_and_replaced_beliefs_about_a_notion_stay_reachable(
        self, memory: Any, road: str
    ) -> None:
        """After the current belief about a notion is forgotten, retrieval focused on the notion (or
        naming it) still meets every belief about it through the graph: omissions by default
        (suppressed beats superseded), items with ``include_suppressed`` / ``include_superseded``.

        Adapter authors: ``links_of`` with ABOUT must find every belief about a notion, current or
        not, and ``currency`` must classify them.
        """
        ana, first, second = await self._forgotten_replaced_belief(memory)
        where: dict[str, Any] = (
            {"query": "What music?", "focus_entity_ids": [ana]}
            if road == "focus_entity"
            else {"query": "What music does Ana like?"}
        )
        items, omitted = await self._recalled(memory, **where)
        assert {first, second}.isdisjoint(items)
        assert (omitted.get(first), omitted.get(second)) == ("superseded", "suppressed")
        items, omitted = await self._recalled(memory, **where, include_superseded=True)
        assert items.get(first) is CurrencyStatus.SUPERSEDED
        assert omitted.get(second) == "suppressed"
        pack = await memory.retrieve(
            RetrievalContext(**where, include_superseded=True, include_suppressed=True)
        )
        reached = {item.id: item for item in pack.items}
        assert (reached[first].status, reached[second].status) == (
            CurrencyStatus.SUPERSEDED,
            CurrencyStatus.SUPPRESSED,
        )
        assert road in reached[first].signals
        assert road in reached[second].signals

    # ------------------------------------------------------------------ repair

    async def test_vector_delete_failure_is_repaired_by_replaying_the_correction(self, memory: Any) -> None:
        """Vector-delete failures come back as a VectorMaintenance marker with the failed Delete;
        graph filtering keeps the stale candidate out of every pack; replaying repairs the delete.

        Adapter authors: ``delete`` must be idempotent and ``search`` must still find stale points.
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

        Adapter authors: nothing adapter-specific.
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

    # ------------------------------------------------------------------ stats, names, time

    async def test_stats_follow_every_operation_and_rebuild_recomputes_them(self, memory: Any) -> None:
        """Retrieval-stat counters are updated by commit, correct, forget and link, and
        ``rebuild_stats`` recomputes the same counters from the graph.

        Adapter authors: ``object_ids``/``link_ids`` must list the whole collection.
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

        Adapter authors: ``name_assertions`` must return every KnownAs assertion.
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

    async def test_as_of_shows_what_the_character_believed_then(self, memory: Any) -> None:
        """``as_of`` reads lifecycle records at their record time: before a correction the old
        belief is current; after it, the replacement.

        Adapter authors: ``currency(as_of=...)`` must ignore later records and links.
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

    # ------------------------------------------------------------------ collections

    async def test_forgetting_in_one_collection_leaves_another_untouched(self) -> None:
        """Lifecycle operations stay inside their collection, even when stores are shared.

        Adapter authors: every query and write must be scoped to the collection's graph.
        """
        async for first in self.make_memory("lifecycle-one"):
            async for second in self.make_memory("lifecycle-two"):
                shared_id = MemoryId.deterministic("both", "observation")
                for memory in (first, second):
                    await memory.remember(
                        RememberInput("Same words in both.", observation_id=shared_id, occurred_at=T0)
                    )
                await first.forget(ForgetMemoryDraft.suppress(shared_id, "Only here."))
                assert (await stores_of(first).graph.currency([shared_id]))[
                    shared_id
                ] is CurrencyStatus.SUPPRESSED
                assert (await stores_of(second).graph.currency([shared_id]))[
                    shared_id
                ] is CurrencyStatus.CURRENT
                assert shared_id in await stores_of(second).vectors.point_ids()
