"""No duplicate lines in a pack: a memory that repeats a higher-ranked item's text is omitted.

Items, sections, links, render and ``to_dict()`` agree on it.
"""

from __future__ import annotations

from datetime import UTC, datetime

from charmem import (
    CharacterMemory,
    CorrectionTarget,
    CorrectMemoryDraft,
    DerivedMemoryDraft,
    DerivedType,
    ObjectType,
    RememberInput,
    ReplacementDerivedMemoryDraft,
    RetrievalContext,
)

DUPLICATE_TEXT = "duplicate_text"

WHEN = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)


async def test_a_derived_memory_restating_its_utterance_is_one_item(memory: CharacterMemory) -> None:
    outcome = await memory.remember(
        RememberInput("Ana is allergic to peanuts.", occurred_at=WHEN).with_derived_memory(
            DerivedMemoryDraft(DerivedType.CLAIM, "Ana is  allergic to peanuts.\n")  # same after spacing
        )
    )
    observation, claim = outcome.object_ids[1], outcome.object_ids[-1]
    pack = await memory.retrieve("Is Ana allergic to peanuts?")

    texts = [" ".join(item.text.split()) for item in pack.items]
    assert texts.count("Ana is allergic to peanuts.") == 1
    kept = next(item.id for item in pack.items if item.id in (observation, claim))
    dropped = claim if kept == observation else observation
    assert dropped not in {item.id for item in pack.items}
    omission = next(o for o in pack.omissions if o.id == dropped)
    assert (omission.reason, omission.duplicate_of) == (DUPLICATE_TEXT, kept)
    assert all(dropped not in ids for ids in pack.sections.values())
    assert kept in pack.sections["salient_observations" if kept == observation else "derived_memories"]
    assert all(dropped not in (link.from_id, link.to_id) for link in pack.links)
    assert pack.telemetry["omitted_duplicate_text"] == 1
    assert pack.telemetry["items"] == len(pack.items)
    assert pack.render().count("allergic to peanuts") == 1

    data = pack.to_dict()
    assert {"id": str(dropped), "reason": "duplicate_text", "duplicate_of": str(kept)} in data["omissions"]
    assert str(dropped) not in [item["id"] for item in data["items"]]
    assert all("duplicate_of" not in o for o in data["omissions"] if o["reason"] != "duplicate_text")


async def test_the_pack_fills_with_distinct_texts_up_to_max_items(memory: CharacterMemory) -> None:
    for text in (
        "We flew kites at the beach.",
        "We flew kites at the beach.",
        "Kites flew high at the beach.",
    ):
        await memory.remember(RememberInput(text, occurred_at=WHEN))
    pack = await memory.retrieve(RetrievalContext(query="kites at the beach", max_items=2))
    assert sorted(item.text for item in pack.items) == [
        "Kites flew high at the beach.",
        "We flew kites at the beach.",
    ]
    assert [o.reason for o in pack.omissions] == [DUPLICATE_TEXT]


async def test_case_and_currency_are_not_duplicates(memory: CharacterMemory) -> None:
    await memory.remember(
        RememberInput("Ana is allergic to peanuts.", occurred_at=WHEN).with_derived_memory(
            DerivedMemoryDraft(DerivedType.CLAIM, "ANA IS ALLERGIC TO PEANUTS.")
        )
    )
    pack = await memory.retrieve("Is Ana allergic to peanuts?")
    assert pack.omissions == ()
    assert len([item for item in pack.items if item.object_type is not ObjectType.EPISODE]) == 2

    # a superseded belief beside its current replacement of the same text is not a repeat: the
    # lines differ by "(superseded)", and leaving either out would hide the change of currency
    outcome = await memory.remember(
        RememberInput("We talked about lunch.", occurred_at=WHEN).with_derived_memory(
            DerivedMemoryDraft(DerivedType.CLAIM, "Ben avoids gluten.")
        )
    )
    claim = outcome.object_ids[-1]
    replaced = await memory.correct(
        CorrectMemoryDraft(CorrectionTarget.derived_memory(claim), "restated").with_replacement(
            ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "Ben avoids gluten.")
        )
    )
    pack = await memory.retrieve(RetrievalContext(query="Ben avoids gluten", include_superseded=True))
    same = {item.id: item.status.value for item in pack.items if item.text == "Ben avoids gluten."}
    assert sorted(same.values()) == ["current", "superseded"]
    assert same[claim] == "superseded"
    assert set(same) - {claim} == set(replaced.replacement_ids)
    assert DUPLICATE_TEXT not in {o.reason for o in pack.omissions}


def test_same_text_key_is_the_rendered_text_with_spacing_collapsed() -> None:
    from charmem.domain.retrieval import DUPLICATE_TEXT as REASON
    from charmem.domain.retrieval import same_text_key

    assert REASON == DUPLICATE_TEXT
    assert same_text_key("  I like\ttea.\r\n") == same_text_key("I like tea.") == "I like tea."
    assert same_text_key("I like\u2028tea.\x00") == "I like tea."
    assert same_text_key("I like tea.") != same_text_key("i like tea.")
    assert same_text_key("I like tea.") != same_text_key("I like tea!")
