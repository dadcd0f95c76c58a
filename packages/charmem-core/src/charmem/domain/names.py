"""An index of ``KnownAs`` names: which names a query mentions, at a cost that does not grow with them.

The matching rule is :func:`charmem.domain.rules.name_occurs_in`; the index applies it to every
stored name at once. Building it normalises each name once (work in the number of names, done
once per collection and extended as names are written); a lookup looks up, in a dict, the
substrings of the normalised query that lie on word boundaries and have the length of some
name (:func:`charmem.domain.rules.name_spans`): its work is in the query's length times the
number of distinct name lengths, never in the number of names.

A name that is also an ordinary English word ("Will", "May", "Hope", "Mark") occurs in many
queries that do not mean it ("When will my flight leave?"). :func:`name_use` tells, from the
query's own letter case, whether an occurrence is used as a name: retrieval counts it as a name
cue in full only then (:data:`WORD_NAMES` lists such words).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Final, TypeVar

import attrs

from charmem.domain.ids import MemoryId
from charmem.domain.rules import name_spans, normalise_name, spaced, word_bounded_starts
from charmem.domain.timecues import month_in_a_date

__all__ = ["MONTH_NAMES", "WORD_NAMES", "NameAssertion", "NameIndex", "NameUse", "name_use"]

K = TypeVar("K")

#: A stored ``KnownAs`` assertion: ``(belief_id, subject_id, name)`` as spelled.
NameAssertion = tuple[MemoryId, MemoryId, str]


@attrs.frozen
class NameIndex:
    """Stored ``KnownAs`` assertions by normalised name (immutable: extend with :meth:`with_added`).

    Attributes:
        by_name: normalised name -> the assertions of that name, sorted.
        lengths: the distinct lengths (in characters) of the normalised names.
        by_subject: notion id -> every assertion naming it (empty names too), sorted.
    """

    by_name: Mapping[str, tuple[NameAssertion, ...]] = attrs.field(factory=dict)
    lengths: frozenset[int] = frozenset()
    by_subject: Mapping[MemoryId, tuple[NameAssertion, ...]] = attrs.field(factory=dict)

    @classmethod
    def of(cls, assertions: Iterable[NameAssertion]) -> NameIndex:
        """The index of ``assertions`` (names that normalise to nothing are left out)."""
        return cls().with_added(assertions)

    def with_added(self, assertions: Iterable[NameAssertion]) -> NameIndex:
        """This index with ``assertions`` too (each once); normalises only the new names."""
        added = set(assertions)
        if not added:
            return self
        grouped: dict[str, set[NameAssertion]] = {}
        for assertion in added:
            grouped.setdefault(normalise_name(assertion[2]), set()).add(assertion)
        grouped.pop("", None)  # a name that normalises to nothing never occurs
        return NameIndex(
            _merged(self.by_name, grouped),
            self.lengths | {len(key) for key in grouped},
            _merged(self.by_subject, _by_subject(added)),
        )

    def naming(self, subjects: Iterable[MemoryId]) -> list[NameAssertion]:
        """The assertions naming one of ``subjects`` (current or not), sorted."""
        return sorted(a for subject in set(subjects) for a in self.by_subject.get(subject, ()))

    def named(self, name: str) -> list[NameAssertion]:
        """The assertions of exactly ``name`` under :func:`~charmem.domain.rules.normalise_name`, sorted."""
        return sorted(self.by_name.get(normalise_name(name), ()))

    def occurring_in(self, text: str) -> list[NameAssertion]:
        """The assertions whose name occurs in ``text``, sorted.

        A name occurs as :func:`~charmem.domain.rules.name_occurs_in` says.
        """
        spans = name_spans(normalise_name(text), self.lengths)
        return sorted(a for span in spans for a in self.by_name.get(span, ()))


def _by_subject(assertions: Iterable[NameAssertion]) -> dict[MemoryId, set[NameAssertion]]:
    grouped: dict[MemoryId, set[NameAssertion]] = {}
    for assertion in assertions:
        grouped.setdefault(assertion[1], set()).add(assertion)
    return grouped


def _merged(
    kept: Mapping[K, tuple[NameAssertion, ...]], added: Mapping[K, set[NameAssertion]]
) -> dict[K, tuple[NameAssertion, ...]]:
    """``kept`` (copied, not changed) with the ``added`` assertions under their keys, sorted."""
    merged = dict(kept)
    for key, group in added.items():
        merged[key] = tuple(sorted(group.union(merged.get(key, ()))))
    return merged


class NameUse(enum.Enum):
    """How a query uses a name that occurs in it (:func:`name_use`)."""

    #: As a name: the name is no ordinary word, or the query capitalises it inside a sentence.
    NAME = "name"
    #: Perhaps as a name: an ordinary word too, and the case tells nothing (it starts a sentence,
    #: or the query is written in one case only).
    UNMARKED = "unmarked"
    #: As the ordinary word: written in lower case in a query that uses capitals elsewhere.
    WORD = "word"


#: Ordinary English words (normalised) that are also given names or nicknames: a query uses one as
#: a name only where its case says so (:func:`name_use`). A name of several words ("Will Smith")
#: is never one of them.
# fmt: off
WORD_NAMES: Final = frozenset((
    "ace", "amber", "angel", "april", "art", "august", "autumn", "bear", "bill", "bob", "buck",
    "bud", "bunny", "candy", "carol", "chase", "chip", "chuck", "cliff", "crystal", "daisy", "dale",
    "dash", "dawn", "dean", "destiny", "don", "dot", "drew", "duke", "earl", "echo", "faith",
    "forest", "frank", "gale", "gene", "ginger", "glen", "grace", "grant", "guy", "happy",
    "harmony", "hazel", "heath", "holly", "honey", "honor", "hope", "hunter", "iris", "ivy", "jack",
    "jade", "jay", "jewel", "joy", "june", "king", "kitty", "lark", "lily", "lucky", "major",
    "mark", "max", "may", "melody", "mercy", "miles", "misty", "nick", "olive", "opal", "pat",
    "patience", "pearl", "penny", "pepper", "pierce", "poppy", "raven", "ray", "reed", "rich",
    "river", "rob", "robin", "rocky", "rod", "rose", "ruby", "rusty", "sage", "sandy", "scout",
    "skip", "sky", "storm", "sue", "summer", "sunny", "violet", "wade", "will", "winter", "wren",
))
# fmt: on

#: The names among :data:`WORD_NAMES` that are months: always capitalised in English, so a capital
#: tells nothing about them, and in a date they are the month ("May 2023", "9 May", "May, 2023":
#: :func:`charmem.domain.timecues.month_in_a_date`).
MONTH_NAMES: Final = frozenset(("april", "august", "june", "may"))

#: What may stand between a sentence's end and its first word: spaces, opening quotes, brackets,
#: list bullets.
_OPENERS: Final = " \"'\u201c\u2018([{-*\u2022"
#: What ends a sentence: its marks, and the end of a line.
_SENTENCE_ENDS: Final = ".!?:\u2026\n"


def name_use(name: str, text: str) -> NameUse | None:
    """How ``text`` uses ``name``, or None when the name does not occur in it.

    A name occurs as :func:`charmem.domain.rules.name_occurs_in` says (case, width and spacing
    ignored). A name whose normalised form is not in :data:`WORD_NAMES` is always
    :attr:`NameUse.NAME`. For one that is, each occurrence is read by the case of its first
    letter in ``text`` (width and spacing normalised, case kept): a capital that does not start a
    sentence is a name, a small letter the ordinary word, a capital starting a sentence (or a text
    with no capitals, or no small letters, or the word in capitals throughout) tells nothing. A
    sentence starts the text or a line, or follows ``.!?:…``, with spaces, opening quotes,
    brackets or a list bullet (``-``, ``*``, ``•``) between. A month (:data:`MONTH_NAMES`) is
    always capitalised, so its capital tells nothing, and in a date
    (:func:`~charmem.domain.timecues.month_in_a_date`: "May 2023", "9 May") it is the ordinary
    word. Any occurrence used as a name makes the answer :attr:`NameUse.NAME`; else any that
    tells nothing makes it :attr:`NameUse.UNMARKED`.

    Args:
        name: the name as spelled (a ``KnownAs`` name).
        text: the query.

    Returns:
        NameUse | None: the strongest use of any occurrence; None when it does not occur.
    """
    needle = normalise_name(name)
    cased = _lined(text)
    lowered = cased.lower().replace("\n", " ")  # a line break is a space between words
    starts = word_bounded_starts(needle, lowered)
    if not starts:
        return None
    if needle not in WORD_NAMES:
        return NameUse.NAME
    cased_text = any(c.isupper() for c in cased) and any(c.islower() for c in cased)
    if not cased_text or len(lowered) != len(cased):  # no case to read, or no way to align it
        return NameUse.UNMARKED
    uses = {_use_at(cased, start, len(needle), month=needle in MONTH_NAMES) for start in starts}
    return min(uses, key=[NameUse.NAME, NameUse.UNMARKED, NameUse.WORD].index)


def _lined(text: str) -> str:
    r"""``text`` as :func:`~charmem.domain.rules.spaced` makes it, but a line break is ``\n``.

    A run of whitespace holding a line break becomes one ``\n``, any other run one space.
    """
    return "\n".join(line for line in map(spaced, text.splitlines()) if line)


def _use_at(cased: str, start: int, length: int, *, month: bool) -> NameUse:
    """The use the occurrence ``cased[start:start + length]`` shows (:func:`name_use`)."""
    word = cased[start : start + length]
    if word[0].islower():
        return NameUse.WORD
    if month and month_in_a_date(cased[:start], cased[start + length :]):
        return NameUse.WORD
    if month or (len(word) > 1 and word.isupper()):  # a month's capital, or shouting: no evidence
        return NameUse.UNMARKED
    before = cased[:start].rstrip(_OPENERS)
    return NameUse.UNMARKED if not before or before[-1] in _SENTENCE_ENDS else NameUse.NAME
