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
import functools
import inspect
import math
import threading
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator
from numbers import Integral
from types import TracebackType
from typing import Any, Concatenate, Final, ParamSpec, TypeVar

import attrs

from charmem.clock import SystemClock
from charmem.composition import load_factory, load_token_counter
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
from charmem.errors import CharmemError, ConfigurationError, DraftValidationError, MemoryNotOpenedError
from charmem.log import get_logger
from charmem.ports import (
    Clock,
    EmbeddingProvider,
    GraphStore,
    RetrievalStatsStore,
    TokenCounter,
    VectorIndex,
)
from charmem.settings import DEFAULT_EMBEDDING_TIMEOUT_S, Settings, validate_collection_name
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

__all__ = ["CharacterMemory", "SyncCharacterMemory", "check_embedding_provider"]

log = get_logger("charmem.memory")
T = TypeVar("T")
P = ParamSpec("P")

#: Seconds :meth:`CharacterMemory.close` waits for operations in flight before cancelling them:
#: long enough for a commit whose embedding batches each take up to a few seconds.
DEFAULT_CLOSE_TIMEOUT_S: Final = 30.0
#: Seconds close then gives the operations it cancelled to unwind before closing the stores.
_CANCEL_GRACE_S: Final = 5.0
#: Facade operations that never write: one cancelled by close wrote nothing.
_READ_OPERATIONS: Final = frozenset({"prepare", "validate_plan", "retrieve"})


async def _build_adapter(port: str, mode: str, *args: Any, **kwargs: Any) -> Any:
    """Open an adapter through the factory its entry point names (from the caller's loop)."""
    return await load_factory(port, mode).open(*args, **kwargs)


def _positive_seconds(value: object, name: str) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        return float(value)
    raise ConfigurationError(f"{name} must be a positive number of seconds, not {value!r}", key=name)


def _is_async_callable(function: object) -> bool:
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None)  # noqa: B004 - an object with an async __call__
    )


def check_embedding_provider(provider: object) -> EmbeddingProvider:
    """Refuse an object that does not implement :class:`~charmem.ports.EmbeddingProvider`.

    Checked before anything is opened, so a wrong object fails at once with what it lacks
    instead of an ``AttributeError`` or ``TypeError`` in the middle of a write: ``model_id`` a
    non-empty str, ``vector_size`` an int >= 1, ``embed_documents`` and ``embed_query`` async
    methods (``async def``). The vectors it answers are checked at each call.

    Args:
        provider: the object given as ``embedding_provider`` / ``embedder``.

    Returns:
        EmbeddingProvider: ``provider`` itself.

    Raises:
        ConfigurationError: something is missing or of the wrong kind; the message names every
            problem (``key="embedding_provider"``).
    """
    problems: list[str] = []
    for attribute, wanted in (("model_id", "a non-empty str"), ("vector_size", "an int >= 1")):
        try:
            value = getattr(provider, attribute)
        except AttributeError:
            problems.append(f"it has no {attribute} ({wanted})")
            continue
        except Exception as exc:  # noqa: BLE001 - reported as the problem
            problems.append(f"reading its {attribute} raised {type(exc).__name__}")
            continue
        if attribute == "model_id":
            fits = isinstance(value, str) and bool(value.strip())
        else:
            fits = isinstance(value, Integral) and not isinstance(value, bool) and int(value) >= 1
        if not fits:
            problems.append(f"its {attribute} is {value!r}, not {wanted}")
    for method in ("embed_documents", "embed_query"):
        function = getattr(provider, method, None)
        if function is None:
            problems.append(f"it has no {method} method (an async def)")
        elif not _is_async_callable(function):
            problems.append(f"its {method} is not an async def")
    if problems:
        raise ConfigurationError(
            f"the embedding provider {type(provider).__name__} is not an EmbeddingProvider: "
            f"{'; '.join(problems)} (see charmem.ports.EmbeddingProvider)",
            key="embedding_provider",
        )
    return provider  # type: ignore[return-value]


