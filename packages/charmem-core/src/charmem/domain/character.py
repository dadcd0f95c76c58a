"""Whose memory a collection is: the character identity rule."""

from __future__ import annotations

from charmem.domain.ids import MemoryId
from charmem.errors import CharacterIdentityMismatchError

__all__ = ["check_character_identity"]


def check_character_identity(collection: str, recorded: MemoryId | None, given: MemoryId | None) -> None:
    """Refuse an open that names another character than the one ``collection`` records.

    The rule: a collection records the character id of its first open that gives one (the id
    need not name a stored notion yet); a later open giving another id is refused; an open
    giving none is always allowed, whatever is recorded.

    Args:
        collection: the collection's name (for the message).
        recorded: the id the collection records after this open recorded one if it could.
        given: the id this open asked for (``None``: none).

    Raises:
        CharacterIdentityMismatchError: ``given`` and ``recorded`` are two different ids.
    """
    if given is None or recorded is None or recorded == given:
        return
    raise CharacterIdentityMismatchError(
        f"collection {collection!r} is the memory of character {recorded}, not {given}: open it "
        "with that character_id (or none), or give this character its own collection",
        collection=collection,
        recorded=recorded,
        given=given,
    )
