"""``charmem serve`` and ``charmem mcp``: the commands this package adds to the charmem CLI.

The CLI finds :func:`register` through the entry-point group ``charmem.cli_commands``; each
command's handler gets the parsed arguments and the CLI's settings (``--store`` and the
environment, ``EMBEDDING_PROVIDER`` defaulting to ``local``) and returns the exit code.
Logs go to stderr; stdout carries only MCP frames (``charmem mcp``) or nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from charmem import MemoryId, Settings
from charmem.errors import CharmemError, ConfigurationError
from charmem.settings import validate_collection_name

__all__ = ["register"]

log = logging.getLogger("charmem_server.cli")


def register(commands: Any) -> None:
    """Add ``serve`` and ``mcp`` to the CLI's subcommands (an argparse subparsers action)."""
    serve = commands.add_parser(
        "serve",
        help="serve every collection under --store over HTTP (/v1) and MCP (/mcp) from one process",
    )
    _common(serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8765, help="TCP port (default 8765; 0: any free one)")
    serve.add_argument(
        "--tokens", type=Path, help="JSON file of SHA-256 token hashes (required off loopback)"
    )
    serve.add_argument(
        "--max-body-bytes", type=int, default=1024 * 1024, help="largest request body (default 1 MiB)"
    )
    serve.add_argument(
        "--request-timeout", type=float, default=60.0, help="seconds per operation (default 60)"
    )
    serve.add_argument("--max-concurrency", type=int, default=32, help="operations at once (default 32)")
    serve.add_argument("--allow-host", action="append", default=[], help="another Host name to accept")
    serve.add_argument(
        "--mcp-collection", default=None, help="collection of the /mcp tools (default: --collection)"
    )
    serve.add_argument(
        "--hash-token",
        action="store_true",
        help="read a token on stdin, print its SHA-256 for the token file, exit",
    )
    serve.set_defaults(handler=serve_command)
    mcp = commands.add_parser(
        "mcp", help="serve the MCP tools of one collection over stdio (for agent hosts)"
    )
    _common(mcp)
    mcp.set_defaults(handler=mcp_command)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--character-id",
        action="append",
        default=[],
        metavar="[COLLECTION=]ID",
        help="the character whose memory a collection is (repeatable; a bare ID is --collection's): "
        "recorded on the collection's first open, a collection recording another is refused (409)",
    )
    # also accepted after the command: `charmem mcp --store DIR --collection C -v`
    parser.add_argument("--store", default=argparse.SUPPRESS, help="directory holding every embedded store")
    parser.add_argument("--collection", default=argparse.SUPPRESS, help="collection name")
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="charmem's debug logs on stderr",
    )


def character_ids(values: list[str], collection: str) -> dict[str, MemoryId]:
    """``--character-id`` values as collection -> character id (a bare id is ``collection``'s).

    Raises:
        ConfigurationError: a value is not ``ID`` or ``COLLECTION=ID`` with a UUID, or names one
            collection twice with two ids.
    """
    found: dict[str, MemoryId] = {}
    for value in values:
        name, _, text = value.rpartition("=")
        name = name or collection
        try:
            validate_collection_name(name)
            chosen = MemoryId(text.strip())
        except CharmemError as exc:
            raise ConfigurationError(
                f"--character-id {value!r}: give ID or COLLECTION=ID with the character's notion id "
                f"(a UUID), e.g. --character-id {collection}=0f6c7a9e-3b9e-4b5c-9d7e-1f2a3b4c5d6e ({exc})",
                key="--character-id",
            ) from None
        if found.setdefault(name, chosen) != chosen:
            raise ConfigurationError(
                f"--character-id names collection {name!r} twice with two ids; give one",
                key="--character-id",
            )
    return found


class _AtLeast(logging.Filter):
    """Records of charmem's loggers at any level; other libraries' from ``level`` up."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name.startswith("charmem") or record.levelno >= self.level


def _log_to_stderr(level: int, *, verbose: bool = False) -> None:
    """Every log on stderr from ``level`` up; with ``verbose``, charmem's debug logs too."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    if verbose:
        handler.addFilter(_AtLeast(level))
        level = logging.DEBUG
    root.setLevel(level)


