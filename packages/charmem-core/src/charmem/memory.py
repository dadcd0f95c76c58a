"""The facades: :class:`CharacterMemory` (async) and :class:`SyncCharacterMemory` (blocking).

DESIGN §2::

    memory = await CharacterMemory.open(settings, "my-assistant-memory")
    async with CharacterMemory.open(settings, "my-assistant-memory", embedding_provider=p) as memory:
        ...
    with SyncCharacterMemory.open(settings, "my-assistant-memory") as memory:
        ...
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Generator
from types import TracebackType
from typing import Any, TypeVar

from charmem.clock import SystemClock
from charmem.composition import load_adapter, load_token_counter
from charmem.domain.drafts import LinkDraft, RememberDrafts, RememberInput
from charmem.domain.lifecycle import (
    CorrectMemoryDraft,
    ForgetMemoryDraft,
    LifecycleMutationOutcome,
    LinkOutcome,
)
from charmem.domain.plan import (
    CandidateValidation,
    CommitOptions,
    PrepareOptions,
    RememberOptions,
    RememberOutcome,
    RememberWritePlan,
)
from charmem.domain.retrieval import ContinuityContextPack, RetrievalContext
from charmem.errors import CharmemError, ConfigurationError, DraftValidationError
from charmem.log import get_logger
from charmem.ports import (
    Clock,
    EmbeddingProvider,
    GraphStore,
    RetrievalStatsStore,
    TokenCounter,
    VectorIndex,
)
from charmem.settings import Settings, validate_collection_name
from charmem.tokens import WhitespaceTokenCounter
from charmem.usecases.commit import commit_plan, rebuild_stats
from charmem.usecases.lifecycle import LifecycleStores, correct_memory, forget_memory, link_memories
from charmem.usecases.maintenance import (
    ProgressCallback,
    VectorRebuildReport,
    drop_vector_index,
    ensure_vectors_match_graph,
    rebuild_vector_index,
    refuse_vectors_without_graph,
    stats_lost_beside_graph,
)
from charmem.usecases.planning import build_plan
from charmem.usecases.retrieval import retrieve_pack
from charmem.usecases.validation import validate

__all__ = ["CharacterMemory", "SyncCharacterMemory"]

log = get_logger("charmem.memory")
T = TypeVar("T")


async def _build_adapter(port: str, mode: str, *args: Any, **kwargs: Any) -> Any:
    """Build an adapter with ``from_settings_async`` if it has one.

    Otherwise ``from_settings`` runs in a worker thread (it may block on files or locks).
    """
    factory = load_adapter(port, mode)
    opener = getattr(factory, "from_settings_async", None)
    if opener is not None:
        return await opener(*args, **kwargs)
    return await asyncio.to_thread(lambda: factory.from_settings(*args, **kwargs))


class _Opening:
    """What :meth:`CharacterMemory.open` returns: awaitable and an async context manager."""

    def __init__(self, factory: Callable[[], Coroutine[Any, Any, CharacterMemory]]) -> None:
        self._factory = factory
        self._memory: CharacterMemory | None = None

    def __await__(self) -> Generator[Any, None, CharacterMemory]:
        return self._factory().__await__()

    async def __aenter__(self) -> CharacterMemory:
        self._memory = await self._factory()
        return self._memory

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._memory is not None:
            await self._memory.close()


class CharacterMemory:
    """Episodic, graph-authoritative memory for one collection.

    Build it with :meth:`open` from settings, or directly from adapters::

        CharacterMemory(graph=..., vectors=..., embedder=..., stats=..., collection="...")

    Writers are serialised within one instance (commits never interleave). Every method is a
    coroutine; blocking store calls run in worker threads inside the adapters.

    Args:
        graph: the graph authority bound to ``collection``.
        vectors: the vector index bound to ``collection`` and the embedder's fingerprint.
        embedder: the embedding provider.
        stats: the retrieval-stats store bound to ``collection``.
        collection: the collection name.
        clock: source of defaulted timestamps (default: UTC wall clock).
        token_counter: counts tokens in :meth:`ContinuityContextPack.render` (default: whitespace
            here; :meth:`open` uses the ``TOKEN_COUNTER`` setting).
        log_memory_text: add memory texts, queries and rationales to charmem's debug log events
            (default False: events carry ids and counts only; ``LOG_MEMORY_TEXT`` in settings).

    Raises:
        ConfigurationError: the collection name is not allowed, or an adapter is bound to another
            collection.
    """

    def __init__(
        self,
        *,
        graph: GraphStore,
        vectors: VectorIndex,
        embedder: EmbeddingProvider,
        stats: RetrievalStatsStore,
        collection: str,
        clock: Clock | None = None,
        token_counter: TokenCounter | None = None,
        log_memory_text: bool = False,
    ) -> None:
        self.collection = validate_collection_name(collection)
        if graph.collection != collection:
            raise ConfigurationError(
                f"the graph store is bound to collection {graph.collection!r}, not {collection!r}",
                key="collection",
            )
        self.graph = graph
        self.vectors = vectors
        self.embedder = embedder
        self.stats = stats
        self.clock: Clock = clock or SystemClock()
        self.token_counter: TokenCounter = token_counter or WhitespaceTokenCounter()
        self.log_memory_text = bool(log_memory_text)
        self._write_lock = asyncio.Lock()
        self._closed = False

    @classmethod
    def open(
        cls,
        settings: Settings,
        collection: str,
        *,
        embedding_provider: EmbeddingProvider | None = None,
        clock: Clock | None = None,
        token_counter: TokenCounter | None = None,
        rebuild_vectors: bool = False,
        rebuild_progress: ProgressCallback | None = None,
    ) -> _Opening:
        """Open the stores the settings select for ``collection``.

        Returns an object that is both awaitable (``memory = await CharacterMemory.open(...)``)
        and an async context manager (``async with CharacterMemory.open(...) as memory``).

        **Another embedder, or moving vector stores.** A collection's vectors are bound to the
        embedder that made them; opening with another one raises ``DimensionMismatchError`` or
        ``EmbedderMismatchError``. ``rebuild_vectors=True`` is the documented way out: it drops the
        collection's vectors through the vector adapter's ``drop_from_settings`` (the embedded
        shard's directory, the service collection; nothing for the in-memory index), opens the
        index with the new provider's fingerprint and runs :meth:`rebuild_vector_index` from the
        graph before returning. The graph is never touched. The same flag fills a new vector store
        (for example after switching ``VECTOR_STORE_MODE`` from ``embedded`` to ``service``). If it
        fails midway, open with ``rebuild_vectors=True`` again.

        **Lost derived data.** When the collection's vector index is missing (its adapter's
        ``exists_from_settings`` says so: a deleted shard) while its graph holds statements, the
        index is rebuilt from the graph before ``open`` returns, logged (``vector_index_missing``,
        then ``vector_index_rebuilt`` with counts) and reported through ``rebuild_progress``; with
        ``VECTOR_REBUILD_ON_OPEN=false`` the open is refused instead. Empty retrieval statistics
        beside a non-empty graph (a deleted or discarded stats file) are rebuilt with a warning.
        A missing graph store beside existing vectors is refused, never created empty.

        Args:
            settings: validated settings (:meth:`Settings.from_mapping`).
            collection: ``[a-z0-9][a-z0-9_-]{0,127}``, checked before any directory is touched.
            embedding_provider: a provider object; when given, no embedding setting is read and
                the vector store must match its ``vector_size``.
            clock: source of defaulted timestamps.
            token_counter: counts tokens for ``render``; when omitted, the counter the
                ``TOKEN_COUNTER`` setting selects (``local``, a real WordPiece tokenizer, when
                charmem-local-embed is installed; else ``whitespace``).
            rebuild_vectors: drop the collection's vectors and rebuild them from the graph with
                this embedder (see above).
            rebuild_progress: ``callback(done, total)`` of that rebuild, or of the rebuild of a
                lost vector index (index entries written so far, and in all).

        Raises:
            ConfigurationError: bad collection name, missing key, or adapter (including the
                ``TOKEN_COUNTER`` one) not installed.
            StoreLockedError: an embedded store is held by another process.
            DimensionMismatchError, EmbedderMismatchError: the collection was indexed by another
                embedder.
            StoreCorruptedError: a store's files are damaged; the graph store is missing while
                the collection's vectors exist; or the vector index is missing beside a non-empty
                graph and ``VECTOR_REBUILD_ON_OPEN`` is false. The message names the path and
                the way back.
            InsufficientStorageError: too little free disk space to open or create a store.
            BackendError: a store failed to open.
        """

        async def build() -> CharacterMemory:
            validate_collection_name(collection)
            counter = token_counter if token_counter is not None else load_token_counter(settings)
            embedder: EmbeddingProvider
            if embedding_provider is None:
                settings.require_embedding_keys()
                factory = load_adapter("embedder", settings.embedding_provider)
                opener = getattr(factory, "from_settings_async", None)
                if opener is not None:
                    embedder = await opener(settings)
                else:
                    embedder = await asyncio.to_thread(factory.from_settings, settings)
            else:
                embedder = embedding_provider
            opened: list[Any] = []
            try:
                if not rebuild_vectors:
                    await refuse_vectors_without_graph(settings, collection)
                graph = await _build_adapter("graph", settings.graph_store_mode, settings, collection)
                opened.append(graph)
                stats = await _build_adapter(
                    "stats", settings.retrieval_stats_store_mode, settings, collection
                )
                opened.append(stats)
                stats_lost = await stats_lost_beside_graph(settings, graph, stats)
                if rebuild_vectors:
                    dropped = await drop_vector_index(settings, collection)
                    log.info("vector_index_dropped", collection=collection, dropped=dropped)
                rebuild = rebuild_vectors or await ensure_vectors_match_graph(settings, collection, graph)
                vectors = await _build_adapter(
                    "vectors",
                    settings.vector_store_mode,
                    settings,
                    collection,
                    model_id=embedder.model_id,
                    vector_size=embedder.vector_size,
                )
                opened.append(vectors)
            except BaseException:
                for adapter in reversed(opened):
                    try:
                        await adapter.close()
                    except Exception:  # noqa: BLE001, S110 - the original error matters more
                        pass
                raise
            log.info(
                "memory_opened",
                collection=collection,
                graph=settings.graph_store_mode,
                vectors=settings.vector_store_mode,
                model=embedder.model_id,
                token_counter=counter.name,
            )
            memory = cls(
                graph=graph,
                vectors=vectors,
                embedder=embedder,
                stats=stats,
                collection=collection,
                clock=clock,
                token_counter=counter,
                log_memory_text=settings.log_memory_text,
            )
            try:
                if stats_lost:
                    rows = await memory.rebuild_stats()
                    log.warning("retrieval_stats_rebuilt", collection=collection, rows=rows)
                if rebuild:
                    await memory.rebuild_vector_index(on_progress=rebuild_progress)
            except BaseException:
                await memory.close()
                raise
            return memory

        return _Opening(build)

    def _check_open(self, argument: object = None, expected: type | tuple[type, ...] | None = None) -> None:
        if self._closed:
            raise CharmemError(f"memory {self.collection!r} is closed; open it again")
        if expected is not None and not isinstance(argument, expected):
            names = " or ".join(
                "None" if t is type(None) else t.__name__
                for t in (expected if isinstance(expected, tuple) else (expected,))
            )
            raise DraftValidationError(f"expected a {names}, not {type(argument).__name__}")

    async def prepare(
        self, item: RememberInput | RememberDrafts, options: PrepareOptions | None = None
    ) -> RememberWritePlan:
        """Build an inspectable write plan; writes nothing (no graph, vector or stats change).

        Args:
            item: ``RememberInput`` (convenience path) or ``RememberDrafts`` (explicit path).
            options: ``PrepareOptions(now=...)`` fixes the instant of defaulted timestamps.

        Returns:
            RememberWritePlan: objects, caller links, derived links and index entries.

        Raises:
            DraftValidationError: ``item`` is not a RememberInput or RememberDrafts, or
                ``options`` not a PrepareOptions.
        """
        self._check_open()
        if not isinstance(item, RememberInput | RememberDrafts):
            raise DraftValidationError(
                f"prepare takes a RememberInput or RememberDrafts, not {type(item).__name__}"
            )
        self._check_open(options, (PrepareOptions, type(None)))
        options = options or PrepareOptions()
        return build_plan(self.collection, item, options.now or self.clock.now())

    async def validate_plan(self, plan: RememberWritePlan) -> list[CandidateValidation]:
        """Check a plan against the graph; read-only.

        Returns:
            list[CandidateValidation]: one per object and caller link, in plan order.

        Raises:
            BackendError: the graph could not be read.
        """
        self._check_open(plan, RememberWritePlan)
        return await validate(plan, self.graph)

    async def commit(self, plan: RememberWritePlan, options: CommitOptions | None = None) -> RememberOutcome:
        """Re-validate and persist a plan (graph atomically; vectors and stats repairably).

        Returns:
            RememberOutcome: stored ids and any repair markers.

        Raises:
            DraftValidationError: ``plan`` or ``options`` is of the wrong type.
            PlanValidationError: an invalid candidate; nothing was written.
            IdConflictError: an id stored with different content; nothing was written.
            BackendError: the graph write failed; nothing was written.
        """
        self._check_open(plan, RememberWritePlan)
        self._check_open(options, (CommitOptions, type(None)))
        async with self._write_lock:
            outcome = await commit_plan(
                plan,
                options or CommitOptions(),
                graph=self.graph,
                vectors=self.vectors,
                embedder=self.embedder,
                stats=self.stats,
            )
        self._log_texts(
            "memory_texts_committed", texts={str(entry.id): entry.text for entry in plan.index_entries}
        )
        return outcome

    async def remember(
        self, item: RememberInput | RememberDrafts, options: RememberOptions | None = None
    ) -> RememberOutcome:
        """``prepare`` + ``validate_plan`` + ``commit`` in one call.

        Raises:
            DraftValidationError: ``item`` or ``options`` is of the wrong type.
            PlanValidationError, IdConflictError, BackendError: as :meth:`commit`.
        """
        self._check_open(options, (RememberOptions, type(None)))
        options = options or RememberOptions()
        plan = await self.prepare(item, options.prepare)
        # commit validates the plan against the graph before writing (validate_plan's checks)
        return await self.commit(plan, options.commit)

    def _log_texts(self, event: str, **fields: object) -> None:
        """A debug event carrying memory text, only when the user opted in (``LOG_MEMORY_TEXT``)."""
        if self.log_memory_text:
            log.debug(event, collection=self.collection, **fields)

    def _lifecycle_stores(self) -> LifecycleStores:
        return LifecycleStores(self.graph, self.vectors, self.embedder, self.stats)

    async def correct(self, draft: CorrectMemoryDraft) -> LifecycleMutationOutcome:
        """Correct a memory: a replacement supersedes the target (DESIGN §4.4).

        The target stays stored (and unsuppressed) but is no longer current: it leaves candidate
        recall and is reached through the graph. Without a replacement id one is derived from the
        target and the replacement's content, so replaying a correction is idempotent.

        Returns:
            LifecycleMutationOutcome: ``replacement_ids`` to persist with your own identifiers.

        Raises:
            LifecycleValidationError: the draft breaks a rule; ``kind`` says which.
            IdConflictError: a replacement id is stored with other content.
            BackendError: the graph write failed; nothing was written.
        """
        self._check_open(draft, CorrectMemoryDraft)
        async with self._write_lock:
            outcome = await correct_memory(
                draft, collection=self.collection, stores=self._lifecycle_stores(), now=self.clock.now()
            )
        self._log_texts("memory_correction_texts", target=str(draft.target.id), rationale=draft.rationale)
        return outcome

    async def forget(self, draft: ForgetMemoryDraft) -> LifecycleMutationOutcome:
        """Forget by suppression (DESIGN §4.6): nothing is deleted; influence is removed.

        Raises:
            LifecycleValidationError: blank rationale, unknown target, notion or link target.
            BackendError: the graph write failed; nothing was written.
        """
        self._check_open(draft, ForgetMemoryDraft)
        async with self._write_lock:
            outcome = await forget_memory(
                draft, collection=self.collection, stores=self._lifecycle_stores(), now=self.clock.now()
            )
        self._log_texts("memory_forget_texts", target=str(draft.target_id), rationale=draft.rationale)
        return outcome

    async def link(self, draft: LinkDraft) -> LinkOutcome:
        """Add a caller-authored link between two stored memories.

        Raises:
            PlanValidationError: a ``supersedes`` link (derived only), unknown endpoints, or
                endpoint types the relation does not allow.
            IdConflictError: the link id is stored with other content.
            BackendError: the graph write failed; nothing was written.
        """
        self._check_open(draft, LinkDraft)
        async with self._write_lock:
            outcome = await link_memories(
                draft, collection=self.collection, stores=self._lifecycle_stores(), now=self.clock.now()
            )
        if draft.rationale is not None:
            self._log_texts("memory_link_texts", link=str(outcome.link.id), rationale=draft.rationale)
        return outcome

    async def rebuild_stats(self) -> int:
        """Recompute the retrieval statistics of the collection from the graph (DESIGN §4.9).

        Returns:
            int: the number of rows written.

        Raises:
            BackendError: a store failed (the stats may then be partial: run it again).
        """
        self._check_open()
        async with self._write_lock:
            return await rebuild_stats(self.graph, self.stats)

    async def rebuild_vector_index(
        self, *, batch_size: int = 64, on_progress: ProgressCallback | None = None
    ) -> VectorRebuildReport:
        """Re-create the collection's vectors from its current graph objects (DESIGN §7).

        Every current episode (with a summary of its own), observation, derived memory and thread
        is embedded again and upserted; superseded and suppressed memories stay out, and points no
        current object backs are deleted. The repair of last resort (a lost shard, unreplayed
        repair markers) and the way to fill a new vector store. To switch to an embedder of
        another model or size, the index must first be dropped: open with
        ``CharacterMemory.open(settings, name, embedding_provider=new, rebuild_vectors=True)``
        (see :meth:`open`). Writers wait while it runs.

        Args:
            batch_size: texts per ``embed_documents`` call and points per upsert (count, >= 1).
            on_progress: ``on_progress(done, total)``: index entries written so far and in all.

        Returns:
            VectorRebuildReport: ``objects`` examined, ``indexed`` points written,
            ``not_current`` objects left out, stale points ``removed``.

        Raises:
            DraftValidationError: ``batch_size`` is not an int >= 1 (also a ``ValueError``).
            BackendError: a store or the embedder failed; the index may be partial: run it again.
        """
        self._check_open()
        async with self._write_lock:
            return await rebuild_vector_index(
                graph=self.graph,
                vectors=self.vectors,
                embedder=self.embedder,
                batch_size=batch_size,
                on_progress=on_progress,
            )

    @contextlib.asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        """Hold this memory's writer lock: none of its writes run until the block ends.

        For operational tools that read or change a whole collection (``charmem.admin``'s
        export, import and purge), so they never interleave with this instance's commits,
        corrections, forgets and links. Not re-entrant: do not call a writing method of this
        memory inside the block.

        Raises:
            CharmemError: the memory is closed.
        """
        self._check_open()
        async with self._write_lock:
            yield

    async def retrieve(self, context: RetrievalContext | str) -> ContinuityContextPack:
        """Recall memories into a continuity context pack (DESIGN §6).

        Args:
            context: a :class:`RetrievalContext`, or just the query text.

        Returns:
            ContinuityContextPack: ranked items, sections, entities, links, omissions.

        Raises:
            DraftValidationError: blank query.
            BackendError: a store or the embedder failed.
        """
        self._check_open(context, (RetrievalContext, str))
        if isinstance(context, str):
            context = RetrievalContext(query=context)
        pack = await retrieve_pack(
            context,
            graph=self.graph,
            vectors=self.vectors,
            embedder=self.embedder,
            stats=self.stats,
            token_counter=self.token_counter,
            now=self.clock.now(),
        )
        log.debug(
            "memory_retrieved",
            collection=self.collection,
            items=len(pack.items),
            omissions=len(pack.omissions),
            **({"query": context.query} if self.log_memory_text else {}),
        )
        return pack

    async def close(self) -> None:
        """Release every store (idempotent). Acknowledged writes are already durable."""
        if self._closed:
            return
        self._closed = True
        errors: list[BaseException] = []
        for adapter in (self.vectors, self.stats, self.graph):
            try:
                await adapter.close()
            except Exception as exc:  # noqa: BLE001 - close the others first
                errors.append(exc)
        if errors:
            raise errors[0]

    async def __aenter__(self) -> CharacterMemory:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class _LoopThread:
    """A private event loop on a daemon thread, so blocking callers work inside running loops."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="charmem-sync", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        self.loop.close()


