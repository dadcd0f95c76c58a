"""The compact layout's version record, the refusal of other layouts, and ``charmem migrate``.

``fixtures/layout1.nq`` is the N-Quads export of a store written by the adapter before the compact
layout (layout 1; ``fixtures/make_layout1.py``): every object kind, ``KnownAs`` names, a
correction, a forget and a purge tombstone. ``fixtures/layout2.nq`` is the export of a store of
the compact layout before the ``vocab:unstoredEndpoint`` marks (layout 2;
``fixtures/make_layout2.py``): links written before their endpoints were stored, under other
kinds than the ones stored later, and a link to an id never stored. Every test runs on real stores.
"""

from __future__ import annotations

import io
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from charmem.admin import migrate
from charmem.domain.graph import GraphBatch, GraphErasure, LifecycleRecord, Tombstone
from charmem.domain.ids import MemoryId
from charmem.domain.model import MemoryLink, ObjectType
from charmem.errors import BackupFormatError, StoreLayoutError
from charmem.settings import Settings
from pyoxigraph import Literal, NamedNode, Quad, RdfFormat, Store, parse

from charmem_oxigraph import (
    OxigraphGraphStore,
    PersistentOxigraphGraphStore,
    SparqlServiceGraphStore,
    _legacy,
)
from charmem_oxigraph import _layout as lay
from charmem_oxigraph._codec import NodeTriples, decode_item

FIXTURE = Path(__file__).parent / "fixtures" / "layout1.nq"
FIXTURE_2 = Path(__file__).parent / "fixtures" / "layout2.nq"
MARK = "urn:charmem:vocab#unstoredEndpoint"
COLLECTION = "fixture"
GRAPH = f"urn:charmem:collection:{COLLECTION}"
VERSION = NamedNode("urn:charmem:vocab#layoutVersion")


def _fixture_quads() -> list[Quad]:
    return list(parse(path=FIXTURE, format=RdfFormat.N_QUADS))


def _fixture_items() -> tuple[list[Any], list[Tombstone]]:
    """The fixture decoded with the layout-1 decoder: items, and tombstones."""
    nodes: dict[str, NodeTriples] = {}
    tombstones: list[Tombstone] = []
    for quad in _fixture_quads():
        subject = quad.subject.value
        if quad.object == NamedNode("urn:charmem:vocab#Tombstone"):
            kind, _, uuid = subject.removeprefix("urn:charmem:").partition(":")
            purged = next(
                q.object.value
                for q in _fixture_quads()
                if q.subject == quad.subject and q.object != quad.object
            )
            tombstones.append(
                Tombstone(
                    id=MemoryId(uuid), object_type=ObjectType(kind), purged_at=datetime.fromisoformat(purged)
                )
            )
            continue
        root, _, position = subject.partition("/assertion/")
        node = nodes.setdefault(root, NodeTriples(root))
        if position:
            node.add_assertion(subject, quad.predicate.value, quad.object)
        else:
            node.add(quad.predicate.value, quad.object)
    items = [
        _legacy.decode_item(node)
        for node in nodes.values()
        if any(t.value.startswith("urn:charmem:vocab#") for t in node.props.get(lay.v.RDF_TYPE, ()))
    ]
    return items, tombstones


def _load_raw(path: Path, quads: list[Quad]) -> None:
    store = Store(str(path))
    store.extend(quads)
    store.flush()
    del store


def _settings(path: Path) -> Settings:
    return Settings.from_mapping({"GRAPH_STORE_MODE": "persistent", "OXIGRAPH_PATH": str(path)})


async def _dump(store: Any) -> set[str]:
    out = io.BytesIO()
    await store.export_graph(out)
    return {line for line in out.getvalue().decode().splitlines() if line}


async def _reads(store: Any, items: list[Any]) -> dict[str, Any]:
    """What the port answers about every item of the fixture."""
    objects = [i.id for i in items if not isinstance(i, MemoryLink | LifecycleRecord)]
    links = [i.id for i in items if isinstance(i, MemoryLink)]
    every = [i.id for i in items]
    return {
        "objects": await store.get_objects(objects),
        "links": await store.get_links(links),
        "links_of": await store.links_of(objects),
        "records": await store.get_records(every),
        "turns": {e: sorted(t, key=str) for e, t in (await store.episode_turns(objects)).items()},
        "object_ids": await store.object_ids(),
        "link_ids": await store.link_ids(),
        "currency": await store.currency(objects),
        "names": await store.name_assertions(),
        "tombstones": await store.tombstones(),
    }


