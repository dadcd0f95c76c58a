"""After a correction, what grounded only the old belief ranks below the correction and its sources.

"I live in Oslo" grounded the claim "Lives in Oslo"; a correction grounded on "We moved to
Bergen" replaced it. For a question about where the character lives, the Oslo utterance is still
a current memory (utterances are never superseded) and may look closest to the question, but it
must not outrank what corrected it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from charmem import (
    CharacterMemory,
    ContinuityContextPack,
    CorrectionTarget,
    CorrectMemoryDraft,
    DerivedMemoryDraft,
    DerivedType,
    MemoryId,
    RememberInput,
    ReplacementDerivedMemoryDraft,
    RetrievalContext,
    SourceProvenanceReference,
)

T0 = datetime(2024, 2, 1, 9, 0, tzinfo=UTC)  # 97 days before the fixture clock's now
QUESTION = "Where do I live now: in the flat by the harbour in Oslo?"


async def _world(memory: CharacterMemory, *, grounded_on_the_move: bool) -> dict[str, MemoryId]:
    first = await memory.remember(
        RememberInput(
            "I live in the flat by the harbour in Oslo.", occurred_at=T0, created_at=T0
        ).with_derived_memory(DerivedMemoryDraft(DerivedType.CLAIM, "Lives in Oslo.", created_at=T0))
    )
    _episode, oslo, claim = first.object_ids
    moved = await memory.remember(
        RememberInput(
            "We moved to Bergen; I live there now.",
            occurred_at=T0 + timedelta(days=40),
            created_at=T0 + timedelta(days=40),
        )
    )
    move = moved.object_ids[1]
    origin = SourceProvenanceReference(observation_ids=[move]) if grounded_on_the_move else None
    outcome = await memory.correct(
        CorrectMemoryDraft(
            CorrectionTarget.derived_memory(claim),
            "Moved.",
            correction_origin=origin,
            recorded_at=T0 + timedelta(days=41),
        ).with_replacement(ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "Lives in Bergen now."))
    )
    [correction] = outcome.replacement_ids
    return {"oslo": oslo, "claim": claim, "move": move, "correction": correction}


def _order(pack: ContinuityContextPack) -> list[MemoryId]:
    return [item.id for item in pack.items]


async def test_a_source_of_the_old_belief_only_ranks_below_the_correction_and_its_sources(
    memory: CharacterMemory,
) -> None:
    ids = await _world(memory, grounded_on_the_move=True)
    pack = await memory.retrieve(QUESTION)
    order = _order(pack)
    assert {ids["oslo"], ids["correction"], ids["move"]} <= set(order)
    assert order.index(ids["oslo"]) > order.index(ids["correction"])
    assert order.index(ids["oslo"]) > order.index(ids["move"])
    item = next(i for i in pack.items if i.id == ids["oslo"])
    assert "corrected_source" in item.signals
    assert ids["claim"] not in order  # superseded: an omission, as always


async def test_a_source_the_correction_still_stands_on_keeps_its_rank(memory: CharacterMemory) -> None:
    ids = await _world(memory, grounded_on_the_move=False)  # grounded on the target's sources
    pack = await memory.retrieve(QUESTION)
    oslo = next(i for i in pack.items if i.id == ids["oslo"])
    assert "corrected_source" not in oslo.signals
    assert _order(pack)[0] == ids["oslo"]


async def test_before_the_correction_was_recorded_nothing_was_left_behind(memory: CharacterMemory) -> None:
    ids = await _world(memory, grounded_on_the_move=True)
    then = await memory.retrieve(RetrievalContext(query=QUESTION, as_of=T0 + timedelta(days=40, hours=1)))
    oslo = next(i for i in then.items if i.id == ids["oslo"])
    assert "corrected_source" not in oslo.signals
    assert _order(then)[0] == ids["oslo"]
