"""The turns that come with a recalled observation: the reply to a question, and the others.

Rules: :func:`charmem.domain.rules.asks_question`, :func:`charmem.domain.rules.replies_to` and
:func:`charmem.domain.scoring.context_score`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from charmem import (
    CharacterMemory,
    EntityDraft,
    EpisodeDraft,
    ObservationDraft,
    RememberDrafts,
    RetrievalContext,
)
from charmem.domain.ids import MemoryId
from charmem.domain.model import Entity, Observation
from charmem.domain.rules import asks_question, replies_to, spoken_question
from charmem.domain.scoring import DEFAULT_SCORING, ScoringPolicy, context_score

T0 = datetime(2024, 4, 1, 9, 0, tzinfo=UTC)  # before the fixture clock's now


@pytest.mark.parametrize(
    ("text", "asks"),
    [
        ("Where did you hide the key?", True),
        ("Where did you go?  ", True),
        ("Where did you go? [image: a lake at dawn]", True),
        ("You did?!", True),
        ("Really?!!", True),
        ("Was it you‽", True),
        ("Which one ?", True),
        ("どこに行きましたか？", True),
        ("هل أنت بخير؟", True),
        ("Really? That's great.", False),
        ("I went to the lake.", False),
        ("I went to the lake...", False),
        ("Wow!", False),
        ("no marks at all", False),
        ("", False),
        ("行きました。", False),
        ("Are you coming❓", True),
        ("Τι ώρα είναι\u037e", True),  # the Greek question mark (NFC turns it into ";", not read)
        ("Which one﹖", True),
        ("Really? That's great", True),
        ("Where did you go? [image: a lake.]", False),
        ("?" * 100_000 + " done.", False),
        ("Here is the recipe https://example.com/r?id=3", False),  # marks inside a token
        ("It costs 3.5", False),
        ("Where did you go? see https://example.com/a?b=1", True),
        ("Is it at example.com?", True),
        ("どこ？行こう", True),  # no spaces in the script: its own marks end sentences
        ("a.b" * 50_000, False),
    ],
)
def test_an_utterance_asks_when_its_last_sentence_mark_is_a_question_mark(text: str, asks: bool) -> None:
    assert asks_question(text) is asks


_QUESTION_MARKS = "?\u203d\u2047\u2048\u2049\uff1f\ufe56\u061f\u037e\u2753\u2754"
_MARKS = ".!\u2026\u3002\uff01" + _QUESTION_MARKS


@given(st.text(alphabet=st.sampled_from([*_MARKS, "a", "7", "字", " ", "]", "\n", "😊"]), max_size=30))
def test_asking_is_decided_by_the_last_run_of_sentence_marks(text: str) -> None:
    runs = [
        match.group()
        for match in re.finditer(f"[{_MARKS}]+", text)
        if match.group()[-1] not in ".!?" or not text[match.end() : match.end() + 1].isalnum()
    ]
    expected = bool(runs) and any(mark in runs[-1] for mark in _QUESTION_MARKS)
    assert asks_question(text) is expected


def _turn(text: str, speaker: MemoryId | None, minute: int = 0) -> Observation:
    return Observation(
        id=MemoryId.new(),
        episode_id=MemoryId.new(),
        text=text,
        observed_at=T0 + timedelta(minutes=minute),
        speaker_entity_id=speaker,
        created_at=T0,
    )


def test_the_next_turn_by_someone_else_replies_to_a_question() -> None:
    ann, bob = MemoryId.new(), MemoryId.new()
    assert replies_to(_turn("Under the pot.", bob, 1), _turn("Where is the key?", ann))


def test_a_second_turn_of_the_asker_or_a_statement_has_no_reply() -> None:
    ann, bob = MemoryId.new(), MemoryId.new()
    assert not replies_to(_turn("I mean the red one.", ann, 1), _turn("Where is the key?", ann))
    assert not replies_to(_turn("Nice.", bob, 1), _turn("The key is under the pot.", ann))
    entity = Entity(id=MemoryId.new(), entity_type="person", created_at=T0)
    assert not replies_to(entity, _turn("Where is the key?", ann))
    assert not replies_to(None, _turn("Where is the key?", ann))


def test_without_speakers_or_an_order_there_is_no_question_and_no_reply() -> None:
    ann, bob = MemoryId.new(), MemoryId.new()
    # a whole exchange stored as one text, as an assistant loop does, is no spoken question
    exchange = _turn("User: I met Ana.\nAssistant: Will you visit her?", None)
    assert asks_question(exchange.text) and not spoken_question(exchange)
    assert not replies_to(_turn("User: Yes.", None, 1), exchange)
    assert not replies_to(_turn("Under the pot.", None, 1), _turn("Where is the key?", ann))
    # turns observed at the same instant have no order: neither replies to the other
    assert not replies_to(_turn("Under the pot.", bob, 0), _turn("Where is the key?", ann, 0))


def test_a_reply_keeps_the_questions_score_and_other_turns_rank_below() -> None:
    policy = ScoringPolicy(context_decay=0.9, reply_factor=1.0, context_aside_factor=0.5)
    assert context_score(0.6, 1, reply=True, policy=policy) == pytest.approx(0.6)
    assert context_score(0.6, 1, reply=False, policy=policy) == pytest.approx(0.6 * 0.9 * 0.5)
    assert context_score(0.6, 2, reply=False, policy=policy) == pytest.approx(0.6 * 0.81 * 0.5)
    default = DEFAULT_SCORING
    assert context_score(1.0, 1, reply=False, policy=default) < context_score(
        1.0, 1, reply=True, policy=default
    )


# ------------------------------------------------------------------------------ in retrieval


async def _conversation(memory: CharacterMemory, lines: list[tuple[str, str]]) -> dict[str, MemoryId]:
    """One episode of ``(speaker, text)`` turns in order; returns text -> observation id."""
    speakers = {name: MemoryId.new() for name, _ in lines}
    episode = MemoryId.new()
    observations = [
        ObservationDraft(
            id=MemoryId.new(),
            text=text,
            episode_id=episode,
            observed_at=T0 + timedelta(minutes=n),
            speaker_entity_id=speakers[name],
        )
        for n, (name, text) in enumerate(lines)
    ]
    await memory.remember(
        RememberDrafts(
            entities=[EntityDraft(id=i, entity_type="person") for i in speakers.values()],
            episodes=[EpisodeDraft(id=episode, occurred_at=T0)],
            observations=observations,
        )
    )
    return {o.text: o.id for o in observations if o.id is not None}


async def test_the_reply_to_a_recalled_question_comes_with_it_and_framing_turns_below(
    memory: CharacterMemory,
) -> None:
    ids = await _conversation(
        memory,
        [
            ("ann", "Tea and biscuits again today."),
            ("bob", "Lovely weather for the walk."),
            ("ann", "Where did you hide the spare garage key?"),
            ("bob", "Under the blue flowerpot by the door."),
            ("ann", "Thanks, see you tomorrow."),
        ],
    )
    context = RetrievalContext(query="where is the spare garage key hidden", candidate_limit=1, trace=True)
    pack = await memory.retrieve(context)
    by_id = {item.id: item for item in pack.items}
    question = by_id[ids["Where did you hide the spare garage key?"]]
    reply = by_id[ids["Under the blue flowerpot by the door."]]
    before = by_id[ids["Lovely weather for the walk."]]
    assert "vector" in question.signals and "vector" not in reply.signals
    assert question.trace is not None and reply.trace is not None
    policy = DEFAULT_SCORING
    # the question asks, its reply tells: the reply keeps the question's recalled score
    assert dict(question.trace.factors)["question"] == pytest.approx(policy.question_factor)
    assert "question" not in dict(reply.trace.factors)
    recalled = question.score / policy.question_factor
    assert reply.score == pytest.approx(recalled * policy.reply_factor)
    assert [item.id for item in pack.items][:2] == [reply.id, question.id]
    assert before.score < question.score
    assert before.score <= recalled * policy.context_decay * policy.context_aside_factor


async def test_the_turn_after_a_recalled_statement_is_no_reply(memory: CharacterMemory) -> None:
    ids = await _conversation(
        memory,
        [
            ("ann", "The spare garage key is under the blue flowerpot."),
            ("bob", "Good to know, thanks."),
        ],
    )
    pack = await memory.retrieve(RetrievalContext(query="spare garage key flowerpot", candidate_limit=1))
    by_id = {item.id: item for item in pack.items}
    statement, after = (
        by_id[ids["The spare garage key is under the blue flowerpot."]],
        by_id[ids["Good to know, thanks."]],
    )
    expected = statement.score * DEFAULT_SCORING.context_decay * DEFAULT_SCORING.context_aside_factor
    assert after.score == pytest.approx(expected)


async def test_a_reply_that_asks_back_lends_its_own_reply_no_more_than_it_was_recalled_at(
    memory: CharacterMemory,
) -> None:
    ids = await _conversation(
        memory,
        [
            ("ann", "Where did you go hiking last weekend?"),
            ("bob", "Why do you ask?"),
            ("ann", "curious"),
        ],
    )
    context = RetrievalContext(query="where did you go hiking", trace=True)
    pack = await memory.retrieve(context)
    by_id = {item.id: item for item in pack.items}
    question = by_id[ids["Where did you go hiking last weekend?"]]
    curious = by_id[ids["curious"]]
    # "Why do you ask?" came along as the reply; its own reply must not outrank what was asked
    assert [item.id for item in pack.items].index(question.id) < [item.id for item in pack.items].index(
        curious.id
    )
    assert curious.score < question.score