class _Opening:
    """What :meth:`CharacterMemory.open` returns: awaitable and an async context manager.

    It is not the memory: any other use (``CharacterMemory.open(...).remember``) raises
    :class:`~charmem.errors.MemoryNotOpenedError` saying to ``await`` it, and one never awaited
    nor entered warns (``RuntimeWarning``) when collected, as a coroutine does.
    """

    def __init__(self, build: Callable[[], Coroutine[Any, Any, CharacterMemory]]) -> None:
        self._build = build
        self._memory: CharacterMemory | None = None
        self._used = False

    def _factory(self) -> Coroutine[Any, Any, CharacterMemory]:
        """The opening coroutine (awaited once, by ``await``, ``async with`` or the sync facade)."""
        self._used = True
        return self._build()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        self._used = True  # the error says it all; no second warning when collected
        raise MemoryNotOpenedError(
            f"CharacterMemory.open(...) returns an opener, not the memory, so it has no {name!r}: "
            "write `memory = await CharacterMemory.open(...)` or "
            "`async with CharacterMemory.open(...) as memory:`"
        )

    def __del__(self) -> None:
        if not getattr(self, "_used", True):
            warnings.warn(
                "CharacterMemory.open(...) was never awaited, so nothing was opened: write "
                "`memory = await CharacterMemory.open(...)` or `async with CharacterMemory.open(...) "
                "as memory:`",
                RuntimeWarning,
                stacklevel=2,
                source=self,
            )

    def __enter__(self) -> None:
        self._used = True
        raise MemoryNotOpenedError(
            "CharacterMemory.open(...) is asynchronous: write `async with CharacterMemory.open(...) "
            "as memory:` in a coroutine, or use `with SyncCharacterMemory.open(...) as memory:` in "
            "blocking code"
        )

    def __exit__(self, *exc_info: object) -> None:
        """Never reached: :meth:`__enter__` always raises."""

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


@attrs.frozen
class MemoryStores:
    """The stores behind one open memory, for operational tools and tests.

    Not part of the memory API: the facade offers no enumeration or lookup of its own (only
    ``retrieve``). :mod:`charmem.admin` reaches the stores through the memory it is given, and
    tests through :func:`charmem.testing.stores_of`.
    """

    graph: GraphStore
    vectors: VectorIndex
    stats: RetrievalStatsStore


def _operation(
    method: Callable[Concatenate[CharacterMemory, P], Awaitable[T]],
) -> Callable[Concatenate[CharacterMemory, P], Coroutine[Any, Any, T]]:
    """Count a facade method as an operation in flight, which :meth:`CharacterMemory.close` awaits."""

    @functools.wraps(method)
    async def run(self: CharacterMemory, /, *args: P.args, **kwargs: P.kwargs) -> T:
        async with self._in_flight(method.__name__):
            return await method(self, *args, **kwargs)

    return run