def serve_command(args: argparse.Namespace, settings: Settings) -> int:
    """Run ``charmem serve`` until SIGTERM or Ctrl-C; returns the exit code."""
    if args.hash_token:
        from charmem_server._auth import hash_token

        token = sys.stdin.readline().strip()
        if not token:
            raise ConfigurationError("no token on stdin", key="--hash-token")
        print(hash_token(token))
        return 0
    _log_to_stderr(logging.INFO, verbose=getattr(args, "verbose", False))
    from charmem_server._app import ServerConfig
    from charmem_server._auth import load_tokens
    from charmem_server._guard import is_loopback

    tokens = load_tokens(args.tokens) if args.tokens else None
    if tokens is None and not is_loopback(args.host):
        raise ConfigurationError(
            f"refusing to serve on {args.host} without --tokens: anyone who can reach it could read "
            "and change every memory; give a token file or bind to 127.0.0.1",
            key="--tokens",
        )
    sock = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as exc:
        sock.close()
        raise ConfigurationError(
            f"cannot listen on {args.host}:{args.port}: {exc.strerror}", key="--port"
        ) from exc
    port = sock.getsockname()[1]
    config = ServerConfig(
        host=args.host,
        port=port,
        tokens=tokens,
        max_body_bytes=args.max_body_bytes,
        request_timeout_s=args.request_timeout,
        max_concurrency=args.max_concurrency,
        extra_hosts=tuple(args.allow_host),
        mcp_collection=args.mcp_collection or args.collection,
    )
    if tokens is None:
        log.warning(
            "no token file: serving on loopback only, and every process of this machine may read "
            "and change every collection (give --tokens FILE to require tokens)"
        )
    characters = character_ids(args.character_id, args.collection)
    try:
        asyncio.run(
            _serve(
                settings,
                config,
                sock,
                Path(args.store) if getattr(args, "store", None) else None,
                characters,
            )
        )
    finally:
        sock.close()
    return 0


async def _serve(
    settings: Settings,
    config: Any,
    sock: socket.socket,
    store_root: Path | None,
    characters: dict[str, MemoryId],
) -> None:
    import uvicorn

    from charmem_server._app import create_app
    from charmem_server._registry import MemoryRegistry

    class Server(uvicorn.Server):
        """uvicorn's server, exiting 0 after a drained SIGTERM/SIGINT instead of re-raising it."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            with super().capture_signals():
                yield
                self._captured_signals.clear()

    registry = MemoryRegistry(settings, store_root=store_root, character_ids=characters)
    await registry.start()  # a locked store fails here, before anything listens
    app = create_app(registry, config)
    _freeze_start_up()
    server = Server(
        uvicorn.Config(
            app,
            log_config=None,
            timeout_graceful_shutdown=int(config.request_timeout_s) + 5,
            lifespan="on",
            server_header=False,
        )
    )
    sock.listen(128)
    log.info(
        "charmem serve listening on http://%s:%d (HTTP API /v1, MCP /mcp)",
        _url_host(config.host),
        config.port,
    )
    try:
        await server.serve(sockets=[sock])
    finally:
        await registry.close()
    if not server.started:
        raise ConfigurationError("the server did not start; its log above says why")


def _freeze_start_up() -> None:
    """Keep what start-up allocated out of the garbage collector's full collections.

    Once the registry started (modules imported, the embedder built, every existing collection
    opened), what survives a collection now lives as long as the process, yet each full
    collection, which stops the event loop, would walk it again. Measured at 10,000 memories
    (hashing embedder; 4 retrieves and a writer for 20 s, 2 runs each): about 50,000 objects
    frozen; the longest full collection 126-218 ms -> 92-121 ms, their total 578-783 ms ->
    331-361 ms. A model-backed embedder freezes more. Garbage is collected first, so none of it
    is kept for good.
    """
    gc.collect()
    gc.freeze()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def mcp_command(args: argparse.Namespace, settings: Settings) -> int:
    """Run ``charmem mcp``: the MCP tools of ``--collection`` over stdin/stdout."""
    _log_to_stderr(logging.WARNING, verbose=getattr(args, "verbose", False))
    characters = character_ids(args.character_id, args.collection)
    store_root = Path(args.store) if getattr(args, "store", None) else None
    asyncio.run(_mcp(settings, args.collection, store_root, characters))
    return 0


async def _mcp(
    settings: Settings, collection: str, store_root: Path | None, characters: dict[str, MemoryId]
) -> None:
    from charmem_server._mcp import build_mcp_server
    from charmem_server._registry import MemoryRegistry

    registry = MemoryRegistry(settings, store_root=store_root, character_ids=characters)
    await registry.start()
    _freeze_start_up()
    try:
        server = build_mcp_server(
            lambda: registry.get(collection, create=True), reading=lambda: registry.reading(collection)
        )
        await server.run_stdio_async()
    finally:
        await registry.close()
