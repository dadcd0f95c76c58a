"""The graph-store contract suite on both Oxigraph modes: persistent (``Store(path)``) and
in-memory (``Store()``), each on a real pyoxigraph store (never a stand-in)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from charmem.errors import StoreLockedError
from charmem.ports import GraphStore
from charmem_contract import GraphStoreContract

from charmem_oxigraph import OxigraphGraphStore

# A child process opening the store: the RocksDB lock is per process (collections of one process
# share one handle), so only another process is a competing opener.
COMPETITOR = textwrap.dedent(
    """
    import asyncio
    import sys
    from charmem.errors import StoreLockedError
    from charmem_oxigraph import OxigraphGraphStore

    try:
        store = OxigraphGraphStore.open("contract", path=sys.argv[1], lock_timeout=0.5)
    except StoreLockedError as exc:
        print("locked:", exc)
    else:
        asyncio.run(store.close())
        print("opened")
    """
)


def _as_oxigraph(store: GraphStore) -> OxigraphGraphStore:
    assert isinstance(store, OxigraphGraphStore)
    return store


class TestOxigraphPersistent(GraphStoreContract):
    @pytest.fixture
    async def graph_store(self, tmp_path: Path) -> AsyncIterator[GraphStore]:
        self.path = tmp_path / "oxigraph"
        store = await OxigraphGraphStore.open_async("contract", path=self.path)
        try:
            yield store
        finally:
            await store.close()

    async def reopen(self, store: GraphStore) -> GraphStore:
        return await OxigraphGraphStore.open_async(store.collection, path=self.path)

    async def open_twin(self, store: GraphStore, collection: str) -> GraphStore:
        return await OxigraphGraphStore.open_async(collection, path=self.path.with_name(f"twin-{collection}"))

    async def open_competitor(self, store: GraphStore) -> None:
        child = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-c", COMPETITOR, str(self.path)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        lines = [line for line in child.stdout.splitlines() if line.startswith(("locked:", "opened"))]
        assert child.returncode == 0, f"the competing process failed: {child.stderr}"
        assert lines, f"the competing process said nothing: {child.stdout}"
        if lines[-1].startswith("locked:"):
            raise StoreLockedError(lines[-1].removeprefix("locked:").strip())

    async def open_sibling(self, store: GraphStore, collection: str) -> GraphStore:
        return _as_oxigraph(store).for_collection(collection)


class TestOxigraphInMemory(GraphStoreContract):
    # Store() lives in this process only: nothing survives close, and there is no lock.
    supports_reopen = False
    supports_lock = False

    @pytest.fixture
    async def graph_store(self) -> AsyncIterator[GraphStore]:
        store = await OxigraphGraphStore.open_async("contract")
        try:
            yield store
        finally:
            await store.close()

    async def open_twin(self, store: GraphStore, collection: str) -> GraphStore:
        return await OxigraphGraphStore.open_async(collection)  # a new Store() each time

    async def open_sibling(self, store: GraphStore, collection: str) -> GraphStore:
        return _as_oxigraph(store).for_collection(collection)
