"""Calls to the embedding provider, with its answers checked (port ``EmbeddingProvider``).

The provider is the one port a caller often writes: its contract (one row per text, ``vector_size``
finite floats each, failures as :class:`~charmem.errors.BackendError`) is checked here, once, so a
faulty provider gives a typed error naming it instead of a ``TypeError`` deep in a vector store,
and never a NaN or a short vector in the index. Each call is bounded in time
(``EMBEDDING_TIMEOUT_S``), so a hung provider cannot hang a write or a retrieval.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence
from numbers import Real
from typing import Any, Final

from charmem.errors import (
    BackendError,
    CharmemError,
    DimensionMismatchError,
    EmbeddingTimeoutError,
    excerpt,
)
from charmem.ports import EmbeddingProvider
from charmem.settings import DEFAULT_EMBEDDING_TIMEOUT_S

__all__ = ["DEFAULT_EMBED_BATCH_SIZE", "embed_cue", "embed_texts", "provider_batch_size"]

#: Texts per ``embed_documents`` call for a provider that states no ``preferred_batch_size``.
DEFAULT_EMBED_BATCH_SIZE: Final = 64


def provider_batch_size(embedder: EmbeddingProvider, requested: int | None = None) -> int:
    """Texts per ``embed_documents`` call: ``requested``, else what the provider prefers.

    A provider may state its efficient call size as an optional ``preferred_batch_size``
    attribute (a positive int; not part of the port's required members). A provider that states
    none, or states something else than a positive int, gets :data:`DEFAULT_EMBED_BATCH_SIZE`.

    Args:
        embedder: the provider.
        requested: a caller's explicit size (count, >= 1), or ``None`` for the provider's.

    Returns:
        int: texts per call, >= 1.
    """
    if requested is not None:
        return requested
    stated = getattr(embedder, "preferred_batch_size", None)
    if isinstance(stated, int) and not isinstance(stated, bool) and stated >= 1:
        return stated
    return DEFAULT_EMBED_BATCH_SIZE


def _name(embedder: EmbeddingProvider) -> str:
    try:
        return repr(embedder.model_id)
    except Exception:  # noqa: BLE001 - the name only decorates a message
        return type(embedder).__name__


#: Element types a row may hold without the per-element check: plain floats, or ints (converted).
_FAST_TYPES: Final = frozenset({float, int})


def _all_finite(floats: list[float]) -> bool:
    """Whether every value of ``floats`` is finite.

    One C-level sum first (a NaN or an infinity makes it non-finite), element by element only
    when the sum is not finite (overflow alone can do that).
    """
    return math.isfinite(sum(floats)) or all(map(math.isfinite, floats))


def _checked_row(embedder: EmbeddingProvider, row: Any, index: int) -> list[float]:
    """Row ``index`` as a list of ``vector_size`` finite floats.

    The common rows (lists of plain floats or ints, numpy float arrays) are checked with a few
    C-level passes (element types as a set, then one sum: a finite sum of floats means every
    element is finite); anything else (numpy scalars, other ``Real`` types, bad values) takes the
    element-by-element check, which gives the same verdicts and messages.

    Raises:
        DimensionMismatchError: the row has another length than the declared ``vector_size``.
        BackendError: the row is not a sequence of real numbers, or holds NaN or infinity.
    """
    size = embedder.vector_size
    if isinstance(row, str | bytes) or (not isinstance(row, Sequence) and not hasattr(row, "tolist")):
        raise BackendError(
            f"the embedding provider {_name(embedder)} answered row {index} with a "
            f"{type(row).__name__}, not a sequence of {size} floats"
        )
    values = row.tolist() if hasattr(row, "tolist") else list(row)
    if len(values) != size:
        raise DimensionMismatchError(
            f"the embedding provider {_name(embedder)} answered row {index} with {len(values)} "
            f"dimensions but declares vector_size={size}; the provider is faulty or misconfigured",
            expected=size,
            actual=len(values),
        )
    types = set(map(type, values))
    if types <= _FAST_TYPES:  # bool is excluded: its type is bool, not int
        floats = values if types == {float} else list(map(float, values))
        if _all_finite(floats):
            return floats
    elif not all(isinstance(value, Real) and not isinstance(value, bool) for value in values):
        raise BackendError(
            f"the embedding provider {_name(embedder)} answered row {index} with values that are "
            "not real numbers"
        )
    else:
        floats = [float(value) for value in values]
        if _all_finite(floats):
            return floats
    raise BackendError(
        f"the embedding provider {_name(embedder)} answered row {index} with NaN or infinite "
        "values; embedders must return finite floats"
    )


async def _call_provider(
    embedder: EmbeddingProvider, call: Callable[[], Awaitable[Any]], what: str, timeout_s: float
) -> Any:
    """``await call()``, bounded by ``timeout_s`` seconds, its failures as charmem errors.

    Raises:
        EmbeddingTimeoutError: the call did not answer within ``timeout_s`` (it is cancelled).
        BackendError: the call raised a non-charmem exception (chained; its text quoted by
            :func:`~charmem.errors.excerpt`); charmem errors pass unchanged.
    """
    scope = asyncio.timeout(timeout_s)
    try:
        async with scope:
            return await call()
    except CharmemError:
        raise
    except TimeoutError as exc:
        if scope.expired():
            raise EmbeddingTimeoutError(
                f"the embedding provider {_name(embedder)} did not answer within {timeout_s:g} s on "
                f"{what}; the call was cancelled (raise EMBEDDING_TIMEOUT_S, or check the provider)",
                timeout_s=timeout_s,
            ) from None
        raise BackendError(
            f"the embedding provider {_name(embedder)} failed on {what}: {excerpt(_described(exc))}"
        ) from exc
    except Exception as exc:
        raise BackendError(
            f"the embedding provider {_name(embedder)} failed on {what}: {excerpt(_described(exc))}"
        ) from exc


def _described(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


async def embed_texts(
    embedder: EmbeddingProvider,
    texts: Sequence[str],
    *,
    timeout_s: float = DEFAULT_EMBEDDING_TIMEOUT_S,
) -> list[list[float]]:
    """``embedder.embed_documents(texts)``, checked and bounded in time.

    Args:
        embedder: the provider.
        texts: memory texts (one batch: this is one provider call).
        timeout_s: seconds the call may take (``EMBEDDING_TIMEOUT_S``).

    Returns:
        list[list[float]]: one row per text, in order, each ``vector_size`` finite floats.

    Raises:
        EmbeddingTimeoutError: no answer within ``timeout_s`` seconds (a ``BackendError``).
        DimensionMismatchError: a row has another length than ``vector_size``.
        BackendError: the provider failed (a non-charmem exception is chained as the cause, its
            text cut to 200 characters), or answered another number of rows, non-numbers, NaN
            or infinity.
    """
    batch = list(texts)
    rows: Any = await _call_provider(
        embedder, lambda: embedder.embed_documents(batch), f"{len(batch)} text(s)", timeout_s
    )
    if isinstance(rows, str | bytes) or not hasattr(rows, "__len__") or len(rows) != len(texts):
        count = len(rows) if hasattr(rows, "__len__") else type(rows).__name__
        raise BackendError(
            f"the embedding provider {_name(embedder)} answered {count} rows for {len(texts)} texts; "
            "it must return one row per text"
        )
    return [_checked_row(embedder, row, index) for index, row in enumerate(rows)]


async def embed_cue(
    embedder: EmbeddingProvider, text: str, *, timeout_s: float = DEFAULT_EMBEDDING_TIMEOUT_S
) -> list[float]:
    """``embedder.embed_query(text)``, checked and bounded in time.

    Args:
        embedder: the provider.
        text: the recall cue.
        timeout_s: seconds the call may take (``EMBEDDING_TIMEOUT_S``).

    Returns:
        list[float]: ``vector_size`` finite floats.

    Raises:
        EmbeddingTimeoutError, DimensionMismatchError, BackendError: as :func:`embed_texts`.
    """
    row: Any = await _call_provider(embedder, lambda: embedder.embed_query(text), "a query", timeout_s)
    return _checked_row(embedder, row, 0)
