"""The facade over the SPARQL service graph: CharacterMemory on a real ``oxigraph serve`` (and on
a real Virtuoso 7 when installed) + Qdrant Edge + SQLite stats (hashing embedder), against the
same operations on embedded Oxigraph."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from charmem import (
    BackendError,
    CharacterMemory,
    CorrectionTarget,
    CorrectMemoryDraft,
    DerivedMemoryDraft,
    DerivedType,
    ForgetMemoryDraft,
    MemoryId,
    RememberInput,
    ReplacementDerivedMemoryDraft,
    RetrievalContext,
    Settings,
)
from charmem.admin import check
from charmem.testing import HashingEmbeddingProvider, stores_of
from charmem_cli.app import main
from charmem_contract import CharacterMemoryContract, MemoryFactory, SituatedRecallContract, memory_factory
from charmem_contract.lifecycle import LifecycleContract
from charmem_oxigraph import SparqlServiceGraphStore
from charmem_oxigraph.testing import OxigraphServer, VirtuosoServer, find_virtuoso_binaries

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)


class FixedClock:
    def now(self) -> datetime:
        return T0


def service_env(root: Path, server: OxigraphServer | VirtuosoServer) -> dict[str, str]:
    return {
        "GRAPH_STORE_MODE": "service",
        "SPARQL_QUERY_ENDPOINT": server.query_endpoint,
        "SPARQL_UPDATE_ENDPOINT": server.update_endpoint,
        "SPARQL_TIMEOUT": "5",
        "VECTOR_STORE_MODE": "embedded",
        "VECTOR_STORE_PATH": str(root / "vectors"),
        "VECTOR_LEXICAL_CUE": "false",
        "RETRIEVAL_STATS_STORE_MODE": "sqlite",
        "RETRIEVAL_STATS_PATH": str(root / "stats.sqlite3"),
        "EMBEDDING_PROVIDER": "hashing",
    }


def embedded_env(root: Path) -> dict[str, str]:
    return {
        "GRAPH_STORE_MODE": "persistent",
        "OXIGRAPH_PATH": str(root / "oxigraph"),
        "VECTOR_STORE_MODE": "embedded",
        "VECTOR_STORE_PATH": str(root / "vectors"),
        "VECTOR_LEXICAL_CUE": "false",
        "RETRIEVAL_STATS_STORE_MODE": "sqlite",
        "RETRIEVAL_STATS_PATH": str(root / "stats.sqlite3"),
        "EMBEDDING_PROVIDER": "hashing",
    }


@pytest.fixture
def server(tmp_path: Path) -> Iterator[OxigraphServer]:
    running = OxigraphServer(tmp_path / "sparql-server")
    running.start()
    try:
        yield running
    finally:
        running.stop()


async def scenario(memory: CharacterMemory) -> list[dict[str, Any]]:
    """remember, correct, forget, retrieve: the packs of a few questions (as dicts)."""
    claims = []
    for n, (text, belief) in enumerate(
        [
            (
                'Ines said: "} ; DROP ALL" is just text.\nShe is learning the violin.',
                "Ines learns the violin.",
            ),
            ("Ines moved to Lisbon last spring.", "Ines lives in Lisbon."),
            ("We will name the dog Biscuit.", "The dog is called Biscuit."),
            ("I drink coffee at nine.", "Drinks coffee at nine."),
        ]
    ):
        outcome = await memory.remember(
            RememberInput(
                text,
                occurred_at=T0.replace(day=n + 1),
                created_at=T0,
                episode_id=MemoryId.deterministic("facade", str(n), "episode"),
                observation_id=MemoryId.deterministic("facade", str(n), "observation"),
            ).with_derived_memory(
                DerivedMemoryDraft(
                    DerivedType.CLAIM,
                    belief,
                    id=MemoryId.deterministic("facade", str(n), "claim"),
                    created_at=T0,
                )
            )
        )
        assert not outcome.repair_markers
        claims.append(outcome.object_ids[-1])
    corrected = await memory.correct(
        CorrectMemoryDraft(
            CorrectionTarget.derived_memory(claims[1]), "Porto.", recorded_at=T0
        ).with_replacement(ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "Ines lives in Porto."))
    )
    assert not corrected.repair_markers
    forgotten = await memory.forget(ForgetMemoryDraft.suppress(claims[3], "Forget it.", recorded_at=T0))
    assert not forgotten.repair_markers
    packs = []
    for question in ("violin", "where does Ines live", "dog name", "coffee"):
        packs.append((await memory.retrieve(question)).to_dict())
    packs.append((await memory.retrieve(RetrievalContext(query="Lisbon", include_superseded=True))).to_dict())
    current = {item["id"] for pack in packs[:4] for item in pack["items"] if item["status"] == "current"}
    assert str(claims[1]) not in current  # superseded
    assert str(claims[3]) not in current  # suppressed
    assert str(claims[1]) in {item["id"] for item in packs[4]["items"]}  # reached through the graph
    return packs


@pytest.fixture
def virtuoso(tmp_path: Path) -> Iterator[VirtuosoServer]:
    """A real Virtuoso 7; skipped when it is not installed (failed under REQUIRE_VIRTUOSO_TESTS=1)."""
    if find_virtuoso_binaries() is None:
        reason = "Virtuoso is not installed: apt-get install virtuoso-opensource-7-bin"
        if os.environ.get("REQUIRE_VIRTUOSO_TESTS") == "1":
            pytest.fail(f"REQUIRE_VIRTUOSO_TESTS=1 but {reason}")
        pytest.skip(reason)
    with VirtuosoServer(tmp_path / "virtuoso") as running:
        yield running


@pytest.mark.parametrize("engine", ["oxigraph", "virtuoso"])
async def test_facade_round_trip_matches_the_embedded_graph(
    tmp_path: Path, engine: str, request: pytest.FixtureRequest
) -> None:
    server = request.getfixturevalue("server" if engine == "oxigraph" else "virtuoso")
    service_settings = Settings.from_mapping(service_env(tmp_path / "service", server))
    async with CharacterMemory.open(service_settings, "facade", clock=FixedClock()) as memory:
        assert isinstance(stores_of(memory).graph, SparqlServiceGraphStore)
        on_service = await scenario(memory)
        statements = await stores_of(memory).graph.statement_count()
        assert (await check(memory)).consistent
    embedded_settings = Settings.from_mapping(embedded_env(tmp_path / "embedded"))
    async with CharacterMemory.open(embedded_settings, "facade", clock=FixedClock()) as memory:
        on_embedded = await scenario(memory)
        assert await stores_of(memory).graph.statement_count() == statements

    # the same ids on both stacks (deterministic), so the packs must be identical
    assert on_service == on_embedded
    assert all(pack["items"] for pack in on_service)

    # the data live on the server: a new memory (new process, in effect) reads them back
    async with CharacterMemory.open(service_settings, "facade", clock=FixedClock()) as memory:
        again = await memory.retrieve("violin")
        assert again.to_dict() == on_service[0]


async def test_a_dropped_server_fails_fast_and_the_memory_recovers(
    tmp_path: Path, server: OxigraphServer
) -> None:
    settings = Settings.from_mapping({**service_env(tmp_path, server), "SPARQL_TIMEOUT": "2"})
    async with CharacterMemory.open(settings, "dropped", clock=FixedClock()) as memory:
        await memory.remember(RememberInput("The harbour walk at dusk.", occurred_at=T0))
        server.kill()
        with pytest.raises(BackendError, match=server.base_url):
            await memory.retrieve("harbour walk")
        with pytest.raises(BackendError, match=server.base_url):
            await memory.remember(RememberInput("A second walk.", occurred_at=T0))
        server.start()
        assert (await memory.retrieve("harbour walk")).items
        outcome = await memory.remember(RememberInput("A second walk.", occurred_at=T0))
        assert not outcome.repair_markers


class TestSparqlServiceLifecycle(LifecycleContract):
    """The lifecycle contract with the graph on a real SPARQL server (one per test)."""

    @pytest.fixture
    async def memory_factory(self, tmp_path: Path) -> AsyncIterator[MemoryFactory]:
        server = OxigraphServer(tmp_path / "sparql-server")
        server.start()
        try:
            settings = Settings.from_mapping(service_env(tmp_path, server))

            async def open_on_service(collection: str) -> CharacterMemory:
                return await CharacterMemory.open(settings, collection)

            async with memory_factory(open_on_service) as factory:
                yield factory
        finally:
            server.stop()


class TestSparqlServiceStack(CharacterMemoryContract):
    """The facade contract with the graph on a real SPARQL server (one per test), Qdrant Edge and
    SQLite stats, opened through the entry points; lexical cue off to compare exact orders."""

    #: The same state-machine examples on every run: this class checks the SPARQL graph, and a
    #: random sequence that trips a core retrieval tie would fail it for reasons of core's own.
    state_machine_derandomize = True

    @pytest.fixture
    async def memory_factory(self, tmp_path: Path) -> AsyncIterator[MemoryFactory]:
        server = OxigraphServer(tmp_path / "sparql-server")
        server.start()
        try:
            settings = Settings.from_mapping(service_env(tmp_path, server))
            embedder = HashingEmbeddingProvider()

            async def open_on_service(collection: str) -> CharacterMemory:
                return await CharacterMemory.open(settings, collection, embedding_provider=embedder)

            async with memory_factory(open_on_service) as factory:
                yield factory
        finally:
            server.stop()


def test_the_cli_refuses_a_collection_on_the_wrong_graph_server(
    tmp_path: Path,
    server: OxigraphServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A mistyped endpoint: recall and check --repair refuse, naming the server read, not a path."""
    for key, value in service_env(tmp_path, server).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("SPARQL_ENDPOINTS", raising=False)
    assert main(["--collection", "wrong-shard", "remember", "Our dog is called Biscuit."]) == 0
    empty = OxigraphServer(tmp_path / "another-server")
    empty.start()
    try:
        monkeypatch.setenv("SPARQL_QUERY_ENDPOINT", empty.query_endpoint)
        monkeypatch.setenv("SPARQL_UPDATE_ENDPOINT", empty.update_endpoint)
        capsys.readouterr()
        assert main(["--collection", "wrong-shard", "recall", "dog"]) == 2
        assert empty.query_endpoint in capsys.readouterr().err
        assert main(["--collection", "wrong-shard", "check", "--repair"]) == 2
        err = capsys.readouterr().err
    finally:
        empty.stop()
    assert "StoreCorruptedError" in err
    assert empty.query_endpoint in err
    assert "OXIGRAPH_PATH" not in err
    assert "--store" not in err
    monkeypatch.setenv("SPARQL_QUERY_ENDPOINT", server.query_endpoint)  # the right one again
    monkeypatch.setenv("SPARQL_UPDATE_ENDPOINT", server.update_endpoint)
    assert main(["--collection", "wrong-shard", "check"]) == 0


class TestSparqlServiceSituatedRecall(SituatedRecallContract):
    """Scene recall with the graph on a real SPARQL server (its occasions in one query each)."""

    @pytest.fixture
    async def memory_factory(self, tmp_path: Path) -> AsyncIterator[MemoryFactory]:
        server = OxigraphServer(tmp_path / "sparql-server")
        server.start()
        try:
            settings = Settings.from_mapping(service_env(tmp_path, server))

            async def open_on_service(collection: str) -> CharacterMemory:
                return await CharacterMemory.open(settings, collection)

            async with memory_factory(open_on_service) as factory:
                yield factory
        finally:
            server.stop()