class SyncCharacterMemory:
    """The blocking API: every :class:`CharacterMemory` method without ``await``.

    For scripts and WSGI apps. Built on the same implementation, run on a private event loop.
    ``with SyncCharacterMemory.open(settings, "name") as memory: ...``
    """

    def __init__(self, memory: CharacterMemory, runner: _LoopThread) -> None:
        self._memory = memory
        self._runner = runner

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._runner.loop.is_closed():
            coro.close()
            raise CharmemError(f"memory {self._memory.collection!r} is closed; open it again")
        return self._runner.run(coro)

    @property
    def memory(self) -> CharacterMemory:
        """The underlying async facade."""
        return self._memory

    @property
    def collection(self) -> str:
        """The collection name."""
        return self._memory.collection

    @classmethod
    def open(
        cls,
        settings: Settings,
        collection: str,
        *,
        embedding_provider: EmbeddingProvider | None = None,
        clock: Clock | None = None,
        token_counter: TokenCounter | None = None,
        rebuild_vectors: bool = False,
        rebuild_progress: ProgressCallback | None = None,
    ) -> SyncCharacterMemory:
        """Open as :meth:`CharacterMemory.open` does; usable directly or as a context manager."""
        runner = _LoopThread()
        try:
            memory: CharacterMemory = runner.run(
                CharacterMemory.open(
                    settings,
                    collection,
                    embedding_provider=embedding_provider,
                    clock=clock,
                    token_counter=token_counter,
                    rebuild_vectors=rebuild_vectors,
                    rebuild_progress=rebuild_progress,
                )._factory()
            )
        except BaseException:
            runner.stop()
            raise
        return cls(memory, runner)

    @classmethod
    def wrap(cls, memory: CharacterMemory) -> SyncCharacterMemory:
        """Wrap an already built :class:`CharacterMemory`.

        Its adapters must not be in use by another event loop.
        """
        return cls(memory, _LoopThread())

    def prepare(
        self, item: RememberInput | RememberDrafts, options: PrepareOptions | None = None
    ) -> RememberWritePlan:
        """See :meth:`CharacterMemory.prepare`."""
        return self._run(self._memory.prepare(item, options))

    def validate_plan(self, plan: RememberWritePlan) -> list[CandidateValidation]:
        """See :meth:`CharacterMemory.validate_plan`."""
        return self._run(self._memory.validate_plan(plan))

    def commit(self, plan: RememberWritePlan, options: CommitOptions | None = None) -> RememberOutcome:
        """See :meth:`CharacterMemory.commit`."""
        return self._run(self._memory.commit(plan, options))

    def remember(
        self, item: RememberInput | RememberDrafts, options: RememberOptions | None = None
    ) -> RememberOutcome:
        """See :meth:`CharacterMemory.remember`."""
        return self._run(self._memory.remember(item, options))

    def retrieve(self, context: RetrievalContext | str) -> ContinuityContextPack:
        """See :meth:`CharacterMemory.retrieve`."""
        return self._run(self._memory.retrieve(context))

    def correct(self, draft: CorrectMemoryDraft) -> LifecycleMutationOutcome:
        """See :meth:`CharacterMemory.correct`."""
        return self._run(self._memory.correct(draft))

    def forget(self, draft: ForgetMemoryDraft) -> LifecycleMutationOutcome:
        """See :meth:`CharacterMemory.forget`."""
        return self._run(self._memory.forget(draft))

    def link(self, draft: LinkDraft) -> LinkOutcome:
        """See :meth:`CharacterMemory.link`."""
        return self._run(self._memory.link(draft))

    def rebuild_stats(self) -> int:
        """See :meth:`CharacterMemory.rebuild_stats`."""
        return self._run(self._memory.rebuild_stats())

    def rebuild_vector_index(
        self, *, batch_size: int = 64, on_progress: ProgressCallback | None = None
    ) -> VectorRebuildReport:
        """See :meth:`CharacterMemory.rebuild_vector_index`."""
        return self._run(self._memory.rebuild_vector_index(batch_size=batch_size, on_progress=on_progress))

    def close(self) -> None:
        """See :meth:`CharacterMemory.close`; also stops the private loop (idempotent)."""
        try:
            if not self._memory._closed:
                self._runner.run(self._memory.close())
        finally:
            if not self._runner.loop.is_closed():
                self._runner.stop()

    def __enter__(self) -> SyncCharacterMemory:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
