"""``RETRIEVAL_STATS_STORE_MODE=graph``: statistics computed from the graph, shared by every process.

The counters must equal what a recording stats store holds after ``rebuild_stats`` (the rows the
graph implies), on the persistent store and on a real ``oxigraph serve``; and two processes
writing one collection on one server must read the same statistics.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from charmem import CharacterMemory, ForgetMemoryDraft, RememberInput
from charmem.admin import check
from charmem.composition import load_factory
from charmem.domain.graph import GraphBatch, LifecycleAction
from charmem.domain.ids import MemoryId
from charmem.domain.model import Relation
from charmem.errors import ConfigurationError
from charmem.settings import Settings
from charmem.stats import InMemoryRetrievalStatsStore
from charmem.usecases.maintenance import graph_stats_rows

from charmem_oxigraph._stats import GraphRetrievalStatsStore
from charmem_oxigraph.testing import OxigraphServer

from oxigraph_builders import derived, entity, episode, link, observation, record, thread

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
_names = itertools.count()


@pytest.fixture
def graph_stats_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The ``graph`` stats entry point of this package's pyproject, also before it is reinstalled.

    A distribution's metadata directory on ``sys.path`` (and on the ``PYTHONPATH`` of child
    processes) registering what the pyproject registers; ``importlib.metadata`` finds it there.
    """
    value = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"]["charmem.stats_stores"]["graph"]
    where = tmp_path / "entry-points"
    info = where / "charmem_graph_stats_test-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: charmem-graph-stats-test\nVersion: 0\n")
    (info / "entry_points.txt").write_text(f"[charmem.stats_stores]\ngraph = {value}\n")
    monkeypatch.syspath_prepend(str(where))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join(filter(None, [str(where), os.environ.get("PYTHONPATH")]))
    )
    return where


def _settings(mode: str, where: Path | OxigraphServer, **more: str) -> Settings:
    keys = {"GRAPH_STORE_MODE": mode, "RETRIEVAL_STATS_STORE_MODE": "graph", **more}
    if isinstance(where, OxigraphServer):
        keys |= {
            "SPARQL_QUERY_ENDPOINT": where.query_endpoint,
            "SPARQL_UPDATE_ENDPOINT": where.update_endpoint,
        }
    else:
        keys["OXIGRAPH_PATH"] = str(where)
    return Settings.from_mapping(keys)


@pytest.fixture(params=["persistent", "service"])
async def settings(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Settings]:
    if request.param == "service":
        yield _settings("service", request.getfixturevalue("sparql_server"))
    else:
        yield _settings("persistent", tmp_path / "oxigraph")


def _varied_batches() -> tuple[list[GraphBatch], list[MemoryId]]:
    """Every kind of object and link, a suppress record, a correction, a reference written early."""
    ana, bo = entity(), entity(entity_type="pet")
    chat = episode()
    said = observation(chat.id)
    old, new, later = derived(), derived(text="the user now prefers roses"), derived(text="later")
    garden = thread()
    early = link(later.id, Relation.SUPERSEDES, old.id)  # `later` is stored after this link
    first = GraphBatch(
        objects=[ana, bo, chat, said, old, new, garden],
        links=[
            link(chat.id, Relation.HAS_OBSERVATION, said.id),
            link(chat.id, Relation.INVOLVES, ana.id),
            link(said.id, Relation.MENTIONS, ana.id),
            link(said.id, Relation.MENTIONS, bo.id),
            link(new.id, Relation.SUPERSEDES, old.id),
            link(new.id, Relation.ABOUT, ana.id),
            link(ana.id, Relation.ASSOCIATED_WITH, ana.id),  # a self-link counts once
            link(chat.id, Relation.PART_OF_THREAD, garden.id),
            early,
        ],
        records=[record(said.id), record(new.id, action=LifecycleAction.FORGET_NOTED)],
    )
    second = GraphBatch(objects=[later], links=[link(later.id, Relation.ABOUT, bo.id)])
    return [first, second], [ana.id, bo.id, chat.id, said.id, old.id, new.id, later.id, garden.id]


async def _reference(graph: Any) -> InMemoryRetrievalStatsStore:
    """What a recording stats store holds after ``rebuild_stats``: the rows the graph implies."""
    reference = InMemoryRetrievalStatsStore(graph.collection)
    async for rows in graph_stats_rows(graph):
        await reference.record(rows)
    return reference


async def test_counters_equal_the_rows_the_graph_implies(
    settings: Settings, graph_stats_entry_point: Path
) -> None:
    collection = f"stats-{next(_names)}"
    graph = await load_factory("graph", settings.graph_store_mode).open(settings, collection)
    stats = await load_factory("stats", "graph").open(settings, collection)
    try:
        assert isinstance(stats, GraphRetrievalStatsStore)
        assert await stats.row_count() == 0
        batches, ids = _varied_batches()
        for batch in batches:
            await graph.write_batch(batch)
        reference = await _reference(graph)
        assert await stats.summary() == await reference.summary()
        current = (await stats.summary()).current_objects
        assert "observation" not in current  # the one observation is suppressed
        assert current["derived"] == 2  # `old` is superseded (also by a link written before `later`)
        assert await stats.row_count() == await reference.row_count() == 18  # 8 objects, 10 links
        asked = [*ids, MemoryId.new()]  # an absent id counts 0
        assert await stats.degrees(asked) == await reference.degrees(asked)
        for relation in (Relation.MENTIONS, Relation.SUPERSEDES, Relation.ASSOCIATED_WITH, Relation.RESOLVES):
            assert await stats.degrees(asked, relation=relation) == await reference.degrees(
                asked, relation=relation
            )
        await stats.record([])  # nothing to write or clear: the graph is the record
        await stats.clear()
        assert await stats.row_count() == 18  # 8 objects, 10 links
    finally:
        await stats.close()
        await graph.close()


