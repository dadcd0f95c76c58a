"""Argument checks of the facades, made before anything is opened or written."""

from __future__ import annotations

import inspect
import math
from numbers import Integral

from charmem.errors import ConfigurationError
from charmem.ports import EmbeddingProvider

__all__ = ["check_embedding_provider", "positive_seconds"]


def positive_seconds(value: object, name: str) -> float:
    """``value`` as a float when it is a finite number of seconds > 0 (not a bool).

    Raises:
        ConfigurationError: it is not (``key=name``).
    """
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        return float(value)
    raise ConfigurationError(f"{name} must be a positive number of seconds, not {value!r}", key=name)


def _is_async_callable(function: object) -> bool:
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None)  # noqa: B004 - an object with an async __call__
    )


def _attribute_problem(provider: object, attribute: str, wanted: str) -> str | None:
    """What is wrong with ``provider.<attribute>`` (``model_id`` or ``vector_size``), if anything."""
    try:
        value = getattr(provider, attribute)
    except AttributeError:
        return f"it has no {attribute} ({wanted})"
    except Exception as exc:  # noqa: BLE001 - reported as the problem
        return f"reading its {attribute} raised {type(exc).__name__}"
    if attribute == "model_id":
        fits = isinstance(value, str) and bool(value.strip())
    else:
        fits = isinstance(value, Integral) and not isinstance(value, bool) and int(value) >= 1
    return None if fits else f"its {attribute} is {value!r}, not {wanted}"


def check_embedding_provider(provider: object) -> EmbeddingProvider:
    """Refuse an object that does not implement :class:`~charmem.ports.EmbeddingProvider`.

    Checked before anything is opened, so a wrong object fails at once with what it lacks
    instead of an ``AttributeError`` or ``TypeError`` in the middle of a write: ``model_id`` a
    non-empty str, ``vector_size`` an int >= 1, ``embed_documents`` and ``embed_query`` async
    methods (``async def``). The vectors it answers are checked at each call.

    Args:
        provider: the object given as ``embedding_provider`` / ``embedder``.

    Returns:
        EmbeddingProvider: ``provider`` itself.

    Raises:
        ConfigurationError: something is missing or of the wrong kind; the message names every
            problem (``key="embedding_provider"``).
    """
    problems: list[str] = []
    for attribute, wanted in (("model_id", "a non-empty str"), ("vector_size", "an int >= 1")):
        problem = _attribute_problem(provider, attribute, wanted)
        if problem is not None:
            problems.append(problem)
    for method in ("embed_documents", "embed_query"):
        function = getattr(provider, method, None)
        if function is None:
            problems.append(f"it has no {method} method (an async def)")
        elif not _is_async_callable(function):
            problems.append(f"its {method} is not an async def")
    if problems:
        raise ConfigurationError(
            f"the embedding provider {type(provider).__name__} is not an EmbeddingProvider: "
            f"{'; '.join(problems)} (see charmem.ports.EmbeddingProvider)",
            key="embedding_provider",
        )
    return provider  # type: ignore[return-value]
