"""A time cue ranks what happened in its period as a list of its own (:func:`period_lifts`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from charmem import CharacterMemory, EpisodeDraft, ObservationDraft, RememberDrafts, RetrievalContext
from charmem.domain.ids import MemoryId
from charmem.domain.scoring import period_lifts
from charmem.domain.timecues import happened_in
from charmem.testing import HashingEmbeddingProvider
from charmem_contract import reference_memory


def test_the_first_memory_of_the_period_scores_like_the_first_of_all() -> None:
    assert period_lifts([0.9, 0.8, 0.5, 0.3, 0.2], [False, False, False, True, True]) == [
        0.9,
        0.8,
        0.5,
        0.9,
        0.8,
    ]


def test_a_memory_of_the_period_already_ranked_high_keeps_its_score() -> None:
    assert period_lifts([0.9, 0.8, 0.5], [True, False, True]) == [0.9, 0.8, 0.8]


def test_nothing_inside_changes_nothing() -> None:
    assert period_lifts([0.9, 0.8], [False, False]) == [0.9, 0.8]
    assert period_lifts([], []) == []


@given(st.lists(st.tuples(st.floats(0.0, 1.0), st.booleans()), max_size=40))
def test_lifts_never_lower_and_keep_the_periods_own_order(pairs: list[tuple[float, bool]]) -> None:
    pairs.sort(key=lambda pair: -pair[0])
    scores = [s for s, _ in pairs]
    inside = [i for _, i in pairs]
    lifted = period_lifts(scores, inside)
    assert all(new >= old for new, old in zip(lifted, scores, strict=True))
    assert [n for n, i in zip(lifted, inside, strict=True) if not i] == [s for s, i in pairs if not i]
    mine = [n for n, i in zip(lifted, inside, strict=True) if i]
    assert mine == sorted(mine, reverse=True)
    assert all(n >= scores[j] for j, n in enumerate(mine))


def test_a_period_is_half_open() -> None:
    start, end = datetime(2024, 3, 15, tzinfo=UTC), datetime(2024, 3, 18, tzinfo=UTC)
    assert happened_in(start, [(start, end)])
    assert not happened_in(end, [(start, end)])
    assert not happened_in(start, [])


async def test_the_named_day_comes_first_however_far_down_its_meaning_ranks(memory: CharacterMemory) -> None:
    t0 = datetime(2024, 1, 8, 18, 0, tzinfo=UTC)  # before the fixture clock's now
    episodes, observations = [], []
    for day in range(20):  # the fence, talked about on other days (none near March 16), in more words
        episode = MemoryId.new()
        episodes.append(EpisodeDraft(id=episode, occurred_at=t0 + timedelta(days=3 * day)))
        observations.append(
            ObservationDraft(
                text=f"The garden fence is old and the garden fence needs paint, note {day}.",
                episode_id=episode,
                observed_at=t0 + timedelta(days=3 * day),
            )
        )
    then = datetime(2024, 3, 16, 18, 0, tzinfo=UTC)
    episode = MemoryId.new()
    episodes.append(EpisodeDraft(id=episode, occurred_at=then))
    fixed = ObservationDraft(
        id=MemoryId.new(), text="We fixed the gate of the fence today.", episode_id=episode, observed_at=then
    )
    observations.append(fixed)
    await memory.remember(RememberDrafts(episodes=episodes, observations=observations))

    query = "what happened with the garden fence on 16 March 2024"
    plain = await memory.retrieve(RetrievalContext(query=query, time_cues=False, max_items=40))
    ids = [item.id for item in plain.items]
    assert ids.index(fixed.id) > 10, "by meaning alone the day's memory ranks far down"

    cued = await memory.retrieve(RetrievalContext(query=query, trace=True))
    first = cued.items[0]
    assert first.id == fixed.id
    assert first.trace is not None
    assert "time_cue_rank" in first.signals
    assert dict(first.trace.factors)["time_cue"] == pytest.approx(2.0)
    product = first.trace.combined
    for _name, factor in first.trace.factors:
        product *= factor
    assert first.score == pytest.approx(product), "the trace explains the score"


async def test_a_candidate_scoring_zero_is_lifted_without_error(memory: CharacterMemory) -> None:
    day = datetime(2024, 3, 16, 12, 0, tzinfo=UTC)
    for text, when in (("hiking with my dog", day - timedelta(days=15)), ("zebra crossing", day)):
        episode = MemoryId.new()
        await memory.remember(
            RememberDrafts(
                episodes=[EpisodeDraft(id=episode, occurred_at=when)],
                observations=[ObservationDraft(text=text, episode_id=episode)],
            )
        )
    query = "hiking dog on 16 March 2024"
    pack = await memory.retrieve(RetrievalContext(query=query, score_floor=-1.0, trace=True))
    by_text = {item.text: item for item in pack.items}
    zebra = by_text["zebra crossing"]  # nothing in common with the query: cosine 0
    assert "time_cue_rank" in zebra.signals
    assert pack.items[0].text == "zebra crossing", "the day's only memory ranks with the best"


class _OppositeQueries(HashingEmbeddingProvider):
    """Embeds every query as the opposite of its words: each candidate's cosine is negative."""

    async def embed_query(self, text: str) -> list[float]:
        return [-value for value in self.embed(text)]


async def test_a_negative_similarity_ranks_as_nothing_in_common_and_factors_keep_their_sense() -> None:
    memory = reference_memory("neg", _OppositeQueries())
    try:
        for text, when in (
            ("alpha beta gamma.", datetime(2024, 1, 10, 12, tzinfo=UTC)),
            ("alpha beta gamma!", datetime(2024, 3, 6, 12, tzinfo=UTC)),  # last week, same vector
        ):
            episode = MemoryId.new()
            await memory.remember(
                RememberDrafts(
                    episodes=[EpisodeDraft(id=episode, occurred_at=when, created_at=when)],
                    observations=[
                        ObservationDraft(text=text, episode_id=episode, observed_at=when, created_at=when)
                    ],
                )
            )
        query = "alpha beta gamma last week"
        as_of = datetime(2024, 3, 13, tzinfo=UTC)
        context = RetrievalContext(query=query, score_floor=-1.0, as_of=as_of, trace=True)
        pack = await memory.retrieve(context)
    finally:
        await memory.close()
    assert [item.occurred_at.month for item in pack.items] == [3, 1], "last week's memory does not rank last"
    for item in pack.items:
        assert item.score >= 0.0
        assert item.trace is not None
        product = item.trace.combined
        for _name, factor in item.trace.factors:
            product *= factor
        assert item.score == pytest.approx(product)
