"""Contract suites for charmem adapters: every adapter, ours and third parties', passes the same tests.

Subclass a suite in your adapter's tests, override its one fixture (a factory of handles on the
test's own backing stores), and run pytest::

    from charmem_contract import GraphStoreContract, opening

    class TestMyGraphStore(GraphStoreContract):
        supports_lock = False

        @pytest.fixture
        async def graph_store_factory(self, tmp_path):
            def open_store(collection, *, store):
                return MyGraphStore(tmp_path / store, collection)

            async with opening(open_store) as factory:
                yield factory

Suites: :class:`GraphStoreContract`, :class:`VectorIndexContract`,
:class:`EmbeddingProviderContract`, :class:`RetrievalStatsStoreContract` (one per port; the three
store suites share the store lifecycle tests: reopen, lock, closed handle) and
:class:`CharacterMemoryContract` (the whole facade over any composition of adapters),
:class:`CharacterMemoryBlackBoxContract` (the facade through its methods only),
:class:`LifecycleContract`, :class:`RecallSignalsContract`, :class:`SituatedRecallContract` and
:class:`AdminToolsContract`
(backup, restore and purge). See :mod:`charmem_contract.factories` for the fixture shape and the
package README for the rules (capability flags, known failures, the guard).
"""

import pkgutil

import pytest

# Before the suite modules are imported, so their asserts keep pytest's detailed messages: every
# module of the package, so a new suite module cannot be forgotten.
pytest.register_assert_rewrite(*(f"{__name__}.{module.name}" for module in pkgutil.iter_modules(__path__)))

from charmem_contract._base import ContractSuite, known_failure, requires  # noqa: E402
from charmem_contract._version import __version__  # noqa: E402
from charmem_contract.admin import AdminToolsContract  # noqa: E402
from charmem_contract.embedder import EmbeddingProviderContract  # noqa: E402
from charmem_contract.facade import CharacterMemoryBlackBoxContract, CharacterMemoryContract  # noqa: E402
from charmem_contract.factories import Factory, StoreFactory, opening  # noqa: E402
from charmem_contract.graph import GraphStoreContract  # noqa: E402
from charmem_contract.lifecycle import LifecycleContract  # noqa: E402
from charmem_contract.recall import RecallSignalsContract  # noqa: E402
from charmem_contract.situated import SituatedRecallContract  # noqa: E402
from charmem_contract.stacks import FixedClock, MemoryFactory, memory_factory, reference_memory  # noqa: E402
from charmem_contract.stats import RetrievalStatsStoreContract  # noqa: E402
from charmem_contract.vectors import VectorIndexContract  # noqa: E402

__all__ = [
    "AdminToolsContract",
    "CharacterMemoryBlackBoxContract",
    "CharacterMemoryContract",
    "ContractSuite",
    "EmbeddingProviderContract",
    "Factory",
    "FixedClock",
    "GraphStoreContract",
    "LifecycleContract",
    "MemoryFactory",
    "RecallSignalsContract",
    "RetrievalStatsStoreContract",
    "SituatedRecallContract",
    "StoreFactory",
    "VectorIndexContract",
    "__version__",
    "known_failure",
    "memory_factory",
    "opening",
    "reference_memory",
    "requires",
]