class CharacterMemory:
    """Episodic, graph-authoritative memory for one collection.

    Build it with :meth:`open` from settings, or directly from adapters::

        CharacterMemory(graph=..., vectors=..., embedder=..., stats=..., collection="...")

    Writers are serialised within one instance (commits never interleave). Every method is a
    coroutine; blocking store calls run in worker threads inside the adapters.

    The stores are private: a memory answers through ``retrieve`` only, never by enumeration.
    Operational tools (check, repair, export, import, purge) live in :mod:`charmem.admin` and
    take the memory itself.

    **Timeouts, cancellation and close.** Each call of the embedding provider may take
    ``embedding_timeout_s`` seconds; a slower one is cancelled: a write then keeps its graph
    batch and reports a ``VectorMaintenance`` repair marker, a retrieval raises
    :class:`~charmem.errors.EmbeddingTimeoutError`. A write cancelled after its graph batch (a
    cancelled task, ``asyncio.timeout`` around the call) returns nothing, but the graph is the
    record: ``charmem.admin.check`` reports the vectors and statistics it did not write, and
    replaying the same operation (or check's repair) brings them in step. :meth:`close` waits for
    operations in flight (see there).

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
        embedding_timeout_s: seconds one embedding-provider call (one batch, or one query) may
            take (default 60; ``EMBEDDING_TIMEOUT_S`` in settings).
        close_timeout_s: seconds :meth:`close` waits for operations in flight before cancelling
            them (default 30).

    Raises:
        ConfigurationError: the collection name is not allowed, an adapter is bound to another
            collection, ``embedder`` is not an ``EmbeddingProvider`` (the message names what it
            lacks), or a timeout is not a positive number of seconds.
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
        embedding_timeout_s: float = DEFAULT_EMBEDDING_TIMEOUT_S,
        close_timeout_s: float = DEFAULT_CLOSE_TIMEOUT_S,
    ) -> None:
        self.collection = validate_collection_name(collection)
        check_embedding_provider(embedder)
        self.embedding_timeout_s = _positive_seconds(embedding_timeout_s, "embedding_timeout_s")
        self.close_timeout_s = _positive_seconds(close_timeout_s, "close_timeout_s")
        if graph.collection != collection:
            raise ConfigurationError(
                f"the graph store is bound to collection {graph.collection!r}, not {collection!r}",
                key="collection",
            )
        self._graph = graph
        self._vectors = vectors
        self.embedder = embedder
        self._stats = stats
        self.clock: Clock = clock or SystemClock()
        self.token_counter: TokenCounter = token_counter or WhitespaceTokenCounter()
        self.log_memory_text = bool(log_memory_text)
        self._write_lock = asyncio.Lock()
        self._closed = False
        # operations in flight: task -> nesting depth (remember runs prepare and commit)
        self._running: dict[asyncio.Task[Any], int] = {}
        self._running_changed = asyncio.Event()
        self._cancelled_by_close: set[asyncio.Task[Any]] = set()
        self._close_waited_s = self.close_timeout_s
        self._closing: asyncio.Task[None] | None = None

    @property
    def _stores(self) -> MemoryStores:
        """The stores, for :mod:`charmem.admin` and :func:`charmem.testing.stores_of` only."""
        return MemoryStores(graph=self._graph, vectors=self._vectors, stats=self._stats)

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
            ConfigurationError: bad collection name, missing key, adapter (including the
                ``TOKEN_COUNTER`` one) not installed, or an ``embedding_provider`` that is not an
                ``EmbeddingProvider``.
            MemoryNotOpenedError: the result was used as the memory without ``await``.
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
            if embedding_provider is not None:
                check_embedding_provider(embedding_provider)
            counter = token_counter if token_counter is not None else load_token_counter(settings)
            embedder: EmbeddingProvider
            if embedding_provider is None:
                settings.require_embedding_keys()
                embedder = await load_factory("embedder", settings.embedding_provider).open(settings)
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
                embedding_timeout_s=settings.embedding_timeout_s,
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

    def _closed_error(self) -> CharmemError:
        return CharmemError(f"memory {self.collection!r} is closed; open it again")

    @contextlib.asynccontextmanager
    async def _in_flight(self, name: str) -> AsyncIterator[None]:
        """Run an operation that :meth:`close` waits for; refused once close has started.

        An operation nested in one in flight (``remember`` runs ``prepare`` and ``commit``) is
        part of it and never refused. One that close cancels raises ``CharmemError`` instead of
        ``CancelledError``, since the caller's task was not cancelled.
        """
        task = asyncio.current_task()
        if task is None:  # not run by an asyncio task; nothing to wait for
            yield
            return
        if self._closed and task not in self._running:
            raise self._closed_error()
        self._running[task] = self._running.get(task, 0) + 1
        try:
            yield
        except asyncio.CancelledError:
            if self._running[task] == 1 and task in self._cancelled_by_close:
                self._cancelled_by_close.discard(task)
                task.uncancel()
                if name in _READ_OPERATIONS:
                    consequence = "nothing was written"
                else:
                    consequence = (
                        "its graph write may be stored without vectors or stats: open the memory "
                        "again and run charmem.admin.check(memory) and repair(memory, report), or "
                        "commit the same plan again (a new remember of the same RememberInput "
                        "makes new ids)"
                    )
                raise CharmemError(
                    f"memory {self.collection!r} was closed while this {name} ran (close waited "
                    f"{self._close_waited_s:g} s for it); {consequence}"
                ) from None
            raise
        finally:
            depth = self._running.pop(task) - 1
            if depth:
                self._running[task] = depth
            else:
                self._cancelled_by_close.discard(task)
            self._running_changed.set()

    def _check_open(self, argument: object = None, expected: type | tuple[type, ...] | None = None) -> None:
        if self._closed and asyncio.current_task() not in self._running:
            raise self._closed_error()
        if expected is not None and not isinstance(argument, expected):
            names = " or ".join(
                "None" if t is type(None) else t.__name__
                for t in (expected if isinstance(expected, tuple) else (expected,))
            )
            raise DraftValidationError(f"expected a {names}, not {type(argument).__name__}")

    @_operation
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

    @_operation
    async def validate_plan(self, plan: RememberWritePlan) -> list[CandidateValidation]:
        """Check a plan against the graph; read-only.

        Returns:
            list[CandidateValidation]: one per object and caller link, in plan order.

        Raises:
            BackendError: the graph could not be read.
        """
        self._check_open(plan, RememberWritePlan)
        return await validate(plan, self._graph, self.clock.now())

    @_operation
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
                graph=self._graph,
                vectors=self._vectors,
                embedder=self.embedder,
                stats=self._stats,
                embed_timeout_s=self.embedding_timeout_s,
                now=self.clock.now(),
            )
        self._log_texts(
            "memory_texts_committed", texts={str(entry.id): entry.text for entry in plan.index_entries}
        )
        return outcome

    @_operation
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
        return LifecycleStores(
            self._graph, self._vectors, self.embedder, self._stats, embed_timeout_s=self.embedding_timeout_s
        )

    @_operation
    async def correct(self, draft: CorrectMemoryDraft) -> LifecycleMutationOutcome:
        """Correct a memory: a replacement supersedes the target (DESIGN §4.4).

        The target stays stored (and unsuppressed) but is no longer current: it leaves candidate
        recall and is reached through the graph. Without a replacement id one is derived from the
        target and the replacement's content, so replaying a correction is idempotent.

        Returns:
            LifecycleMutationOutcome: ``replacement_ids`` to persist with your own identifiers.

        Raises:
            LifecycleValidationError: the draft breaks a rule; ``kind`` says which (among them
                ``ALREADY_SUPERSEDED``: another memory already supersedes the target;
                ``RECORDED_BEFORE_TARGET`` / ``RECORDED_IN_FUTURE``: ``recorded_at`` before the
                target was created, or beyond ``RECORDED_AT_SKEW`` ahead of the clock).
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

    @_operation
    async def forget(self, draft: ForgetMemoryDraft) -> LifecycleMutationOutcome:
        """Forget by suppression (DESIGN §4.6): nothing is deleted; influence is removed.

        Raises:
            LifecycleValidationError: blank rationale, unknown target, notion or link target;
                ``recorded_at`` before the target was created or beyond ``RECORDED_AT_SKEW`` ahead
                of the clock.
            BackendError: the graph write failed; nothing was written.
        """
        self._check_open(draft, ForgetMemoryDraft)
        async with self._write_lock:
            outcome = await forget_memory(
                draft, collection=self.collection, stores=self._lifecycle_stores(), now=self.clock.now()
            )
        self._log_texts("memory_forget_texts", target=str(draft.target_id), rationale=draft.rationale)
        return outcome

    @_operation
    async def link(self, draft: LinkDraft) -> LinkOutcome:
        """Add a caller-authored link between two stored memories.

        Raises:
            PlanValidationError: a ``supersedes`` link (derived only), unknown endpoints, or
                endpoint types the relation does not allow.
            LifecycleValidationError: ``recorded_at`` before either endpoint was created
                (``RECORDED_BEFORE_TARGET``) or beyond ``RECORDED_AT_SKEW`` ahead of the clock
                (``RECORDED_IN_FUTURE``).
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

    @_operation
    async def rebuild_stats(self) -> int:
        """Recompute the retrieval statistics of the collection from the graph (DESIGN §4.9).

        Returns:
            int: the number of rows written.

        Raises:
            BackendError: a store failed (the stats may then be partial: run it again).
        """
        self._check_open()
        async with self._write_lock:
            return await rebuild_stats(self._graph, self._stats)

    @_operation
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
                graph=self._graph,
                vectors=self._vectors,
                embedder=self.embedder,
                batch_size=batch_size,
                on_progress=on_progress,
                embed_timeout_s=self.embedding_timeout_s,
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
        async with self._in_flight("exclusive block"):
            self._check_open()
            async with self._write_lock:
                yield

    @_operation
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
            graph=self._graph,
            vectors=self._vectors,
            embedder=self.embedder,
            stats=self._stats,
            token_counter=self.token_counter,
            now=self.clock.now(),
            embed_timeout_s=self.embedding_timeout_s,
        )
        log.debug(
            "memory_retrieved",
            collection=self.collection,
            items=len(pack.items),
            omissions=len(pack.omissions),
            **({"query": context.query} if self.log_memory_text else {}),
        )
        return pack

    async def close(self, *, timeout_s: float | None = None) -> None:
        """Wait for the operations in flight, then release every store (idempotent).

        From the moment close starts, new operations are refused (``CharmemError``: "memory ...
        is closed; open it again"). Operations already running (a remember waiting for its
        embedder, a retrieval, an ``exclusive`` block) run to their end first, so no outcome
        carries a repair marker caused by the close. Close waits up to ``timeout_s`` seconds for
        them; those still running then are cancelled, each raising ``CharmemError`` ("memory ...
        was closed while this remember ran"; a write cancelled after its graph batch shows in
        ``charmem.admin.check`` and a replay repairs it), and the stores are closed after at most
        5 more seconds. Acknowledged writes are already durable.

        Concurrent and repeated calls wait for the same close. Called inside an operation of
        this memory (an ``exclusive`` block), close does not wait for that one.

        Args:
            timeout_s: seconds to wait for operations in flight (default: the constructor's
                ``close_timeout_s``, 30).

        Raises:
            ConfigurationError: ``timeout_s`` is not a positive number of seconds.
            BackendError: a store failed to close (the others are closed first).
        """
        wait_s = self.close_timeout_s if timeout_s is None else _positive_seconds(timeout_s, "timeout_s")
        first = self._closing is None
        if self._closing is None:
            self._closed = True
            self._closing = asyncio.ensure_future(self._close(wait_s, asyncio.current_task()))
        try:
            await asyncio.shield(self._closing)
        except Exception:
            if first:  # a store's close error is the first caller's; later calls find it closed
                raise

    async def _wait_for_others(
        self, timeout_s: float, me: asyncio.Task[Any] | None
    ) -> list[asyncio.Task[Any]]:
        """Wait until no operation but ``me``'s runs, at most ``timeout_s``; the ones left."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while others := [task for task in self._running if task is not me]:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return others
            self._running_changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._running_changed.wait()
        return []

    async def _close(self, timeout_s: float, me: asyncio.Task[Any] | None) -> None:
        self._close_waited_s = timeout_s
        left = await self._wait_for_others(timeout_s, me)
        if left:
            log.warning("close_cancels_operations", collection=self.collection, operations=len(left))
            self._cancelled_by_close.update(left)
            for task in left:
                task.cancel()
            await self._wait_for_others(_CANCEL_GRACE_S, me)
        errors: list[BaseException] = []
        for adapter in (self._vectors, self._stats, self._graph):
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
