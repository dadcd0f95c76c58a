"""The lifecycle's ordering rules, part of :class:`~charmem_contract.LifecycleContract`.

Supersession is acyclic; a memory gains successors in one write (one plan, or one correction);
lifecycle records are in time order, so the default view and ``as_of=now`` always agree. Every
test goes through the facade only (remember, prepare, validate_plan, commit, correct, forget,
link, retrieve), so any stack runs them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import pytest

from charmem import (
    RECORDED_AT_SKEW,
    CandidateValidationStatus,
    CorrectionTarget,
    CorrectMemoryDraft,
    CurrencyStatus,
    DerivedMemoryDraft,
    DerivedType,
    ForgetMemoryDraft,
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
)

__all__ = ["LifecycleRulesTests"]

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
DAY = timedelta(days=1)


async def _observation(memory: Any, text: str, *, created_at: datetime = T0) -> MemoryId:
    """Remember ``text`` (an episode and its observation, created at ``created_at``); the observation."""
    outcome = await memory.remember(RememberInput(text, occurred_at=T0, created_at=created_at))
    observation: MemoryId = outcome.object_ids[1]
    return observation


def _claim(
    memory_id: MemoryId,
    text: str,
    source: MemoryId,
    *,
    supersedes: Sequence[MemoryId] = (),
    created_at: datetime = T0,
) -> DerivedMemoryDraft:
    return DerivedMemoryDraft(
        DerivedType.CLAIM,
        text,
        id=memory_id,
        observation_ids=[source],
        supersedes=supersedes,
        created_at=created_at,
    )


async def _stored_claim(memory: Any, text: str, *, created_at: datetime = T0) -> MemoryId:
    """A claim grounded on a new observation, both created at ``created_at``."""
    source = await _observation(memory, f"I said: {text}", created_at=created_at)
    claim = MemoryId.new()
    await memory.remember(RememberDrafts(derived=[_claim(claim, text, source, created_at=created_at)]))
    return claim


async def _statuses(memory: Any, query: str) -> dict[MemoryId, CurrencyStatus]:
    """Id -> status of every item recalled for ``query``, superseded and suppressed ones included."""
    pack = await memory.retrieve(
        RetrievalContext(query=query, include_superseded=True, include_suppressed=True)
    )
    return {item.id: item.status for item in pack.items}


def _correction(target: MemoryId, text: str, **kwargs: Any) -> CorrectMemoryDraft:
    return CorrectMemoryDraft(
        CorrectionTarget.derived_memory(target), f"Now: {text}", **kwargs
    ).with_replacement(ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, text))


class LifecycleRulesTests:
    """Ordering rules of the lifecycle (mixed into ``LifecycleContract``; not a suite on its own)."""

    # ------------------------------------------------------------------ acyclic supersession

    @pytest.mark.parametrize("length", [2, 3])
    async def test_drafts_whose_supersedes_lists_form_a_cycle_are_refused(
        self, memory: Any, length: int
    ) -> None:
        """Drafts of one plan that supersede each other in a ring are invalid, naming the cycle;
        nothing is written (before the rule both were stored and vanished from every view).

        If this fails: nothing adapter-specific (core validation reads ``links_of``).
        """
        source = await _observation(memory, "We argued about the ring of beliefs.")
        ids = [MemoryId.new() for _ in range(length)]
        drafts = [
            _claim(memory_id, f"ring belief {n}", source, supersedes=[ids[(n + 1) % length]])
            for n, memory_id in enumerate(ids)
        ]
        plan = await memory.prepare(RememberDrafts(derived=drafts))
        validations = {v.candidate_id: v for v in await memory.validate_plan(plan)}
        for memory_id in ids:
            assert validations[memory_id].status is CandidateValidationStatus.INVALID
            [reason] = [r for r in validations[memory_id].reasons if "cycle" in r]
            assert all(str(other) in reason for other in ids), reason
        with pytest.raises(PlanValidationError, match="cycle") as info:
            await memory.commit(plan)
        assert set(info.value.reasons) == {str(i) for i in ids}
        recalled = await _statuses(memory, "ring belief 0 ring belief 1")
        assert not set(ids) & set(recalled), "a refused plan left memories behind"

    # ------------------------------------------------------------------ successors in one write

    async def test_a_later_plan_cannot_supersede_an_already_superseded_memory(self, memory: Any) -> None:
        """Once superseded, a memory gains no successor from another plan (the error names the
        successor); replaying the plan that superseded it stays accepted, also half-replayed
        plans that add a sibling are refused.

        If this fails: ``links_of`` with ``relations=[SUPERSEDES]`` must return incoming links.
        """
        old = await _stored_claim(memory, "The bakery opens at seven.")
        source = await _observation(memory, "The bakery changed its hours.")
        first = MemoryId.new()
        first_draft = _claim(first, "The bakery opens at eight.", source, supersedes=[old])
        plan = await memory.prepare(RememberDrafts(derived=[first_draft]))
        await memory.commit(plan)
        second = MemoryId.new()
        second_draft = _claim(second, "The bakery opens at nine.", source, supersedes=[old])
        with pytest.raises(PlanValidationError, match="already superseded") as info:
            await memory.remember(RememberDrafts(derived=[second_draft]))
        assert str(first) in str(info.value)
        assert str(first) in info.value.reasons[str(second)][0]
        replayed = await memory.commit(plan)
        assert replayed.warnings, "a replay must be accepted as already stored"
        with pytest.raises(PlanValidationError, match="already superseded"):
            await memory.remember(RememberDrafts(derived=[first_draft, second_draft]))
        statuses = await _statuses(memory, "The bakery opens at eight.")
        assert statuses.get(old) is CurrencyStatus.SUPERSEDED
        assert statuses.get(first) is CurrencyStatus.CURRENT
        assert second not in statuses

    async def test_a_split_and_a_merge_in_one_plan_are_allowed(self, memory: Any) -> None:
        """Several successors of one memory in one plan (a split) and one successor of several
        memories (a merge) are accepted and replayable; afterwards neither a later plan nor
        ``correct`` may add a successor to the split memory.

        If this fails: ``currency`` must count every incoming ``supersedes`` link.
        """
        split = await _stored_claim(memory, "Mina and Jun share the garden.")
        left = await _stored_claim(memory, "Mina waters on Mondays.")
        right = await _stored_claim(memory, "Mina waters on Fridays.")
        source = await _observation(memory, "Mina and Jun split the garden; Mina waters twice a week.")
        mina, jun, both = MemoryId.new(), MemoryId.new(), MemoryId.new()
        plan = await memory.prepare(
            RememberDrafts(
                derived=[
                    _claim(mina, "Mina keeps the north half of the garden.", source, supersedes=[split]),
                    _claim(jun, "Jun keeps the south half of the garden.", source, supersedes=[split]),
                    _claim(both, "Mina waters on Mondays and Fridays.", source, supersedes=[left, right]),
                ]
            )
        )
        await memory.commit(plan)
        assert (await memory.commit(plan)).warnings
        statuses = await _statuses(memory, "Mina keeps the north half of the garden.")
        assert statuses.get(mina) is CurrencyStatus.CURRENT
        assert statuses.get(split) is CurrencyStatus.SUPERSEDED
        merged = await _statuses(memory, "Mina waters on Mondays and Fridays.")
        assert merged.get(both) is CurrencyStatus.CURRENT
        assert merged.get(left) is merged.get(right) is CurrencyStatus.SUPERSEDED
        with pytest.raises(LifecycleValidationError) as info:
            await memory.correct(_correction(split, "They share it again."))
        assert info.value.kind is LifecycleErrorKind.ALREADY_SUPERSEDED
        assert str(jun) in str(info.value) and str(mina) in str(info.value)
        with pytest.raises(PlanValidationError, match="already superseded"):
            await memory.remember(
                RememberDrafts(derived=[_claim(MemoryId.new(), "They share it.", source, supersedes=[split])])
            )

    async def test_correct_refuses_a_target_another_memory_supersedes(self, memory: Any) -> None:
        """``correct`` of a memory a plan superseded raises ALREADY_SUPERSEDED naming the
        successor; a plan cannot supersede a corrected memory (naming the replacement); replaying
        the correction stays accepted.

        If this fails: check that the refused operations wrote nothing.
        """
        planned = await _stored_claim(memory, "Oma lives in Busan.")
        source = await _observation(memory, "Oma moved to Seoul.")
        successor = MemoryId.new()
        await memory.remember(
            RememberDrafts(derived=[_claim(successor, "Oma lives in Seoul.", source, supersedes=[planned])])
        )
        with pytest.raises(LifecycleValidationError) as info:
            await memory.correct(_correction(planned, "Oma lives in Daegu."))
        assert info.value.kind is LifecycleErrorKind.ALREADY_SUPERSEDED
        assert str(successor) in str(info.value)

        corrected = await _stored_claim(memory, "Jun plays the violin.")
        draft = _correction(corrected, "Jun plays the cello.")
        [replacement] = (await memory.correct(draft)).replacement_ids
        assert (await memory.correct(draft)).replacement_ids == (replacement,)
        with pytest.raises(PlanValidationError, match="already superseded") as plan_error:
            await memory.remember(
                RememberDrafts(
                    derived=[_claim(MemoryId.new(), "Jun plays the viola.", source, supersedes=[corrected])]
                )
            )
        assert str(replacement) in str(plan_error.value)
        statuses = await _statuses(memory, "Jun plays the cello.")
        assert statuses.get(replacement) is CurrencyStatus.CURRENT
        assert statuses.get(corrected) is CurrencyStatus.SUPERSEDED
        assert "Jun plays the viola." not in {item.text for item in (await memory.retrieve("viola")).items}

    # ------------------------------------------------------------------ records in time order

    async def test_lifecycle_records_before_their_target_are_refused(self, memory: Any) -> None:
        """A correct, forget or link recorded before its target was created (for a link: either
        endpoint) raises RECORDED_BEFORE_TARGET and writes nothing; at the creation instant
        itself it is accepted.

        If this fails: objects must keep their ``created_at`` exactly (timezone included).
        """
        created = T0 + DAY
        target = await _stored_claim(memory, "Jun walks the dog at noon.", created_at=created)
        early = await _stored_claim(memory, "Jun has a dog.", created_at=T0)
        before = created - timedelta(hours=1)
        refused: list[Callable[[], Awaitable[object]]] = [
            lambda: memory.correct(_correction(target, "Jun walks the dog at one.", recorded_at=before)),
            lambda: memory.correct(
                CorrectMemoryDraft(
                    CorrectionTarget.derived_memory(target), "Later.", recorded_at=created
                ).with_replacement(
                    ReplacementDerivedMemoryDraft(
                        DerivedType.CORRECTION, "Jun walks at two.", created_at=before
                    )
                )
            ),
            lambda: memory.forget(ForgetMemoryDraft.suppress(target, "Private.", recorded_at=before)),
            lambda: memory.link(LinkDraft(early, Relation.SUPPORTS, target, recorded_at=before)),
            lambda: memory.link(LinkDraft(target, Relation.SUPPORTS, early, recorded_at=before)),
        ]
        for attempt in refused:
            with pytest.raises(LifecycleValidationError) as info:
                await attempt()
            assert info.value.kind is LifecycleErrorKind.RECORDED_BEFORE_TARGET
            assert str(target) in str(info.value)
        statuses = await _statuses(memory, "Jun walks the dog at noon.")
        assert statuses.get(target) is CurrencyStatus.CURRENT
        recalled = await memory.retrieve("Jun walks the dog at one.")
        assert "Jun walks the dog at one." not in {item.text for item in recalled.items}
        link = await memory.link(LinkDraft(early, Relation.SUPPORTS, target, recorded_at=created))
        assert link.link.created_at == created
        outcome = await memory.correct(_correction(target, "Jun walks the dog at one.", recorded_at=created))
        assert outcome.replacement_ids

    async def test_lifecycle_records_in_the_future_are_refused_beyond_the_skew(self, memory: Any) -> None:
        """A correct, forget or link recorded later than the clock's now plus RECORDED_AT_SKEW
        raises RECORDED_IN_FUTURE; within the skew it is accepted and recorded at the clock's now.

        If this fails: nothing adapter-specific (the facade's clock decides).
        """
        first = await _stored_claim(memory, "Mina likes green tea.")
        second = await _stored_claim(memory, "Mina likes black tea.")
        ahead = memory.clock.now() + RECORDED_AT_SKEW + timedelta(hours=1)
        refused: list[Callable[[], Awaitable[object]]] = [
            lambda: memory.correct(_correction(first, "Mina likes oolong.", recorded_at=ahead)),
            lambda: memory.forget(ForgetMemoryDraft.suppress(first, "Private.", recorded_at=ahead)),
            lambda: memory.link(LinkDraft(first, Relation.ASSOCIATED_WITH, second, recorded_at=ahead)),
        ]
        for attempt in refused:
            with pytest.raises(LifecycleValidationError) as info:
                await attempt()
            assert info.value.kind is LifecycleErrorKind.RECORDED_IN_FUTURE
        assert (await _statuses(memory, "Mina likes green tea.")).get(first) is CurrencyStatus.CURRENT
        slightly = memory.clock.now() + RECORDED_AT_SKEW / 2
        link = await memory.link(LinkDraft(first, Relation.ASSOCIATED_WITH, second, recorded_at=slightly))
        assert link.link.created_at <= memory.clock.now()
        await memory.forget(ForgetMemoryDraft.suppress(second, "Private.", recorded_at=slightly))
        as_of_now = await memory.retrieve(
            RetrievalContext(query="Mina likes black tea.", include_suppressed=True, as_of=memory.clock.now())
        )
        assert {i.id: i.status for i in as_of_now.items}.get(second) is CurrencyStatus.SUPPRESSED

    async def test_the_default_view_and_as_of_now_agree(self, memory: Any) -> None:
        """After corrections and forgets with back-filled ``recorded_at`` (and one slightly ahead
        of the clock), ``retrieve()`` and ``retrieve(as_of=now)`` give the same items, statuses
        and omissions.

        If this fails: ``currency(as_of=...)`` must count records and ``supersedes`` links
        recorded at or before ``as_of``.
        """
        texts = ["Jun studies law.", "Jun lives in Incheon.", "Jun drives a van.", "Jun drinks coffee."]
        claims = [await _stored_claim(memory, text) for text in texts]
        await memory.correct(_correction(claims[0], "Jun studies medicine.", recorded_at=T0 + DAY))
        await memory.forget(ForgetMemoryDraft.suppress(claims[1], "Private.", recorded_at=T0 + 2 * DAY))
        soon = memory.clock.now() + RECORDED_AT_SKEW / 2
        outcome = await memory.correct(_correction(claims[2], "Jun drives a truck.", recorded_at=soon))
        await memory.forget(
            ForgetMemoryDraft.suppress(outcome.replacement_ids[0], "Private.", recorded_at=soon)
        )
        await memory.forget(ForgetMemoryDraft.suppress(claims[3], "Private.", recorded_at=soon))
        now = memory.clock.now()
        query = "What about Jun? studies lives drives drinks"
        for context in (
            RetrievalContext(query=query),
            RetrievalContext(query=query, include_superseded=True),
            RetrievalContext(query=query, include_superseded=True, include_suppressed=True),
        ):
            default = await memory.retrieve(context)
            then = await memory.retrieve(attrs.evolve(context, as_of=now))
            assert [(i.id, i.status) for i in then.items] == [(i.id, i.status) for i in default.items], (
                context
            )
            assert {(o.id, o.reason) for o in then.omissions} == {(o.id, o.reason) for o in default.omissions}

    async def test_plans_obey_the_time_order_of_lifecycle_records(self, memory: Any) -> None:
        """``remember``/``commit`` refuse (PlanValidationError, reasons starting "time order") a
        memory dated later than the clock's now plus RECORDED_AT_SKEW, which ``forget`` could not
        reach until the clock did, and a successor, derived memory or caller link dated before what
        it supersedes, is grounded on or joins; nothing is written. At equal instants it is stored,
        and the default view and ``as_of=now`` agree on it.

        If this fails: nothing adapter-specific (validation reads stored objects' ``created_at``).
        """
        future = memory.clock.now() + RECORDED_AT_SKEW + DAY
        with pytest.raises(PlanValidationError, match="time order") as info:
            await memory.remember(RememberInput("My bank PIN is 4321.", created_at=future))
        assert all(r.startswith("time order") for reasons in info.value.reasons.values() for r in reasons)
        pin = await memory.retrieve(RetrievalContext(query="My bank PIN is 4321.", include_suppressed=True))
        assert "My bank PIN is 4321." not in {item.text for item in pin.items}

        later = T0 + DAY
        old = await _stored_claim(memory, "Ola keeps bees.", created_at=later)
        source = await _observation(memory, "Ola said she sold the hives.", created_at=later)
        successor, grounded = MemoryId.new(), MemoryId.new()
        refused = [
            RememberDrafts(derived=[_claim(successor, "Ola sold her bees.", source, supersedes=[old])]),
            RememberDrafts(derived=[_claim(grounded, "Ola sold hives.", source)]),
            RememberDrafts(links=[LinkDraft(source, Relation.SUPPORTS, old, recorded_at=T0)]),
        ]
        for drafts in refused:
            with pytest.raises(PlanValidationError, match=r"time order: .* cannot predate"):
                await memory.remember(drafts)
        assert (await _statuses(memory, "Ola keeps bees.")).get(old) is CurrencyStatus.CURRENT

        await memory.remember(
            RememberDrafts(
                derived=[_claim(successor, "Ola sold her bees.", source, supersedes=[old], created_at=later)],
                links=[LinkDraft(source, Relation.SUPPORTS, old, recorded_at=later)],
            )
        )
        assert (await _statuses(memory, "Ola keeps bees.")).get(old) is CurrencyStatus.SUPERSEDED
        await memory.forget(ForgetMemoryDraft.suppress(successor, "Private."))
        context = RetrievalContext(query="Ola bees hives", include_superseded=True, include_suppressed=True)
        default = await memory.retrieve(context)
        then = await memory.retrieve(attrs.evolve(context, as_of=memory.clock.now()))
        assert [(i.id, i.status) for i in then.items] == [(i.id, i.status) for i in default.items]
