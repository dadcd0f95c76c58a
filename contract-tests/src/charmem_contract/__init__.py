"""Contract suites for charmem adapters: every adapter, ours and third parties', passes the same tests.

Subclass a suite in your adapter's tests, override its one fixture, and run pytest::

    from charmem_contract import GraphStoreContract

    class TestMyGraphStore(GraphStoreContract):
        supports_lock = False

        @pytest.fixture
        async def graph_store(self, tmp_path):
            store = MyGraphStore(tmp_path / "graph", "contract")
            try:
                yield store
            finally:
                await store.close()

Suites: :class:`GraphStoreContract`, :class:`VectorIndexContract`,
:class:`EmbeddingProviderContract`, :class:`RetrievalStatsStoreContract` (one per port) and
:class:`CharacterMemoryContract` (the whole facade over any composition of adapters),
:class:`LifecycleContract` and :class:`AdminToolsContract` (backup, restore and purge). See the
package README for the rules (capability flags, known failures, the guard).
"""

import pytest

# Before the suite modules are imported, so their asserts keep pytest's detailed messages.
pytest.register_assert_rewrite(
    "charmem_contract._base",
    "charmem_contract._lifecycle_rules",
    "charmem_contract.admin",
    "charmem_contract._state_machine",
    "charmem_contract.embedder",
    "charmem_contract.facade",
    "charmem_contract.graph",
    "charmem_contract.lifecycle",
    "charmem_contract.stats",
    "charmem_contract.vectors",
)

from charmem_contract._base import ContractSuite, known_failure, requires  # noqa: E402
from charmem_contract._version import __version__  # noqa: E402
from charmem_contract.admin import AdminToolsContract  # noqa: E402
from charmem_contract.embedder import EmbeddingProviderContract  # noqa: E402
from charmem_contract.facade import CharacterMemoryBlackBoxContract, CharacterMemoryContract  # noqa: E402
from charmem_contract.graph import GraphStoreContract  # noqa: E402
from charmem_contract.lifecycle import LifecycleContract  # noqa: E402
from charmem_contract.recall import RecallSignalsContract  # noqa: E402
from charmem_contract.stacks import FixedClock, MemoryFactory, memory_factory, reference_memory  # noqa: E402
from charmem_contract.stats import RetrievalStatsStoreContract  # noqa: E402
from charmem_contract.vectors import VectorIndexContract  # noqa: E402

__all__ = [
    "AdminToolsContract",
    "CharacterMemoryBlackBoxContract",
    "CharacterMemoryContract",
    "ContractSuite",
    "EmbeddingProviderContract",
    "FixedClock",
    "GraphStoreContract",
    "LifecycleContract",
    "MemoryFactory",
    "RecallSignalsContract",
    "RetrievalStatsStoreContract",
    "VectorIndexContract",
    "__version__",
    "known_failure",
    "memory_factory",
    "reference_memory",
    "requires",
]
