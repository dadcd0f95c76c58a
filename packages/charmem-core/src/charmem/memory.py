"""The async facade :class:`CharacterMemory`; :class:`SyncCharacterMemory` is its blocking twin.

::

    memory = await CharacterMemory.open(settings, "my-assistant-memory")
    async with CharacterMemory.open(settings, "my-assistant-memory", embedding_provider=p) as memory:
        ...
    with SyncCharacterMemory.open(settings, "my-assistant-memory") as memory:
        ...

How a memory is opened is in :mod:`charmem._opening`, how its operations in flight and its
close are tracked in :mod:`charmem._flight`, the blocking facade in :mod:`charmem._sync`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from charmem._checks import check_embedding_provider, positive_seconds
from charmem._flight import DEFAULT_CLOSE_TIMEOUT_S, InFlight, operation
from charmem._opening import OpenOptions, opening
from charmem._stores import MemoryStores
from charmem._sync import SyncCharacterMemory
from charmem.clock import SystemClock
from charmem.domain.drafts import LinkDraft, RememberDrafts, RememberInput
from charmem.domain.ids import MemoryId, as_memory_id
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
from charmem.domain.surfaces import entry_key
from charmem.errors import ConfigurationError, DraftValidationError
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
from charmem.usecases.commit import commit_plan, commit_plans, rebuild_stats
from charmem.usecases.lifecycle import LifecycleStores, correct_memory, forget_memory, link_memories
from charmem.usecases.maintenance import ProgressCallback, VectorRebuildReport, rebuild_vector_index
from charmem.usecases.planning import build_plan
from charmem.usecases.retrieval import retrieve_pack
from charmem.usecases.validation import validate

if TYPE_CHECKING:
    from charmem._opening import _Opening

__all__ = [
    "DEFAULT_CLOSE_TIMEOUT_S",
    "CharacterMemory",
    "MemoryStores",
    "SyncCharacterMemory",
    "check_embedding_provider",
]

log = get_logger("charmem.memory")
T = TypeVar("T")
P = ParamSpec("P")


class CharacterMemory:
    """Episodic, graph-authoritative memory for one collection.

    Build it with :meth:`open` from settings, or directly from adapters::

        CharacterMemory(graph=..., vectors=..., embedder=..., stats=..., collection="...")

    Writers are serialised within one instance (commits never interleave). Every method is a
    coroutine; blocking store calls run in worker threads inside the adapters.

    The stores are private: a memory answers through ``retrieve`` only, never by enumeration.
    Operational tools (check, repair, export, import, purge) live in :mod:`charmem.admin` and
    take the memory itself.

    **Timeouts, cancellation and close** (``docs/operations.md``): an embedding call slower than
    ``embedding_timeout_s`` is cancelled (a write keeps its graph batch and reports a
    ``VectorMaintenance`` marker; a retrieval raises :class:`~charmem.errors.EmbeddingTimeoutError`);
    a cancelled write ends once the store write it started has, and ``charmem.admin.check``
    reports what it left undone (a replay or check's repair finishes it). :meth:`close`: see there.

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
        character_id: the notion id of the character whose memory this is, as the collection
            records it (:meth:`open` records and checks it; given here, it is only kept).

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
        character_id: MemoryId | None = None,
    ) -> None:
        self.collection = validate_collection_name(collection)
        check_embedding_provider(embedder)
        self.embedding_timeout_s = positive_seconds(embedding_timeout_s, "embedding_timeout_s")
        self.close_timeout_s = positive_seconds(close_timeout_s, "close_timeout_s")
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
        self._flight = InFlight(self.collection, self.close_timeout_s)
        self.character_id = None if character_id is None else as_memory_id(character_id)

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
        character_id: MemoryId | None = None,
    ) -> _Opening:
        """Open the stores the settings select for ``collection``.

        Returns an object that is both awaitable (``memory = await CharacterMemory.open(...)``)
        and an async context manager (``async with CharacterMemory.open(...) as memory``).

        **Another embedder, or moving vector stores.** A collection's vectors are bound to the
        embedder that made them (another one raises ``DimensionMismatchError`` or
        ``EmbedderMismatchError``). ``rebuild_vectors=True`` drops the collection's vectors through
        the vector adapter's factory (``AdapterFactory.drop``) and runs :meth:`rebuild_vector_index`
        with this provider before returning; the graph is never touched. The same flag fills a new
        vector store. If it fails midway, open with ``rebuild_vectors=True`` again.

        **Lost derived data.** A missing vector index beside a non-empty graph is rebuilt from the
        graph before ``open`` returns (logged, reported through ``rebuild_progress``; refused with
        ``VECTOR_REBUILD_ON_OPEN=false``); empty statistics beside a non-empty graph are rebuilt;
        a missing graph store beside existing vectors is refused, never created empty.

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
            character_id: the character's notion id: recorded on the collection's first open
                that gives one (no stored notion needed), refused when another is recorded;
                without it any collection opens. :attr:`character_id` is the recorded id.

        Raises:
            ConfigurationError: bad collection name, missing key, adapter (including the
                ``TOKEN_COUNTER`` one) not installed, or an ``embedding_provider`` that is not an
                ``EmbeddingProvider``.
            MemoryNotOpenedError: the result was used as the memory without ``await``.
            StoreLockedError: an embedded store is held by another process.
            DimensionMismatchError, EmbedderMismatchError: the collection was indexed by another
                embedder.
            StoreCorruptedError: a store's files are damaged, the graph (or the graph server read:
                wrong shard or endpoint) holds none of a collection whose vectors hold points, or
                the vector index is missing and ``VECTOR_REBUILD_ON_OPEN`` is false.
            InsufficientStorageError: too little free disk space to open or create a store.
            CharacterIdentityMismatchError: another character id is recorded (no vector opened).
            BackendError: a store failed to open.
        """
        options = OpenOptions(
            embedding_provider=embedding_provider,
            clock=clock,
            token_counter=token_counter,
            rebuild_vectors=rebuild_vectors,
            rebuild_progress=rebuild_progress,
            character_id=character_id,
        )
        return opening(cls, settings, collection, options)

    @property
    def _closed(self) -> bool:
        """Whether close has started (operations are then refused)."""
        return self._flight.closed

    def _check_open(self, argument: object = None, expected: type | tuple[type, ...] | None = None) -> None:
        self._flight.refuse_if_closed()
        if expected is not None and not isinstance(argument, expected):
            names = " or ".join(
                "None" if t is type(None) else t.__name__
                for t in (expected if isinstance(expected, tuple) else (expected,))
            )
            raise DraftValidationError(f"expected a {names}, not {type(argument).__name__}")

    @operation
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

    @operation
    async def validate_plan(self, plan: RememberWritePlan) -> list[CandidateValidation]:
        """Check a plan against the graph; read-only.

        Returns:
            list[CandidateValidation]: one per object and caller link, in plan order.

        Raises:
            PlanValidationError: the plan was prepared for another collection (as :meth:`commit`
                refuses it).
            BackendError: the graph could not be read.
        """
        self._check_open(plan, RememberWritePlan)
        return await validate(plan, self._graph, self.clock.now())

    @operation
    async def commit(self, plan: RememberWritePlan, options: CommitOptions | None = None) -> RememberOutcome:
        """Re-validate and persist a plan (graph atomically; vectors and stats repairably).

        Returns:
            RememberOutcome: stored ids and any repair markers.

        Raises:
            DraftValidationError: ``plan`` or ``options`` is of the wrong type.
            PlanValidationError: an invalid candidate, or a plan prepared for another
                collection; nothing was written.
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
        texts = {entry_key(e.id, e.surface): e.text for e in plan.index_entries}
        self._log_texts("memory_texts_committed", texts=texts)
        return outcome

    @operation
    async def commit_many(
        self, plans: Sequence[RememberWritePlan], options: CommitOptions | None = None
    ) -> list[RememberOutcome]:
        """Commit plans in order, each as :meth:`commit` would, embedding texts across plans.

        For bulk ingest: texts go in calls of ``preferred_batch_size`` as later plans are written.

        Returns:
            list[RememberOutcome]: one per plan, in order.

        Raises:
            DraftValidationError: ``plans`` is not a list or tuple of plans, or bad ``options``.
            PlanSequenceError: plan ``index`` failed as :meth:`commit` raises (``error``): the
                plans before it are committed (``outcomes``), it and those after are not.
        """
        self._check_open(plans, (list, tuple))
        for plan in plans:
            self._check_open(plan, RememberWritePlan)
        self._check_open(options, (CommitOptions, type(None)))
        async with self._write_lock:
            outcomes = await commit_plans(
                plans,
                options or CommitOptions(),
                graph=self._graph,
                vectors=self._vectors,
                embedder=self.embedder,
                stats=self._stats,
                embed_timeout_s=self.embedding_timeout_s,
                now=self.clock.now(),
            )
        texts = {entry_key(e.id, e.surface): e.text for p in plans for e in p.index_entries}
        self._log_texts("memory_texts_committed", texts=texts)
        return outcomes

    @operation
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

    @operation
    async def correct(self, draft: CorrectMemoryDraft) -> LifecycleMutationOutcome:
        """Correct a memory: a replacement supersedes the target.

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

    @operation
    async def forget(self, draft: ForgetMemoryDraft) -> LifecycleMutationOutcome:
        """Forget by suppression: nothing is deleted; influence is removed.

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

    @operation
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

    @operation
    async def rebuild_stats(self) -> int:
        """Recompute the retrieval statistics of the collection from the graph.

        Returns:
            int: the number of rows written.

        Raises:
            BackendError: a store failed (the stats may then be partial: run it again).
        """
        self._check_open()
        async with self._write_lock:
            return await rebuild_stats(self._graph, self._stats)

    @operation
    async def rebuild_vector_index(
        self, *, batch_size: int | None = None, on_progress: ProgressCallback | None = None
    ) -> VectorRebuildReport:
        """Re-create the collection's vectors from its current graph objects.

        Every current episode (with a summary of its own), observation, derived memory and thread
        is embedded again and upserted; superseded and suppressed memories stay out, and points no
        current object backs are deleted. The repair of last resort (a lost shard, unreplayed
        repair markers) and the way to fill a new vector store. To switch to an embedder of
        another model or size, the index must first be dropped: open with
        ``CharacterMemory.open(settings, name, embedding_provider=new, rebuild_vectors=True)``
        (see :meth:`open`). Writers wait while it runs.

        Args:
            batch_size: texts per ``embed_documents`` call and points per upsert (count, >= 1;
                default: the provider's ``preferred_batch_size``, else 64).
            on_progress: ``on_progress(done, total)``: index entries written so far and in all.

        Returns:
            VectorRebuildReport: ``objects`` examined, ``indexed`` points written,
            ``not_current`` objects left out, stale points ``removed``.

        Raises:
            DraftValidationError: ``batch_size`` is not None or an int >= 1 (a ``ValueError``).
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
        async with self._flight.operation("exclusive block"):
            self._check_open()
            async with self._write_lock:
                yield

    @operation
    async def retrieve(self, context: RetrievalContext | str) -> ContinuityContextPack:
        """Recall memories into a continuity context pack.

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
            character_id=self.character_id,
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
        wait_s = self.close_timeout_s if timeout_s is None else positive_seconds(timeout_s, "timeout_s")
        await self._flight.close(wait_s, self._stores.close)

    async def __aenter__(self) -> CharacterMemory:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
