"""Domain types: validation at construction, ids, canonical content, plan JSON."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from charmem import (
    BeliefAssertion,
    DerivedMemoryDraft,
    DerivedType,
    DraftValidationError,
    Episode,
    EpisodeDraft,
    KnownAs,
    LinkDraft,
    MemoryId,
    ObjectType,
    ObservationDraft,
    Relation,
    RememberInput,
    RememberWritePlan,
)
from charmem.domain.retrieval import rank_key
from charmem.domain.rules import canonical_content, content_equal, name_occurs_in, normalise_name
from charmem.usecases.planning import build_plan

NOW = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_memory_id_accepts_uuid_and_string_and_is_canonical() -> None:
    raw = uuid.uuid4()
    assert MemoryId(raw) == MemoryId(str(raw).upper())
    assert str(MemoryId(raw)) == str(raw)
    with pytest.raises(DraftValidationError):
        MemoryId("not-a-uuid")


@given(st.lists(st.uuids(), min_size=2, max_size=30))
def test_memory_ids_order_by_their_canonical_string(raws: list[uuid.UUID]) -> None:
    ids = [MemoryId(raw) for raw in raws]
    assert [str(i) for i in sorted(ids)] == sorted(str(i) for i in ids)
    a, b = ids[0], ids[1]
    x, y = str(a), str(b)
    assert (a < b, a <= b, a > b, a >= b) == (x < y, x <= y, x > y, x >= y)
    assert hash(a) == hash(MemoryId(str(a).upper()))
    with pytest.raises(TypeError):
        _ = a < str(b)  # type: ignore[operator]


def test_deterministic_ids_are_stable_and_distinct() -> None:
    a = MemoryId.deterministic("conv-26", "D1:3")
    assert a == MemoryId.deterministic("conv-26", "D1:3")
    assert a != MemoryId.deterministic("conv-26", "D1:4")
    assert a.value.version == 5
    # parts are separated, so ("a", "bc") and ("ab", "c") differ
    assert MemoryId.deterministic("n", "a", "bc") != MemoryId.deterministic("n", "ab", "c")


@pytest.mark.parametrize(
    "build",
    [
        lambda: EpisodeDraft(occurred_at=datetime(2024, 1, 1)),  # naive
        lambda: RememberInput("   "),  # blank text
        lambda: RememberInput("x", salience=1.5),
        lambda: RememberInput("x", salience=float("nan")),
        lambda: DerivedMemoryDraft(DerivedType.CLAIM, ""),
        lambda: DerivedMemoryDraft("not-a-type", "text"),
        lambda: RememberInput("lone \ud800 surrogate"),
        lambda: KnownAs(" "),
        lambda: ObservationDraft(text="x", episode_id="nope"),
    ],
)
def test_bad_drafts_raise_draft_validation_error(build: object) -> None:
    with pytest.raises((DraftValidationError, ValueError)) as info:
        build()  # type: ignore[operator]
    assert isinstance(info.value, ValueError)


def test_draft_validation_error_is_a_value_error_naming_the_field() -> None:
    with pytest.raises(DraftValidationError) as info:
        EpisodeDraft(occurred_at=datetime(2024, 1, 1))
    assert info.value.field == "occurred_at"
    assert "timezone" in str(info.value)


def test_drafts_are_frozen_and_evolve() -> None:
    draft = DerivedMemoryDraft(DerivedType.REFLECTION, "text")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        draft.text = "other"  # type: ignore[misc]
    assert attrs.evolve(draft, text="other").text == "other"
    assert DerivedType("reflection") is DerivedType.REFLECTION


def test_canonical_content_ignores_id_order_and_offsets() -> None:
    a, b = MemoryId.new(), MemoryId.new()
    base = {"id": MemoryId.new(), "summary": "s", "created_at": NOW}
    e1 = Episode(occurred_at=NOW, participant_entity_ids=[a, b], **base)  # type: ignore[arg-type]
    plus2 = timezone(timedelta(hours=2))
    e2 = Episode(occurred_at=NOW.astimezone(plus2), participant_entity_ids=[b, a, a], **base)  # type: ignore[arg-type]
    assert content_equal(e1, e2)
    assert e2.occurred_at.utcoffset() == timedelta(hours=2)  # offset preserved on the object
    e3 = attrs.evolve(e1, summary="other")
    assert not content_equal(e1, e3)
    assert canonical_content(e1) != canonical_content(e3)


def test_name_normalisation_ignores_case_width_spacing_but_not_sharp_s() -> None:
    assert normalise_name("  ＢＯＢ   Smith ") == "bob smith"
    assert normalise_name("Straße") != normalise_name("STRASSE")
    assert name_occurs_in("Bob", "Did bob call?")
    assert not name_occurs_in("Bob", "Bobby called")
    assert name_occurs_in("Mary Ann", "I met mary   ann today")


def test_prepare_derives_links_and_index_entries() -> None:
    notion = MemoryId.new()
    item = RememberInput(
        "I adopted a cat", speaker_entity_id=notion, summary="Adoption day"
    ).with_derived_memory(DerivedMemoryDraft(DerivedType.CLAIM, "has a cat", entity_ids=[notion]))
    plan = build_plan("c", item, NOW)
    relations = sorted(link.relation.value for link in plan.derived_links)
    assert relations == ["about", "derived_from", "derived_from", "has_observation", "involves"]
    indexed = {entry.object_type.value for entry in plan.index_entries}
    assert indexed == {"episode", "observation", "derived"}
    # the summary equal to the text is an echo: no episode vector
    echo = build_plan("c", RememberInput("same", summary="same"), NOW)
    assert {e.object_type.value for e in echo.index_entries} == {"observation"}


def test_caller_about_link_is_not_duplicated() -> None:
    notion = MemoryId.new()
    derived_id = MemoryId.new()
    from charmem import EntityDraft, RememberDrafts

    drafts = RememberDrafts(
        entities=[EntityDraft(id=notion)],
        derived=[
            DerivedMemoryDraft(
                DerivedType.REFLECTION, "x", id=derived_id, entity_ids=[notion], given_by_application=True
            )
        ],
        links=[LinkDraft(derived_id, Relation.ABOUT, notion)],
    )
    plan = build_plan("c", drafts, NOW)
    assert [link.relation for link in plan.derived_links] == []
    assert [link.relation for link in plan.links] == [Relation.ABOUT]


def test_plan_json_round_trip_is_exact() -> None:
    notion = MemoryId.new()
    item = RememberInput('quotes """ {braces} \\ 한국어 🎉 \u200b', occurred_at=NOW).with_derived_memory(
        DerivedMemoryDraft(
            DerivedType.REFLECTION,
            "named",
            entity_ids=[notion],
            assertions=[BeliefAssertion(notion, KnownAs("Straße"))],
            given_by_application=True,
        )
    )
    plan = build_plan("c", item, NOW)
    again = RememberWritePlan.from_json(plan.to_json())
    assert again == plan
    with pytest.raises(DraftValidationError):
        RememberWritePlan.from_json('{"format_version": 99}')
    with pytest.raises(DraftValidationError):
        RememberWritePlan.from_json("{not json")


def test_scores_closer_than_the_resolution_rank_as_ties() -> None:
    """float32 and float64 stores score one memory a few 1e-8 apart: the canonical tie-break decides."""
    when = datetime(2024, 1, 1, tzinfo=UTC)
    episode, observation = MemoryId(uuid.uuid4()), MemoryId(uuid.uuid4())
    noisy = [
        (0.25 + 3e-8, when, ObjectType.OBSERVATION, observation),
        (0.25, when, ObjectType.EPISODE, episode),
    ]
    ranked = sorted(noisy, key=lambda row: rank_key(*row))
    assert [row[2] for row in ranked] == [ObjectType.EPISODE, ObjectType.OBSERVATION]  # type order, not noise
    assert rank_key(0.5 + 1e-5, when, ObjectType.OBSERVATION, observation) < rank_key(
        0.5, when, ObjectType.EPISODE, episode
    )  # a real difference still ranks first
    assert rank_key(0.5, when + timedelta(seconds=1), ObjectType.OBSERVATION, observation) < rank_key(
        0.5, when, ObjectType.EPISODE, episode
    )  # then newer first
