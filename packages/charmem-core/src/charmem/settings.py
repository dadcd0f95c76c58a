"""Settings from any ``Mapping[str, str]`` (the keys are tabled in the README and docs/).

Only keys of the selected backends are read; unused ones need no placeholder. A missing or
malformed value is a :class:`~charmem.errors.ConfigurationError` naming the key.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import attrs

from charmem._placement import (
    SPARQL_ENDPOINTS_KEY,
    SparqlEndpoints,
    SparqlShard,
    parse_sparql_endpoints,
    shard_index,
)
from charmem.errors import ConfigurationError, mask_secrets, with_article
from charmem.log import get_logger

__all__ = [
    "COLLECTION_NAME_PATTERN",
    "DEFAULT_EMBEDDING_TIMEOUT_S",
    "KNOWN_SETTINGS_KEYS",
    "RESERVED_COLLECTION_NAMES",
    "Settings",
    "SparqlEndpoints",
    "SparqlShard",
    "default_stats_mode",
    "default_token_counter",
    "near_miss_key",
    "shard_index",
    "validate_collection_name",
]

log = get_logger("charmem.settings")

#: Seconds one call of the embedding provider may take (``EMBEDDING_TIMEOUT_S``): each call
#: embeds at most one batch (``CommitOptions.embed_batch_size`` texts, or one query), so a
#: minute is far above a healthy answer and still ends a hung connection.
DEFAULT_EMBEDDING_TIMEOUT_S: Final = 60.0

#: Every settings key charmem and its first-party adapters read; a key close to one of these
#: (but not one of them) is logged as a probable typo by :meth:`Settings.from_mapping`.
KNOWN_SETTINGS_KEYS: Final = frozenset(
    {
        # core (the README settings table)
        "VECTOR_STORE_MODE",
        "VECTOR_STORE_PATH",
        "QDRANT_CONNECTION_STRING",
        "QDRANT_API_KEY",
        "VECTOR_SERVICE_LAYOUT",
        "GRAPH_STORE_MODE",
        "OXIGRAPH_PATH",
        "SPARQL_QUERY_ENDPOINT",
        "SPARQL_UPDATE_ENDPOINT",
        "SPARQL_ENDPOINTS",
        "RETRIEVAL_STATS_STORE_MODE",
        "RETRIEVAL_STATS_PATH",
        "EMBEDDING_PROVIDER",
        "OPENAI_API_KEY",
        "EMBEDDING_MODEL",
        "OPENAI_BASE_URL",
        "EMBEDDING_DIMENSIONS",
        "EMBEDDING_TIMEOUT_S",
        "LOCAL_EMBEDDING_MODEL",
        "TOKEN_COUNTER",
        "LOG_MEMORY_TEXT",
        # read from ``Settings.extra`` by charmem-openai, -oxigraph, -qdrant and the CLI
        "OPENAI_MAX_RETRIES",
        "OPENAI_TIMEOUT",
        "SPARQL_USERNAME",
        "SPARQL_PASSWORD",
        "SPARQL_BEARER_TOKEN",
        "SPARQL_AUTH_SCHEME",
        "SPARQL_TIMEOUT",
        "OXIGRAPH_FLUSH_MIB",
        "QDRANT_TIMEOUT",
        "VECTOR_LEXICAL_CUE",
        "VECTOR_LEXICAL_WEIGHT",
        "VECTOR_HNSW_THRESHOLD",
        "VECTOR_HNSW_M",
        "VECTOR_HNSW_EF_CONSTRUCT",
        "VECTOR_HNSW_EF",
        "VECTOR_HNSW_BACKGROUND",
        "CHARMEM_COLLECTION",
    }
)

# Only upper-case keys with an underscore look like settings keys (PATH, HOME, LANG never match).
_SETTINGS_KEY_SHAPE: Final = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
# difflib ratio a typo must reach: one missing, doubled or swapped letter in a key of ~15
# characters scores about 0.93-0.97; unrelated keys sharing a word (QDRANT_API_KEY and
# OPENAI_API_KEY: 0.71) stay below.
_NEAR_MISS_RATIO: Final = 0.85

#: Collection names: checked before any directory is touched.
COLLECTION_NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_-]{0,127}")

_MODES: dict[str, tuple[str, ...]] = {
    "VECTOR_STORE_MODE": ("embedded", "service", "in_memory"),
    "GRAPH_STORE_MODE": ("persistent", "in_memory", "service", "reference"),
    "RETRIEVAL_STATS_STORE_MODE": ("sqlite", "in_memory", "graph"),
    "EMBEDDING_PROVIDER": ("openai", "local", "hashing"),
    "TOKEN_COUNTER": ("whitespace", "local"),
}


#: ``VECTOR_SERVICE_LAYOUT``: the Qdrant collections of ``VECTOR_STORE_MODE=service``; ``shared``
#: (one per embedder fingerprint, a tenant per charmem collection) or ``per_collection``.
VECTOR_SERVICE_LAYOUTS: Final = ("shared", "per_collection")


#: Names Windows maps to devices whatever the directory (``vectors\\nul`` is the null device).
RESERVED_COLLECTION_NAMES = frozenset(
    {"con", "prn", "aux", "nul", *(f"com{n}" for n in range(10)), *(f"lpt{n}" for n in range(10))}
)


def validate_collection_name(name: str) -> str:
    """Check a collection name against ``[a-z0-9][a-z0-9_-]{0,127}``.

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


