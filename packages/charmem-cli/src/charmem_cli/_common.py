"""What every command of the CLI shares: settings, the embedder, and the guards on the stores.

The guards refuse a command on stores that do not exist (opening a memory would create them) or
on a collection they do not hold, before anything is opened.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, Protocol, runtime_checkable

from charmem import ConfigurationError, Settings
from charmem.ports import EmbeddingProvider
from charmem.usecases.embedding import provider_batch_size

__all__ = [
    "DEFAULT_COLLECTION",
    "LazyModel",
    "TimedEmbedder",
    "announce_model_load",
    "cli_settings",
    "embedding_provider",
    "parse_occurred_at",
    "require_collection",
    "require_graph_store",
]

DEFAULT_COLLECTION = "charmem"


def cli_settings(environ: Mapping[str, str], store: str | None) -> Settings:
    """Settings for the CLI: the environment, with ``EMBEDDING_PROVIDER`` defaulting to ``local``.

    Args:
        environ: usually ``os.environ``.
        store: a directory holding every embedded store (``--store``), or ``None``.

    Raises:
        ConfigurationError: a setting is missing or malformed.
    """
    mapping = dict(environ)
    mapping.setdefault("EMBEDDING_PROVIDER", "local")
    settings = Settings.from_mapping(mapping)
    return settings.with_store_root(Path(store)) if store else settings


class TimedEmbedder:
    """Wraps a provider and adds up the seconds and texts of ``embed_documents``.

    Ingest can then be reported with and without embedding. Queries are not counted.
    """

    def __init__(self, inner: EmbeddingProvider) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.texts = 0

    @property
    def model_id(self) -> str:
        """The wrapped provider's model id."""
        return self.inner.model_id

    @property
    def vector_size(self) -> int:
        """The wrapped provider's size."""
        return self.inner.vector_size

    @property
    def preferred_batch_size(self) -> int:
        """The wrapped provider's efficient call size (64 when it states none)."""
        return provider_batch_size(self.inner)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed and time."""
        start = time.perf_counter()
        try:
            return await self.inner.embed_documents(texts)
        finally:
            self.seconds += time.perf_counter() - start
            self.texts += len(texts)

    async def embed_query(self, text: str) -> list[float]:
        """Embed a query (not timed)."""
        return await self.inner.embed_query(text)


def embedding_provider(settings: Settings) -> EmbeddingProvider:
    """The embedder ``EMBEDDING_PROVIDER`` selects (its model not loaded yet).

    Raises:
        ConfigurationError: a key the embedder needs is missing, or its adapter is not installed.
    """
    from charmem.composition import load_adapter

    settings.require_embedding_keys()
    provider: EmbeddingProvider = load_adapter("embedder", settings.embedding_provider).from_settings(
        settings
    )
    return provider


@runtime_checkable
class LazyModel(Protocol):
    """An embedder that loads its model on first use, and can be told to load it now.

    charmem-local-embed's provider is one: its first call imports torch and reads the weights
    (seconds), which a command would otherwise spend silently.
    """

    @property
    def is_loaded(self) -> bool:
        """Whether the model is in memory."""
        ...

    def load(self) -> None:
        """Load the model now (blocking)."""
        ...


async def announce_model_load(provider: EmbeddingProvider, out: IO[str] | None = None) -> None:
    """Load a lazily loading embedder's model now, saying so on stderr first.

    A command that will embed calls this once it knows it will run, so the wait shows a line
    (``charmem: loading the embedding model ... ``) on stderr, never on stdout. Providers that
    load nothing (the hashing embedder, OpenAI) are left alone.

    Args:
        provider: the command's embedder.
        out: where to write the line (default ``sys.stderr``).

    Raises:
        ConfigurationError, BackendError: the model could not be loaded (see the provider).
    """
    if not isinstance(provider, LazyModel) or provider.is_loaded:
        return
    print(f"charmem: loading the embedding model {provider.model_id} ...", file=out or sys.stderr, flush=True)
    await asyncio.to_thread(provider.load)


def require_graph_store(settings: Settings, collection: str) -> None:
    """Refuse a command that reads a collection when its graph store does not exist.

    Opening a memory creates its stores, so ``recall``, ``export``, ``purge`` and
    ``rebuild-vectors`` on a mistyped ``--store`` would otherwise leave new, empty stores behind
    and answer as if the collection were empty. Stores whose adapter factory cannot tell
    (``exists`` answers ``None``: servers, in-memory stores) are not checked.

    Args:
        settings: the deployment settings.
        collection: the collection name.

    Raises:
        ConfigurationError: the persistent graph store is missing (``key="OXIGRAPH_PATH"``), or
            the collection name is not allowed.
    """
    from charmem.composition import load_factory

    if load_factory("graph", settings.graph_store_mode).exists(settings, collection) is False:
        raise ConfigurationError(
            f"there is no graph store for GRAPH_STORE_MODE={settings.graph_store_mode!r} at "
            f"{settings.oxigraph_path}; nothing was created (point OXIGRAPH_PATH or --store at an "
            "existing store)",
            key="OXIGRAPH_PATH",
        )


async def require_collection(settings: Settings, collection: str) -> None:
    """Refuse a command on a collection these stores do not hold (a mistyped name or path).

    The graph store must exist; a collection without a vector shard is refused only when its
    graph is empty too: a lost shard beside a graph that holds memories is rebuilt by the open
    (``VECTOR_REBUILD_ON_OPEN``), as the library does.

    Raises:
        ConfigurationError: no graph store there, or no shard and nothing in the collection's
            graph; nothing was created.
    """
    require_graph_store(settings, collection)
    await _require_graph_collection(settings, collection)


async def _require_graph_collection(settings: Settings, collection: str) -> None:
    """Refuse to rebuild the vectors of a collection that has no shard and nothing in the graph.

    ``rebuild-vectors`` re-creates a lost shard, so it cannot rely on the shard check of
    :func:`require_graph_store`; a collection whose graph is empty too is a mistyped name, and
    rebuilding it would create an empty shard that later commands take for a real collection.

    Raises:
        ConfigurationError: no shard and no statement in the collection's graph
            (``key="collection"``).
    """
    from charmem.composition import load_factory

    if load_factory("vectors", settings.vector_store_mode).exists(settings, collection) is not False:
        return
    graph = await load_factory("graph", settings.graph_store_mode).open(settings, collection)
    try:
        statements = await graph.statement_count()
    finally:
        await graph.close()
    if not statements:
        raise ConfigurationError(
            f"collection {collection!r} holds nothing in these stores (an empty graph and no "
            f"vector index at {settings.vector_store_path}); nothing was created (check "
            "--collection or CHARMEM_COLLECTION, and --store)",
            key="collection",
        )


def parse_occurred_at(value: str) -> datetime:
    """``remember --occurred-at``: an ISO 8601 instant with a UTC offset.

    Raises:
        ConfigurationError: not ISO 8601, or no offset (``key="--occurred-at"``).
    """
    example = "e.g. 2024-06-01T18:30:00+00:00 or 2024-06-01T18:30:00Z"
    try:
        when = datetime.fromisoformat(value)
    except ValueError as exc:
        raise ConfigurationError(
            f"--occurred-at {value!r} is not an ISO 8601 time ({example})", key="--occurred-at"
        ) from exc
    if when.tzinfo is None or when.utcoffset() is None:
        raise ConfigurationError(
            f"--occurred-at {value!r} has no UTC offset; add one ({example})", key="--occurred-at"
        )
    return when
