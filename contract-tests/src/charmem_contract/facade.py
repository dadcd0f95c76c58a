"""The whole-facade suite: :class:`CharacterMemoryContract`, run over any composition of adapters."""

from __future__ import annotations

import asyncio
from typing import ClassVar

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from charmem import CharacterMemory, RetrievalContext
from charmem.ports import EmbeddingProvider
from charmem.testing import stores_of
from charmem_contract._base import ContractSuite
from charmem_contract._facade_black_box import BlackBoxTests
from charmem_contract._facade_repairs import WhiteBoxRecallTests
from charmem_contract._facade_writes import WhiteBoxWriteTests
from charmem_contract._state_machine import LoopRunner, MemoryComparison
from charmem_contract.factories import CONTRACT_COLLECTION, MemoryFactory

__all__ = ["CharacterMemoryBlackBoxContract", "CharacterMemoryContract"]


class CharacterMemoryBlackBoxContract(BlackBoxTests, ContractSuite, suite=True):
    """The facade suite through the facade's methods only: any implementation of its API passes it.

    It never reaches a store: every check goes through ``prepare``, ``validate_plan``,
    ``commit``, ``remember``, ``retrieve``, ``correct``, ``forget``, ``link`` and ``close``, so a
    memory in another process (``charmem_server.RemoteCharacterMemory`` over a running server)
    runs it as well as an in-process stack. :class:`CharacterMemoryContract` adds the tests that
    look inside the stores (counts, points, repair markers of injected faults).

    Subclass it as ``TestMyMemory`` and override the one fixture ``memory_factory`` (see
    :class:`CharacterMemoryContract`); a memory with no ``embedder`` attribute also overrides
    ``reference_embedder`` to return the embedder its server uses, for the differential state
    machine's reference stack.
    """

    capabilities: ClassVar[dict[str, str]] = {
        "supports_reopen": "reaches the same data when a closed collection is opened again",
        "supports_exhaustive": "recalls candidates exhaustively and reports the count scanned",
    }
    #: An approximate stack cannot be compared with the exact reference stack: only reopen is optional.
    optional_capabilities: ClassVar[frozenset[str]] = frozenset({"supports_reopen"})
    minimum_passing: ClassVar[int] = 13

    supports_reopen: ClassVar[bool] = True
    supports_exhaustive: ClassVar[bool] = True
    #: Whether the suite may look inside the stores (``charmem.testing.stores_of``).
    white_box: ClassVar[bool] = False

    #: Hypothesis budget of the state machine (examples x steps); keep CI fast.
    state_machine_examples: ClassVar[int] = 15
    state_machine_steps: ClassVar[int] = 12
    #: Shrink a failing sequence to a minimal one. Off by default: shrinking replays hundreds of
    #: sequences on real stores (minutes); switch it on locally to debug a failure.
    state_machine_shrink: ClassVar[bool] = False
    #: Run the same examples every time (hypothesis ``derandomize``), e.g. for a reproducible CI.
    state_machine_derandomize: ClassVar[bool] = False

    # -- what a stack provides -------------------------------------------------------------

    @pytest.fixture
    def memory_factory(self) -> MemoryFactory:
        """Override: yield a MemoryFactory over the test's own stores; close what it opened afterwards."""
        raise NotImplementedError(
            f"{type(self).__name__} must override the memory_factory fixture to yield a "
            "charmem_contract.MemoryFactory (see charmem_contract.memory_factory)"
        )

    @pytest.fixture
    async def memory(self, memory_factory: MemoryFactory) -> CharacterMemory:
        """The memory of collection ``contract`` (closed by the factory)."""
        return await memory_factory.open(CONTRACT_COLLECTION)

    @pytest.fixture
    def reference_embedder(self) -> EmbeddingProvider | None:
        """The embedder of the state machine's reference stack (``None``: the memory's own)."""
        return None

    # -- the canary ------------------------------------------------------------------------

    async def test_fixture_starts_empty_through_recall(self, memory: CharacterMemory) -> None:
        """A fresh memory recalls nothing and omits nothing.

        If this fails: ``memory_factory`` must open every test's collection on fresh stores
        (a fresh temporary directory, or a fresh server).
        """
        pack = await memory.retrieve(RetrievalContext(query="anything at all about tomatoes"))
        assert pack.items == () and pack.omissions == (), "the memory_factory's memories are not empty"

    # -- the differential state machine ----------------------------------------------------

    async def test_random_sequences_match_the_reference_stack(
        self, memory_factory: MemoryFactory, reference_embedder: EmbeddingProvider | None
    ) -> None:
        """Random remember / replay / retrieve (/ reopen) sequences give what the reference stack gives.

        Each example opens a new collection on this test's stores and an empty reference stack
        (core's reference adapters with the same embedder); after every step both must raise the
        same error class or agree, and every retrieval must give the same item ids, order,
        statuses, rounded scores, omissions and entities.

        If this fails: hypothesis prints the sequence of steps that differs (set
        ``state_machine_shrink = True`` on the test class to shrink it to a minimal one first);
        replay it by hand on both stacks and compare each store (``graph.currency``,
        ``vectors.search``).
        """
        machine = MemoryComparison.bind(
            LoopRunner(asyncio.get_running_loop()),
            memory_factory,
            can_reopen=self.supports_reopen,
            white_box=self.white_box,
            embedder=reference_embedder,
        )
        phases = [Phase.explicit, Phase.reuse, Phase.generate]
        options = settings(
            max_examples=self.state_machine_examples,
            stateful_step_count=self.state_machine_steps,
            deadline=None,
            database=None,
            phases=[*phases, Phase.shrink] if self.state_machine_shrink else phases,
            report_multiple_bugs=False,
            derandomize=self.state_machine_derandomize,
            suppress_health_check=list(HealthCheck),
        )
        await asyncio.to_thread(run_state_machine_as_test, machine, settings=options)


