"""The service index's connection to a Qdrant server: settings, time budget, retries, errors.

A call of :class:`charmem_qdrant.QdrantServiceVectorIndex` is bounded by ``timeout`` seconds in
total; a call refused as ``UNAVAILABLE`` (server down or restarting) is tried up to 3 times
within that budget (every call is idempotent). Anything else from the driver, or running out of
time, raises :class:`~charmem.errors.BackendError` naming the endpoint; the API key never
appears in an error.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeVar
from urllib.parse import urlsplit

import tenacity
from qdrant_client import AsyncQdrantClient

from charmem.errors import BackendError, CharmemError, ConfigurationError
from charmem_qdrant._recall import positive_setting

if TYPE_CHECKING:
    from charmem.settings import Settings

__all__ = [
    "CONNECTION_KEY",
    "DEFAULT_TIMEOUT",
    "TIMEOUT_KEY",
    "call_bounded",
    "client_from_settings",
    "run_blocking",
    "timeout_from_settings",
]

_T = TypeVar("_T")

#: Seconds one call (including its retries) may take before it fails with ``BackendError``.
DEFAULT_TIMEOUT: Final = 5.0
#: Settings key (read from ``Settings.extra``) overriding :data:`DEFAULT_TIMEOUT`, in seconds.
TIMEOUT_KEY: Final = "QDRANT_TIMEOUT"
#: The setting naming the server's gRPC endpoint.
CONNECTION_KEY: Final = "QDRANT_CONNECTION_STRING"

_ATTEMPTS: Final = 3  # a call refused as UNAVAILABLE (server down or restarting) is tried 3 times
_RETRY_WAIT: Final = 0.2  # seconds before the first retry (doubled before the second)
# gRPC reconnects a broken channel with exponential back-off (default up to 120 s); keep it short
# so that the first call after the server is back finds the channel reconnected.
_GRPC_OPTIONS: Final[dict[str, Any]] = {
    "grpc.initial_reconnect_backoff_ms": 100,
    "grpc.min_reconnect_backoff_ms": 100,
    "grpc.max_reconnect_backoff_ms": 1000,
}


def _is_unavailable(exc: BaseException) -> bool:
    """A gRPC ``UNAVAILABLE`` (server down, restarting, or channel reconnecting): worth a retry.

    Every call of the index is idempotent (reads, upserts of whole points, deletes by id), so
    sending it again is safe.
    """
    code = getattr(exc, "code", None)
    if callable(code):
        try:
            name = getattr(code(), "name", "")
        except Exception:  # not a gRPC error after all
            return False
        return bool(name == "UNAVAILABLE")
    return False


def _describe(exc: BaseException) -> str:
    """A one-line description of a driver error (a gRPC error as ``CODE: details``)."""
    code, details = getattr(exc, "code", None), getattr(exc, "details", None)
    if callable(code) and callable(details):
        try:
            return f"gRPC {getattr(code(), 'name', code())}: {details()}"
        except Exception:  # noqa: S110 - fall back to the plain form below
            pass
    return f"{type(exc).__name__}: {exc}"


def timeout_from_settings(extra: Mapping[str, str]) -> float:
    """``QDRANT_TIMEOUT`` from ``extra`` in seconds, or :data:`DEFAULT_TIMEOUT`.

    Raises:
        ConfigurationError: not a positive number of seconds.
    """
    return positive_setting(extra, TIMEOUT_KEY, DEFAULT_TIMEOUT, "a positive number of seconds")


def client_from_settings(settings: Settings, timeout: float) -> tuple[AsyncQdrantClient, str]:
    """An ``AsyncQdrantClient`` speaking gRPC to ``QDRANT_CONNECTION_STRING``, and its endpoint.

    Raises:
        ConfigurationError: the connection string is missing or not an http(s) URL with a host.
    """
    raw = settings.qdrant_connection_string
    if settings.vector_store_mode != "service" or not raw:
        raise ConfigurationError(
            "QdrantServiceVectorIndex needs VECTOR_STORE_MODE=service and QDRANT_CONNECTION_STRING "
            "(the gRPC endpoint, e.g. http://127.0.0.1:6334)",
            key=CONNECTION_KEY,
        )
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(
            f"{CONNECTION_KEY} must be an http(s) URL of the gRPC endpoint, e.g. "
            "http://127.0.0.1:6334",
            key=CONNECTION_KEY,
        )
    try:
        port = parts.port or 6334
    except ValueError as exc:
        raise ConfigurationError(
            f"{CONNECTION_KEY} has an invalid port", key=CONNECTION_KEY
        ) from exc
    endpoint = f"{parts.scheme}://{parts.hostname}:{port}"
    client = AsyncQdrantClient(
        host=parts.hostname,
        grpc_port=port,
        prefer_grpc=True,
        https=parts.scheme == "https",
        api_key=settings.qdrant_api_key,
        timeout=max(1, math.ceil(timeout)),
        grpc_options=dict(_GRPC_OPTIONS),
        check_compatibility=False,  # it would send a REST request from the constructor
    )
    return client, endpoint


def run_blocking(factory: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """Run a coroutine to completion on a private event loop in a helper thread.

    For the blocking ``from_settings`` / ``drop_from_settings``, which may be called from a thread
    that already runs a loop.
    """
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="charmem-qdrant") as pool:
        return pool.submit(asyncio.run, factory()).result()


async def call_bounded(
    action: str,
    operation: Callable[[], Awaitable[_T]],
    *,
    timeout: float,  # noqa: ASYNC109 - the budget of the call and its retries
    endpoint: str,
    where: str,
    scrub: Callable[[str], str],
) -> _T:
    """Run one driver call, bounded by ``timeout`` seconds, retrying ``UNAVAILABLE``.

    Args:
        action: what the call does, for messages (``upsert points``).
        operation: makes the call (a new awaitable per attempt).
        timeout: seconds the call and its retries may take in total.
        endpoint: the server as named in messages.
        where: the collection as named in messages.
        scrub: removes secrets from a driver's message.

    Raises:
        BackendError: out of time, or any driver failure (cause chained, API key scrubbed).
    """
    retrying = tenacity.AsyncRetrying(
        retry=tenacity.retry_if_exception(_is_unavailable),
        stop=tenacity.stop_after_attempt(_ATTEMPTS),
        wait=tenacity.wait_exponential(multiplier=_RETRY_WAIT, min=_RETRY_WAIT),
        reraise=True,
    )
    try:
        async with asyncio.timeout(timeout):
            async for attempt in retrying:
                with attempt:
                    return await operation()
    except CharmemError:
        raise
    except TimeoutError as exc:
        raise BackendError(
            f"Qdrant at {endpoint} did not answer within {timeout:g} s while "
            f"trying to {action} for {where}; check that the server is up and reachable"
        ) from exc
    except Exception as exc:
        detail = scrub(_describe(exc))
        if len(detail) > 500:
            detail = detail[:500] + "..."
        raise BackendError(
            f"Qdrant at {endpoint} failed to {action} for {where}: {detail}"
        ) from exc
    raise AssertionError("unreachable")  # pragma: no cover - tenacity returns or raises
