"""The ASGI application of ``charmem serve``: the HTTP API under ``/v1`` and MCP at ``/mcp``.

Every request passes the :class:`~charmem_server._guard.Guard` (Host, Origin, bearer token).
A ``/v1`` route then checks the token's scope and collection, reads at most ``max_body_bytes`` of
body, waits for one of ``max_concurrency`` slots and runs the operation under
``request_timeout_s``; the SIGTERM drain waits for those operations. The MCP tools at ``/mcp`` are
not under the slots, the timeout or the drain yet (each tool call is one facade operation, which
``close`` still waits for). Errors are problem+json; nothing answers a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from http import HTTPStatus
from typing import Any, Final

import attrs
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from charmem.errors import CharmemError, DraftValidationError
from charmem.log import get_logger
from charmem_server._auth import Principal, Scope, TokenTable
from charmem_server._guard import Guard, allowed_hosts
from charmem_server._openapi import openapi_document
from charmem_server._operations import OPERATIONS, Operation
from charmem_server._registry import MemoryRegistry
from charmem_server._version import __version__
from charmem_server._wire import PROBLEM_CONTENT_TYPE, WIRE_FORMAT_VERSION, RemoteError, problem_of

__all__ = ["ServerConfig", "create_app"]

log = get_logger("charmem_server.http")

#: 1 MiB: a remember of a long text with its drafts, or a plan of a few hundred objects.
DEFAULT_MAX_BODY_BYTES: Final = 1024 * 1024


@attrs.frozen(kw_only=True)
class ServerConfig:
    """How ``charmem serve`` listens and what it allows.

    Attributes:
        host: the address to bind (default loopback).
        port: the TCP port (0: any free one).
        tokens: the token table; ``None`` allows every request and is refused off loopback.
        max_body_bytes: largest request body (bytes); a larger one gets 413.
        request_timeout_s: seconds one operation may take before the answer is 504 (a write
            keeps running to its end, so nothing is left half-written).
        max_concurrency: ``/v1`` operations running at once; more wait for a slot (within the
            timeout). MCP tool calls are not counted.
        extra_hosts: further ``Host`` names to accept (``name`` or ``name:port``), e.g. the
            public name of a server bound to ``0.0.0.0``.
        mcp_collection: the collection the ``/mcp`` endpoint's tools use, or ``None`` for no MCP.
    """

    host: str = "127.0.0.1"
    port: int = 8765
    tokens: TokenTable | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    request_timeout_s: float = 60.0
    max_concurrency: int = 32
    extra_hosts: tuple[str, ...] = ()
    mcp_collection: str | None = "charmem"


def _problem(exc: CharmemError, request: Request) -> JSONResponse:
    problem = problem_of(exc, instance=request.url.path)
    return JSONResponse(problem, status_code=problem["status"], media_type=PROBLEM_CONTENT_TYPE)


def _refusal(status: int, title: str, detail: str) -> JSONResponse:
    return _problem_response(RemoteError(detail, status=status, problem_type=f"urn:charmem:problem:{title}"))


def _problem_response(exc: RemoteError) -> JSONResponse:
    problem = problem_of(exc)
    problem["type"] = exc.problem_type
    return JSONResponse(problem, status_code=exc.status, media_type=PROBLEM_CONTENT_TYPE)


async def _read_body(request: Request, limit: int) -> bytes | None:
    """The body, or ``None`` once more than ``limit`` bytes arrived (the rest is not read)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _decode(body: bytes) -> tuple[str, Any]:
    """The body's text and its JSON value (``None`` for an empty body).

    Raises:
        DraftValidationError: the body is not UTF-8 JSON, or nests deeper than the parser's
            recursion limit (``field="body"``).
    """
    try:
        raw = body.decode("utf-8")
        return raw, json.loads(raw) if raw.strip() else None
    except ValueError as exc:
        raise DraftValidationError(f"the body is not JSON: {exc}", field="body") from None
    except RecursionError:
        raise DraftValidationError(
            "the body nests too deeply (arrays or objects inside each other) to be read", field="body"
        ) from None