class CharacterMemoryContract(
    WhiteBoxWriteTests, WhiteBoxRecallTests, CharacterMemoryBlackBoxContract, suite=True
):
    """Contract suite of the whole :class:`~charmem.CharacterMemory` over one composition of adapters.

    Subclass it as ``TestMyStack`` and override the one fixture ``memory_factory`` to yield a
    :class:`~charmem_contract.factories.MemoryFactory` over stores of the test's own (a temporary
    directory), closing what it opened in ``finally`` (:func:`charmem_contract.memory_factory`
    does both). Build the stack with the lexical cue off: the suite compares exact orders with the
    reference stack.

    The suite covers the write path (prepare and validate write nothing, commit, idempotent
    replay, id conflicts, admission of given beliefs, refused caller ``supersedes`` links,
    supersession leaving the vector index, repair markers and their repair by replay) and
    retrieval (graph authority, canonical order and ties, scope, completeness, bounded
    expansion), plus a differential state machine against the reference stack. It holds every
    test of :class:`CharacterMemoryBlackBoxContract` and adds those that look inside the stores
    (``charmem.testing.stores_of``). The lifecycle operations (correct, forget, link) in depth
    are :class:`~charmem_contract.LifecycleContract`'s, with the same fixture.
    """

    minimum_passing: ClassVar[int] = 29
    white_box: ClassVar[bool] = True

    # -- the canary ------------------------------------------------------------------------

    async def test_fixture_starts_empty(self, memory: CharacterMemory) -> None:
        """The factory opens empty memories whose vector index matches the embedder.

        If this fails: ``memory_factory`` must open every test's stores under a fresh temporary
        directory (or fresh in-memory stores), and the vector index must be opened with the
        embedder's ``model_id`` and ``vector_size``.
        """
        assert await stores_of(memory).graph.object_ids() == [], "the memory_factory's stores are not empty"
        assert await stores_of(memory).graph.link_ids() == []
        assert await stores_of(memory).vectors.count() == 0
        assert await stores_of(memory).stats.row_count() == 0
        assert (stores_of(memory).vectors.model_id, stores_of(memory).vectors.vector_size) == (
            memory.embedder.model_id,
            memory.embedder.vector_size,
        )
