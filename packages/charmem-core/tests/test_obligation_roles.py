"""Obligation parties: ``Actor`` (who owes) and ``Counterpart`` (to whom) assertions, only on
commitments and open loops, never both for one subject of a memory; the plan JSON tags each
predicate (format 2) and still loads a format-1 plan."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from charmem import (
    Actor,
    BeliefAssertion,
    CandidateValidationStatus,
    CharacterMemory,
    CorrectionTarget,
    CorrectMemoryDraft,
    Counterpart,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    KnownAs,
    LifecycleValidationError,
    MemoryId,
    PlanValidationError,
    RememberDrafts,
    RememberInput,
    RememberWritePlan,
    ReplacementDerivedMemoryDraft,
)
from charmem.domain.model import DerivedMemory
from charmem.testing import stores_of

WHEN = datetime(2024, 2, 2, 9, 0, tzinfo=UTC)


async def _people(memory: CharacterMemory) -> tuple[MemoryId, MemoryId, MemoryId]:
    me, ana = MemoryId.new(), MemoryId.new()
    seed = await memory.remember(
        RememberInput("I promised Ana to return her book by Friday.", occurred_at=WHEN)
    )
    await memory.remember(
        RememberDrafts(
            entities=[EntityDraft(id=me, entity_type="person"), EntityDraft(id=ana, entity_type="person")]
        )
    )
    return me, ana, seed.observation_ids[0]


def _promise(
    me: MemoryId,
    ana: MemoryId,
    source: MemoryId,
    *roles: BeliefAssertion,
    kind: DerivedType = DerivedType.COMMITMENT,
) -> DerivedMemoryDraft:
    return DerivedMemoryDraft(
        kind,
        "Return Ana's book by Friday.",
        entity_ids=[me, ana],
        observation_ids=[source],
        assertions=list(roles),
    )


async def test_a_commitment_names_who_owes_and_to_whom(memory: CharacterMemory) -> None:
    me, ana, source = await _people(memory)
    roles = (
        BeliefAssertion(me, Actor()),
        BeliefAssertion(ana, Counterpart()),
        BeliefAssertion(ana, KnownAs("Ana")),
    )
    outcome = await memory.remember(RememberDrafts(derived=[_promise(me, ana, source, *roles)]))
    [stored_id] = outcome.derived_ids
    stored = (await stores_of(memory).graph.get_objects([stored_id]))[stored_id]
    assert isinstance(stored, DerivedMemory)
    assert set(stored.assertions) == set(roles)
    # roles are no names: the name index holds Ana's name only
    assert [(s, n) for _b, s, n in await stores_of(memory).graph.name_assertions()] == [(ana, "Ana")]


@pytest.mark.parametrize("kind", [DerivedType.REFLECTION, DerivedType.USER_PREFERENCE])
async def test_a_role_on_another_type_is_refused(memory: CharacterMemory, kind: DerivedType) -> None:
    me, ana, source = await _people(memory)
    plan = await memory.prepare(
        RememberDrafts(derived=[_promise(me, ana, source, BeliefAssertion(me, Actor()), kind=kind)])
    )
    [verdict] = [v for v in await memory.validate_plan(plan) if v.status is CandidateValidationStatus.INVALID]
    assert any("only a commitment or an open_loop" in reason for reason in verdict.reasons)
    with pytest.raises(PlanValidationError):
        await memory.commit(plan)


async def test_one_subject_cannot_owe_itself(memory: CharacterMemory) -> None:
    me, ana, source = await _people(memory)
    draft = _promise(
        me,
        ana,
        source,
        BeliefAssertion(ana, Actor()),
        BeliefAssertion(ana, Counterpart()),
        kind=DerivedType.OPEN_LOOP,
    )
    with pytest.raises(PlanValidationError, match="both Actor and Counterpart"):
        await memory.remember(RememberDrafts(derived=[draft]))


async def test_a_correction_keeps_the_rule(memory: CharacterMemory) -> None:
    me, ana, source = await _people(memory)
    outcome = await memory.remember(
        RememberDrafts(derived=[_promise(me, ana, source, BeliefAssertion(me, Actor()))])
    )
    wrong = ReplacementDerivedMemoryDraft(
        DerivedType.REFLECTION, "I never promised anything.", assertions=[BeliefAssertion(me, Actor())]
    )
    draft = CorrectMemoryDraft(CorrectionTarget.derived_memory(outcome.derived_ids[0]), "misheard")
    with pytest.raises(LifecycleValidationError, match="obligation role"):
        await memory.correct(draft.with_replacement(wrong))


async def test_plan_json_tags_predicates_and_reads_format_1(memory: CharacterMemory) -> None:
    me, ana, source = await _people(memory)
    roles = (
        BeliefAssertion(me, Actor()),
        BeliefAssertion(ana, Counterpart()),
        BeliefAssertion(ana, KnownAs("Ana")),
    )
    plan = await memory.prepare(RememberDrafts(derived=[_promise(me, ana, source, *roles)]))
    data = json.loads(plan.to_json())
    assert data["format_version"] == 3
    kinds = sorted(a["predicate"]["kind"] for o in data["objects"] for a in o.get("assertions", ()))
    assert kinds == ["actor", "counterpart", "known_as"]
    assert RememberWritePlan.from_json(plan.to_json()) == plan
    named = await memory.prepare(
        RememberDrafts(derived=[_promise(me, ana, source, BeliefAssertion(ana, KnownAs("Ana")))])
    )
    old = json.loads(named.to_json())  # the same plan as a format-1 writer wrote it: untagged names
    old["format_version"] = 1
    for obj in old["objects"]:
        for assertion in obj.get("assertions", ()):
            del assertion["predicate"]["kind"]
    assert RememberWritePlan.from_json(json.dumps(old)) == named


def test_who_owes_is_part_of_the_content() -> None:
    """An id replayed with the roles swapped is other content (an id conflict, not a replay)."""
    from charmem.domain.rules import content_equal
    from charmem.domain.serde import converter

    me, ana = MemoryId.new(), MemoryId.new()

    def promise(owes: MemoryId, owed: MemoryId) -> DerivedMemory:
        return DerivedMemory(
            id=ana,  # one id for both
            derived_type=DerivedType.COMMITMENT,
            text="Return the book.",
            created_at=WHEN,
            entity_ids=[me, ana],
            observation_ids=[MemoryId.deterministic("t", "obs")],
            assertions=[BeliefAssertion(owes, Actor()), BeliefAssertion(owed, Counterpart())],
        )

    assert not content_equal(promise(me, ana), promise(ana, me))
    assert content_equal(promise(me, ana), promise(me, ana))
    copied = converter.copy()  # what an application's copy needs, as the server's wire does
    from charmem.domain.serde import tag_predicates

    tag_predicates(copied)
    assert copied.structure(copied.unstructure(promise(me, ana)), DerivedMemory) == promise(me, ana)
