"""An index of ``KnownAs`` names: which names a query mentions, at a cost that does not grow with them.

The matching rule is :func:`charmem.domain.rules.name_occurs_in`; the index applies it to every
stored name at once. Building it normalises each name once (work in the number of names, done
once per collection and extended as names are written); a lookup looks up, in a dict, the
substrings of the normalised query that lie on word boundaries and have the length of some
name (:func:`charmem.domain.rules.name_spans`): its work is in the query's length times the
number of distinct name lengths, never in the number of names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

import attrs

from charmem.domain.ids import MemoryId
from charmem.domain.rules import name_spans, normalise_name

__all__ = ["NameAssertion", "NameIndex"]

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
