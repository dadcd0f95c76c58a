"""The HTTP side of the SPARQL service store: endpoints, authentication, timeout and retry.

Credentials come from an endpoint URL's user-info or from ``Settings.extra``; they never reach a
requested (and logged) URL, a repr or an error message.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Mapping
from typing import Final
from urllib.parse import unquote, urlsplit, urlunsplit

import httpx
from charmem.errors import ConfigurationError

__all__ = [
    "ATTEMPTS",
    "BEARER_TOKEN_KEY",
    "DEFAULT_TIMEOUT",
    "PASSWORD_KEY",
    "RETRY_WAIT",
    "TIMEOUT_KEY",
    "USERNAME_KEY",
    "BearerAuth",
    "auth_from_settings",
    "check_endpoint",
    "display",
    "retryable",
    "route",
    "timeout_from_settings",
]

#: Seconds one request (connect, send, answer) may take before it fails with ``BackendError``.
DEFAULT_TIMEOUT: Final = 10.0
#: Settings keys read from ``Settings.extra`` (never logged, never in a repr or an error).
USERNAME_KEY: Final = "SPARQL_USERNAME"
PASSWORD_KEY: Final = "SPARQL_PASSWORD"  # noqa: S105 - the name of a setting, not a secret
BEARER_TOKEN_KEY: Final = "SPARQL_BEARER_TOKEN"  # noqa: S105 - the name of a setting
TIMEOUT_KEY: Final = "SPARQL_TIMEOUT"

ATTEMPTS: Final = 2  # a request failing before any answer (connection refused or reset) is sent twice
RETRY_WAIT: Final = 0.05  # seconds between the two attempts


def display(endpoint: str) -> str:
    """The endpoint without any user-info (``user:password@``) it may carry."""
    parts = urlsplit(endpoint)
    if "@" not in parts.netloc:
        return endpoint
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def route(endpoint: str, auth: httpx.Auth | None) -> tuple[str, httpx.Auth | None]:
    """The URL to request and the authentication to send with it.

    User-info in an endpoint URL (``http://user:password@host/query``) becomes HTTP basic
    authentication (percent-decoded; an explicit ``auth`` wins) and is removed from the URL that is
    requested, so it never reaches a log line (``httpx`` logs every request URL at INFO).
    """
    parts = urlsplit(endpoint)
    if "@" not in parts.netloc:
        return endpoint, auth
    if auth is None:
        auth = httpx.BasicAuth(unquote(parts.username or ""), unquote(parts.password or ""))
    return display(endpoint), auth


def check_endpoint(endpoint: str, key: str) -> str:
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigurationError(
            f"{key}={display(endpoint)!r} is not an http(s) URL; give the SPARQL endpoint's full URL, "
            "e.g. http://127.0.0.1:7878/query",
            key=key,
        )
    return endpoint


class BearerAuth(httpx.Auth):
    """``Authorization: Bearer <token>``; the token never appears in a repr."""

    def __init__(self, token: str) -> None:
        self._token = token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self._token}"
        yield request

    def __repr__(self) -> str:
        return "BearerAuth(token=***)"


def auth_from_settings(extra: Mapping[str, str]) -> httpx.Auth | None:
    def value(key: str) -> str | None:
        raw = extra.get(key)
        return raw.strip() if raw is not None and raw.strip() else None

    username, password, token = value(USERNAME_KEY), value(PASSWORD_KEY), value(BEARER_TOKEN_KEY)
    if token is not None and (username is not None or password is not None):
        raise ConfigurationError(
            f"set either {BEARER_TOKEN_KEY} or {USERNAME_KEY}/{PASSWORD_KEY}, not both",
            key=BEARER_TOKEN_KEY,
        )
    if token is not None:
        return BearerAuth(token)
    if (username is None) != (password is None):
        missing = PASSWORD_KEY if password is None else USERNAME_KEY
        raise ConfigurationError(
            f"{missing} is required with {USERNAME_KEY if missing == PASSWORD_KEY else PASSWORD_KEY} "
            "(HTTP basic authentication)",
            key=missing,
        )
    if username is not None and password is not None:
        return httpx.BasicAuth(username, password)
    return None


def timeout_from_settings(extra: Mapping[str, str]) -> float:
    raw = extra.get(TIMEOUT_KEY)
    if raw is None or not raw.strip():
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ConfigurationError(
            f"{TIMEOUT_KEY}={raw!r} must be a positive number of seconds", key=TIMEOUT_KEY
        )
    return value


def retryable(exc: BaseException) -> bool:
    """A failure before the server answered anything (refused, reset): safe to send again.

    Reads are idempotent and an ``INSERT DATA`` of the same quads is too (RDF graphs are sets),
    so both may be sent twice. Timeouts are not retried: the time budget is spent.
    """
    return isinstance(exc, httpx.TransportError) and not isinstance(exc, httpx.TimeoutException)
