"""Backup, restore and purge (charmem.admin) on the embedded default stores: persistent Oxigraph,
Qdrant Edge (lexical cue on, as users run it), SQLite stats; and a restore onto the SPARQL service
graph (whose erase, export and import the graph-store contract covers on its own)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyoxigraph import Literal, Store

from charmem import CharacterMemory, PurgedMemoryError, RememberWritePlan, Settings
from charmem.admin import export_collection, import_collection, purge
from charmem.testing import stores_of
from charmem_contract import AdminToolsContract, MemoryFactory, memory_factory
from charmem_contract.admin import PERSONAL_WORD, PURGED_AT, AdminWorld
from charmem_oxigraph.testing import OxigraphServer

EnvFor = Callable[[Path], dict[str, str]]

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)


class FixedClock:
    def now(self) -> datetime:
        return T0


class TestEmbeddedAdminTools(AdminToolsContract):
    @pytest.fixture
    async def memory_factory(self, tmp_path: Path, env_for: EnvFor) -> AsyncIterator[MemoryFactory]:
        """The stores named ``store`` under ``<tmp>/stores/<store>``."""

        async def open_embedded(collection: str, *, store: str) -> CharacterMemory:
            settings = Settings.from_mapping(env_for(tmp_path / "stores" / store))
            return await CharacterMemory.open(settings, collection, clock=FixedClock())

        async with memory_factory(open_embedded) as factory:
            yield factory


def _literals_containing(path: Path, word: str) -> list[str]:
    """Every literal of the Oxigraph store at ``path`` containing ``word`` (a statement search)."""
    store = Store(str(path))
    try:
        return [
            quad.object.value
            for quad in store.quads_for_pattern(None, None, None, None)
            if isinstance(quad.object, Literal) and word in quad.object.value
        ]
    finally:
        del store


async def test_purge_leaves_no_statement_with_the_text_in_the_oxigraph_store(
    tmp_path: Path, env_for: EnvFor
) -> None:
    settings = Settings.from_mapping(env_for(tmp_path / "store"))
    async with CharacterMemory.open(settings, "admin", clock=FixedClock()) as memory:
        world = await AdminWorld().build(memory)
    assert _literals_containing(tmp_path / "store" / "oxigraph", PERSONAL_WORD), "the scenario lost its text"
    async with CharacterMemory.open(settings, "admin", clock=FixedClock()) as memory:
        report = await purge(memory, [world.ids["episode"], world.ids["observation"]], purged_at=PURGED_AT)
        assert report.check.consistent, "\n".join(report.check.describe())
    assert _literals_containing(tmp_path / "store" / "oxigraph", PERSONAL_WORD) == []


# -- the SPARQL service graph ---------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OxigraphServer]:
    running = OxigraphServer(tmp_path_factory.mktemp("sparql"))
    running.start()
    try:
        yield running
    finally:
        running.stop()


def service_env(embedded: dict[str, str], server: OxigraphServer) -> dict[str, str]:
    return {
        **embedded,
        "GRAPH_STORE_MODE": "service",
        "SPARQL_QUERY_ENDPOINT": server.query_endpoint,
        "SPARQL_UPDATE_ENDPOINT": server.update_endpoint,
    }


async def test_an_embedded_backup_restores_onto_a_sparql_server_and_purges_there(
    tmp_path: Path, server: OxigraphServer, env_for: EnvFor
) -> None:
    """The graph stores share one dump format; the whole admin path runs on the service graph."""
    embedded = Settings.from_mapping(env_for(tmp_path / "embedded"))
    contexts = ["When is Ana visiting?", "tomatoes", "a rainy walk"]
    async with CharacterMemory.open(embedded, "crossing", clock=FixedClock()) as memory:
        world = await AdminWorld().build(memory)
        await purge(memory, [world.ids["walk"]], purged_at=PURGED_AT)
        expected = [(await memory.retrieve(q)).to_dict() for q in contexts]
        await export_collection(memory, tmp_path / "backup")
    service = Settings.from_mapping(service_env(env_for(tmp_path / "service"), server))
    async with CharacterMemory.open(service, "crossing", clock=FixedClock()) as memory:
        report = await import_collection(memory, tmp_path / "backup")
        assert report.check.consistent, "\n".join(report.check.describe())
        assert [(await memory.retrieve(q)).to_dict() for q in contexts] == expected
        assert set(await stores_of(memory).graph.tombstones()) == {world.ids["walk"]}
        purged = await purge(memory, [world.ids["episode"], world.ids["observation"]], purged_at=PURGED_AT)
        assert purged.check.consistent, "\n".join(purged.check.describe())
        await export_collection(memory, tmp_path / "after")
        assert PERSONAL_WORD.encode() not in (tmp_path / "after" / "graph.nq").read_bytes()
        with pytest.raises(PurgedMemoryError):
            await memory.commit(RememberWritePlan.from_json(world.plan_json))
