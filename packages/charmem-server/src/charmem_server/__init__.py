"""charmem over the network: ``charmem serve`` (HTTP + MCP), ``charmem mcp`` (stdio) and a remote client.

One process owns the stores of every collection under a directory and serves the facade's
operations under ``/v1`` (problem+json errors, bearer tokens with scopes, request limits) and
the MCP tools ``remember``, ``recall``, ``correct``, ``forget`` and ``link`` at ``/mcp``.
:class:`RemoteCharacterMemory` and :class:`SyncRemoteCharacterMemory` call it with charmem's own
types and raise charmem's own errors.

Importing this package (or :mod:`charmem_server.client`) loads only httpx and charmem core; the
server parts (Starlette, uvicorn, the MCP SDK) load when :func:`create_app`, :class:`ServerConfig`,
:class:`MemoryRegistry` or :func:`build_mcp_server` is first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from charmem_server._auth import Scope, hash_token, load_tokens
from charmem_server._version import __version__
from charmem_server._wire import WIRE_FORMAT_VERSION, RemoteError
from charmem_server.client import RemoteCharacterMemory, SyncRemoteCharacterMemory

if TYPE_CHECKING:
    from charmem_server._app import ServerConfig, create_app
    from charmem_server._mcp import build_mcp_server
    from charmem_server._registry import MemoryRegistry

__all__ = [
    "WIRE_FORMAT_VERSION",
    "MemoryRegistry",
    "RemoteCharacterMemory",
    "RemoteError",
    "Scope",
    "ServerConfig",
    "SyncRemoteCharacterMemory",
    "__version__",
    "build_mcp_server",
    "create_app",
    "hash_token",
    "load_tokens",
]

_LAZY = {
    "ServerConfig": "charmem_server._app",
    "create_app": "charmem_server._app",
    "MemoryRegistry": "charmem_server._registry",
    "build_mcp_server": "charmem_server._mcp",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'charmem_server' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
