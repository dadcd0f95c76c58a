"""Graph sharding by collection (``SPARQL_ENDPOINTS``) on two real ``oxigraph serve`` processes.

Each collection must land on the server its placement names (checked by asking each server
directly), a pin must beat the hash, and a reopen must find the collection again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import attrs
import httpx
import pytest
from charmem import CharacterMemory, RememberInput, RetrievalContext, StoreCorruptedError
from charmem.admin import check, repair
from charmem.composition import load_factory
from charmem.domain.graph import GraphBatch
from charmem.settings import Settings, shard_index
from charmem.testing import HashingEmbeddingProvider, stores_of

from charmem_oxigraph import SparqlServiceGraphStore, collection_graph
from charmem_oxigraph._stats import GraphRetrievalStatsStore
from charmem_oxigraph.testing import OxigraphServer

from oxigraph_builders import entity

_T0 = datetime(2024, 3, 3, 18, 10, tzinfo=UTC)


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


def _memory_settings(
    servers: tuple[OxigraphServer, ...], vectors: Path, pinned: dict[str, int] | None = None
) -> Settings:
    """Sharded graph settings with an embedded vector index under ``vectors``."""
    shards = [{"query": s.query_endpoint, "update": s.update_endpoint} for s in servers]
    return Settings.from_mapping(
        {
            "GRAPH_STORE_MODE": "service",
            "SPARQL_ENDPOINTS": json.dumps({"shards": shards, "pinned": pinned or {}}),
            "SPARQL_TIMEOUT": "10",
            "VECTOR_STORE_MODE": "embedded",
            "VECTOR_STORE_PATH": str(vectors),
            "RETRIEVAL_STATS_STORE_MODE": "in_memory",
        }
    )


async def _remember_two(settings: Settings, name: str) -> int:
    """Write two memories to ``name``; the points its vector index holds."""
    async with CharacterMemory.open(settings, name, embedding_provider=HashingEmbeddingProvider()) as memory:
        await memory.remember(RememberInput("We adopted a dog called Biscuit.", occurred_at=_T0))
        await memory.remember(RememberInput("Ines learns the cello.", occurred_at=_T0))
        return await stores_of(memory).vectors.count()


async def test_a_reordered_shard_list_is_refused_on_open_and_keeps_the_vectors(
    two_servers: tuple[OxigraphServer, OxigraphServer], tmp_path: Path
) -> None:
    name = _names_on(0, 1, "reordered")[0]
    points = await _remember_two(_memory_settings(two_servers, tmp_path), name)
    assert points > 0
    reordered = (two_servers[1], two_servers[0])  # the hash now names the empty server
    with pytest.raises(StoreCorruptedError) as refused:
        await CharacterMemory.open(
            _memory_settings(reordered, tmp_path), name, embedding_provider=HashingEmbeddingProvider()
        )
    message = str(refused.value)
    assert two_servers[1].query_endpoint in message
    assert "shard 0 of 2" in message
    assert f"holds {points} points" in message
    assert "pinned" in message
    assert "charmem import" in message
    assert "rebuild_vectors=True" in message
    assert "OXIGRAPH_PATH" not in message
    assert _holders(two_servers, name) == [0]  # nothing written to the wrong server
    pinned = _memory_settings(reordered, tmp_path, pinned={name: 1})  # the way out: pin it
    async with CharacterMemory.open(pinned, name, embedding_provider=HashingEmbeddingProvider()) as memory:
        assert await stores_of(memory).vectors.count() == points
        pack = await memory.retrieve(RetrievalContext(query="dog Biscuit"))
        assert any("Biscuit" in item.text for item in pack.items)


async def test_a_mistyped_endpoint_is_refused_and_rebuild_vectors_drops_deliberately(
    two_servers: tuple[OxigraphServer, OxigraphServer], tmp_path: Path
) -> None:
    name = "mistyped-endpoint"
    one = Settings.from_mapping(
        {
            "GRAPH_STORE_MODE": "service",
            "SPARQL_QUERY_ENDPOINT": two_servers[0].query_endpoint,
            "SPARQL_UPDATE_ENDPOINT": two_servers[0].update_endpoint,
            "VECTOR_STORE_PATH": str(tmp_path),
            "RETRIEVAL_STATS_STORE_MODE": "in_memory",
        }
    )
    points = await _remember_two(one, name)
    other = attrs.evolve(
        one,
        sparql_query_endpoint=two_servers[1].query_endpoint,
        sparql_update_endpoint=two_servers[1].update_endpoint,
    )
    with pytest.raises(StoreCorruptedError, match=f"holds {points} points") as refused:
        await CharacterMemory.open(other, name, embedding_provider=HashingEmbeddingProvider())
    assert "SPARQL_QUERY_ENDPOINT" in str(refused.value)
    async with CharacterMemory.open(
        other, name, embedding_provider=HashingEmbeddingProvider(), rebuild_vectors=True
    ) as memory:  # dropping the vectors on purpose is still possible
        assert await stores_of(memory).vectors.count() == 0


async def test_check_calls_an_emptied_graph_unrepairable_and_repair_names_the_endpoint(
    two_servers: tuple[OxigraphServer, OxigraphServer], tmp_path: Path
) -> None:
    name = _names_on(1, 1, "emptied")[0]
    settings = _memory_settings(two_servers, tmp_path)
    await _remember_two(settings, name)
    async with CharacterMemory.open(settings, name, embedding_provider=HashingEmbeddingProvider()) as memory:
        drop = f"DROP SILENT GRAPH <{collection_graph(name)}>"  # the graph lost behind the app
        async with httpx.AsyncClient(timeout=10) as client:
            dropped = await client.post(
                two_servers[1].update_endpoint,
                content=drop,
                headers={"Content-Type": "application/sparql-update"},
            )
        dropped.raise_for_status()
        report = await check(memory)
        assert report.graph_looks_lost
        assert not report.repairable
        assert not any("repairable: `charmem check --repair`" in line for line in report.describe())
        with pytest.raises(StoreCorruptedError) as refused:
            await repair(memory, report)
        assert two_servers[1].query_endpoint in str(refused.value)
        assert "OXIGRAPH_PATH" not in str(refused.value)
        assert "--store" not in str(refused.value)
        assert await stores_of(memory).vectors.count() > 0