async def _fresh_copy(items: list[Any], tombstones: list[Tombstone]) -> OxigraphGraphStore:
    """The same items written by the current code into a new in-memory store."""
    fresh = OxigraphGraphStore.open(COLLECTION)
    await fresh.write_batch(
        GraphBatch(
            objects=[i for i in items if not isinstance(i, MemoryLink | LifecycleRecord)],
            links=[i for i in items if isinstance(i, MemoryLink)],
            records=[i for i in items if isinstance(i, LifecycleRecord)],
        )
    )
    await fresh.erase(GraphErasure(tombstones=tombstones))
    return fresh


async def test_a_layout_1_store_is_refused_then_migrated(tmp_path: Path) -> None:
    """Open -> StoreLayoutError naming migrate; migrate; the same items, links, records, currency."""
    path = tmp_path / "oxigraph"
    _load_raw(path, _fixture_quads())
    with pytest.raises(StoreLayoutError, match="charmem migrate") as refused:
        OxigraphGraphStore.open(COLLECTION, path=path)
    assert refused.value.found is None
    assert refused.value.expected == lay.CURRENT_LAYOUT
    assert str(path) in str(refused.value)
    assert "layout 1" in str(refused.value)

    report = await migrate(_settings(path), COLLECTION)
    items, tombstones = _fixture_items()
    assert report is not None
    assert report.found is None
    assert report.layout == lay.CURRENT_LAYOUT
    assert report.objects == len(items)

    store = await OxigraphGraphStore.open_async(COLLECTION, path=path)
    fresh = await _fresh_copy(items, tombstones)
    try:
        expected = await _reads(fresh, items)
        assert await _reads(store, items) == expected
        assert (
            len(expected["currency"])
            == len(expected["objects"])
            == sum(1 for i in items if not isinstance(i, MemoryLink | LifecycleRecord))
        )
        assert len(expected["names"]) == 3
        assert len(expected["tombstones"]) == 1
        # the migrated graph holds exactly what the current code writes for the same items
        assert await _dump(store) == await _dump(fresh)
    finally:
        await store.close()
        await fresh.close()
    again = await migrate(_settings(path), COLLECTION)
    assert again is not None
    assert again.objects == 0
    assert again.found == lay.CURRENT_LAYOUT


async def test_a_damaged_node_is_left_as_it_is_and_the_rest_is_migrated(tmp_path: Path) -> None:
    """One undecodable layout-1 node does not hold the collection back; foreign triples stay."""
    path = tmp_path / "oxigraph"
    quads = _fixture_quads()
    observations = sorted(
        {q.subject.value for q in quads if q.subject.value.startswith("urn:charmem:observation:")}
    )
    damaged, annotated = observations[0], observations[1]
    text = NamedNode("urn:charmem:vocab#text")
    note = Quad(
        NamedNode(annotated),
        NamedNode("urn:charmem:vocab#customNote"),
        Literal("a caller's own annotation"),
        NamedNode(GRAPH),
    )
    kept = [q for q in quads if not (q.subject.value == damaged and q.predicate == text)]
    _load_raw(path, [*kept, note])

    report = await migrate(_settings(path), COLLECTION)
    items, tombstones = _fixture_items()
    assert report is not None
    assert report.unreadable == (damaged,)
    assert report.objects == len(items) - 1
    assert report.layout == lay.CURRENT_LAYOUT

    store = await OxigraphGraphStore.open_async(COLLECTION, path=path)  # no longer refused
    fresh = await _fresh_copy(items, tombstones)
    try:
        dump = await _dump(store)
        assert any(annotated in line and "a caller's own annotation" in line for line in dump)
        readable = [i for i in items if str(i.id) not in damaged]
        expected = await fresh.get_objects([i.id for i in readable if i.id in await fresh.object_ids()])
        assert await store.get_objects(list(expected)) == expected
    finally:
        await store.close()
        await fresh.close()


async def test_an_interrupted_migration_resumes(tmp_path: Path) -> None:
    """A migration stopped after one batch leaves a refused store; running it again finishes it."""
    path = tmp_path / "oxigraph"
    _load_raw(path, _fixture_quads())
    from charmem_oxigraph import _registry

    shared = _registry.acquire(path)
    partial = OxigraphGraphStore(shared, COLLECTION, check_layout=False)
    first = partial._drive(lay.pending(GRAPH))[:5]
    step = partial._drive(lay.migration_step(GRAPH, first))
    assert step.rewritten == 5
    assert step.update is not None
    shared.store.update(step.update)
    await partial.close()  # "killed" after one batch

    with pytest.raises(StoreLayoutError):
        OxigraphGraphStore.open(COLLECTION, path=path)
    report = PersistentOxigraphGraphStore.migrate_from_settings(_settings(path), COLLECTION)
    items, tombstones = _fixture_items()
    assert report.objects == len(items) - 5
    store = await OxigraphGraphStore.open_async(COLLECTION, path=path)
    fresh = await _fresh_copy(items, tombstones)
    try:
        assert await _dump(store) == await _dump(fresh)
    finally:
        await store.close()
        await fresh.close()


