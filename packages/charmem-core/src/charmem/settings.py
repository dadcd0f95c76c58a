"""Settings from any ``Mapping[str, str]`` (DESIGN §2).

Only keys of the selected backends are read; unused ones need no placeholder. A missing or
malformed value is a :class:`~charmem.errors.ConfigurationError` naming the key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import attrs

from charmem.errors import ConfigurationError

__all__ = [
    "COLLECTION_NAME_PATTERN",
    "RESERVED_COLLECTION_NAMES",
    "Settings",
    "default_token_counter",
    "validate_collection_name",
]

#: Collection names: checked before any directory is touched (DESIGN §2).
COLLECTION_NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,127}")

_MODES: dict[str, tuple[str, ...]] = {
    "VECTOR_STORE_MODE": ("embedded", "service", "in_memory"),
    "GRAPH_STORE_MODE": ("persistent", "in_memory", "service", "reference"),
    "RETRIEVAL_STATS_STORE_MODE": ("sqlite", "in_memory"),
    "EMBEDDING_PROVIDER": ("openai", "local", "hashing"),
    "TOKEN_COUNTER": ("whitespace", "local"),
}


#: Names Windows maps to devices whatever the directory (``vectors\\nul`` is the null device).
RESERVED_COLLECTION_NAMES = frozenset(
    {"con", "prn", "aux", "nul", *(f"com{n}" for n in range(10)), *(f"lpt{n}" for n in range(10))}
)


def validate_collection_name(name: str) -> str:
    """Check a collection name against ``[a-z0-9][a-z0-9_-]{0,127}`` (DESIGN §2).

    The pattern keeps a name one plain path segment on every file system: no separator, no
    ``.``/``..``, no NUL, no upper case (so two names never differ only by case on a
    case-insensitive file system), at most 128 characters. Windows device names (``con``,
    ``nul``, ``com1``...: :data:`RESERVED_COLLECTION_NAMES`) are refused too, since a shard
    directory of that name would be the device.

    Returns:
        str: the name unchanged.

    Raises:
        ConfigurationError: the name is not allowed (so it can never escape a store root).
    """
    if not isinstance(name, str) or COLLECTION_NAME_PATTERN.fullmatch(name) is None:
        raise ConfigurationError(
            f"collection name {name!r} is not allowed: use 1-128 characters of lowercase "
            "letters, digits, '_' and '-', starting with a letter or digit",
            key="collection",
        )
    if name in RESERVED_COLLECTION_NAMES:
        raise ConfigurationError(
            f"collection name {name!r} is a Windows device name; choose another name",
            key="collection",
        )
    return name


def _registered_modes(key: str) -> tuple[str, ...]:
    """Mode names third-party adapters register in the entry-point group of ``key``."""
    from importlib.metadata import entry_points

    from charmem.composition import GROUPS

    group = next(group for group, setting in GROUPS.values() if setting == key)
    return tuple(sorted({ep.name for ep in entry_points(group=group)}))


def default_token_counter() -> str:
    """The ``TOKEN_COUNTER`` used when the key is unset: a real tokenizer when one is installed.

    Returns:
        str: ``"local"`` (charmem-local-embed's offline WordPiece counter) when an installed
        distribution registers it in the ``charmem.token_counters`` entry-point group, else
        ``"whitespace"`` (core's word count).
    """
    return "local" if "local" in _registered_modes("TOKEN_COUNTER") else "whitespace"


def _mode(mapping: Mapping[str, str], key: str, default: str) -> str:
    value = mapping.get(key)
    if value is None or value == "":
        return default
    value = value.strip().lower()
    if value not in _MODES[key] and value not in _registered_modes(key):
        known = sorted({*_MODES[key], *_registered_modes(key)})
        raise ConfigurationError(
            f"{key}={value!r} is not a known mode; choose one of {', '.join(known)} "
            "(or install an adapter that registers it)",
            key=key,
        )
    return value


def _required(mapping: Mapping[str, str], key: str, why: str) -> str:
    value = mapping.get(key)
    if value is None or not value.strip():
        raise ConfigurationError(f"{key} is required {why}; set it in the settings mapping", key=key)
    return value.strip()


def _optional(mapping: Mapping[str, str], key: str) -> str | None:
    value = mapping.get(key)
    return value.strip() if value is not None and value.strip() else None


def _path(mapping: Mapping[str, str], key: str, default: str) -> Path:
    raw = _optional(mapping, key) or default
    return _checked_path(Path(raw), key)


def _checked_path(path: Path, key: str) -> Path:
    if "\x00" in str(path):
        raise ConfigurationError(f"{key} holds a NUL character, which no file system accepts", key=key)
    return path


def _flag(mapping: Mapping[str, str], key: str, default: bool) -> bool:
    raw = _optional(mapping, key)
    if raw is None:
        return default
    value = raw.lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise ConfigurationError(f"{key}={raw!r} must be true or false", key=key)


def _positive_int(mapping: Mapping[str, str], key: str) -> int | None:
    raw = _optional(mapping, key)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigurationError(f"{key}={raw!r} must be a positive integer", key=key)
    return value


@attrs.frozen(kw_only=True)
class Settings:
    """Validated settings of one charmem deployment (DESIGN §2 table).

    Build with :meth:`from_mapping`; fields of unselected backends stay ``None``. The repr hides
    secrets (``QDRANT_API_KEY``, ``OPENAI_API_KEY``) and ``extra`` (which may hold adapters' own
    credentials, e.g. ``SPARQL_PASSWORD``).

    ``log_memory_text`` (``LOG_MEMORY_TEXT``, default false): charmem's log events carry ids and
    counts, never memory text; set it to true to add texts, queries and rationales to debug
    events while you diagnose a problem (they then reach whatever your logging sends them to).

    ``token_counter`` (``TOKEN_COUNTER``: ``whitespace`` or ``local``) defaults to
    :func:`default_token_counter`: ``local`` when charmem-local-embed is installed.

    ``vector_rebuild_on_open`` (``VECTOR_REBUILD_ON_OPEN``, default true): when a collection's
    vector index is missing (a lost shard) while its graph holds memories,
    ``CharacterMemory.open`` rebuilds the index from the graph before returning; set it to false
    to have the open refused with :class:`~charmem.errors.StoreCorruptedError` instead (then run
    ``charmem rebuild-vectors`` or open with ``rebuild_vectors=True`` when convenient).
    """

    vector_store_mode: str = "embedded"
    vector_store_path: Path = Path("./data/vectors")
    qdrant_connection_string: str | None = None
    qdrant_api_key: str | None = attrs.field(default=None, repr=False)
    graph_store_mode: str = "persistent"
    oxigraph_path: Path = Path("./data/oxigraph")
    sparql_query_endpoint: str | None = None
    sparql_update_endpoint: str | None = None
    retrieval_stats_store_mode: str = "sqlite"
    retrieval_stats_path: Path = Path("./data/retrieval-stats.sqlite3")
    embedding_provider: str = "openai"
    openai_api_key: str | None = attrs.field(default=None, repr=False)
    embedding_model: str | None = None
    openai_base_url: str | None = None
    embedding_dimensions: int | None = None
    local_embedding_model: str = "all-MiniLM-L6-v2"
    token_counter: str = attrs.field(factory=default_token_counter)
    log_memory_text: bool = False
    vector_rebuild_on_open: bool = True
    extra: Mapping[str, str] = attrs.field(factory=dict, repr=False)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, str]) -> Settings:
        """Read settings from ``mapping`` (for example ``os.environ``).

        Args:
            mapping: keys of DESIGN §2; unknown keys are kept in ``extra`` for adapters.

        Returns:
            Settings: validated values with the DESIGN defaults.

        Raises:
            ConfigurationError: a key or value is not a str, a mode is unknown, or a key its
                mode requires is missing or malformed; the error's ``key`` names it. Embedding
                keys are checked by :meth:`require_embedding_keys` when no provider object is
                passed to ``open``.
        """
        if not isinstance(mapping, Mapping):
            raise ConfigurationError(
                f"settings come from a mapping of str to str (e.g. os.environ), not {type(mapping).__name__}"
            )
        for key, value in mapping.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise ConfigurationError(
                    f"settings map str to str (as os.environ does); {key!r} maps to a {type(value).__name__}",
                    key=key if isinstance(key, str) else None,
                )
        vector_mode = _mode(mapping, "VECTOR_STORE_MODE", "embedded")
        graph_mode = _mode(mapping, "GRAPH_STORE_MODE", "persistent")
        stats_mode = _mode(mapping, "RETRIEVAL_STATS_STORE_MODE", "sqlite")
        values: dict[str, object] = {
            "vector_store_mode": vector_mode,
            "graph_store_mode": graph_mode,
            "retrieval_stats_store_mode": stats_mode,
            "log_memory_text": _flag(mapping, "LOG_MEMORY_TEXT", False),
            "vector_rebuild_on_open": _flag(mapping, "VECTOR_REBUILD_ON_OPEN", True),
            "extra": dict(mapping),
        }
        if vector_mode == "embedded":
            values["vector_store_path"] = _path(mapping, "VECTOR_STORE_PATH", "./data/vectors")
        elif vector_mode == "service":
            values["qdrant_connection_string"] = _required(
                mapping,
                "QDRANT_CONNECTION_STRING",
                "when VECTOR_STORE_MODE=service (gRPC endpoint, e.g. http://127.0.0.1:6334)",
            )
            values["qdrant_api_key"] = _optional(mapping, "QDRANT_API_KEY")
        if graph_mode == "persistent":
            values["oxigraph_path"] = _path(mapping, "OXIGRAPH_PATH", "./data/oxigraph")
        elif graph_mode == "service":
            query = _required(mapping, "SPARQL_QUERY_ENDPOINT", "when GRAPH_STORE_MODE=service")
            values["sparql_query_endpoint"] = query
            values["sparql_update_endpoint"] = _optional(mapping, "SPARQL_UPDATE_ENDPOINT") or query
        if stats_mode == "sqlite":
            values["retrieval_stats_path"] = _path(
                mapping, "RETRIEVAL_STATS_PATH", "./data/retrieval-stats.sqlite3"
            )
        values["token_counter"] = (
            _mode(mapping, "TOKEN_COUNTER", "whitespace")
            if mapping.get("TOKEN_COUNTER")
            else default_token_counter()
        )
        provider = _mode(mapping, "EMBEDDING_PROVIDER", "openai")
        values["embedding_provider"] = provider
        if provider == "openai":
            values["openai_api_key"] = _optional(mapping, "OPENAI_API_KEY")
            values["embedding_model"] = _optional(mapping, "EMBEDDING_MODEL")
            values["openai_base_url"] = _optional(mapping, "OPENAI_BASE_URL")
            values["embedding_dimensions"] = _positive_int(mapping, "EMBEDDING_DIMENSIONS")
        elif provider == "local":
            values["local_embedding_model"] = (
                _optional(mapping, "LOCAL_EMBEDDING_MODEL") or "all-MiniLM-L6-v2"
            )
        return cls(**values)  # type: ignore[arg-type]

    def require_embedding_keys(self) -> None:
        """Check the keys the selected ``EMBEDDING_PROVIDER`` needs.

        Called when no provider object is given: ``openai`` needs ``OPENAI_API_KEY`` and
        ``EMBEDDING_MODEL``.

        Raises:
            ConfigurationError: a required key is missing; its ``key`` names it.
        """
        if self.embedding_provider == "openai":
            for key, value in (
                ("OPENAI_API_KEY", self.openai_api_key),
                ("EMBEDDING_MODEL", self.embedding_model),
            ):
                if not value:
                    raise ConfigurationError(
                        f"{key} is required when EMBEDDING_PROVIDER=openai (the library default); "
                        "set it, set EMBEDDING_PROVIDER=local, or pass an embedding_provider object",
                        key=key,
                    )

    def with_store_root(self, root: Path) -> Settings:
        """Return settings with every embedded store path under ``root`` (the CLI's ``--store``).

        Raises:
            ConfigurationError: ``root`` holds a NUL character.
        """
        root = _checked_path(Path(root), "store root")
        return attrs.evolve(
            self,
            vector_store_path=root / "vectors",
            oxigraph_path=root / "oxigraph",
            retrieval_stats_path=root / "retrieval-stats.sqlite3",
        )
