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
from charmem_contract import GraphStoreContract, StoreFactory, opening

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


async def _competing_process(path: Path) -> None:
    """Open the store at ``path`` from a child process; raise its StoreLockedError here."""
    child = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", COMPETITOR, str(path)],
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


class TestOxigraphPersistent(GraphStoreContract):
    @pytest.fixture
    async def graph_store_factory(self, tmp_path: Path) -> AsyncIterator[StoreFactory[GraphStore]]:
        """One store directory per store name; the lock competitor is another process."""

        async def open_store(collection: str, *, store: str) -> GraphStore:
            return await OxigraphGraphStore.open_async(collection, path=tmp_path / store)

        async def competitor(collection: str, *, store: str) -> None:
            await _competing_process(tmp_path / store)

        async with opening(open_store, competitor=competitor) as factory:
            yield factory


class TestOxigraphInMemory(GraphStoreContract):
    # Store() lives in this process only: nothing survives close, and there is no lock.
    supports_reopen = False
    supports_lock = False

    @pytest.fixture
    async def graph_store_factory(self) -> AsyncIterator[StoreFactory[GraphStore]]:
        """One in-process ``Store()`` per store name; its collections share it."""
        first: dict[str, OxigraphGraphStore] = {}

        async def open_store(collection: str, *, store: str) -> GraphStore:
            if store not in first:
                first[store] = await OxigraphGraphStore.open_async(collection)
                return first[store]
            return first[store].for_collection(collection)

        async with opening(open_store) as factory:
            yield factory