async def test_an_unknown_layout_is_refused(tmp_path: Path) -> None:
    """A store recording a newer layout is refused (upgrade charmem), and migrate refuses it too."""
    path = tmp_path / "oxigraph"
    _load_raw(path, [Quad(NamedNode(GRAPH), VERSION, Literal(99), NamedNode(GRAPH))])
    with pytest.raises(StoreLayoutError, match="Upgrade charmem") as refused:
        OxigraphGraphStore.open(COLLECTION, path=path)
    assert refused.value.found == 99
    with pytest.raises(StoreLayoutError, match="Upgrade charmem"):
        await migrate(_settings(path), COLLECTION)


async def test_a_new_store_records_its_layout_and_migrating_it_is_a_no_op(tmp_path: Path) -> None:
    path = tmp_path / "oxigraph"
    store = await OxigraphGraphStore.open_async(COLLECTION, path=path)
    items, _tombstones = _fixture_items()
    try:
        assert await store.statement_count() == 0  # an empty collection holds nothing
        await store.write_batch(
            GraphBatch(objects=[items[0]] if not isinstance(items[0], MemoryLink) else [])
        )
        dump = await _dump(store)
        assert any("layoutVersion" in line for line in dump)
    finally:
        await store.close()
    report = await migrate(_settings(path), COLLECTION)
    assert report is not None
    assert report.objects == 0
    assert report.found == lay.CURRENT_LAYOUT


async def test_export_import_round_trip_and_a_layout_1_dump_is_migrated_on_import() -> None:
    items, tombstones = _fixture_items()
    source = await _fresh_copy(items, tombstones)
    twin = OxigraphGraphStore.open(COLLECTION)
    old = OxigraphGraphStore.open(COLLECTION)
    try:
        out = io.BytesIO()
        exported = await source.export_graph(out)
        assert await twin.import_graph(io.BytesIO(out.getvalue()), exported.media_type) == exported.statements
        assert await _dump(twin) == await _dump(source)
        # a layout-1 dump (charmem export before the compact layout) is upgraded as it is imported
        await old.import_graph(io.BytesIO(FIXTURE.read_bytes()), "application/n-quads")
        assert await _dump(old) == await _dump(source)
        assert await _reads(old, items) == await _reads(source, items)
    finally:
        for store in (source, twin, old):
            await store.close()


async def test_a_dump_of_a_newer_layout_is_refused() -> None:
    store = OxigraphGraphStore.open(COLLECTION)
    dump = f'<{GRAPH}> <{VERSION.value}> "7"^^<http://www.w3.org/2001/XMLSchema#integer> <{GRAPH}> .\n'
    try:
        with pytest.raises(BackupFormatError, match="newer charmem"):
            await store.import_graph(io.BytesIO(dump.encode()), "application/n-quads")
        assert await store.statement_count() == 0
    finally:
        await store.close()


@pytest.mark.parametrize("server_fixture", ["sparql_server", "virtuoso_server"])
async def test_the_service_store_refuses_then_migrates(
    server_fixture: str, request: pytest.FixtureRequest
) -> None:
    """On ``oxigraph serve`` and Virtuoso: open refused, ``charmem migrate`` (service), then the
    same reads (on Virtuoso the migration's ``FILTER NOT EXISTS`` and ``DELETE ... WHERE`` too)."""
    server = request.getfixturevalue(server_fixture)
    settings = Settings.from_mapping(
        {
            "GRAPH_STORE_MODE": "service",
            "SPARQL_QUERY_ENDPOINT": server.query_endpoint,
            "SPARQL_UPDATE_ENDPOINT": server.update_endpoint,
        }
    )
    raw = SparqlServiceGraphStore.from_settings(settings, COLLECTION)
    try:
        await raw._insert([f"{quad.triple} ." for quad in _fixture_quads()], "load the fixture")
    finally:
        await raw.close()
    with pytest.raises(StoreLayoutError, match="charmem migrate"):
        await SparqlServiceGraphStore.from_settings_async(settings, COLLECTION)
    report = await migrate(settings, COLLECTION)
    items, tombstones = _fixture_items()
    assert report is not None
    assert report.objects == len(items)
    store = await SparqlServiceGraphStore.from_settings_async(settings, COLLECTION)
    fresh = await _fresh_copy(items, tombstones)
    try:
        assert await _reads(store, items) == await _reads(fresh, items)
        assert await _dump(store) == await _dump(fresh)
    finally:
        await store.close()
        await fresh.close()


def _layout2_quads() -> list[Quad]:
    return list(parse(path=FIXTURE_2, format=RdfFormat.N_QUADS))


