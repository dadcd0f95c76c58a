"""The error hierarchy of charmem.

Every error a caller can receive from charmem is a :class:`CharmemError`. Adapters translate their
driver's exceptions into these, chaining the cause (``raise BackendError(...) from exc``). Each
subclass carries structured fields (``key``, ``reasons``, ``kind``) besides its message, and every
message says what was wrong and what to do.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from charmem.domain.ids import MemoryId
    from charmem.domain.plan import RememberOutcome

__all__ = [
    "EXCERPT_CHARS",
    "BackendError",
    "BackupFormatError",
    "CharacterIdentityMismatchError",
    "CharmemError",
    "CollectionNotEmptyError",
    "ConfigurationError",
    "DimensionMismatchError",
    "DraftValidationError",
    "EmbedderMismatchError",
    "EmbeddingTimeoutError",
    "IdConflictError",
    "InsufficientStorageError",
    "LifecycleErrorKind",
    "LifecycleValidationError",
    "MemoryNotOpenedError",
    "PlanSequenceError",
    "PlanValidationError",
    "PurgeTargetError",
    "PurgedMemoryError",
    "StoreCorruptedError",
    "StoreLayoutError",
    "StoreLockedError",
    "excerpt",
    "mask_secrets",
]

#: Most characters of a foreign text (a provider's or server's error body) quoted in an error
#: message, a log event or a repair marker's ``cause``: enough for the reason, short enough that a
#: whole HTML error page never ends up in a log line.
EXCERPT_CHARS: Final = 200

_MASK: Final = "***"
# scheme://user:password@host: the password runs to the last '@' before the path (a password
# may hold an unencoded '@'; urlsplit splits the same way).
_URL_PASSWORD: Final = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^/?#@\s:]*):[^/?#\s]*@")
# user:password@host without a scheme (an endpoint written as ``alice:pw@db:7878/query``).
_BARE_PASSWORD: Final = re.compile(r"(?P<head>(?<![\w.+\-/:@])[A-Za-z0-9._~%+\-]+):[^/?#\s]*@(?=[\w\[])")
_SECRET_PARAMETER: Final = re.compile(
    r"(?P<head>[?&][A-Za-z0-9_\-]*(?:key|token|password|passwd|secret)=)[^&#\s]+", re.IGNORECASE
)
_SECRET_KEY: Final = re.compile(
    r"(?:^|_)(?:PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY|CREDENTIALS?)$", re.IGNORECASE
)


def with_article(word: str) -> str:
    """``word`` after "a" or "an", for messages: ``"an observation"``, ``"a link"``, ``"an int"``.

    Chosen by the first letter (a vowel takes "an"), which suits charmem's kinds and type names.
    """
    return f"an {word}" if word[:1].lower() in ("a", "e", "i", "o", "u") else f"a {word}"


def mask_secrets(value: str, *, key: str | None = None) -> str:
    """``value`` with its secrets replaced by ``***``: the one masking rule of charmem.

    * The whole value, when ``key`` names a secret: a settings key or field name ending in
      ``PASSWORD``, ``SECRET``, ``TOKEN``, ``API_KEY`` or ``CREDENTIALS`` (``OPENAI_API_KEY``,
      ``QDRANT_API_KEY``, ``SPARQL_PASSWORD``, ``SPARQL_BEARER_TOKEN``; case-insensitive).
    * Otherwise the password of every URL's user-info (``http://alice:***@host/``, and without a
      scheme ``alice:***@host:7878``; the user name stays) and the value of URL query parameters
      named like a secret (``?api_key=***``).

    Used by the settings' repr, charmem's log events and every :class:`CharmemError` message.

    Args:
        value: any text (a setting's value, a message, a URL).
        key: the name the value is stored under, if any.

    Returns:
        str: the masked text (``value`` itself when it holds no secret).
    """
    if key is not None and value and _SECRET_KEY.search(key):
        return _MASK
    if "@" in value:
        value = _URL_PASSWORD.sub(lambda m: f"{m['head']}:{_MASK}@", value)
        value = _BARE_PASSWORD.sub(lambda m: f"{m['head']}:{_MASK}@", value)
    if "=" in value:
        value = _SECRET_PARAMETER.sub(lambda m: f"{m['head']}{_MASK}", value)
    return value


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """A foreign text fit to quote: secrets masked, whitespace runs joined, at most ``limit`` chars.

    For what a provider or server answered (an error body, an exception's text) when it goes
    into an error message, a log event or a repair marker's ``cause``. A longer text is cut and
    ends with ``...``.

    Args:
        text: the text to quote.
        limit: most characters of the result (count, >= 4; default :data:`EXCERPT_CHARS`).

    Returns:
        str: the excerpt.
    """
    flat = " ".join(mask_secrets(str(text)).split())
    return flat if len(flat) <= limit else flat[: max(limit - 3, 1)] + "..."


class CharmemError(Exception):
    """Root of every error charmem raises on purpose.

    Its message never carries a secret: text arguments pass through :func:`mask_secrets`.
    """

    def __init__(self, *args: object) -> None:
        super().__init__(*(mask_secrets(arg) if isinstance(arg, str) else arg for arg in args))


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


class PlanSequenceError(CharmemError):
    """A plan of a sequence (``CharacterMemory.commit_many``) failed.

    The plans before it are committed (graph, vectors and statistics, as ``commit`` would have
    left them); it and every plan after it wrote nothing. Fix it and commit
    ``plans[index:]``.

    Attributes:
        index: position of the failed plan in the sequence (0-based).
        outcomes: the outcomes of the plans committed before it, in order (``index`` of them).
        error: the failed plan's own error (``PlanValidationError``, ``IdConflictError``,
            ``PurgedMemoryError``, ``BackendError``: as ``commit`` raises); also the cause.
    """

    def __init__(
        self, message: str, *, index: int, outcomes: Sequence[RememberOutcome], error: CharmemError
    ) -> None:
        super().__init__(message)
        self.index = index
        self.outcomes = tuple(outcomes)
        self.error = error


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
    """An id is already stored with different content; nothing was written.

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
    """Why a lifecycle draft (correct, forget, link) was refused (rules: docs/concepts/lifecycle.md)."""

    MISSING_GIVEN_REPLACEMENT = "missing_given_replacement"
    EMPTY_RATIONALE = "empty_rationale"
    EMPTY_CORRECTION_ORIGIN = "empty_correction_origin"
    EMPTY_REPLACEMENT_TEXT = "empty_replacement_text"
    MISSING_REPLACEMENT_SOURCE = "missing_replacement_source"
    INVALID_BELIEF = "invalid_belief"
    MISSING_CORRECTION_TARGET = "missing_correction_target"
    MISSING_FORGET_TARGET = "missing_forget_target"
    UNSUPPORTED_LIFECYCLE_TARGET = "unsupported_lifecycle_target"

    ALREADY_SUPERSEDED = "already_superseded"
    """``correct`` of a memory another memory already supersedes.

    A memory gains successors in one write only (one plan, or one correction): the message names
    the successor; correct that one instead. Replaying the same correction stays accepted.
    """

    RECORDED_BEFORE_TARGET = "recorded_before_target"
    """A correct, forget or link whose ``recorded_at`` is before its target's ``created_at``.

    For a link the targets are both endpoints; for a correction, the correction origin's source
    experiences are targets too, and an explicit replacement ``created_at`` is held to the same
    rule. Lifecycle records are in time order, so an ``as_of``
    view never shows a change to a memory before the memory existed.
    """

    RECORDED_IN_FUTURE = "recorded_in_future"
    """A correct, forget or link recorded later than the clock's now plus ``RECORDED_AT_SKEW``.

    ``charmem.domain.rules.RECORDED_AT_SKEW`` (5 minutes) tolerates clocks slightly ahead of the
    memory's ``Clock``; a time within it is recorded as the clock's now, so the default view and
    ``as_of=now`` always agree.
    """


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


class StoreLayoutError(CharmemError):
    """A store holds data in a layout this charmem does not read; nothing was read or written.

    Raised when a store is opened: an older layout is upgraded in place by ``charmem migrate``
    (:func:`charmem.admin.migrate`); a newer one needs the charmem version that wrote it.

    Attributes:
        store: where the store is (a path, an endpoint) and which collection.
        found: the layout version found (``None``: an older store without a version record).
        expected: the layout version this charmem reads and writes.
    """

    def __init__(self, message: str, *, store: str, found: int | None, expected: int) -> None:
        super().__init__(message)
        self.store = store
        self.found = found
        self.expected = expected


class CharacterIdentityMismatchError(CharmemError):
    """The collection belongs to another character; nothing was opened.

    ``CharacterMemory.open(..., character_id=...)`` records the character's notion id on a
    collection's first open with one and refuses a later open with another id (before any vector
    store opens): one memory per character. Opening without ``character_id`` is always allowed.

    Attributes:
        collection: the collection's name.
        recorded: the character id the collection records.
        given: the id this open asked for.
    """

    def __init__(self, message: str, *, collection: str, recorded: MemoryId, given: MemoryId) -> None:
        super().__init__(message)
        self.collection = collection
        self.recorded = recorded
        self.given = given


class EmbeddingTimeoutError(BackendError, TimeoutError):
    """The embedding provider did not answer one call within ``EMBEDDING_TIMEOUT_S`` seconds.

    Raised by retrieval and vector rebuilds; a commit, correction or forget turns it into a
    ``RepairMarker.VectorMaintenance`` on its outcome instead (the graph write stands).

    Attributes:
        timeout_s: the bound that was exceeded (seconds).
    """

    def __init__(self, message: str, *, timeout_s: float) -> None:
        super().__init__(message)
        self.timeout_s = timeout_s


class MemoryNotOpenedError(CharmemError, AttributeError):
    """A method was called on what ``CharacterMemory.open(...)`` returns, before opening it.

    ``open`` returns an opener: ``memory = await CharacterMemory.open(...)`` or
    ``async with CharacterMemory.open(...) as memory:`` gives the memory.
    """


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
