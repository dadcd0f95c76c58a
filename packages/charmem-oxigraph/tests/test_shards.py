"""Graph sharding by collection (``SPARQL_ENDPOINTS``) on two real ``oxigraph serve`` processes.

Each collection must land on the server its placement names (checked by asking each server
directly), a pin must beat the hash, and a reopen must find the collection again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from charmem.composition import load_factory
from charmem.domain.graph import GraphBatch
from charmem.settings import Settings, shard_index

from charmem_oxigraph import SparqlServiceGraphStore, collection_graph
from charmem_oxigraph._stats import GraphRetrievalStatsStore
from charmem_oxigraph.testing import OxigraphServer

from oxigraph_builders import entity


@pytest.fixture(scope="module")
def two_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[OxigraphServer, OxigraphServer]]:
    """Two real graph servers (shard 0 and shard 1), each with its own data directory."""
    first = OxigraphServer(tmp_path_factory.mktemp("shard-0"))
    second = OxigraphServer(tmp_path_factory.mktemp("shard-1"))
    first.start()
    try:
        second.start()
        try:
            yield first, second
        finally:
            second.stop()
    finally:
        first.stop()


def _settings(servers: tuple[OxigraphServer, ...], pinned: dict[str, int] | None = None) -> Settings:
    shards = [{"query": s.query_endpoint, "update": s.update_endpoint} for s in servers]
    return Settings.from_mapping(
        {
            "GRAPH_STORE_MODE": "service",
            "SPARQL_ENDPOINTS": json.dumps({"shards": shards, "pinned": pinned or {}}),
            "SPARQL_TIMEOUT": "10",
        }
    )


def _holds(server: OxigraphServer, collection: str) -> bool:
    """Ask the server itself whether the collection's named graph has any triple."""
    query = f"ASK {{ GRAPH <{collection_graph(collection)}> {{ ?s ?p ?o }} }}"
    answer = httpx.post(
        server.query_endpoint,
        content=query,
        headers={"Content-Type": "application/sparql-query", "Accept": "application/sparql-results+json"},
        timeout=10,
    )
    answer.raise_for_status()
    return bool(answer.json()["boolean"])


def _holders(servers: tuple[OxigraphServer, ...], collection: str) -> list[int]:
    """The indexes of the servers holding the collection."""
    return [i for i, server in enumerate(servers) if _holds(server, collection)]


def _names_on(shard: int, count: int, prefix: str) -> list[str]:
    """``count`` collection names that the hash places on ``shard`` of two."""
    names = (f"{prefix}-{n}" for n in range(1000))
    return [name for name in names if shard_index(name, 2, {}) == shard][:count]


async def test_collections_land_on_their_shard_and_reopen_finds_them(
    two_servers: tuple[OxigraphServer, OxigraphServer],
) -> None:
    settings = _settings(two_servers)
    on_zero, on_one = _names_on(0, 2, "hashed"), _names_on(1, 2, "hashed")
    stored = {}
    factory = load_factory("graph", "service")
    for name in (*on_zero, *on_one):
        graph = await factory.open(settings, name)  # the path CharacterMemory.open and the CLI take
        try:
            stored[name] = entity()
            await graph.write_batch(GraphBatch(objects=[stored[name]]))
        finally:
            await graph.close()
    assert {name: _holders(two_servers, name) for name in stored} == {
        **{name: [0] for name in on_zero},
        **{name: [1] for name in on_one},
    }
    for name, obj in stored.items():  # a new process's settings find every collection again
        async with SparqlServiceGraphStore.from_settings(_settings(two_servers), name) as graph:
            assert await graph.get_objects([obj.id]) == {obj.id: obj}


async def test_a_pin_beats_the_hash_and_for_collection_follows_placement(
    two_servers: tuple[OxigraphServer, OxigraphServer],
) -> None:
    hashed_to_zero = _names_on(0, 1, "pinned")[0]
    settings = _settings(two_servers, pinned={hashed_to_zero: 1})
    graph = SparqlServiceGraphStore.from_settings(settings, hashed_to_zero)
    try:
        assert graph.query_endpoint == two_servers[1].query_endpoint
        await graph.write_batch(GraphBatch(objects=[entity()]))
        hashed_to_one = _names_on(1, 1, "sibling")[0]
        hashed_to_zero_too = _names_on(0, 1, "sibling")[0]
        async with graph.for_collection(hashed_to_zero_too) as sibling:
            await sibling.write_batch(GraphBatch(objects=[entity()]))
        async with graph.for_collection(hashed_to_one) as sibling:
            await sibling.write_batch(GraphBatch(objects=[entity()]))
    finally:
        await graph.close()
    assert _holders(two_servers, hashed_to_zero) == [1]  # pinned
    assert _holders(two_servers, hashed_to_zero_too) == [0]
    assert _holders(two_servers, hashed_to_one) == [1]


async def test_one_server_settings_place_everything_on_it() -> None:
    settings = Settings.from_mapping(
        {"GRAPH_STORE_MODE": "service", "SPARQL_QUERY_ENDPOINT": "http://127.0.0.1:9/query"}
    )
    graph = SparqlServiceGraphStore.from_settings(settings, "anyone")
    async with graph, graph.for_collection("someone-else") as other:
        assert graph.query_endpoint == other.query_endpoint == "http://127.0.0.1:9/query"
        assert other.update_endpoint == "http://127.0.0.1:9/query"


async def test_graph_statistics_count_on_the_collections_shard(
    two_servers: tuple[OxigraphServer, OxigraphServer],
) -> None:
    settings = _settings(two_servers)
    name = _names_on(1, 1, "counted")[0]
    async with SparqlServiceGraphStore.from_settings(settings, name) as graph:
        await graph.write_batch(GraphBatch(objects=[entity(), entity()]))
    stats = GraphRetrievalStatsStore.from_settings(settings, name)
    try:
        assert (await stats.summary()).objects == {"entity": 2}
    finally:
        await stats.close()
    assert _holders(two_servers, name) == [1]
