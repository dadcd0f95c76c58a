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
    EpisodeDraft,
    MemoryId,
    ObservationDraft,
    RememberDrafts,
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


async def test_every_utterance_a_chain_of_corrections_left_behind_ranks_below_the_last(
    memory: CharacterMemory,
) -> None:
    ids = await _world(memory, grounded_on_the_move=True)  # Oslo -> Bergen
    later = T0 + timedelta(days=80)
    moved = await memory.remember(
        RememberInput("We relocated to Trondheim last month.", occurred_at=later, created_at=later)
    )
    again = await memory.correct(
        CorrectMemoryDraft(
            CorrectionTarget.derived_memory(ids["correction"]),
            "Moved again.",
            correction_origin=SourceProvenanceReference(observation_ids=[moved.object_ids[1]]),
            recorded_at=later + timedelta(days=1),
        ).with_replacement(ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "Lives in Trondheim now."))
    )
    [trondheim] = again.replacement_ids
    pack = await memory.retrieve(QUESTION)
    order = _order(pack)
    for left_behind in (ids["oslo"], ids["move"]):
        assert left_behind in order
        assert order.index(left_behind) > order.index(trondheim)
        assert "corrected_source" in pack.items[order.index(left_behind)].signals


async def test_what_corrected_a_memory_stays_above_it_after_the_spread(memory: CharacterMemory) -> None:
    """The correction's source came along with turns of its episode (the spread discounts it);
    the utterance left behind was recalled by the query itself (never discounted): the cap is
    taken from the final scores."""
    first = await memory.remember(
        RememberInput(
            "I live in the flat by the harbour in Oslo.", occurred_at=T0, created_at=T0
        ).with_derived_memory(DerivedMemoryDraft(DerivedType.CLAIM, "Lives in Oslo.", created_at=T0))
    )
    _episode, oslo, claim = first.object_ids
    t1 = T0 + timedelta(days=40)
    episode = MemoryId.new()
    texts = [
        "The new flat is small but bright.",
        "Ana helped carry the sofa into the flat.",
        "The flat has a view of the mountains.",
        "We moved to Bergen; I live there now.",
        "Lives in a flat near the fish market.",
        "Pizza for dinner on the floor.",
    ]
    turns = [
        ObservationDraft(text=t, episode_id=episode, observed_at=t1 + timedelta(minutes=n), created_at=t1)
        for n, t in enumerate(texts)
    ]
    outcome = await memory.remember(
        RememberDrafts(episodes=[EpisodeDraft(id=episode, occurred_at=t1, created_at=t1)], observations=turns)
    )
    move = outcome.object_ids[1 + 3]
    corrected = await memory.correct(
        CorrectMemoryDraft(
            CorrectionTarget.derived_memory(claim),
            "Moved.",
            correction_origin=SourceProvenanceReference(observation_ids=[move]),
            recorded_at=t1 + timedelta(days=1),
        ).with_replacement(
            ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "Lives in a flat now, not by the harbour.")
        )
    )
    [correction] = corrected.replacement_ids
    checked = 0
    for question in ["Which flat do I live in, the one by the harbour?", "Tell me about the flat I live in."]:
        for limit in range(1, 8):
            pack = await memory.retrieve(RetrievalContext(query=question, candidate_limit=limit))
            order = _order(pack)
            if oslo not in order or "corrected_source" not in pack.items[order.index(oslo)].signals:
                continue
            checked += 1
            for above in (move, correction):
                if above in order:
                    assert order.index(above) < order.index(oslo), (question, limit)
    assert checked, "some retrieval found the utterance left behind"


def test_the_cap_is_taken_after_the_spread_discounted_what_corrected() -> None:
    """Ranking alone: the correction's source is the second turn that came along from its
    episode (spread x0.8); the utterance left behind was recalled by the query (never spread)."""
    from charmem.domain.model import Observation
    from charmem.domain.scoring import DEFAULT_SCORING
    from charmem.usecases.retrieval import Candidate, Recall
    from charmem.usecases.retrieval_assembly import rank

    recall = Recall(RetrievalContext(query="where do I live"), graph=None)  # type: ignore[arg-type]
    episode, other = MemoryId.new(), MemoryId.new()

    def turn(score: float, signal: str, in_episode: MemoryId) -> MemoryId:
        obs = Observation(
            id=MemoryId.new(), episode_id=in_episode, text=f"turn {score}", observed_at=T0, created_at=T0
        )
        recall.chosen[obs.id] = Candidate(obs, score, {signal})
        return obs.id

    oslo = turn(1.0, "vector", other)
    turn(0.9, "context:adjacent", episode)
    move = turn(0.85, "context:adjacent", episode)
    recall.corrected[oslo] = frozenset({move})
    ranked = rank(recall, reference=T0)
    scores = {c.obj.id: c.score for c in ranked}
    assert scores[move] == 0.85 * DEFAULT_SCORING.episode_repeat_factor
    assert scores[oslo] == scores[move] * DEFAULT_SCORING.corrected_source_factor
    assert [c.obj.id for c in ranked].index(oslo) > [c.obj.id for c in ranked].index(move)
