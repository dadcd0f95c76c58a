"""The gate in front of every route: Host and Origin checks, then the bearer token.

A pure ASGI middleware, so it also guards the MCP endpoint (``/mcp``), whose handler is the MCP
SDK's own ASGI app. What passes carries its :class:`~charmem_server._auth.Principal` in
``scope["charmem.principal"]``; refusals are problem+json and name no token.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable
from typing import Any, Final
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from charmem.log import get_logger
from charmem_server._auth import Principal, TokenTable
from charmem_server._wire import PROBLEM_CONTENT_TYPE

__all__ = ["Guard", "allowed_hosts", "is_loopback", "send_problem"]

log = get_logger("charmem_server.guard")

#: Paths open without a token: they reveal no memory.
PUBLIC_PATHS: Final = frozenset({"/v1/health", "/openapi.json"})
_LOOPBACK_NAMES: Final = ("127.0.0.1", "localhost", "[::1]")


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def allowed_hosts(host: str, port: int, extra: Iterable[str] = ()) -> frozenset[str] | None:
    """The ``Host`` header values a server bound to ``host:port`` accepts (``None``: any).

    A loopback server accepts its loopback names with its port, so a browser page whose name
    resolves to 127.0.0.1 (DNS rebinding) is refused. A server bound to every interface
    (``0.0.0.0``, ``::``) cannot know its public names: it accepts any unless ``extra`` names
    them. ``extra`` entries are ``name`` or ``name:port``.
    """
    names = {f"{_bracketed(host)}:{port}"}
    if is_loopback(host):
        names |= {f"{name}:{port}" for name in _LOOPBACK_NAMES}
    wildcard = host in ("0.0.0.0", "::", "")  # noqa: S104 - recognising the wildcard, not binding
    for name in extra:
        names.add(name if ":" in name.lstrip("[").split("]")[-1] else f"{name}:{port}")
    if wildcard and not list(extra):
        return None
    return frozenset(names)


async def send_problem(send: Send, status: int, title: str, detail: str, **fields: Any) -> None:
    """Answer with a problem+json body (RFC 9457)."""
    body = json.dumps(
        {"type": f"urn:charmem:problem:{title}", "title": title, "status": status, "detail": detail, **fields}
    ).encode()
    headers = [(b"content-type", PROBLEM_CONTENT_TYPE.encode()), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="charmem"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """Check Host, Origin and the bearer token of every HTTP request.

    Args:
        app: the application behind the gate.
        hosts: accepted ``Host`` values (``name:port``), or ``None`` to accept any.
        tokens: the token table, or ``None`` (loopback only): every request is allowed.
    """

    def __init__(self, app: ASGIApp, *, hosts: frozenset[str] | None, tokens: TokenTable | None) -> None:
        self.app = app
        self.hosts = hosts
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        host = headers.get("host", "")
        if self.hosts is not None and host.lower() not in self.hosts:
            log.warning("request_refused", reason="host", path=scope["path"])
            await send_problem(
                send,
                421 if host else 400,
                "host-refused",
                "the Host header does not name this server; use the address it listens on",
            )
            return
        origin = headers.get("origin")
        if origin is not None and not self._origin_allowed(origin, host):
            log.warning("request_refused", reason="origin", path=scope["path"])
            await send_problem(
                send, 403, "origin-refused", "requests from web pages of other origins are refused"
            )
            return
        principal = self._principal(headers.get("authorization"))
        if scope["path"] not in PUBLIC_PATHS:
            if principal is None:
                log.info("request_refused", reason="token", path=scope["path"])
                await send_problem(
                    send,
                    401,
                    "unauthorized",
                    "this server needs a bearer token (Authorization: Bearer <token>) from its token file",
                )
                return
            scope["charmem.principal"] = principal
        await self.app(scope, receive, send)

    def _origin_allowed(self, origin: str, host: str) -> bool:
        if origin == "null":
            return False
        netloc = urlsplit(origin).netloc.lower()
        if self.hosts is None:
            return netloc == host.lower()
        return netloc in self.hosts

    def _principal(self, authorization: str | None) -> Principal | None:
        if self.tokens is None:
            return TokenTable.allow_all()
        if not authorization or not authorization.lower().startswith("bearer "):
            return None
        return self.tokens.find(authorization[7:].strip())
