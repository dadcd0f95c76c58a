"""Obligations as recall sees them: who owes, relative to the character, and whether it is settled.

An obligation is a ``commitment`` or an ``open_loop`` derived memory
(:data:`~charmem.domain.rules.OBLIGATION_TYPES`). Its parties are
:class:`~charmem.domain.model.Actor` (who owes) and :class:`~charmem.domain.model.Counterpart`
(to whom) assertions; a ``resolves`` or ``fulfills_commitment`` link from a resolver to it settles
it. Both rules are pure functions of what retrieval already read.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime
from typing import Final

from charmem.domain.ids import MemoryId
from charmem.domain.model import Actor, Counterpart, DerivedMemory, MemoryLink, MemoryObject, Relation
from charmem.domain.pack import ObligationDirection
from charmem.domain.rules import OBLIGATION_TYPES

__all__ = ["RESOLVING_RELATIONS", "is_obligation", "obligation_direction", "settled_by"]

#: The relations that settle the matter they point to (from the resolver to the matter).
RESOLVING_RELATIONS: Final = (Relation.FULFILLS_COMMITMENT, Relation.RESOLVES)


def is_obligation(obj: MemoryObject) -> bool:
    """Whether ``obj`` is an obligation: a ``commitment`` or ``open_loop`` derived memory."""
    return isinstance(obj, DerivedMemory) and obj.derived_type in OBLIGATION_TYPES


def obligation_direction(obj: MemoryObject, character_id: MemoryId | None) -> ObligationDirection | None:
    """Who owes in an obligation, relative to the character.

    The rule: ``OWED_BY_CHARACTER`` when an :class:`~charmem.domain.model.Actor` assertion's
    subject is the character, ``OWED_TO_CHARACTER`` when a
    :class:`~charmem.domain.model.Counterpart` assertion's is, else ``None`` (neither party is the
    character, no character id is recorded, or ``obj`` is no obligation). One subject never holds
    both roles in one memory (plans refusing it: :func:`charmem.domain.rules.belief_breaches`),
    so at most one of the two holds.

    Args:
        obj: a recalled memory.
        character_id: the collection's character (``CharacterMemory.character_id``), or ``None``.

    Returns:
        ObligationDirection | None: the direction, or ``None``.
    """
    if character_id is None or not is_obligation(obj):
        return None
    assert isinstance(obj, DerivedMemory)
    for assertion in obj.assertions:
        if assertion.subject != character_id:
            continue
        if isinstance(assertion.predicate, Actor):
            return ObligationDirection.OWED_BY_CHARACTER
        if isinstance(assertion.predicate, Counterpart):
            return ObligationDirection.OWED_TO_CHARACTER
    return None


def settled_by(
    obj: MemoryObject,
    links: Iterable[MemoryLink],
    as_of: datetime | None = None,
    later: Collection[MemoryId] = (),
) -> tuple[MemoryId, ...]:
    """Whether an obligation is settled, and by what: the ids of its resolvers (empty: open).

    The rule: an obligation is settled by every memory with a ``resolves`` or
    ``fulfills_commitment`` link to it (:data:`RESOLVING_RELATIONS`), recorded by ``as_of`` when
    given. The resolver's currency does not matter: forgetting (suppressing) or correcting a
    resolver appends a lifecycle record and leaves its links, so the matter stays settled; only
    erasure (``charmem.admin.purge``) removes the link, and with it the settlement. A forgotten
    resolver's id is still returned: an id is no content (the pack already names forgotten
    memories by id among its omissions), the resolver itself is never recalled, and without it
    a settled matter would read as an open one. A memory that is no obligation is never settled
    here (its links are ordinary links). In a situated context (a scene, an activity or a time
    range), a resolver that happened after the reference time does not settle it yet
    (``later``): on the scene's day the promise is still open.

    Args:
        obj: a recalled memory.
        links: links touching it (others, and links of other relations, are ignored).
        as_of: the record time of an ``as_of`` view, or ``None``.
        later: resolvers that happened after the reference time of a situated context.

    Returns:
        tuple[MemoryId, ...]: the resolvers' ids, sorted and unique; empty when not settled.
    """
    if not is_obligation(obj):
        return ()
    return tuple(
        sorted(
            {
                link.from_id
                for link in links
                if link.to_id == obj.id
                and link.from_id != obj.id
                and link.relation in RESOLVING_RELATIONS
                and (as_of is None or link.created_at <= as_of)
                and link.from_id not in later
            }
        )
    )
