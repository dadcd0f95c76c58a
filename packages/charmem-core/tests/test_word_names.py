"""Names that are ordinary words ("Will", "May", "Hope") count as a name cue where the query means the name.

The rule (:func:`charmem.domain.names.name_use`) reads the query's own letter case; retrieval weighs
the notion's members by it: in full as a name, ``word_name_weight`` where case tells nothing,
not at all for the ordinary word.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from charmem import (
    CharacterMemory,
    MemoryId,
    RememberInput,
)
from charmem.domain.names import MONTH_NAMES, WORD_NAMES, NameUse, name_use
from charmem.domain.rules import name_occurs_in
from charmem.domain.timecues import time_cues
from charmem_contract._lifecycle_steps import LifecycleSteps

T0 = datetime(2024, 4, 1, 9, 0, tzinfo=UTC)  # before the fixture clock's now


@pytest.mark.parametrize(
    ("query", "use"),
    [
        ("When will my flight leave?", NameUse.WORD),
        ("What did Will say about the trip?", NameUse.NAME),
        ("I asked whether Will, or maybe will power, decides.", NameUse.NAME),
        ("Will my flight leave on time?", NameUse.UNMARKED),  # a sentence's first word
        ("It rained. Will called after.", NameUse.UNMARKED),
        ('She said: "Will is late."', NameUse.UNMARKED),
        ("what did will say", NameUse.UNMARKED),  # one case only: no evidence
        ("WHAT DID WILL SAY", NameUse.UNMARKED),
        ("what did ｗｉｌｌ say, Mum?", NameUse.WORD),  # width normalised, case kept
        ("willow and goodwill", None),  # no occurrence on word boundaries
        ("When WILL my flight leave, Mum?", NameUse.UNMARKED),  # capitals throughout: shouting
    ],
)
def test_the_case_of_a_word_name_in_the_query_tells_how_it_is_used(query: str, use: NameUse | None) -> None:
    assert name_use("Will", query) is use


@pytest.mark.parametrize(
    ("query", "use"),
    [
        ("- Will it rain?", NameUse.UNMARKED),  # a list item starts a sentence
        ("* Will it rain?", NameUse.UNMARKED),
        ("\u2022 Will it rain?", NameUse.UNMARKED),
        ("Notes:\n  - Will it rain?", NameUse.UNMARKED),
        ("I'm tired\nWill you come", NameUse.UNMARKED),  # so does a line
        ("I'm tired\r\n\n  \"Will you come", NameUse.UNMARKED),
        ("I'm tired -\nWill you come", NameUse.UNMARKED),
        ("I asked - Will said no", NameUse.NAME),  # a dash inside a line is no bullet
        ("Mary-Will said no", NameUse.NAME),
        ("I asked\nwhether Will said no", NameUse.NAME),
        ("I'm tired\nwill you come", NameUse.WORD),
    ],
)
def test_a_line_or_list_item_starts_a_sentence(query: str, use: NameUse) -> None:
    assert name_use("Will", query) is use


def test_a_name_of_several_words_occurs_across_a_line_break() -> None:
    assert name_use("Will Hope", "I met\nWill\nHope") is NameUse.NAME


@given(st.sampled_from(["Will", "may", "Will Hope"]), st.text(), st.text(), st.text())
def test_a_name_is_read_where_it_occurs(name: str, lead: str, between: str, tail: str) -> None:
    """Reading the case keeps line breaks; finding the name still ignores spacing."""
    text = f"{lead}{name}{between}{tail}"
    assert (name_use(name, text) is None) is (not name_occurs_in(name, text))


@pytest.mark.parametrize(
    ("query", "use"),
    [
        ("What happened in May?", NameUse.UNMARKED),  # a month is always capitalised
        ("What did May say?", NameUse.UNMARKED),
        ("What did we do in May 2023?", NameUse.WORD),  # part of a date
        ("On 9 May we hiked, didn't we?", NameUse.WORD),
        ("It was the 3rd of May, Mum.", NameUse.WORD),
        ("may I ask, Mum?", NameUse.WORD),
    ],
)
def test_a_month_is_a_name_only_unmarked_and_never_in_a_date(query: str, use: NameUse) -> None:
    assert "may" in MONTH_NAMES
    assert name_use("May", query) is use


@pytest.mark.parametrize(
    ("date", "read"),
    [
        ("May 2023", True),
        ("May, 2023", True),
        ("May. 2023", True),
        ("May\n2023", True),
        ("9 May 2023", True),
        ("9th of May, 2023", True),
        ("9TH OF May 2023", True),
        ("May 9, 2023", True),
        ("May 9th 2023", True),
        ("the 3rd of May", False),  # a date without a year: not a time cue, still no name
        ("9 May", False),
        ("9TH May", False),
        ("May 9", False),
        ("May '23", False),
        ("May \u201923", False),
        ("May, '23", False),
    ],
)
def test_a_month_in_any_date_form_is_no_name(date: str, read: bool) -> None:
    """Every form the time cues read as a day or month of a year, and dates they leave alone."""
    query = f"What did we do on {date}, Mum?"
    assert bool(time_cues(query)) is read
    assert name_use("May", query) is NameUse.WORD


_JOINS = st.text(alphabet=" ,.'\u2019\n\tofOF", max_size=5)


@given(
    st.sampled_from(sorted(MONTH_NAMES)),
    st.sampled_from(["", "9", "9th", "31", "2023"]),
    _JOINS,
    _JOINS,
    st.sampled_from(["", "9", "9th", "2023", "'23"]),
)
@example("may", "", "", ", ", "2023")
def test_a_month_the_time_cues_read_in_a_date_is_no_name(
    month: str, before: str, join_before: str, join_after: str, after: str
) -> None:
    """What :func:`time_cues` reads as a day or a month of a year holds the month: the name rule agrees."""
    query = f"What did we do on {before}{join_before}{month.title()}{join_after}{after} there?"
    if any(end - start < timedelta(days=300) for start, end in time_cues(query)):
        assert name_use(month.title(), query) is NameUse.WORD


@pytest.mark.parametrize(
    "query", ["when did caroline call", "CAROLINE?", "Caroline called.", "did caroline, Mum?"]
)
def test_a_name_that_is_no_ordinary_word_is_always_a_name(query: str) -> None:
    assert "caroline" not in WORD_NAMES
    assert name_use("Caroline", query) is NameUse.NAME


def test_a_name_of_several_words_is_a_name_even_when_each_is_a_word() -> None:
    assert name_use("Will  Hope", "when will hope come?") is NameUse.NAME


@given(
    st.sampled_from(sorted(WORD_NAMES - MONTH_NAMES)),
    st.sampled_from(["Yesterday I saw", "Did you see", "Ask"]),
)
def test_every_word_name_capitalised_inside_a_sentence_is_a_name_and_lower_case_is_the_word(
    word: str, lead: str
) -> None:
    assert name_use(word.title(), f"{lead} {word.title()} today?") is NameUse.NAME
    assert name_use(word.title(), f"{lead} {word} today?") is NameUse.WORD


# ------------------------------------------------------------------------------ in retrieval
# (``memory``: the reference stack of conftest.py)


async def _person(memory: CharacterMemory, name: str, said: list[str]) -> tuple[MemoryId, list[MemoryId]]:
    """A person notion known as ``name`` and one episode per text mentioning them."""
    notion, _belief = await LifecycleSteps._notion_with_name(memory, name)
    observations = []
    for n, text in enumerate(said):
        outcome = await memory.remember(
            RememberInput(text, occurred_at=T0 + timedelta(hours=n), mentioned_entity_ids=[notion])
        )
        observations.append(outcome.object_ids[1])
    return notion, observations


async def _world(memory: CharacterMemory) -> tuple[MemoryId, list[MemoryId], MemoryId]:
    notion, about_will = await _person(
        memory,
        "Will",
        [f"Our chat about gardening tools, part {n}." for n in range(6)],
    )
    flight = await memory.remember(
        RememberInput(
            "My flight to Lisbon will leave on time, at 7 from gate 12.", occurred_at=T0 + timedelta(days=1)
        )
    )
    return notion, about_will, flight.object_ids[1]


def _named(pack: object, members: list[MemoryId]) -> list[object]:
    return [i for i in pack.items if "named_notion" in i.signals and i.id in members]  # type: ignore[attr-defined]


async def test_the_ordinary_word_does_not_bring_the_notion(memory: CharacterMemory) -> None:
    _notion, about_will, flight = await _world(memory)
    pack = await memory.retrieve("When will my flight leave?")
    assert pack.items[0].id == flight
    assert not _named(pack, about_will)
    assert not [i for i in pack.items if "named_notion" in i.signals], "no name cue at all"


async def test_the_name_meant_as_a_name_brings_the_notion(memory: CharacterMemory) -> None:
    notion, about_will, _flight = await _world(memory)
    pack = await memory.retrieve("What did Will tell me?")
    assert len(_named(pack, about_will)) == len(about_will)
    assert notion in {e.id for e in pack.entities}


async def test_an_unmarked_word_name_comes_below_what_the_question_finds(memory: CharacterMemory) -> None:
    _notion, about_will, flight = await _world(memory)
    unmarked = await memory.retrieve("Will my flight leave on time?")
    assert unmarked.items[0].id == flight
    assert _named(unmarked, about_will), "case tells nothing: the name still counts, weighed less"
    meant = await memory.retrieve("Did Will ask when my flight leaves?")
    scores = {i.id: i.score for i in meant.items}
    weighed = {i.id: i.score for i in unmarked.items}
    member = about_will[0]
    assert weighed[member] < scores[member]
