"""The lifecycle suite's corrections: supersession, and what each kind of target allows."""

from __future__ import annotations

from typing import Any, cast

import pytest

from charmem import (
    BeliefAssertion,
    CorrectionTarget,
    CorrectMemoryDraft,
    CurrencyStatus,
    DerivedMemoryDraft,
    DerivedType,
    ExternalSourceReference,
    ForgetMemoryDraft,
    IdConflictError,
    KnownAs,
    LifecycleErrorKind,
    LifecycleValidationError,
    LinkDraft,
    MemoryId,
    PlanValidationError,
    Relation,
    RememberDrafts,
    RememberInput,
    ReplacementDerivedMemoryDraft,
    RetrievalContext,
    SourceProvenanceReference,
    ThreadDraft,
)
from charmem.domain.model import DerivedMemory
from charmem.testing import stores_of
from charmem_contract._lifecycle_steps import T0, LifecycleSteps

__all__ = ["LifecycleCorrectionTests"]


class LifecycleCorrectionTests(LifecycleSteps):
    """Supersession and correction by target kind (mixed into ``LifecycleContract``)."""

    # -- supersession ----------------------------------------------------------------------

    async def test_rename_is_supersession_old_belief_stays_new_is_current(self, memory: Any) -> None:
        """A rename is an ordinary supersession: the old name belief is kept as history and is no
        longer current; the new one is current and the pack names the notion by it.

        If this fails: check that ``supersedes`` links written in a batch count in ``currency``.
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
        old_belief = cast(DerivedMemory, (await stores_of(memory).graph.get_objects([old]))[old])
        assert old_belief.text == "I know this notion as Al."
        pack = await memory.retrieve(RetrievalContext(query="Bob", focus_entity_ids=[notion]))
        names = {e.id: e.names for e in pack.entities}
        assert names[notion] == ("Bob",)
        assert old not in await stores_of(memory).vectors.point_ids()

    async def test_correction_supersedes_and_keeps_the_predecessor_unsuppressed(self, memory: Any) -> None:
        """Correction leaves the predecessor stored, unsuppressed and superseded; the replacement
        inherits entity_ids and thread_ids and is grounded on the target's sources.

        If this fails: check ``get_records`` and ``currency`` (no suppression record appears).
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
        replacement = cast(
            DerivedMemory, (await stores_of(memory).graph.get_objects([replacement_id]))[replacement_id]
        )
        assert replacement.observation_ids == (observation,)
        assert replacement.supersedes == (claim,)
        assert await self._status(memory, claim) is CurrencyStatus.SUPERSEDED
        records = await stores_of(memory).graph.get_records([claim])
        assert [r.action.value for r in records] == ["correct"]
        assert claim not in await stores_of(memory).vectors.point_ids()
        assert replacement_id in await stores_of(memory).vectors.point_ids()

    async def test_what_a_chain_of_corrections_left_behind_ranks_below_the_last_correction(
        self, memory: Any
    ) -> None:
        """Oslo, then Bergen, then Trondheim, each correction grounded on the utterance that told
        it: for a question about where the character lives, the Oslo and Bergen utterances (still
        current: utterances are never superseded) rank below the Trondheim correction and its
        source, with the signal ``corrected_source``.

        If this fails: ``links_of`` must return ``supersedes`` and ``derived_from`` links from
        either end, and ``currency`` the status of every belief in the chain.
        """
        _episode, oslo, target = await self._grounded_belief(
            memory, "I live in the flat by the harbour in Oslo.", "Lives in Oslo."
        )
        told: list[MemoryId] = [oslo]
        for said, fact in [
            ("We moved to Bergen; I live there now.", "Lives in Bergen now."),
            ("We relocated to Trondheim last month.", "Lives in Trondheim now."),
        ]:
            moved = await memory.remember(RememberInput(said, occurred_at=T0))
            told.append(moved.object_ids[1])
            outcome = await memory.correct(
                CorrectMemoryDraft(
                    CorrectionTarget.derived_memory(target),
                    "Moved.",
                    correction_origin=SourceProvenanceReference(observation_ids=[told[-1]]),
                ).with_replacement(ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, fact))
            )
            [target] = outcome.replacement_ids
        pack = await memory.retrieve("Where do I live now: in the flat by the harbour in Oslo?")
        order = [item.id for item in pack.items]
        assert target in order and told[-1] in order
        for left_behind in told[:-1]:
            assert left_behind in order
            assert order.index(left_behind) > max(order.index(target), order.index(told[-1]))
            assert "corrected_source" in pack.items[order.index(left_behind)].signals

    async def test_replaying_a_correction_creates_no_second_replacement_or_link(self, memory: Any) -> None:
        """Replacement ids derive from the target and the replacement's content, so replaying a
        correction (even at another time) writes nothing new.

        If this fails: check equal-content replays are accepted without new statements.
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

        If this fails: currency must count a supersedes link whatever its source's state.
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

        If this fails: ``currency`` must return SUPPRESSED for a superseded, suppressed memory.
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

        If this fails: check ``links_of`` with ``relations=[SUPERSEDES]`` finds both directions.
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

        If this fails: nothing adapter-specific; this is core validation.
        """
        _e, _o, a = await self._grounded_belief(memory, "one", "first belief")
        _e, _o, b = await self._grounded_belief(memory, "two", "second belief")
        before = await stores_of(memory).graph.statement_count()
        with pytest.raises(PlanValidationError, match="supersedes"):
            await memory.link(LinkDraft(a, Relation.SUPERSEDES, b))
        assert await stores_of(memory).graph.statement_count() == before

    async def test_a_link_id_reused_for_another_relation_is_rejected(self, memory: Any) -> None:
        """Existing link ids reject different content, including another relation.

        If this fails: ``write_batch`` must raise IdConflictError for a link id with other content.
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

        If this fails: check that link ids are unique across relations.
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

    # -- correction by target kind ---------------------------------------------------------

    async def test_correcting_a_source_object_supersedes_it_and_keeps_it_as_provenance(
        self, memory: Any
    ) -> None:
        """An episode or observation target is kept as provenance, superseded, and leaves the vector
        index; the replacement is grounded on it and inherits its mentions as entity_ids.

        If this fails: check that ``currency`` applies to observations too.
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
        replacement = cast(
            DerivedMemory, (await stores_of(memory).graph.get_objects([replacement_id]))[replacement_id]
        )
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

        If this fails: lifecycle records must keep ``external_refs``.
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
        stored = cast(DerivedMemory, (await stores_of(memory).graph.get_objects([new]))[new])
        assert stored.given_by_application
        assert stored.source_ids == ()
        assert [a.predicate for a in stored.assertions] == [KnownAs("Carol")]
        [record] = await stores_of(memory).graph.get_records([belief])
        assert record.external_refs == ("application:name-change",)
        pack = await memory.retrieve(RetrievalContext(query="Carol", focus_entity_ids=[notion]))
        assert {e.id: e.names for e in pack.entities}[notion] == ("Carol",)

    async def test_rationale_only_correction_of_a_given_belief_raises_missing_given_replacement(
        self, memory: Any
    ) -> None:
        """A rationale-only correction with no source experiences returns MissingGivenReplacement.

        If this fails: check that nothing was written (the statement count is unchanged).
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
        """Each refused correction raises LifecycleValidationError with its documented kind.

        If this fails: check that nothing was written (the statement count is unchanged).
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