class _Runner:
    """Bounded concurrency and the per-request timeout."""

    def __init__(self, config: ServerConfig) -> None:
        self.timeout_s = config.request_timeout_s
        self.slots = asyncio.Semaphore(config.max_concurrency)
        self.running: set[asyncio.Task[Any]] = set()

    async def run(self, make: Any, spec: Operation) -> Any:
        """Run ``make()`` in a slot; a write outlives its timeout so it is never cut half-way."""
        writes = spec.writes
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        try:
            async with asyncio.timeout_at(deadline):
                await self.slots.acquire()
        except TimeoutError:
            raise self._timeout("waiting for a free slot", "it did not start: retrying it is safe") from None
        task = asyncio.ensure_future(make())
        self.running.add(task)

        def done(finished: asyncio.Task[Any]) -> None:
            self.running.discard(finished)
            self.slots.release()

        task.add_done_callback(done)
        try:
            async with asyncio.timeout_at(deadline):
                return await (asyncio.shield(task) if writes else task)
        except TimeoutError:
            if not task.done() and not writes:
                task.cancel()
            raise self._timeout("running", spec.retry_advice) from None

    def _timeout(self, what: str, advice: str) -> RemoteError:
        return RemoteError(
            f"the operation took longer than the server's {self.timeout_s:g} s while {what}; {advice}",
            status=504,
            problem_type="urn:charmem:problem:timeout",
        )


def create_app(registry: MemoryRegistry, config: ServerConfig | None = None) -> Any:
    """The ASGI application serving ``registry``'s collections.

    Its lifespan starts the registry (store lock, embedder, existing collections) and, on
    shutdown (SIGTERM under uvicorn: no new connections, requests in flight finish), closes
    every memory after its operations in flight.

    Args:
        registry: the memories to serve.
        config: listening address, tokens and limits (default :class:`ServerConfig`).

    Returns:
        An ASGI application (the Starlette app behind the :class:`Guard`).
    """
    config = config or ServerConfig()
    runner = _Runner(config)
    mcp_routes, mcp_lifespan = _mcp_parts(registry, config)
    endpoints = _Endpoints(registry, config, runner)
    routes: list[Any] = [
        Route("/v1/health", endpoints.health, methods=["GET"]),
        Route("/openapi.json", endpoints.openapi, methods=["GET"]),
        Route("/v1/collections/{collection}/{operation}", endpoints.operation, methods=["POST"]),
    ]
    routes.extend(mcp_routes)
    app = Starlette(
        routes=routes,
        lifespan=_lifespan(registry, config, runner, mcp_lifespan),
        exception_handlers={HTTPException: _routing_error, Exception: _unexpected},
    )
    hosts = allowed_hosts(config.host, config.port, config.extra_hosts)
    return Guard(app, hosts=hosts, tokens=config.tokens)


class _Endpoints:
    """The HTTP routes: health, the OpenAPI document, and every operation of a collection."""

    def __init__(self, registry: MemoryRegistry, config: ServerConfig, runner: _Runner) -> None:
        self.registry = registry
        self.config = config
        self.runner = runner

    async def health(self, _request: Request) -> JSONResponse:
        """Liveness: the wire format, the server's version and the collections open."""
        return JSONResponse(
            {
                "status": "ok",
                "format_version": WIRE_FORMAT_VERSION,
                "version": __version__,
                "collections_open": len(self.registry.collections),
            }
        )

    async def openapi(self, _request: Request) -> JSONResponse:
        """The OpenAPI 3.1 document."""
        return JSONResponse(openapi_document())

    async def operation(self, request: Request) -> Response:
        """``POST /v1/collections/{collection}/{operation}``: scope, body, slot, timeout, answer."""
        collection = request.path_params["collection"]
        name = request.path_params["operation"]
        spec = OPERATIONS.get(name)
        if spec is None:
            return _refusal(404, "unknown-operation", f"there is no operation {name!r}; see /openapi.json")
        principal: Principal = request.scope.get("charmem.principal") or TokenTable.allow_all()
        if not principal.may(spec.scope, collection):
            log.info("request_forbidden", token=principal.name, operation=name, collection=collection)
            return _refusal(
                403,
                "forbidden",
                f"the token {principal.name!r} may not {spec.scope.value} collection {collection!r}",
            )
        limit = self.config.max_body_bytes
        body = await _read_body(request, limit)
        if body is None:
            return _refusal(413, "too-large", f"the request body is larger than {limit} bytes; split it")
        try:
            raw, data = _decode(body)
        except CharmemError as exc:
            return _problem(exc, request)
        try:
            result = await self.runner.run(lambda: spec.handler(self.registry, collection, data, raw), spec)
        except RemoteError as exc:
            return _problem_response(exc)
        except CharmemError as exc:
            return _problem(exc, request)
        return JSONResponse(result)


