"""Fixtures: a real, empty Oxigraph graph store in each mode (never a stand-in).

A test module that sets ``GRAPH_MODES = ALL_MODES`` also runs against the service modes: a
:class:`~charmem_oxigraph.SparqlServiceGraphStore` on a real ``oxigraph serve`` process
(``service``) and on a real Virtuoso 7 (``virtuoso``), one server of each per session; each test
gets its own collection, so it starts empty.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from charmem_oxigraph import OxigraphGraphStore, SparqlServiceGraphStore
from charmem_oxigraph.testing import OxigraphServer, VirtuosoServer, find_virtuoso_binaries

EMBEDDED_MODES = ("in_memory", "persistent")
#: The service modes and the fixture of the server each runs on (``virtuoso``: Virtuoso 7, when
#: installed; see ``virtuoso_server``).
SERVICE_MODES = {"service": "sparql_server", "virtuoso": "virtuoso_server"}
ALL_MODES = (*EMBEDDED_MODES, *SERVICE_MODES)
_collections = itertools.count()

# The test modules import ``oxigraph_builders`` from this folder, also under the workspace's
# ``--import-mode=importlib`` (which does not put test folders on ``sys.path``).
sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every store test runs in each mode its module lists (``GRAPH_MODES``; default embedded)."""
    if "mode" in metafunc.fixturenames:
        modes = getattr(metafunc.module, "GRAPH_MODES", EMBEDDED_MODES)
        metafunc.parametrize("mode", modes, indirect=True)


@pytest.fixture
def mode(request: pytest.FixtureRequest) -> str:
    """The graph store mode under test."""
    return str(request.param)


@pytest.fixture(scope="session")
def sparql_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OxigraphServer]:
    """One real ``oxigraph serve`` for the session's service-mode tests (stopped at the end)."""
    server = OxigraphServer(tmp_path_factory.mktemp("oxigraph-server"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _virtuoso(location: Path, max_rows: int = 1_000_000) -> Iterator[VirtuosoServer]:
    """A started Virtuoso server, or a skip (a failure under ``REQUIRE_VIRTUOSO_TESTS=1``)."""
    if find_virtuoso_binaries() is None:
        reason = "Virtuoso is not installed: apt-get install virtuoso-opensource-7-bin"
        if os.environ.get("REQUIRE_VIRTUOSO_TESTS") == "1":
            pytest.fail(f"REQUIRE_VIRTUOSO_TESTS=1 but {reason}")
        pytest.skip(reason)
    with VirtuosoServer(location, max_rows=max_rows) as server:
        yield server


@pytest.fixture(scope="session")
def virtuoso_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VirtuosoServer]:
    """One real Virtuoso 7 server for the session's tests (stopped at the end)."""
    yield from _virtuoso(tmp_path_factory.mktemp("virtuoso"))


@pytest.fixture(scope="module")
def virtuoso_twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VirtuosoServer]:
    """A second Virtuoso server: where the restore tests load a collection's export."""
    yield from _virtuoso(tmp_path_factory.mktemp("virtuoso-twin"))


@pytest.fixture
def own_virtuoso(tmp_path: Path) -> Iterator[VirtuosoServer]:
    """A Virtuoso server of this test alone (it may be killed and restarted)."""
    yield from _virtuoso(tmp_path / "virtuoso")


@pytest.fixture(scope="module")
def capped_virtuoso(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VirtuosoServer]:
    """A Virtuoso server whose ``ResultSetMaxRows`` is 20 (as a default setup's 10,000)."""
    yield from _virtuoso(tmp_path_factory.mktemp("virtuoso-capped"), max_rows=20)


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "oxigraph"


@pytest.fixture
async def store(mode: str, store_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """An empty, open graph store of collection ``test`` (closed afterwards).

    In a service mode the collection is ``test-<n>``, new for each test, on the session server.
    """
    graph: OxigraphGraphStore | SparqlServiceGraphStore
    if mode in SERVICE_MODES:
        server: OxigraphServer | VirtuosoServer = request.getfixturevalue(SERVICE_MODES[mode])
        graph = SparqlServiceGraphStore(
            f"test-{next(_collections)}",
            query_endpoint=server.query_endpoint,
            update_endpoint=server.update_endpoint,
            timeout=10,
        )
    else:
        graph = await OxigraphGraphStore.open_async("test", path=store_path if mode == "persistent" else None)
    try:
        yield graph
    finally:
        await graph.close()


@pytest.fixture
async def service_store(sparql_server: OxigraphServer) -> AsyncIterator[SparqlServiceGraphStore]:
    """An open service store of a new collection on the session's ``oxigraph serve`` (closed after)."""
    graph = SparqlServiceGraphStore(
        f"svc-{next(_collections)}",
        query_endpoint=sparql_server.query_endpoint,
        update_endpoint=sparql_server.update_endpoint,
    )
    try:
        yield graph
    finally:
        await graph.close()