def _layout2_items() -> list[Any]:
    """The layout-2 fixture's items (its nodes decode as the current layout's: same records)."""
    nodes: dict[str, NodeTriples] = {}
    for quad in _layout2_quads():
        if quad.subject.value != GRAPH:
            nodes.setdefault(quad.subject.value, NodeTriples(quad.subject.value)).add(
                quad.predicate.value, quad.object
            )
    return [decode_item(node) for node in nodes.values()]


def _expected_marks() -> set[str]:
    """What a migration marks: each link endpoint IRI of the fixture under which no node is stored."""
    quads = _layout2_quads()
    typed = {q.subject.value for q in quads if q.predicate.value == lay.v.RDF_TYPE}
    ends = {
        (q.subject.value, q.object.value)
        for q in quads
        if q.predicate.value in ("urn:charmem:vocab#from", "urn:charmem:vocab#to")
    }
    return {f"<{link}> <{MARK}> <{end}> ." for link, end in ends if end not in typed}


async def _marks(store: Any) -> set[str]:
    return {line.rsplit(" ", 2)[0] + " ." for line in await _dump(store) if MARK in line}


async def test_a_layout_2_store_is_refused_then_migrated_with_its_endpoint_marks(tmp_path: Path) -> None:
    """Open -> StoreLayoutError naming migrate; migrate marks the links written before their
    endpoints; a cold store then finds every link from either side, as a fresh copy does."""
    path = tmp_path / "oxigraph"
    _load_raw(path, _layout2_quads())
    with pytest.raises(StoreLayoutError, match="charmem migrate") as refused:
        OxigraphGraphStore.open(COLLECTION, path=path)
    assert refused.value.found == 2
    assert "layout 2" in str(refused.value)

    report = await migrate(_settings(path), COLLECTION)
    expected = _expected_marks()
    assert len(expected) == 4  # an entity as episode:, an observation and a thread as object:, a ghost
    assert report is not None
    assert (report.found, report.layout, report.objects) == (2, lay.CURRENT_LAYOUT, 3)  # 3 links marked

    items = _layout2_items()
    fresh = await _fresh_copy(items, [])
    store = await OxigraphGraphStore.open_async(COLLECTION, path=path)
    try:
        assert await _marks(store) == expected
        assert await _reads(store, items) == await _reads(fresh, items)
        versions = [line for line in await _dump(store) if "layoutVersion" in line]
        assert len(versions) == 1
        assert f'"{lay.CURRENT_LAYOUT}"' in versions[0]
    finally:
        await store.close()
        await fresh.close()
    again = await migrate(_settings(path), COLLECTION)
    assert again is not None
    assert (again.found, again.objects) == (lay.CURRENT_LAYOUT, 0)


async def test_a_layout_2_dump_is_migrated_on_import() -> None:
    items = _layout2_items()
    store = OxigraphGraphStore.open(COLLECTION)
    fresh = await _fresh_copy(items, [])
    try:
        await store.import_graph(io.BytesIO(FIXTURE_2.read_bytes()), "application/n-quads")
        assert await _marks(store) == _expected_marks()
        assert await _reads(store, items) == await _reads(fresh, items)
    finally:
        await store.close()
        await fresh.close()


async def test_the_service_store_migrates_a_layout_2_collection(sparql_server: Any) -> None:
    """On ``oxigraph serve``: open refused, ``charmem migrate`` marks the links, the same reads."""
    settings = Settings.from_mapping(
        {
            "GRAPH_STORE_MODE": "service",
            "SPARQL_QUERY_ENDPOINT": sparql_server.query_endpoint,
            "SPARQL_UPDATE_ENDPOINT": sparql_server.update_endpoint,
        }
    )
    collection = "layout-two"
    graph = NamedNode(f"urn:charmem:collection:{collection}")
    dump = [Quad(q.subject, q.predicate, q.object, graph) for q in _layout2_quads()]
    dump = [Quad(graph, q.predicate, q.object, graph) if q.subject.value == GRAPH else q for q in dump]
    raw = SparqlServiceGraphStore.from_settings(settings, collection)
    try:
        await raw._insert([f"{quad.triple} ." for quad in dump], "load the fixture")
    finally:
        await raw.close()
    with pytest.raises(StoreLayoutError, match="charmem migrate"):
        await SparqlServiceGraphStore.from_settings_async(settings, collection)
    report = await migrate(settings, collection)
    assert report is not None
    assert (report.found, report.objects) == (2, 3)
    items = _layout2_items()
    store = await SparqlServiceGraphStore.from_settings_async(settings, collection)
    fresh = await _fresh_copy(items, [])
    try:
        assert len(await _marks(store)) == len(_expected_marks())
        assert await _reads(store, items) == await _reads(fresh, items)
    finally:
        await store.close()
        await fresh.close()
