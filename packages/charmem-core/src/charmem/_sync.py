"""The blocking facade: :class:`SyncCharacterMemory`, the async facade run on a private loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from charmem.domain.drafts import LinkDraft, RememberDrafts, RememberInput
from charmem.domain.ids import MemoryId
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
from charmem.errors import CharmemError
from charmem.ports import Clock, EmbeddingProvider, TokenCounter
from charmem.settings import Settings
from charmem.usecases.maintenance import ProgressCallback, VectorRebuildReport

if TYPE_CHECKING:
    from charmem.memory import CharacterMemory

__all__ = ["SyncCharacterMemory"]

T = TypeVar("T")


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

    @property
    def character_id(self) -> MemoryId | None:
        """The character id the collection records (:attr:`CharacterMemory.character_id`)."""
        return self._memory.character_id

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
    ) -> SyncCharacterMemory:
        """Open as :meth:`CharacterMemory.open` does; usable directly or as a context manager."""
        from charmem.memory import CharacterMemory  # the async facade imports this module

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
                    character_id=character_id,
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

    def commit_many(
        self, plans: Sequence[RememberWritePlan], options: CommitOptions | None = None
    ) -> list[RememberOutcome]:
        """See :meth:`CharacterMemory.commit_many`."""
        return self._run(self._memory.commit_many(plans, options))

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
        self, *, batch_size: int | None = None, on_progress: ProgressCallback | None = None
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