def default_stats_mode(graph_mode: str) -> str:
    """The ``RETRIEVAL_STATS_STORE_MODE`` used when the key is unset.

    ``graph`` (statistics computed from the graph server, the same for every process) with
    ``GRAPH_STORE_MODE=service`` when an installed distribution registers it (charmem-oxigraph),
    else ``sqlite``: a per-process file in service mode would count only that process's writes.

    Returns:
        str: ``"graph"`` or ``"sqlite"``.
    """
    if graph_mode == "service" and "graph" in _registered_modes("RETRIEVAL_STATS_STORE_MODE"):
        return "graph"
    return "sqlite"


def near_miss_key(key: str) -> str | None:
    """The known settings key ``key`` is probably a typo of, if any.

    A key is a near miss when it is not a known key (:data:`KNOWN_SETTINGS_KEYS`) and either
    differs from one only by case, or looks like a settings key (upper case, words joined by
    ``_``) and is close to one (``difflib`` ratio >= 0.85: ``EMBEDING_PROVIDER`` is close to
    ``EMBEDDING_PROVIDER``). Other environment variables (``PATH``, ``HOME``) are never near
    misses.

    Returns:
        str | None: the known key, or ``None``.
    """
    if key in KNOWN_SETTINGS_KEYS:
        return None
    if key.upper() in KNOWN_SETTINGS_KEYS:
        return key.upper()
    if _SETTINGS_KEY_SHAPE.fullmatch(key) is None:
        return None
    close = difflib.get_close_matches(key, KNOWN_SETTINGS_KEYS, n=1, cutoff=_NEAR_MISS_RATIO)
    return close[0] if close else None


def _warn_near_misses(mapping: Mapping[str, str]) -> None:
    for key in mapping:
        known = near_miss_key(key)
        if known is not None:
            log.warning(
                "settings_key_unknown",
                key=key,
                did_you_mean=known,
                hint=f"{key} is not a charmem setting and is ignored; did you mean {known}?",
            )


def _masked_repr(value: object) -> str:
    return repr(mask_secrets(value) if isinstance(value, str) else value)


