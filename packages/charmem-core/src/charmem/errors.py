"""The error hierarchy of charmem (DESIGN §8).

Every error a caller can receive from charmem is a :class:`CharmemError`. Adapters translate their
driver's exceptions into these, chaining the cause (``raise BackendError(...) from exc``). Each
subclass carries structured fields (``key``, ``reasons``, ``kind``) besides its message, and every
message says what was wrong and what to do.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence

__all__ = [
    "BackendError",
    "BackupFormatError",
    "CharmemError",
    "CollectionNotEmptyError",
    "ConfigurationError",
    "DimensionMismatchError",
    "DraftValidationError",
    "EmbedderMismatchError",
    "IdConflictError",
    "InsufficientStorageError",
    "LifecycleErrorKind",
    "LifecycleValidationError",
    "PlanValidationError",
    "PurgeTargetError",
    "PurgedMemoryError",
    "StoreCorruptedError",
    "StoreLockedError",
]


class CharmemError(Exception):
    """Root of every error charmem raises on purpose."""


class ConfigurationError(CharmemError):
    """A setting is missing, malformed, or names an adapter that is not installed.

    Attributes:
        key: the settings key at fault (for example ``"SPARQL_QUERY_ENDPOINT"``), or ``None``
            when the problem is not tied to one key.
    """

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class DraftValidationError(CharmemError, ValueError):
    """A draft was built with a bad field (naive datetime, blank text, salience out of range).

    Raised at construction, before anything reaches a store.

    Attributes:
        field: the name of the offending field.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class PlanValidationError(CharmemError):
    """A write plan failed validation against the graph; nothing was written.

    Attributes:
        reasons: candidate id (canonical string) -> the reasons that candidate is invalid.
    """

    def __init__(self, message: str, *, reasons: Mapping[str, Sequence[str]] | None = None) -> None:
        super().__init__(message)
        self.reasons: dict[str, tuple[str, ...]] = {
            key: tuple(value) for key, value in (reasons or {}).items()
        }


class _NamedIdsError(PlanValidationError):
    """A plan validation error naming the ids at fault (``ids``, canonical strings)."""

    def __init__(
        self,
        message: str,
        *,
        ids: Sequence[str] = (),
        reasons: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        super().__init__(message, reasons=reasons)
        self.ids = tuple(ids)


class IdConflictError(_NamedIdsError):
    """An id is already stored with different content (DESIGN §4.3); nothing was written.

    Attributes:
        ids: the conflicting ids as canonical strings.
    """


class PurgedMemoryError(_NamedIdsError):
    """A write names a memory that was purged (``charmem.admin.purge``); nothing was written.

    A purged id keeps a tombstone in the graph so that replaying an old plan, correction or link
    cannot bring the erased memory back, and new memories cannot be grounded on it.

    Attributes:
        ids: canonical strings of the candidates that are, or refer to, purged memories (for a
            lifecycle operation or a graph write: the purged ids themselves).
    """


class PurgeTargetError(CharmemError):
    """``charmem.admin.purge`` was asked to purge something it cannot; nothing was written.

    Attributes:
        ids: the offending ids as canonical strings (unknown ids, links, lifecycle records).
        reasons: id -> why it cannot be purged.
    """

    def __init__(self, message: str, *, reasons: Mapping[str, str]) -> None:
        super().__init__(message)
        self.reasons = dict(reasons)
        self.ids = tuple(sorted(self.reasons))


class CollectionNotEmptyError(CharmemError):
    """An import target already holds data; nothing was written.

    Attributes:
        collection: the collection name.
        counts: store name (``"graph statements"``, ``"vectors"``, ``"stats rows"``) -> how many
            entries it holds.
    """

    def __init__(self, message: str, *, collection: str, counts: Mapping[str, int]) -> None:
        super().__init__(message)
        self.collection = collection
        self.counts = dict(counts)


class BackupFormatError(CharmemError):
    """A backup is incomplete, damaged, of an unknown format, or of another collection.

    Raised by ``charmem.admin.import_collection`` (and the graph port's ``import_graph``) before
    anything is written.
    """


class LifecycleErrorKind(enum.Enum):
    """Why a lifecycle draft (correct, forget, link) was refused; names follow the spec."""

    MISSING_GIVEN_REPLACEMENT = "missing_given_replacement"
    EMPTY_RATIONALE = "empty_rationale"
    EMPTY_CORRECTION_ORIGIN = "empty_correction_origin"
    EMPTY_REPLACEMENT_TEXT = "empty_replacement_text"
    MISSING_REPLACEMENT_SOURCE = "missing_replacement_source"
    INVALID_BELIEF = "invalid_belief"
    MISSING_CORRECTION_TARGET = "missing_correction_target"
    MISSING_FORGET_TARGET = "missing_forget_target"
    UNSUPPORTED_LIFECYCLE_TARGET = "unsupported_lifecycle_target"


class LifecycleValidationError(CharmemError):
    """A lifecycle operation was refused before anything was written.

    Attributes:
        kind: the :class:`LifecycleErrorKind` naming the rule that failed.
    """

    def __init__(self, kind: LifecycleErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class DimensionMismatchError(CharmemError):
    """A vector store holds vectors of another size than the embedding provider produces.

    Attributes:
        expected: the size stored in the collection (dimensions).
        actual: the size offered now (dimensions).
    """

    def __init__(self, message: str, *, expected: int, actual: int) -> None:
        super().__init__(message)
        self.expected = expected
        self.actual = actual


class EmbedderMismatchError(CharmemError):
    """A collection was indexed by another embedding model of the same size.

    The fix is opening with the old model, or re-embedding with the new provider:
    ``CharacterMemory.open(..., embedding_provider=new, rebuild_vectors=True)`` (``charmem
    rebuild-vectors --drop``); ``rebuild_vector_index()`` cannot help, as the open is refused.
    """


class StoreLockedError(CharmemError):
    """An embedded store is held by another process (or another handle in this one)."""


class BackendError(CharmemError):
    """A store or provider failed; the driver's exception is chained as ``__cause__``."""


class StoreCorruptedError(BackendError):
    """A store's files are damaged, incomplete or missing, so opening or using it would lose data.

    Raised instead of opening over them: a graph store directory that is not a complete store, a
    graph store missing while the collection's vectors exist, a vector shard that cannot be
    loaded, or derived data (vectors, statistics) that a repair would wipe because the graph looks
    empty. Nothing was created or removed. The message names the path and the way back
    (restore from a backup with ``charmem import``, or ``charmem rebuild-vectors --drop`` for a
    vector shard, which is derived data).

    Attributes:
        path: the damaged file or directory, or ``None`` when it is not a local path.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class InsufficientStorageError(BackendError):
    """Free disk space is below what opening or writing a store needs; nothing was written.

    Checked before the store's own code runs where running short would crash the process (a
    memory-mapped vector shard gets ``SIGBUS`` on a full disk), and translated from the store's
    "no space left on device" errors elsewhere. Free space and call again: the same memory
    recovers without being reopened.

    Attributes:
        path: the directory whose file system is short of space.
        needed: bytes the operation needs free (an estimate; ``None`` when the store reported
            the shortage itself).
        available: bytes free for this process when it was checked (``None`` when unknown).
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        needed: int | None = None,
        available: int | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.needed = needed
        self.available = available
