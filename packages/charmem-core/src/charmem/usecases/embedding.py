"""Calls to the embedding provider, with its answers checked (ports ``EmbeddingProvider``, DESIGN §8).

The provider is the one port a caller often writes: its contract (one row per text, ``vector_size``
finite floats each, failures as :class:`~charmem.errors.BackendError`) is checked here, once, so a
faulty provider gives a typed error naming it instead of a ``TypeError`` deep in a vector store,
and never a NaN or a short vector in the index.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Real
from typing import Any

from charmem.errors import BackendError, CharmemError, DimensionMismatchError
from charmem.ports import EmbeddingProvider

__all__ = ["embed_cue", "embed_texts"]


def _name(embedder: EmbeddingProvider) -> str:
    try:
        return repr(embedder.model_id)
    except Exception:  # noqa: BLE001 - the name only decorates a message
        return type(embedder).__name__


def _checked_row(embedder: EmbeddingProvider, row: Any, index: int) -> list[float]:
    """Row ``index`` as a list of ``vector_size`` finite floats.

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
    if len(values) == size and set(map(type, values)) == {float} and all(map(math.isfinite, values)):
        return values  # the common answer (plain finite floats), checked at C speed
    if len(values) != size:
        raise DimensionMismatchError(
            f"the embedding provider {_name(embedder)} answered row {index} with {len(values)} "
            f"dimensions but declares vector_size={size}; the provider is faulty or misconfigured",
            expected=size,
            actual=len(values),
        )
    if not all(isinstance(value, Real) and not isinstance(value, bool) for value in values):
        raise BackendError(
            f"the embedding provider {_name(embedder)} answered row {index} with values that are "
            "not real numbers"
        )
    floats = [float(value) for value in values]
    if not all(math.isfinite(value) for value in floats):
        raise BackendError(
            f"the embedding provider {_name(embedder)} answered row {index} with NaN or infinite "
            "values; embedders must return finite floats"
        )
    return floats


async def embed_texts(embedder: EmbeddingProvider, texts: Sequence[str]) -> list[list[float]]:
    """``embedder.embed_documents(texts)``, checked.

    Args:
        embedder: the provider.
        texts: memory texts.

    Returns:
        list[list[float]]: one row per text, in order, each ``vector_size`` finite floats.

    Raises:
        DimensionMismatchError: a row has another length than ``vector_size``.
        BackendError: the provider failed (a non-charmem exception is chained as the cause), or
            answered another number of rows, non-numbers, NaN or infinity.
    """
    try:
        rows: Any = await embedder.embed_documents(list(texts))
    except CharmemError:
        raise
    except Exception as exc:
        raise BackendError(
            f"the embedding provider {_name(embedder)} failed on {len(texts)} text(s): "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if isinstance(rows, str | bytes) or not hasattr(rows, "__len__") or len(rows) != len(texts):
        count = len(rows) if hasattr(rows, "__len__") else type(rows).__name__
        raise BackendError(
            f"the embedding provider {_name(embedder)} answered {count} rows for {len(texts)} texts; "
            "it must return one row per text"
        )
    return [_checked_row(embedder, row, index) for index, row in enumerate(rows)]


async def embed_cue(embedder: EmbeddingProvider, text: str) -> list[float]:
    """``embedder.embed_query(text)``, checked.

    Returns:
        list[float]: ``vector_size`` finite floats.

    Raises:
        DimensionMismatchError, BackendError: as :func:`embed_texts`.
    """
    try:
        row: Any = await embedder.embed_query(text)
    except CharmemError:
        raise
    except Exception as exc:
        raise BackendError(
            f"the embedding provider {_name(embedder)} failed on a query: {type(exc).__name__}: {exc}"
        ) from exc
    return _checked_row(embedder, row, 0)
