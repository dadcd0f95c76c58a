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

import attrs

from charmem.domain.ids import MemoryId
from charmem.domain.rules import name_spans, normalise_name

__all__ = ["NameAssertion", "NameIndex"]

#: A stored ``KnownAs`` assertion: ``(belief_id, subject_id, name)`` as spelled.
NameAssertion = tuple[MemoryId, MemoryId, str]


@attrs.frozen
class NameIndex:
    """Stored ``KnownAs`` assertions by normalised name (immutable: extend with :meth:`with_added`).

    Attributes:
        by_name: normalised name -> the assertions of that name, sorted.
        lengths: the distinct lengths (in characters) of the normalised names.
    """

    by_name: Mapping[str, tuple[NameAssertion, ...]] = attrs.field(factory=dict)
    lengths: frozenset[int] = frozenset()

    @classmethod
    def of(cls, assertions: Iterable[NameAssertion]) -> NameIndex:
        """The index of ``assertions`` (names that normalise to nothing are left out)."""
        return cls().with_added(assertions)

    def with_added(self, assertions: Iterable[NameAssertion]) -> NameIndex:
        """This index with ``assertions`` too (each once); normalises only the new names."""
        grouped: dict[str, set[NameAssertion]] = {}
        for assertion in assertions:
            key = normalise_name(assertion[2])
            if key:
                grouped.setdefault(key, set()).add(assertion)
        if not grouped:
            return self
        by_name = dict(self.by_name)
        for key, added in grouped.items():
            by_name[key] = tuple(sorted(added.union(by_name.get(key, ()))))
        return NameIndex(by_name, self.lengths | {len(key) for key in grouped})

    def occurring_in(self, text: str) -> list[NameAssertion]:
        """The assertions whose name occurs in ``text``, sorted.

        A name occurs as :func:`~charmem.domain.rules.name_occurs_in` says.
        """
        spans = name_spans(normalise_name(text), self.lengths)
        return sorted(a for span in spans for a in self.by_name.get(span, ()))
