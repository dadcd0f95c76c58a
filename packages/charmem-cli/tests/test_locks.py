"""Embedded store locks across real processes: a second opener gets StoreLockedError after a short
bounded retry, a failed open leaves nothing held, and a holder killed with SIGKILL leaves no lock
behind (the store reopens at once, without removing any file)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from charmem import CharacterMemory, MemoryId, Settings, StoreLockedError
from charmem.testing import HashingEmbeddingProvider, stores_of
from charmem_oxigraph import OxigraphGraphStore, _registry
from charmem_qdrant import EdgeVectorIndex

COLLECTION = "locked"
MAX_REFUSAL_SECONDS = 5.0  # the bounded retry gives up after ~1 s; generous for a loaded machine

HOLDER = textwrap.dedent(
    """
    import asyncio, os, sys
    from datetime import UTC, datetime
    from charmem import CharacterMemory, MemoryId, RememberInput, Settings

    async def main():
        memory = await CharacterMemory.open(Settings.from_mapping(os.environ), sys.argv[1])
        await memory.remember(
            RememberInput("held by the child", occurred_at=datetime(2024, 1, 1, tzinfo=UTC),
                          observation_id=MemoryId(sys.argv[2]))
        )
        print("ready", flush=True)
        await asyncio.sleep(600)  # killed long before

    asyncio.run(main())
    """
)


OPENER = textwrap.dedent(
    """
    import asyncio, sys
    from charmem_oxigraph import OxigraphGraphStore, _registry
    asyncio.run(OxigraphGraphStore.open("locked", path=sys.argv[1], lock_timeout=0.0).close())
    print("opened")
    """
)


@pytest.fixture
def holder(store_root: Path, child_env: dict[str, str]) -> Iterator[tuple[subprocess.Popen[str], MemoryId]]:
    """A child process holding every embedded store of ``COLLECTION`` (one memory written)."""
    observation = MemoryId.new()
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, COLLECTION, str(observation)],
        env=child_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline().strip()
        assert line == "ready", child.stderr.read() if child.stderr else line
        yield child, observation
    finally:
        if child.poll() is None:
            child.kill()
        child.wait(timeout=30)


def _refused_within_bound(open_store: object) -> float:
    started = time.monotonic()
    with pytest.raises(StoreLockedError):
        open_store()  # type: ignore[operator]
    return time.monotonic() - started


def test_a_second_process_is_refused_fast_and_a_killed_holder_leaves_no_lock(
    holder: tuple[subprocess.Popen[str], MemoryId], store_root: Path, embedded_settings: Settings
) -> None:
    child, observation = holder
    embedder = HashingEmbeddingProvider()
    graph_wait = _refused_within_bound(
        lambda: OxigraphGraphStore.open(COLLECTION, path=store_root / "oxigraph")
    )
    vector_wait = _refused_within_bound(
        lambda: EdgeVectorIndex(
            store_root / "vectors", COLLECTION, model_id=embedder.model_id, vector_size=embedder.vector_size
        )
    )
    for waited in (graph_wait, vector_wait):
        assert 0.5 <= waited < MAX_REFUSAL_SECONDS  # retried for about a second, then gave up

    child.send_signal(signal.SIGKILL)
    assert child.wait(timeout=30) == -signal.SIGKILL
    assert (store_root / "oxigraph" / "LOCK").exists()  # the files stay; the locks died with it

    async def reopen() -> None:
        started = time.monotonic()
        async with CharacterMemory.open(embedded_settings, COLLECTION) as memory:
            assert time.monotonic() - started < 0.5 + MAX_REFUSAL_SECONDS / 2  # no lock wait
            stored = await stores_of(memory).graph.get_objects([observation])
            assert stored[observation].text == "held by the child"  # type: ignore[union-attr]
            assert observation in await stores_of(memory).vectors.point_ids()

    asyncio.run(reopen())


async def test_a_refused_open_releases_what_it_had_opened(
    holder: tuple[subprocess.Popen[str], MemoryId], tmp_path: Path, store_root: Path
) -> None:
    """The vector shard is held elsewhere: opening fails after the graph store was opened, and
    that graph store is released again (another opener gets it at once)."""
    own_graph = tmp_path / "own-oxigraph"
    settings = Settings.from_mapping(
        {
            "EMBEDDING_PROVIDER": "hashing",
            "OXIGRAPH_PATH": str(own_graph),
            "VECTOR_STORE_PATH": str(store_root / "vectors"),  # the shard the child holds
            "RETRIEVAL_STATS_PATH": str(tmp_path / "own-stats.sqlite3"),
        }
    )
    # the graph store exists (a missing one beside existing vectors is refused before opening)
    await (await OxigraphGraphStore.open_async(COLLECTION, path=own_graph)).close()
    started = time.monotonic()
    with pytest.raises(StoreLockedError, match="held by another opener"):
        await CharacterMemory.open(settings, COLLECTION)
    assert time.monotonic() - started < MAX_REFUSAL_SECONDS
    assert own_graph.resolve() not in _registry._REGISTRY  # the graph handle was released
    reopened = subprocess.run(  # and its RocksDB lock too: another process opens it at once
        [sys.executable, "-c", OPENER, str(own_graph)], capture_output=True, text=True, timeout=60
    )
    assert reopened.stdout.strip() == "opened", reopened.stderr
