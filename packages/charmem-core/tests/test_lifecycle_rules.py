"""The pure lifecycle rules of the domain: currency, the grounding rule, the correction table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from charmem import (
    BeliefAssertion,
    CorrectionTarget,
    CorrectMemoryDraft,
    DerivedType,
    Episode,
    KnownAs,
    LifecycleErrorKind,
    LifecycleValidationError,
    MemoryId,
    ReplacementDerivedMemoryDraft,
)
from charmem.domain.correction import CorrectionFacts, correction_reads, plan_correction
from charmem.domain.currency import currency_status, is_shown
from charmem.domain.model import DerivedMemory, Entity
from charmem.domain.retrieval import CurrencyStatus
from charmem.domain.rules import BeliefBreachKind, belief_breaches

T0 = datetime(2024, 1, 1, tzinfo=UTC)
T1 = T0 + timedelta(days=1)
T2 = T0 + timedelta(days=2)


def test_currency_counts_only_instants_recorded_by_as_of_and_suppressed_beats_superseded() -> None:
    assert currency_status() is CurrencyStatus.CURRENT
    assert currency_status(superseded_at=[T1]) is CurrencyStatus.SUPERSEDED
    assert currency_status(suppressed_at=[T2], superseded_at=[T1]) is CurrencyStatus.SUPPRESSED
    assert currency_status(suppressed_at=[T2], superseded_at=[T1], as_of=T1) is CurrencyStatus.SUPERSEDED
    assert currency_status(suppressed_at=[T2], superseded_at=[T1], as_of=T0) is CurrencyStatus.CURRENT
    assert currency_status(suppressed_at=[T1], as_of=T1) is CurrencyStatus.SUPPRESSED  # inclusive


@pytest.mark.parametrize(
    ("status", "superseded", "suppressed", "shown"),
    [
        (CurrencyStatus.CURRENT, False, False, True),
        (CurrencyStatus.SUPERSEDED, False, True, False),
        (CurrencyStatus.SUPERSEDED, True, False, True),
        (CurrencyStatus.SUPPRESSED, True, False, False),
        (CurrencyStatus.SUPPRESSED, False, True, True),
    ],
)
def test_include_flags_show_only_their_own_status(
    status: CurrencyStatus, superseded: bool, suppressed: bool, shown: bool
) -> None:
    assert is_shown(status, include_superseded=superseded, include_suppressed=suppressed) is shown


def test_belief_breaches_name_every_broken_part_of_the_grounding_rule_in_order() -> None:
    subject, other = MemoryId.new(), MemoryId.new()
    named = [BeliefAssertion(other, KnownAs("Ana"))]
    assert belief_breaches(given=False, has_sources=True, entity_ids=[subject], assertions=[]) == []
    assert belief_breaches(given=True, has_sources=False, entity_ids=[subject], assertions=[]) == []
    kinds = [b.kind for b in belief_breaches(given=True, has_sources=True, entity_ids=[], assertions=named)]
    assert kinds == [
        BeliefBreachKind.GIVEN_WITH_SOURCES,
        BeliefBreachKind.GIVEN_WITHOUT_SUBJECT,
        BeliefBreachKind.SUBJECT_NOT_LISTED,
    ]
    [ungrounded] = belief_breaches(given=False, has_sources=False, entity_ids=[subject], assertions=[])
    assert ungrounded.kind is BeliefBreachKind.UNGROUNDED
    [unlisted] = belief_breaches(given=False, has_sources=True, entity_ids=[subject], assertions=named)
    assert unlisted.subject == other


def _episode() -> Episode:
    return Episode(id=MemoryId.new(), occurred_at=T0, participant_entity_ids=[MemoryId.new()], created_at=T0)


def test_correcting_an_episode_grounds_the_replacement_on_it_and_inherits_its_participants() -> None:
    episode = _episode()
    draft = CorrectMemoryDraft(CorrectionTarget.source_object(episode.id), "it was on Tuesday")
    ids = correction_reads(draft, episode)
    assert set(ids) == {episode.id, *episode.participant_entity_ids}
    notion = Entity(id=episode.participant_entity_ids[0], created_at=T0)
    facts = CorrectionFacts(target=episode, stored={episode.id: episode, notion.id: notion})
    plan = plan_correction(draft, facts, collection="c", now=T1)
    assert plan.replacement.episode_ids == (episode.id,)
    assert plan.replacement.entity_ids == episode.participant_entity_ids
    assert plan.replacement.supersedes == (episode.id,)
    assert plan.replacement.text == "it was on Tuesday"
    assert plan.record.related_ids == (plan.replacement.id,)
    assert plan.record.recorded_at == T1
    # The same draft and facts plan the same replacement id: a replay writes nothing new.
    assert plan_correction(draft, facts, collection="c", now=T2).replacement.id == plan.replacement.id


def test_a_given_belief_is_not_corrected_without_a_replacement_draft() -> None:
    notion = Entity(id=MemoryId.new(), created_at=T0)
    given = DerivedMemory(
        id=MemoryId.new(),
        derived_type=DerivedType.CLAIM,
        text="She is called Ana.",
        entity_ids=[notion.id],
        assertions=[BeliefAssertion(notion.id, KnownAs("Ana"))],
        given_by_application=True,
        created_at=T0,
    )
    draft = CorrectMemoryDraft(CorrectionTarget.derived_memory(given.id), "renamed")
    facts = CorrectionFacts(target=given, stored={notion.id: notion})
    with pytest.raises(LifecycleValidationError) as refused:
        plan_correction(draft, facts, collection="c", now=T1)
    assert refused.value.kind is LifecycleErrorKind.MISSING_GIVEN_REPLACEMENT
    replacement = ReplacementDerivedMemoryDraft(
        DerivedType.CLAIM,
        "She is called Anna.",
        entity_ids=[notion.id],
        assertions=[BeliefAssertion(notion.id, KnownAs("Anna"))],
        given_by_application=True,
    )
    plan = plan_correction(draft.with_replacement(replacement), facts, collection="c", now=T1)
    assert plan.replacement.given_by_application
    assert plan.replacement.source_ids == ()
    assert plan.replacement.entity_ids == (notion.id,)
