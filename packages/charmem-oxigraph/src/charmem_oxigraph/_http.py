"""The HTTP side of the SPARQL service store: endpoints, authentication, timeout and retry.

Credentials come from an endpoint URL's user-info or from ``Settings.extra``; they never reach a
requested (and logged) URL, a repr or an error message.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Generator, Mapping
from typing import Final
from urllib.parse import unquote, urlencode, urlsplit, urlunsplit

import attrs
import httpx
import tenacity
from charmem.errors import BackendError, ConfigurationError
from pyoxigraph import QueryResultsFormat, QuerySolution, QuerySolutions, parse_query_results

__all__ = [
    "ATTEMPTS",
    "AUTH_SCHEMES",
    "AUTH_SCHEME_KEY",
    "BEARER_TOKEN_KEY",
    "DEFAULT_TIMEOUT",
    "PASSWORD_KEY",
    "RAISE_CAP_HINT",
    "RETRY_WAIT",
    "TIMEOUT_KEY",
    "USERNAME_KEY",
    "BearerAuth",
    "Request",
    "Send",
    "auth_from_settings",
    "check_endpoint",
    "check_row_cap",
    "display",
    "exchange",
    "query_request",
    "retryable",
    "route",
    "select_rows",
    "takes_direct_queries",
    "timeout_from_settings",
]

#: Seconds one request (connect, send, answer) may take before it fails with ``BackendError``.
DEFAULT_TIMEOUT: Final = 10.0
#: Settings keys read from ``Settings.extra`` (never logged, never in a repr or an error).
USERNAME_KEY: Final = "SPARQL_USERNAME"
PASSWORD_KEY: Final = "SPARQL_PASSWORD"  # noqa: S105 - the name of a setting, not a secret
BEARER_TOKEN_KEY: Final = "SPARQL_BEARER_TOKEN"  # noqa: S105 - the name of a setting
AUTH_SCHEME_KEY: Final = "SPARQL_AUTH_SCHEME"  # how the username and password are sent
AUTH_SCHEMES: Final = ("basic", "digest")
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
    """The authentication ``Settings.extra`` asks for, or ``None``.

    ``SPARQL_USERNAME`` + ``SPARQL_PASSWORD`` are sent as HTTP basic authentication, or as HTTP
    digest authentication with ``SPARQL_AUTH_SCHEME=digest`` (what Virtuoso's ``/sparql-auth``
    endpoint asks for); ``SPARQL_BEARER_TOKEN`` as ``Authorization: Bearer``.

    Raises:
        ConfigurationError: incomplete or contradictory keys, or an unknown scheme (``key`` names
            the setting).
    """

    def value(key: str) -> str | None:
        raw = extra.get(key)
        return raw.strip() if raw is not None and raw.strip() else None

    username, password, token = value(USERNAME_KEY), value(PASSWORD_KEY), value(BEARER_TOKEN_KEY)
    scheme = _auth_scheme(value(AUTH_SCHEME_KEY), has_password=username is not None and password is not None)
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
    if username is None or password is None:
        return None
    return httpx.DigestAuth(username, password) if scheme == "digest" else httpx.BasicAuth(username, password)


def _auth_scheme(raw: str | None, *, has_password: bool) -> str:
    """``SPARQL_AUTH_SCHEME`` (default ``basic``), checked against the keys it needs."""
    scheme = (raw or "basic").lower()
    if scheme not in AUTH_SCHEMES:
        raise ConfigurationError(
            f"{AUTH_SCHEME_KEY}={scheme!r} is not one of {', '.join(AUTH_SCHEMES)}", key=AUTH_SCHEME_KEY
        )
    if scheme == "digest" and not has_password:
        raise ConfigurationError(
            f"{AUTH_SCHEME_KEY}=digest needs {USERNAME_KEY} and {PASSWORD_KEY}", key=AUTH_SCHEME_KEY
        )
    return scheme


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


def query_request(query: str, *, direct: bool) -> tuple[bytes, str]:
    """The body and ``Content-Type`` of a query request (the protocol's two POST forms).

    ``direct`` sends the query as the body (``application/sparql-query``); otherwise it is the
    ``query`` field of an ``application/x-www-form-urlencoded`` body, the form every SPARQL
    server takes (Virtuoso 7 never answers a direct POST). Encoding costs about 2 ms per 32 kB of
    query text, and Oxigraph takes a direct POST in about half the time (measured).
    """
    if direct:
        return query.encode("utf-8"), "application/sparql-query"
    return urlencode({"query": query}).encode("ascii"), "application/x-www-form-urlencoded"


def takes_direct_queries(response: httpx.Response) -> bool:
    """Whether the server that sent ``response`` is known to answer a direct query POST.

    Only a server naming itself Oxigraph (``Server: Oxigraph/<version>``) is: any other (or one
    behind a proxy that hides the header) keeps the URL-encoded form.
    """
    server: str = response.headers.get("server", "")
    return server.startswith("Oxigraph/")


#: What to do when a server cut an answer (Virtuoso's cap; other servers have their own).
RAISE_CAP_HINT: Final = (
    "raise the server's result cap above the collection's size (Virtuoso: ResultSetMaxRows in the "
    "[SPARQL] section of virtuoso.ini)"
)


def check_row_cap(response: httpx.Response, rows: int, what: str) -> None:
    """Refuse a ``SELECT`` answer that a server cut at its row cap.

    Virtuoso answers at most ``[SPARQL] ResultSetMaxRows`` rows (10,000 in its sample
    configuration) and, when an answer reaches the cap, says so only in the header
    ``X-SPARQL-MaxRows: <cap>``: the rows past the cap are silently left out. An answer of
    ``rows`` rows under such a header is refused when it reaches the cap.

    Args:
        response: the server's answer.
        rows: how many rows it held.
        what: the request, for the message (``"a query to <action> in collection 'x' on <url>"``).

    Raises:
        BackendError: the answer reached the cap the server named (an unreadable cap counts as 0).
    """
    raw = response.headers.get("x-sparql-maxrows")
    if raw is None:
        return
    try:
        cap = int(raw)
    except ValueError:
        cap = 0
    if rows >= cap:
        raise BackendError(
            f"the SPARQL server cut its answer to {what} at its row cap of {raw.strip()} rows "
            f"(X-SPARQL-MaxRows), so rows may be missing; {RAISE_CAP_HINT}"
        )


@attrs.frozen
class Request:
    """One SPARQL protocol request: the endpoint (as configured), its headers and body."""

    endpoint: str
    headers: Mapping[str, str]
    content: bytes


#: Sends one POST: ``send(endpoint, content, headers)`` -> the response (no status check).
Send = Callable[[str, bytes, Mapping[str, str]], Awaitable[httpx.Response]]


async def exchange(send: Send, request: Request, where: str, seconds: float) -> httpx.Response:
    """POST ``request`` within ``seconds`` (a refused connection is tried twice); the answer.

    Args:
        send: posts the request (the store's client, with the endpoint's credentials).
        request: what to send.
        where: what the request does, for errors ("write a batch in collection 'x'").
        seconds: the bound of the whole exchange, both attempts included.

    Raises:
        BackendError: no answer in time, the server unreachable, or an error status (the message
            names the endpoint without its credentials, and the settings to check on 401/403).
    """
    shown = display(request.endpoint)
    retrying = tenacity.AsyncRetrying(
        retry=tenacity.retry_if_exception(retryable),
        stop=tenacity.stop_after_attempt(ATTEMPTS),
        wait=tenacity.wait_fixed(RETRY_WAIT),
        reraise=True,
    )
    try:
        async with asyncio.timeout(seconds):
            async for attempt in retrying:
                with attempt:
                    response = await send(request.endpoint, request.content, request.headers)
    except (TimeoutError, httpx.TimeoutException) as exc:
        detail = "" if isinstance(exc, TimeoutError) else f" ({type(exc).__name__})"
        raise BackendError(
            f"the SPARQL endpoint {shown} did not answer within {seconds:g} s while trying to {where}"
            f"{detail}; check that the server is up and reachable"
        ) from exc
    except httpx.HTTPError as exc:
        raise BackendError(
            f"could not reach the SPARQL endpoint {shown} to {where}: {type(exc).__name__}: {exc}; "
            "check that the server is up and the URL is right"
        ) from exc
    if response.status_code >= 300:
        body = response.text[:300].strip()
        credentials = "; check SPARQL_USERNAME/SPARQL_PASSWORD or SPARQL_BEARER_TOKEN"
        raise BackendError(
            f"the SPARQL endpoint {shown} refused to {where}: HTTP {response.status_code} "
            f"{response.reason_phrase}"
            + (f": {body}" if body else "")
            + (credentials if response.status_code in (401, 403) else "")
        )
    return response


def select_rows(response: httpx.Response, where: str, endpoint: str) -> list[QuerySolution]:
    """The rows of a ``SELECT`` answered as SPARQL JSON results, checked against the row cap.

    Args:
        response: the server's answer.
        where: what the query does, for errors ("read objects in collection 'x'").
        endpoint: the query endpoint as shown (no credentials).

    Raises:
        BackendError: the answer is not SPARQL JSON results of a ``SELECT``, or reached the
            server's row cap (:func:`check_row_cap`).
    """
    try:
        solutions = parse_query_results(response.content, QueryResultsFormat.JSON)
        if not isinstance(solutions, QuerySolutions):
            raise TypeError("expected SELECT solutions, got a boolean")
        rows = list(solutions)
    except (SyntaxError, ValueError, TypeError) as exc:
        raise BackendError(
            f"the SPARQL endpoint {endpoint} answered a query to {where} with something that is not "
            f"SPARQL JSON results: {exc}"
        ) from exc
    del solutions  # pyoxigraph's answer object must not outlive this thread in a kept frame
    check_row_cap(response, len(rows), f"a query to {where} at {endpoint}")
    return rows