def test_graph_stats_need_a_graph_other_stores_can_read() -> None:
    settings = Settings.from_mapping({"GRAPH_STORE_MODE": "in_memory", "RETRIEVAL_STATS_STORE_MODE": "graph"})
    with pytest.raises(
        ConfigurationError, match="choose RETRIEVAL_STATS_STORE_MODE=in_memory or sqlite"
    ) as caught:
        GraphRetrievalStatsStore.from_settings(settings, "anyone")
    assert caught.value.key == "RETRIEVAL_STATS_STORE_MODE"


_OTHER_PROCESS = textwrap.dedent(
    """
    import asyncio, json, sys
    from charmem import CharacterMemory, RememberInput, Settings

    async def main() -> None:
        settings = Settings.from_mapping(json.loads(sys.argv[1]))
        async with CharacterMemory.open(settings, sys.argv[2]) as memory:
            await memory.remember(RememberInput("Bo planted roses by the gate."))
            summary = await memory._stores.stats.summary()
            print(json.dumps({"objects": summary.objects, "links": summary.links}))

    asyncio.run(main())
    """
)


def _process_keys(server: OxigraphServer, stats_mode: str, stats_path: Path) -> dict[str, str]:
    return {
        "GRAPH_STORE_MODE": "service",
        "SPARQL_QUERY_ENDPOINT": server.query_endpoint,
        "SPARQL_UPDATE_ENDPOINT": server.update_endpoint,
        "VECTOR_STORE_MODE": "in_memory",
        "EMBEDDING_PROVIDER": "hashing",
        "RETRIEVAL_STATS_STORE_MODE": stats_mode,
        "RETRIEVAL_STATS_PATH": str(stats_path),
    }


def _write_in_another_process(keys: dict[str, str], collection: str) -> dict[str, Any]:
    """Open the collection in a second OS process, remember one thing, answer its summary."""
    done = subprocess.run(
        [sys.executable, "-c", _OTHER_PROCESS, json.dumps(keys), collection],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


@pytest.mark.parametrize(("stats_mode", "agree"), [("graph", True), ("sqlite", False)])
async def test_two_processes_on_one_server_agree(
    sparql_server: OxigraphServer, tmp_path: Path, graph_stats_entry_point: Path, stats_mode: str, agree: bool
) -> None:
    """A second process writes; with ``graph`` stats both read the same counters (sqlite: each its own)."""
    collection = f"shared-{next(_names)}"
    keys = _process_keys(sparql_server, stats_mode, tmp_path / "mine.sqlite3")
    async with CharacterMemory.open(Settings.from_mapping(keys), collection) as memory:
        await memory.remember(RememberInput("Ana said the tomatoes are ripe."))
        other_keys = {**keys, "RETRIEVAL_STATS_PATH": str(tmp_path / "theirs.sqlite3")}
        theirs = _write_in_another_process(other_keys, collection)
        mine = await memory._stores.stats.summary()
        await memory.remember(RememberInput("Ana and Bo went to the market."))
        again = await memory._stores.stats.summary()
    assert (theirs == {"objects": dict(mine.objects), "links": dict(mine.links)}) is agree
    assert sum(again.objects.values()) > sum(mine.objects.values())
    if agree:
        assert mine.objects["episode"] == 2  # this process's memory and the other's


async def test_check_finds_graph_stats_consistent_after_forget_and_a_second_writer(
    sparql_server: OxigraphServer, tmp_path: Path, graph_stats_entry_point: Path
) -> None:
    """``charmem check`` compares the stats with the graph: computed counters never drift."""
    keys = _process_keys(sparql_server, "graph", tmp_path / "unused.sqlite3")
    del keys["RETRIEVAL_STATS_STORE_MODE"]  # the default in service mode
    settings = Settings.from_mapping(keys)
    assert settings.retrieval_stats_store_mode == "graph"
    collection = f"checked-{next(_names)}"
    async with CharacterMemory.open(settings, collection) as memory:
        first = await memory.remember(RememberInput("Ana said the tomatoes are ripe."))
        _write_in_another_process(keys, collection)
        await memory.forget(ForgetMemoryDraft.suppress(first.episode_ids[0], "asked to forget"))
        report = await check(memory)
    assert report.stats_drift == ()
    assert report.stats_rows == report.objects + report.links
    assert not (tmp_path / "unused.sqlite3").exists()  # no per-process file in graph mode
