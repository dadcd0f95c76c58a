"""Bearer tokens: a JSON file of SHA-256 hashes, each with its collections and scopes.

The file (``charmem serve --tokens FILE``)::

    {"tokens": [
        {"name": "web-app", "sha256": "<64 hex digits>", "collections": ["ana", "ben"],
         "scopes": ["read", "write"]},
        {"name": "ops", "sha256": "<64 hex digits>", "collections": "*", "scopes": ["admin", "read"]}
    ]}

``charmem_server.hash_token("the secret")`` (or ``charmem serve --hash-token``) gives the hash.
Tokens themselves are never stored, logged or compared as text: the presented token is hashed
and compared with every stored hash in constant time. A file readable or writable by group or
others is refused.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import json
import os
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

import attrs

from charmem.errors import ConfigurationError

__all__ = ["Principal", "Scope", "TokenTable", "hash_token", "load_tokens"]

_HEX64: Final = re.compile(r"^[0-9a-f]{64}$")
#: The principal of a server without a token file (loopback only): every scope, every collection.
_LOCAL_NAME: Final = "loopback (no token file)"


class Scope(enum.Enum):
    """What a token may do.

    ``read``: retrieve, prepare, validate. ``write``: remember, commit, correct, forget, link.
    ``admin``: check.
    """

    READ = "read"
    WRITE = "write"
    ADMIN = "admin"


@attrs.frozen
class Principal:
    """Who made a request: the token's name, its collections (``None``: all) and scopes."""

    name: str
    collections: frozenset[str] | None
    scopes: frozenset[Scope]

    def may(self, scope: Scope, collection: str | None) -> bool:
        """Whether this principal holds ``scope`` on ``collection`` (``None``: any collection)."""
        if scope not in self.scopes:
            return False
        return self.collections is None or collection is None or collection in self.collections


def hash_token(token: str) -> str:
    """The SHA-256 hex digest stored in the token file for ``token``."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@attrs.frozen
class TokenTable:
    """The principals of a token file, found by the hash of a presented token."""

    entries: tuple[tuple[bytes, Principal], ...]

    @classmethod
    def allow_all(cls) -> Principal:
        """The principal of a loopback server without a token file."""
        return Principal(_LOCAL_NAME, None, frozenset(Scope))

    def find(self, token: str) -> Principal | None:
        """The principal whose hash matches ``token``, comparing every entry in constant time."""
        digest = hashlib.sha256(token.encode("utf-8")).digest()
        found: Principal | None = None
        for stored, principal in self.entries:
            if hmac.compare_digest(stored, digest) and found is None:
                found = principal
        return found


def _entry(raw: Any, index: int, path: Path) -> tuple[bytes, Principal]:
    where = f"token file {path}, entry {index}"
    if not isinstance(raw, Mapping):
        raise ConfigurationError(f"{where} must be an object", key="--tokens")
    unknown = set(raw) - {"name", "sha256", "collections", "scopes"}
    if unknown:
        raise ConfigurationError(f"{where} has unknown keys {sorted(unknown)}", key="--tokens")
    digest = _entry_digest(raw.get("sha256"), where)
    allowed = _entry_collections(raw.get("collections"), where)
    scopes = _entry_scopes(raw.get("scopes"), where)
    name = raw.get("name", f"token {index}")
    if not isinstance(name, str) or not name.strip():
        raise ConfigurationError(f"{where}: name must be a non-blank string", key="--tokens")
    return digest, Principal(name, allowed, scopes)


def _entry_digest(digest: Any, where: str) -> bytes:
    if not isinstance(digest, str) or not _HEX64.match(digest):
        raise ConfigurationError(
            f"{where}: sha256 must be 64 lowercase hex digits (charmem serve --hash-token gives "
            "them); never put the token itself in the file",
            key="--tokens",
        )
    return bytes.fromhex(digest)


def _entry_collections(collections: Any, where: str) -> frozenset[str] | None:
    """The collections an entry allows; ``None`` for ``"*"`` (every collection)."""
    if collections == "*":
        return None
    if isinstance(collections, list) and collections and all(isinstance(c, str) for c in collections):
        return frozenset(collections)
    raise ConfigurationError(f'{where}: collections must be "*" or a list of names', key="--tokens")


def _entry_scopes(scopes: Any, where: str) -> frozenset[Scope]:
    values = {s.value for s in Scope}
    if not isinstance(scopes, list) or not scopes or not set(scopes) <= values:
        raise ConfigurationError(
            f"{where}: scopes must be a non-empty list of {sorted(values)}", key="--tokens"
        )
    return frozenset(Scope(s) for s in scopes)


def load_tokens(path: Path | str) -> TokenTable:
    """Read a token file.

    Args:
        path: the JSON file (see the module docstring).

    Returns:
        TokenTable: its principals.

    Raises:
        ConfigurationError: the file is missing, readable or writable by group or others (the
            message says the ``chmod``), not JSON, or an entry is malformed (``key="--tokens"``).
    """
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise ConfigurationError(
            f"cannot read the token file {path}: {exc.strerror}", key="--tokens"
        ) from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO) and os.name == "posix":
        raise ConfigurationError(
            f"the token file {path} is accessible by group or others (mode {stat.S_IMODE(mode):o}); "
            f"run `chmod 600 {path}`",
            key="--tokens",
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(
            f"the token file {path} is not readable JSON: {exc}", key="--tokens"
        ) from exc
    tokens = data.get("tokens") if isinstance(data, Mapping) else None
    if not isinstance(tokens, list) or not tokens:
        raise ConfigurationError(
            f'the token file {path} must hold {{"tokens": [...]}} with at least one entry', key="--tokens"
        )
    return TokenTable(tuple(_entry(raw, index, path) for index, raw in enumerate(tokens)))


def scopes_of(names: Iterable[str]) -> frozenset[Scope]:
    """Scopes from their names (for tests and tools)."""
    return frozenset(Scope(name) for name in names)
