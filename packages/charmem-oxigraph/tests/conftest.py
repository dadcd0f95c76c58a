"""Fixtures: a real, empty Oxigraph graph store in each mode (never a stand-in)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from charmem_oxigraph import OxigraphGraphStore

# The test modules import ``oxigraph_builders`` from this folder, also under the workspace's
# ``--import-mode=importlib`` (which does not put test folders on ``sys.path``).
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(params=["in_memory", "persistent"])
def mode(request: pytest.FixtureRequest) -> str:
    """Both Oxigraph modes: every store test runs against each."""
    return str(request.param)


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "oxigraph"


@pytest.fixture
async def store(mode: str, store_path: Path) -> AsyncIterator[OxigraphGraphStore]:
    """An empty, open graph store of collection ``test`` (closed afterwards)."""
    graph = await OxigraphGraphStore.open_async("test", path=store_path if mode == "persistent" else None)
    try:
        yield graph
    finally:
        await graph.close()