def _seconds(mapping: Mapping[str, str], key: str, default: float) -> float:
    raw = _optional(mapping, key)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ConfigurationError(f"{key}={raw!r} must be a positive number of seconds", key=key)
    return value


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
    """Validated settings of one charmem deployment (the README's settings table).

    Build with :meth:`from_mapping`; fields of unselected backends stay ``None``. The repr hides
    secrets (``QDRANT_API_KEY``, ``OPENAI_API_KEY``) and ``extra`` (which may hold adapters' own
    credentials, e.g. ``SPARQL_PASSWORD``), and masks the password of URL-valued settings
    (``http://alice:***@host/query``; :func:`~charmem.errors.mask_secrets`).

    ``embedding_timeout_s`` (``EMBEDDING_TIMEOUT_S``, default
    :data:`DEFAULT_EMBEDDING_TIMEOUT_S` = 60): seconds one embedding-provider call (one batch of
    texts, or one query) may take. A commit, correction or forget whose call times out keeps its
    graph write and reports a ``VectorMaintenance`` repair marker; retrieval and vector rebuilds
    raise :class:`~charmem.errors.EmbeddingTimeoutError`.

    ``log_memory_text`` (``LOG_MEMORY_TEXT``, default false): charmem's log events carry ids and
    counts, never memory text; set it to true to add texts, queries and rationales to debug
    events while you diagnose a problem (they then reach whatever your logging sends them to).

    ``token_counter`` (``TOKEN_COUNTER``: ``whitespace`` or ``local``) defaults to
    :func:`default_token_counter`: ``local`` when charmem-local-embed is installed.

    ``vector_service_layout`` (``VECTOR_SERVICE_LAYOUT``, read with ``VECTOR_STORE_MODE=service``):
    ``shared`` (the default: one Qdrant collection per embedder fingerprint, each charmem
    collection a tenant of it) or ``per_collection`` (one Qdrant collection per charmem
    collection); see the charmem-qdrant README.

    ``retrieval_stats_store_mode`` (``RETRIEVAL_STATS_STORE_MODE``: ``sqlite``, ``in_memory`` or
    an adapter's mode, e.g. charmem-oxigraph's ``graph``) defaults to :func:`default_stats_mode`:
    ``graph`` with ``GRAPH_STORE_MODE=service`` when it is installed, else ``sqlite``.

    ``sparql_endpoints`` (``SPARQL_ENDPOINTS``, service mode only, instead of
    ``SPARQL_QUERY_ENDPOINT``/``SPARQL_UPDATE_ENDPOINT``): several graph servers, each collection
    on one of them (:meth:`sparql_shard`; see :func:`charmem.settings.shard_index`).

    ``vector_rebuild_on_open`` (``VECTOR_REBUILD_ON_OPEN``, default true): when a collection's
    vector index is missing (a lost shard) while its graph holds memories,
    ``CharacterMemory.open`` rebuilds the index from the graph before returning; set it to false
    to have the open refused with :class:`~charmem.errors.StoreCorruptedError` instead (then run
    ``charmem rebuild-vectors`` or open with ``rebuild_vectors=True`` when convenient).
    """

    vector_store_mode: str = "embedded"
    vector_store_path: Path = Path("./data/vectors")
    qdrant_connection_string: str | None = attrs.field(default=None, repr=_masked_repr)
    qdrant_api_key: str | None = attrs.field(default=None, repr=False)
    vector_service_layout: str = "shared"
    graph_store_mode: str = "persistent"
    oxigraph_path: Path = Path("./data/oxigraph")
    sparql_query_endpoint: str | None = attrs.field(default=None, repr=_masked_repr)
    sparql_update_endpoint: str | None = attrs.field(default=None, repr=_masked_repr)
    sparql_endpoints: SparqlEndpoints | None = attrs.field(default=None, repr=False)
    retrieval_stats_store_mode: str = "sqlite"
    retrieval_stats_path: Path = Path("./data/retrieval-stats.sqlite3")
    embedding_provider: str = "openai"
    openai_api_key: str | None = attrs.field(default=None, repr=False)
    embedding_model: str | None = None
    openai_base_url: str | None = attrs.field(default=None, repr=_masked_repr)
    embedding_dimensions: int | None = None
    embedding_timeout_s: float = DEFAULT_EMBEDDING_TIMEOUT_S
    local_embedding_model: str = "all-MiniLM-L6-v2"
    token_counter: str = attrs.field(factory=default_token_counter)
    log_memory_text: bool = False
    vector_rebuild_on_open: bool = True
    extra: Mapping[str, str] = attrs.field(factory=dict, repr=False)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, str]) -> Settings:
        """Read settings from ``mapping`` (for example ``os.environ``).

        Args:
            mapping: the settings keys (README's table); unknown keys are kept in ``extra`` for
                adapters. A key that looks like a typo of a known one (``EMBEDING_PROVIDER``; see
                :func:`near_miss_key`) is logged as a warning naming the known key.

        Returns:
            Settings: validated values with the documented defaults.

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
                    f"settings map str to str (as os.environ does); {key!r} maps to "
                    f"{with_article(type(value).__name__)}",
                    key=key if isinstance(key, str) else None,
                )
        _warn_near_misses(mapping)
        vector_mode = _mode(mapping, "VECTOR_STORE_MODE", "embedded")
        graph_mode = _mode(mapping, "GRAPH_STORE_MODE", "persistent")
        stats_mode = _mode(mapping, "RETRIEVAL_STATS_STORE_MODE", "")
        stats_mode = stats_mode or default_stats_mode(graph_mode)
        values: dict[str, object] = {
            "vector_store_mode": vector_mode,
            "graph_store_mode": graph_mode,
            "retrieval_stats_store_mode": stats_mode,
            "log_memory_text": _flag(mapping, "LOG_MEMORY_TEXT", False),
            "embedding_timeout_s": _seconds(mapping, "EMBEDDING_TIMEOUT_S", DEFAULT_EMBEDDING_TIMEOUT_S),
            "vector_rebuild_on_open": _flag(mapping, "VECTOR_REBUILD_ON_OPEN", True),
            "extra": dict(mapping),
        }
        values.update(_store_keys(mapping, vector_mode, graph_mode, stats_mode))
        values["token_counter"] = (
            _mode(mapping, "TOKEN_COUNTER", "whitespace")
            if mapping.get("TOKEN_COUNTER")
            else default_token_counter()
        )
        provider = _mode(mapping, "EMBEDDING_PROVIDER", "openai")
        values["embedding_provider"] = provider
        values.update(_embedding_keys(mapping, provider))
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

    def sparql_shard(self, collection: str) -> SparqlShard:
        """The SPARQL endpoints holding ``collection`` in ``GRAPH_STORE_MODE=service``.

        With ``SPARQL_ENDPOINTS``, the shard it pins the collection to or its hash picks
        (:func:`charmem.settings.shard_index`); else ``SPARQL_QUERY_ENDPOINT`` and
        ``SPARQL_UPDATE_ENDPOINT``.

        Raises:
            ConfigurationError: the mode is not ``service``, or no endpoint is set.
        """
        if self.graph_store_mode == "service" and self.sparql_endpoints is not None:
            return self.sparql_endpoints.shard_for(collection)
        if self.graph_store_mode != "service" or not self.sparql_query_endpoint:
            raise ConfigurationError(
                "the SPARQL service store needs GRAPH_STORE_MODE=service and SPARQL_QUERY_ENDPOINT "
                "(or SPARQL_ENDPOINTS)",
                key="SPARQL_QUERY_ENDPOINT",
            )
        return SparqlShard(
            query=self.sparql_query_endpoint,
            update=self.sparql_update_endpoint or self.sparql_query_endpoint,
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


def _store_keys(
    mapping: Mapping[str, str], vector_mode: str, graph_mode: str, stats_mode: str
) -> dict[str, object]:
    """The keys of the selected store modes (only those are read)."""
    values: dict[str, object] = {}
    if vector_mode == "embedded":
        values["vector_store_path"] = _path(mapping, "VECTOR_STORE_PATH", "./data/vectors")
    elif vector_mode == "service":
        values["qdrant_connection_string"] = _required(
            mapping,
            "QDRANT_CONNECTION_STRING",
            "when VECTOR_STORE_MODE=service (gRPC endpoint, e.g. http://127.0.0.1:6334)",
        )
        values["qdrant_api_key"] = _optional(mapping, "QDRANT_API_KEY")
        values["vector_service_layout"] = _service_layout(mapping)
    if graph_mode == "persistent":
        values["oxigraph_path"] = _path(mapping, "OXIGRAPH_PATH", "./data/oxigraph")
    elif graph_mode == "service":
        values.update(_sparql_keys(mapping))
    if stats_mode == "sqlite":
        values["retrieval_stats_path"] = _path(
            mapping, "RETRIEVAL_STATS_PATH", "./data/retrieval-stats.sqlite3"
        )
    return values


def _service_layout(mapping: Mapping[str, str]) -> str:
    """``VECTOR_SERVICE_LAYOUT``: one of :data:`VECTOR_SERVICE_LAYOUTS`, ``shared`` when unset."""
    value = (mapping.get("VECTOR_SERVICE_LAYOUT") or "shared").strip().lower()
    if value not in VECTOR_SERVICE_LAYOUTS:
        raise ConfigurationError(
            f"VECTOR_SERVICE_LAYOUT={value!r} is not a layout; choose shared (one Qdrant "
            "collection per embedder, the default) or per_collection",
            key="VECTOR_SERVICE_LAYOUT",
        )
    return value


def _sparql_keys(mapping: Mapping[str, str]) -> dict[str, object]:
    """``SPARQL_ENDPOINTS`` (shards), or ``SPARQL_QUERY_ENDPOINT`` and ``SPARQL_UPDATE_ENDPOINT``."""
    sharded = _optional(mapping, SPARQL_ENDPOINTS_KEY)
    if sharded is None:
        query = _required(mapping, "SPARQL_QUERY_ENDPOINT", "when GRAPH_STORE_MODE=service")
        return {
            "sparql_query_endpoint": query,
            "sparql_update_endpoint": _optional(mapping, "SPARQL_UPDATE_ENDPOINT") or query,
        }
    both = [key for key in ("SPARQL_QUERY_ENDPOINT", "SPARQL_UPDATE_ENDPOINT") if _optional(mapping, key)]
    if both:
        raise ConfigurationError(
            f"{SPARQL_ENDPOINTS_KEY} and {' and '.join(both)} are both set; they are alternatives: "
            f"keep {SPARQL_ENDPOINTS_KEY} (several graph servers) or {both[0]} (one), not both",
            key=SPARQL_ENDPOINTS_KEY,
        )
    return {"sparql_endpoints": parse_sparql_endpoints(sharded)}


def _embedding_keys(mapping: Mapping[str, str], provider: str) -> dict[str, object]:
    """The keys of the selected ``EMBEDDING_PROVIDER`` (only those are read)."""
    if provider == "openai":
        return {
            "openai_api_key": _optional(mapping, "OPENAI_API_KEY"),
            "embedding_model": _optional(mapping, "EMBEDDING_MODEL"),
            "openai_base_url": _optional(mapping, "OPENAI_BASE_URL"),
            "embedding_dimensions": _positive_int(mapping, "EMBEDDING_DIMENSIONS"),
        }
    if provider == "local":
        return {"local_embedding_model": _optional(mapping, "LOCAL_EMBEDDING_MODEL") or "all-MiniLM-L6-v2"}
    return {}
