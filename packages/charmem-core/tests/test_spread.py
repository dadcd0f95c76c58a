"""The spread of the ranking across episodes (:func:`charmem.domain.scoring.spread_discounts`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from charmem import CharacterMemory, EpisodeDraft, ObservationDraft, RememberDrafts, RetrievalContext
from charmem.domain.ids import MemoryId
from charmem.domain.scoring import DEFAULT_SCORING, spread_discounts


def test_the_memories_of_one_episode_are_discounted_one_step_each() -> None:
    assert spread_discounts(["a", "a", "a"], [1.0, 0.9, 0.8], 0.5) == [1.0, 0.5, 0.25]


def test_another_episode_comes_before_a_second_memory_of_the_first() -> None:
    # the neighbouring turn (0.95) of the best root would outrank the next root (0.83)
    discounts = spread_discounts(["a", "a", "b"], [1.0, 0.95, 0.83], 0.8)
    assert discounts == [1.0, 0.8, 1.0]
    assert 0.83 * discounts[2] > 0.95 * discounts[1]


def test_a_factor_of_one_changes_nothing() -> None:
    assert spread_discounts(["a", "a", "b", "a"], [1.0, 0.9, 0.8, 0.7], 1.0) == [1.0] * 4


def test_no_memories_no_discounts() -> None:
    assert spread_discounts([], [], 0.8) == []


@given(
    st.lists(st.tuples(st.sampled_from("abcd"), st.floats(0.01, 1.0)), max_size=30),
    st.floats(0.1, 1.0),
)
def test_each_episode_keeps_its_order_and_the_first_of_each_keeps_its_score(
    ranked: list[tuple[str, float]], factor: float
) -> None:
    ranked.sort(key=lambda pair: -pair[1])
    groups = [g for g, _ in ranked]
    scores = [s for _, s in ranked]
    discounts = spread_discounts(groups, scores, factor)
    for group in set(groups):
        mine = [d for g, d in zip(groups, discounts, strict=True) if g == group]
        assert mine == pytest.approx([factor**n for n in range(len(mine))])


# ------------------------------------------------------------------------------ in retrieval


async def test_a_turn_that_came_along_is_discounted_per_such_turn_of_its_episode_before_it(
    memory: CharacterMemory,
) -> None:
    t0 = datetime(2024, 4, 1, 9, 0, tzinfo=UTC)  # before the fixture clock's now
    episodes, observations = [], []
    for e, topic in enumerate(["garden", "boat", "kitchen"]):
        episode = MemoryId.new()
        episodes.append(EpisodeDraft(id=episode, occurred_at=t0 + timedelta(days=e)))
        for n in range(5):
            text = f"The {topic} needed fresh paint." if n == 2 else f"Tea and biscuits, round {e}{n}."
            observations.append(
                ObservationDraft(text=text, episode_id=episode, observed_at=t0 + timedelta(days=e, minutes=n))
            )
    await memory.remember(RememberDrafts(episodes=episodes, observations=observations))
    # three roots: the rest of each episode comes along as the turns around them
    context = RetrievalContext(query="fresh paint for the boat", trace=True, candidate_limit=3)
    pack = await memory.retrieve(context)
    seen: dict[MemoryId, int] = {}
    by_text = {o.text: o.episode_id for o in observations}
    came_along = [by_text[i.text] for i in pack.items if "vector" not in i.signals]
    assert len(set(came_along[:4])) > 1, "the turns that came along span more than one episode"
    for item in pack.items:
        assert item.trace is not None
        factors = dict(item.trace.factors)
        if "vector" in item.signals:  # recalled by the query itself: never discounted
            assert "episode_repeat" not in factors
            continue
        episode = by_text[item.text]
        expected = DEFAULT_SCORING.episode_repeat_factor ** seen.get(episode, 0)
        assert factors.get("episode_repeat", 1.0) == pytest.approx(expected)
        seen[episode] = seen.get(episode, 0) + 1
    assert any(n > 1 for n in seen.values()), "some episode had several turns come along"
