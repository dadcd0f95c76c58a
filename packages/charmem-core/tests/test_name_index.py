"""The name index finds exactly the names the matching rule finds, whatever the script or spacing."""

from __future__ import annotations

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from charmem.domain.ids import MemoryId
from charmem.domain.names import NameAssertion, NameIndex
from charmem.domain.rules import name_occurs_in, normalise_name

# Latin with the sharp s and its capital, dotted I, full-width letters, Cyrillic, Greek, CJK,
# Arabic, a combining accent, digits, underscore, punctuation and several kinds of space.
ALPHABET = "abSsßẞİiıＢｂЖжΣσς张伟李محمد\u0301_07.,-+!?'’ \t\u3000\n"

texts = st.text(alphabet=ALPHABET, max_size=12)


def regex_occurs(name: str, text: str) -> bool:
    """The matching rule as a regular expression (the rule's first form): the oracle."""
    needle = normalise_name(name)
    if not needle:
        return False
    pattern = r"(?<!\w)" + re.escape(needle) + r"(?!\w)"
    return re.search(pattern, normalise_name(text)) is not None


@st.composite
def names_and_query(draw: st.DrawFn) -> tuple[list[str], str]:
    names = draw(st.lists(texts, max_size=8))
    pieces = draw(st.lists(st.one_of(texts, st.sampled_from(names or [""])), max_size=6))
    separators = draw(st.lists(st.sampled_from(["", " ", "  ", ", ", "-", "x"]), min_size=len(pieces)))
    return names, "".join(s + p for s, p in zip(separators, pieces, strict=False))


@settings(max_examples=400)
@given(names_and_query())
@example((["Straße", "STRASSE"], "die strasse hier"))
@example((["Bob", "bob smith", "Mary  Ann"], "Did BOB   Smith meet mary ann? Bobby no."))
@example((["C++", "+", ".net"], "I like c++ and .net, a+b"))
@example((["张伟", "伟"], "我和张伟 伟"))
def test_the_index_finds_what_the_rule_finds(case: tuple[list[str], str]) -> None:
    names, query = case
    assertions: list[NameAssertion] = [(MemoryId.new(), MemoryId.new(), name) for name in names]
    expected = sorted(a for a in assertions if regex_occurs(a[2], query))
    assert NameIndex.of(assertions).occurring_in(query) == expected
    assert [a for a in assertions if name_occurs_in(a[2], query)] == [
        a for a in assertions if regex_occurs(a[2], query)
    ]


@given(st.lists(texts, max_size=6), st.lists(texts, max_size=6), texts)
def test_an_index_extended_equals_one_built_at_once(first: list[str], then: list[str], query: str) -> None:
    old = [(MemoryId.new(), MemoryId.new(), name) for name in first]
    new = [(MemoryId.new(), MemoryId.new(), name) for name in then]
    extended = NameIndex.of(old).with_added(new)
    assert extended == NameIndex.of([*old, *new])
    assert extended.occurring_in(query) == NameIndex.of([*old, *new]).occurring_in(query)


def test_sharp_s_case_width_spacing() -> None:
    street = (MemoryId.new(), MemoryId.new(), "Straße")
    bob = (MemoryId.new(), MemoryId.new(), "ＢＯＢ  Smith")
    index = NameIndex.of([street, bob])
    assert index.occurring_in("the STRASSE") == []
    assert index.occurring_in("the straße, with bob smith!") == sorted([street, bob])
    assert index.occurring_in("bob smithy") == []


@given(st.lists(st.tuples(st.integers(0, 3), texts), max_size=10), st.sets(st.integers(0, 4)))
def test_naming_lists_every_assertion_about_the_subjects(
    named: list[tuple[int, str]], asked: set[int]
) -> None:
    notions = [MemoryId.new() for _ in range(5)]
    assertions = [(MemoryId.new(), notions[i], name) for i, name in named]
    wanted = {notions[i] for i in asked}
    assert NameIndex.of(assertions).naming(wanted) == sorted(a for a in assertions if a[1] in wanted)
