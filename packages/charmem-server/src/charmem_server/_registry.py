"""The memories one server process owns: one open :class:`CharacterMemory` per collection.

Collections are opened on first use and stay open until the server stops. A collection that
does not exist yet is created by its first write; reads of it (retrieve, prepare, validate)
answer from an empty, throw-away reference stack, so a mistyped name never leaves empty stores
behind. With embedded stores the registry also holds a lock file under the store root, so a
second server on the same stores refuses to start instead of failing on its first request.

Character ids come from the server's configuration (``charmem serve --character-id
COLLECTION=ID``): a collection named there opens with ``character_id=ID``, which records it on
the collection's first open and refuses a collection recording another character. Such a
collection is left closed (logged at start-up) and every request for it answers that
:class:`~charmem.errors.CharacterIdentityMismatchError` (HTTP 409); the others are served.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import IO, Any, Final

from charmem import CharacterMemory, MemoryId, Settings, StoreLockedError
from charmem.composition import load_adapter, load_factory, load_token_counter
from charmem.errors import CharacterIdentityMismatchError
from charmem.log import get_logger
from charmem.ports import EmbeddingProvider
from charmem.settings import validate_collection_name

__all__ = ["LOCK_FILE_NAME", "MemoryRegistry", "load_embedder"]

log = get_logger("charmem_server.registry")

#: The lock file a serving process holds in the directory of its embedded stores.
LOCK_FILE_NAME: Final = ".charmem-serve.lock"


def load_embedder(settings: Settings) -> EmbeddingProvider:
    """The embedding provider ``EMBEDDING_PROVIDER`` selects (one for every collection).

    Raises:
        ConfigurationError: a key is missing or the provider is not installed.
    """
    settings.require_embedding_keys()
    provider: EmbeddingProvider = load_adapter("embedder", settings.embedding_provider).from_settings(
        settings
    )
    return provider


def _uses_embedded_stores(settings: Settings) -> bool:
    return settings.graph_store_mode == "persistent" or settings.vector_store_mode == "embedded"


class _ServeLock:
    """An exclusive, non-blocking lock on ``<dir>/.charmem-serve.lock`` holding the owner's pid."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / LOCK_FILE_NAME
        self._handle: IO[str] | None = None

    def acquire(self) -> None:
        if os.name != "posix":  # the stores' own locks still refuse a second process
            return
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            owner = handle.read().strip() or "unknown"
            handle.close()
            raise StoreLockedError(
                f"another charmem server (pid {owner}) already serves the stores under "
                f"{self.path.parent}; stop it, point --store at another directory, or send your "
                "requests to the running server (CHARMEM_SERVER_URL)"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._handle = handle

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()  # closing drops the flock
            self._handle = None


class MemoryRegistry:
    """Open memories by collection, shared by every request of one server process.

    Args:
        settings: the deployment settings (the CLI's: ``--store`` and the environment).
        embedder: the embedding provider of every collection (default: built from settings).
        store_root: the directory of the embedded stores, locked while the server runs
            (default: the directory holding ``OXIGRAPH_PATH``).
        character_ids: collection name -> the character id it is opened with (recorded on its
            first open, checked on every later one); collections not named open without one.

    Raises:
        ConfigurationError: a name in ``character_ids`` is not a valid collection name.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        embedder: EmbeddingProvider | None = None,
        store_root: Path | None = None,
        character_ids: Mapping[str, MemoryId] | None = None,
    ) -> None:
        self.settings = settings
        self.character_ids = {
            validate_collection_name(name): MemoryId(str(value))
            for name, value in (character_ids or {}).items()
        }
        self._embedder = embedder
        self._memories: dict[str, CharacterMemory] = {}
        self._opening: dict[str, asyncio.Future[CharacterMemory]] = {}
        self._lock: _ServeLock | None = None
        if _uses_embedded_stores(settings):
            self._lock = _ServeLock(store_root or Path(settings.oxigraph_path).parent)
        self._token_counter: Any = None
        self._closed = False
        self._started = False

    @property
    def embedder(self) -> EmbeddingProvider:
        """The embedding provider (built on first use)."""
        if self._embedder is None:
            self._embedder = load_embedder(self.settings)
        return self._embedder

    @property
    def collections(self) -> list[str]:
        """The collections open now, sorted."""
        return sorted(self._memories)

    async def start(self) -> None:
        """Take the store lock, build and warm the embedder and open every existing collection.

        Raises:
            StoreLockedError: another server serves these stores, or another process holds one.
            ConfigurationError: the settings or the embedder are wrong.
        """
        if self._started:
            return
        self._started = True
        if self._lock is not None:
            await asyncio.to_thread(self._lock.acquire)
        try:
            await asyncio.to_thread(lambda: self.embedder)
            self._token_counter = await asyncio.to_thread(load_token_counter, self.settings)
            await self._warm_up()
            for collection in await asyncio.to_thread(self._existing_collections):
                await self._open_at_start(collection)
        except BaseException:
            await self.close()
            raise

    async def _open_at_start(self, collection: str) -> None:
        """Open an existing collection; one of another character is logged and left closed."""
        try:
            await self.get(collection, create=True)
        except CharacterIdentityMismatchError as exc:
            log.error(
                "collection_of_another_character",
                collection=collection,
                recorded=str(exc.recorded),
                configured=str(exc.given),
            )

    async def _warm_up(self) -> None:
        """Embed one query now, so the first request does not pay for loading a local model."""
        try:
            await self.embedder.embed_query("warm-up")
        except Exception as exc:  # noqa: BLE001 - a provider down at start fails its requests instead
            log.warning("embedder_warm_up_failed", error=type(exc).__name__)

    def _existing_collections(self) -> list[str]:
        root = Path(self.settings.vector_store_path)
        if self.settings.vector_store_mode != "embedded" or not root.is_dir():
            return []
        names = []
        for path in sorted(root.iterdir()):
            with contextlib.suppress(Exception):
                if path.is_dir() and self._exists(validate_collection_name(path.name)):
                    names.append(path.name)
        return names

    def _exists(self, collection: str) -> bool:
        """Whether the stores hold ``collection`` (opening it would not create it)."""
        if collection in self._memories:
            return True
        mode = self.settings.vector_store_mode
        exists = load_factory("vectors", mode).exists(self.settings, collection)
        if exists is not None:
            return exists
        return mode != "in_memory"  # a service: its collections are there to be opened

    async def get(self, collection: str, *, create: bool) -> CharacterMemory | None:
        """The open memory of ``collection``; ``None`` when it does not exist and not ``create``.

        Raises:
            ConfigurationError: the collection name is not allowed.
            StoreLockedError, BackendError: a store could not be opened.
            CharacterIdentityMismatchError: the collection records another character than the
                one configured for it (nothing opened; asked again on the next request).
            CharmemError: the server is shutting down.
        """
        validate_collection_name(collection)
        if self._closed:
            from charmem.errors import CharmemError

            raise CharmemError("the server is shutting down; send the request again to its successor")
        memory = self._memories.get(collection)
        if memory is not None:
            return memory
        if not create and not await asyncio.to_thread(self._exists, collection):
            return None
        memory = self._memories.get(collection)  # opened while _exists ran in its thread
        if memory is not None:
            return memory
        pending = self._opening.get(collection)
        if pending is None:
            pending = asyncio.ensure_future(self._open(collection))
            self._opening[collection] = pending
            pending.add_done_callback(lambda _f: self._opening.pop(collection, None))
        return await asyncio.shield(pending)

    async def _open(self, collection: str) -> CharacterMemory:
        memory = await CharacterMemory.open(
            self.settings,
            collection,
            embedding_provider=self.embedder,
            character_id=self.character_ids.get(collection),
        )
        self._memories[collection] = memory
        log.info(
            "collection_opened",
            collection=collection,
            character_id=None if memory.character_id is None else str(memory.character_id),
        )
        return memory

    @contextlib.asynccontextmanager
    async def reading(self, collection: str) -> AsyncIterator[CharacterMemory]:
        """The memory to read ``collection`` from: the open one, or an empty throw-away one."""
        memory = await self.get(collection, create=False)
        if memory is not None:
            yield memory
            return
        from charmem.stats import InMemoryRetrievalStatsStore
        from charmem.testing import ReferenceGraphStore, ReferenceVectorIndex

        embedder = self.embedder
        empty = CharacterMemory(
            graph=ReferenceGraphStore(collection),
            vectors=ReferenceVectorIndex(
                collection, model_id=embedder.model_id, vector_size=embedder.vector_size
            ),
            embedder=embedder,
            stats=InMemoryRetrievalStatsStore(collection),
            collection=collection,
            token_counter=self._token_counter,
        )
        try:
            yield empty
        finally:
            await empty.close()

    async def close(self) -> None:
        """Close every memory (each waits for its operations in flight), then drop the lock."""
        self._closed = True
        for pending in list(self._opening.values()):
            with contextlib.suppress(BaseException):
                await pending
        errors: list[BaseException] = []
        for collection, memory in sorted(self._memories.items()):
            try:
                await memory.close()
            except Exception as exc:  # noqa: BLE001 - close the others first
                log.error("collection_close_failed", collection=collection, error=type(exc).__name__)
                errors.append(exc)
            else:
                log.info("collection_closed", collection=collection)
        self._memories.clear()
        if self._lock is not None:
            self._lock.release()
        if errors:
            raise errors[0]