async def _routing_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no such path, a method the route does not take) as problems."""
    assert isinstance(exc, HTTPException)
    headers = dict(exc.headers or {})
    if exc.status_code == 404:
        detail = f"there is no route {request.url.path!r}; see /openapi.json"
    elif exc.status_code == 405:
        detail = (
            f"{request.method} is not allowed on {request.url.path!r}; use {headers.get('Allow', 'another')}"
        )
    else:
        detail = str(exc.detail)
    title = HTTPStatus(exc.status_code).phrase.lower().replace(" ", "-")
    response = _refusal(exc.status_code, title, detail)
    response.headers.update(headers)
    return response


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("request_failed", path=request.url.path, error=type(exc).__name__)
    return _refusal(500, "internal", "the server failed unexpectedly; its log says why (no details are sent)")


def _lifespan(
    registry: MemoryRegistry, config: ServerConfig, runner: _Runner, mcp_lifespan: Any
) -> Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]]:
    """Start the registry (and MCP); on shutdown let operations in flight finish, then close."""

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        await registry.start()
        try:
            async with mcp_lifespan():
                log.info(
                    "server_started",
                    host=config.host,
                    port=config.port,
                    collections=len(registry.collections),
                )
                yield
        finally:
            log.info("server_stopping", operations=len(runner.running))
            if runner.running:
                await asyncio.wait(set(runner.running), timeout=config.request_timeout_s)
            await registry.close()
            log.info("server_stopped")

    return lifespan


def _mcp_parts(registry: MemoryRegistry, config: ServerConfig) -> tuple[list[Any], Any]:
    """The MCP streamable-HTTP routes for ``/mcp`` and the lifespan they need (or none).

    The tools read and write one collection, so a token needs both scopes on it.
    """
    collection = config.mcp_collection
    if collection is None:
        return [], contextlib.nullcontext
    from charmem_server._mcp import build_mcp_server, streamable_http_asgi

    server = build_mcp_server(
        lambda: registry.get(collection, create=True), reading=lambda: registry.reading(collection)
    )
    routes, lifespan = streamable_http_asgi(server, max_body_bytes=config.max_body_bytes)
    return [Route(route.path, endpoint=_McpGate(route.endpoint, collection)) for route in routes], lifespan


class _McpGate:
    """Let a request reach the MCP tools only with read and write on their collection."""

    def __init__(self, app: Any, collection: str) -> None:
        self.app = app
        self.collection = collection

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        principal: Principal = scope.get("charmem.principal") or TokenTable.allow_all()
        if all(principal.may(needed, self.collection) for needed in (Scope.READ, Scope.WRITE)):
            await self.app(scope, receive, send)
            return
        from charmem_server._guard import send_problem

        log.info("request_forbidden", token=principal.name, operation="mcp", collection=self.collection)
        await send_problem(
            send,
            403,
            "forbidden",
            f"the MCP tools read and write collection {self.collection!r}: the token "
            f"{principal.name!r} needs the read and write scopes on it",
        )


def scope_names() -> list[str]:
    """The scope names a token file may use."""
    return [scope.value for scope in Scope]
