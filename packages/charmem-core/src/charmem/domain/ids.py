"""Memory identity: :class:`MemoryId`, stable across restarts (docs/concepts/memory-model.md)."""

from __future__ import annotations

import operator
import uuid
from typing import Any, Final

import attrs

from charmem.errors import DraftValidationError

__all__ = ["CHARMEM_NAMESPACE", "ID_ORDER", "MemoryId", "as_memory_id"]

#: The uuid5 namespace under which :meth:`MemoryId.deterministic` derives ids.
CHARMEM_NAMESPACE = uuid.UUID("6f1c3a52-8e0b-5d2a-9c57-2f0c6f4d9a11")

_SEPARATOR = "\x1f"  # unit separator: cannot be confused with text inside a part


def _to_uuid(value: Any) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, MemoryId):
        return value.value
    if isinstance(value, str):
        try:
            return uuid.UUID(value)
        except ValueError as exc:
            raise DraftValidationError(
                f"{value!r} is not a UUID; pass a uuid.UUID, its string form, or use "
                "MemoryId.deterministic(namespace, *parts)",
                field="id",
            ) from exc
    raise DraftValidationError(
        f"a MemoryId needs a uuid.UUID or its string, not {type(value).__name__}", field="id"
    )


@attrs.frozen(repr=False, cache_hash=True)
class MemoryId:
    """The id of a memory object or link: a UUID, unique across all object types.

    ``MemoryId(uuid_or_string)`` accepts a :class:`uuid.UUID` or its string form; ``str(id)`` is the
    canonical lowercase hyphenated form. Ids order by their canonical string, the tie-breaker of
    every canonical ordering in charmem.

    Raises:
        DraftValidationError: the value is not a UUID.
    """

    value: uuid.UUID = attrs.field(converter=_to_uuid)

    @classmethod
    def new(cls) -> MemoryId:
        """Return a fresh random (uuid4) id."""
        return cls(uuid.uuid4())

    @classmethod
    def deterministic(cls, namespace: str | MemoryId, *parts: object) -> MemoryId:
        """Derive a stable uuid5 id from a namespace and parts.

        The same namespace and parts always give the same id, in every process, so callers can
        retain identity across restarts without storing ids (docs/concepts/memory-model.md).

        Args:
            namespace: a caller namespace (for example the collection name or a conversation id).
            *parts: values joined by their ``str`` form; ids contribute their canonical form.

        Returns:
            MemoryId: a version-5 UUID under :data:`CHARMEM_NAMESPACE`.
        """
        text = _SEPARATOR.join(str(part) for part in (namespace, *parts))
        return cls(uuid.uuid5(CHARMEM_NAMESPACE, text))

    def __str__(self) -> str:
        return str(self.value)

    # Ordering compares the UUIDs' integers: the same order as their canonical strings (fixed
    # width, lowercase hex), written out because ids are sorted on every hot path and attrs'
    # generic ``order=True`` methods cost several times more per comparison (measured).
    def __lt__(self, other: object) -> bool:
        if other.__class__ is not MemoryId:
            return NotImplemented
        return self.value.int < other.value.int

    def __le__(self, other: object) -> bool:
        if other.__class__ is not MemoryId:
            return NotImplemented
        return self.value.int <= other.value.int

    def __gt__(self, other: object) -> bool:
        if other.__class__ is not MemoryId:
            return NotImplemented
        return self.value.int > other.value.int

    def __ge__(self, other: object) -> bool:
        if other.__class__ is not MemoryId:
            return NotImplemented
        return self.value.int >= other.value.int

    def __repr__(self) -> str:
        return f"MemoryId('{self.value}')"


#: Sort key giving :class:`MemoryId` order (its UUID's integer) compared in C, for large sorts:
#: ``sorted(ids, key=ID_ORDER)`` equals ``sorted(ids)``, several times faster (one Python-level
#: ``__lt__`` per comparison otherwise: sorting 12,000 ids took ~0.1 s, measured).
ID_ORDER: Final = operator.attrgetter("value.int")


def as_memory_id(value: MemoryId | uuid.UUID | str) -> MemoryId:
    """Coerce a :class:`MemoryId`, :class:`uuid.UUID` or UUID string to a :class:`MemoryId`.

    Raises:
        DraftValidationError: the value is not a UUID.
    """
    return value if isinstance(value, MemoryId) else MemoryId(value)
