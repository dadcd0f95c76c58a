"""Opening, sharing and closing stores: collections, persistence, the process lock, settings."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from charmem.domain.graph import GraphBatch
from charmem.domain.ids import MemoryId
from charmem.domain.model import Relation
from charmem.domain.rules import canonical_content
from charmem.errors import BackendError, ConfigurationError, StoreLockedError
from charmem.settings import Settings

from charmem_oxigraph import (
    InMemoryOxigraphGraphStore,
    OxigraphGraphStore,
    PersistentOxigraphGraphStore,
    _registry,
)

from oxigraph_builders import HOSTILE_TEXTS, derived, entity, episode, link, observation, record

CHILD_TIMEOUT = 60  # seconds: generous for a loaded CI machine; the lock itself fails in ~1 s


def _settings(mode: str, path: Path) -> Settings:
    return Settings(graph_store_mode=mode, oxigraph_path=path)


def _world(text: str = "hello") -> GraphBatch:
    ep = episode(summary=text)
    obs = observation(ep.id, text=text)
    belief = derived(text=text, observation_ids=[obs.id])
    return GraphBatch(
        objects=[entity(), ep, obs, belief],
        links=[link(ep.id, Relation.HAS_OBSERVATION, obs.id)],
        records=[record(belief.id)],
    )


async def test_two_collections_in_one_store_are_isolated(store: OxigraphGraphStore) -> None:
    other = store.for_collection("other")
    try:
        assert other.path == store.path
        batch = _world()
        await store.write_batch(batch)
        ids = [obj.id for obj in batch.objects]
        assert await other.statement_count() == 0
        assert await other.get_objects(ids) == {}
        assert await other.links_of(ids) == []
        assert await other.currency(ids) == {}
        # the same ids with other content are no conflict in another collection
        await other.write_batch(GraphBatch(objects=[entity(id=batch.objects[1].id)]))
        assert (await store.get_objects([batch.objects[1].id]))[batch.objects[1].id] == batch.objects[1]
    finally:
        await other.close()
    assert not store.closed
    assert await store.statement_count() > 0


async def test_persistent_reopen_after_close_returns_the_same_objects(tmp_path: Path) -> None:
    path = tmp_path / "store"
    batches = [_world(text) for text in HOSTILE_TEXTS]
    async with PersistentOxigraphGraphStore.from_settings(_settings("persistent", path), "memory-a") as graph:
        for batch in batches:
            await graph.write_batch(batch)
        count = await graph.statement_count()
    assert graph.closed
    reopened = OxigraphGraphStore.from_settings(_settings("persistent", path), "memory-a")
    try:
        assert await reopened.statement_count() == count
        for batch in batches:
            objects = await reopened.get_objects([obj.id for obj in batch.objects])
            assert list(objects.values()) == list(batch.objects)
            assert list((await reopened.get_links([item.id for item in batch.links])).values()) == list(
                batch.links
            )
            assert await reopened.get_records([item.target_id for item in batch.records]) == list(
                batch.records
            )
        replay = await reopened.write_batch(batches[0])
        assert replay.inserted_ids == ()
    finally:
        await reopened.close()


async def test_one_handle_per_path_shared_and_reference_counted(tmp_path: Path) -> None:
    path = tmp_path / "shared"
    first = OxigraphGraphStore.open("first", path=path)
    second = OxigraphGraphStore.open("second", path=path)  # same process: shares, never locks
    assert first._shared is second._shared
    assert first._shared is not None
    assert first._shared.users == 2
    await first.close()
    await first.close()  # idempotent
    await second.write_batch(_world())  # still open for the other user
    with pytest.raises(BackendError, match="closed"):
        await first.statement_count()
    await second.close()
    assert path.resolve() not in _registry._REGISTRY
    third = OxigraphGraphStore.open("first", path=path)  # the lock was released: reopen works
    await third.close()


def _spawn(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def test_a_second_process_gets_store_locked_error_fast(tmp_path: Path) -> None:
    path = tmp_path / "locked"
    holder = OxigraphGraphStore.open("test", path=path)
    try:
        child = _spawn(
            """
            import sys, time
            from charmem.errors import StoreLockedError
            from charmem_oxigraph import OxigraphGraphStore
            started = time.monotonic()
            try:
                OxigraphGraphStore.open("test", path=sys.argv[1])
            except StoreLockedError as exc:
                print("locked", time.monotonic() - started, type(exc.__cause__).__name__)
            else:
                print("opened")
            """,
            str(path),
        )
        out, err = child.communicate(timeout=CHILD_TIMEOUT)
        assert child.returncode == 0, err
        verdict, elapsed, cause = out.split()
        assert verdict == "locked"
        assert 0.5 <= float(elapsed) < 5.0  # a bounded retry (~1 s), then give up
        assert cause == "OSError"
    finally:
        await holder.close()


async def test_store_locked_by_another_process_raises_here(tmp_path: Path) -> None:
    path = tmp_path / "held"
    writer = OxigraphGraphStore.open("test", path=path)
    batch = _world("written by the parent")
    await writer.write_batch(batch)
    await writer.close()
    child = _spawn(
        """
        import asyncio
        import sys
        from charmem_oxigraph import OxigraphGraphStore
        from charmem.domain.ids import MemoryId
        from charmem.domain.rules import canonical_content
        graph = OxigraphGraphStore.open("test", path=sys.argv[1])
        print("ready", flush=True)
        ids = [MemoryId(line.strip()) for line in sys.stdin.readline().split(",")]
        for obj in asyncio.run(graph.get_objects(ids)).values():
            print(canonical_content(obj), flush=True)
        asyncio.run(graph.close())
        """,
        str(path),
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        started = time.monotonic()
        with pytest.raises(StoreLockedError) as caught:
            OxigraphGraphStore.open("test", path=path, lock_timeout=0.3)
        assert time.monotonic() - started < 3.0
        assert isinstance(caught.value.__cause__, OSError)
        assert str(path.resolve()) not in {str(key) for key in _registry._REGISTRY}
        out, err = child.communicate(
            ",".join(str(obj.id) for obj in batch.objects) + "\n", timeout=CHILD_TIMEOUT
        )
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err
    assert out.splitlines() == [canonical_content(obj) for obj in batch.objects]
    after = OxigraphGraphStore.open("test", path=path)  # the child closed: free again
    await after.close()


async def test_from_settings_and_entry_points(tmp_path: Path) -> None:
    found = {ep.name: ep for ep in entry_points(group="charmem.graph_stores")}
    assert found["persistent"].load().adapter is PersistentOxigraphGraphStore
    assert found["in_memory"].load().adapter is InMemoryOxigraphGraphStore

    persistent = found["persistent"].load().build(_settings("persistent", tmp_path / "p"), "c1")
    in_memory = found["in_memory"].load().build(_settings("in_memory", tmp_path / "m"), "c1")
    try:
        assert persistent.path == (tmp_path / "p").resolve()
        assert in_memory.path is None
        assert not (tmp_path / "m").exists()
        assert persistent.graph_iri == "urn:charmem:collection:c1"
        await in_memory.write_batch(_world())
        assert await persistent.statement_count() == 0
    finally:
        await persistent.close()
        await in_memory.close()
    generic = OxigraphGraphStore.from_settings(_settings("in_memory", tmp_path), "c2")
    assert isinstance(generic, InMemoryOxigraphGraphStore)
    await generic.close()
    with pytest.raises(ConfigurationError) as caught:
        OxigraphGraphStore.from_settings(_settings("reference", tmp_path), "c3")
    assert caught.value.key == "GRAPH_STORE_MODE"


async def test_in_memory_stores_are_separate() -> None:
    first = InMemoryOxigraphGraphStore.open("same")
    second = InMemoryOxigraphGraphStore.open("same")
    try:
        await first.write_batch(_world())
        assert await second.statement_count() == 0
    finally:
        await first.close()
        await second.close()


@pytest.mark.parametrize("name", ["", "Upper", "../escape", "a b", "-lead", "x" * 129, "ümlaut"])
def test_bad_collection_names_fail_before_touching_disk(tmp_path: Path, name: str) -> None:
    path = tmp_path / "never"
    with pytest.raises(ConfigurationError):
        OxigraphGraphStore.open(name, path=path)
    assert not path.exists()
    with pytest.raises(ConfigurationError):
        PersistentOxigraphGraphStore.from_settings(_settings("persistent", path), name)
    assert not path.exists()


def test_unusable_path_is_a_backend_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(BackendError) as caught:
        OxigraphGraphStore.open("test", path=blocker)
    assert isinstance(caught.value.__cause__, OSError)
    with pytest.raises(BackendError):
        OxigraphGraphStore.open("test", path=blocker / "below")


async def test_driver_errors_are_translated(
    store: OxigraphGraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert store._shared is not None

    class Failing:
        def query(self, *_args: object, **_kwargs: object) -> object:
            raise OSError("disk on fire")

        def extend(self, *_args: object) -> None:
            raise OSError("disk on fire")

    monkeypatch.setattr(store._shared, "_store", Failing())
    for call in (
        store.statement_count(),
        store.get_objects([entity().id]),
        store.links_of([entity().id]),
        store.currency([entity().id]),
        store.get_records([entity().id]),
        store.write_batch(_world()),
    ):
        with pytest.raises(BackendError) as caught:
            await call
        assert isinstance(caught.value.__cause__, OSError)
    monkeypatch.undo()


async def test_failed_write_writes_nothing(
    store: OxigraphGraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert store._shared is not None
    real = store._shared.store

    class FailingLoad:
        def __init__(self) -> None:
            self.query = real.query

        def load(self, *_args: object, **_kwargs: object) -> None:
            raise OSError("write refused")

    monkeypatch.setattr(store._shared, "_store", FailingLoad())
    batch = _world()
    with pytest.raises(BackendError):
        await store.write_batch(batch)
    monkeypatch.undo()
    assert await store.statement_count() == 0
    assert (await store.write_batch(batch)).existing_ids == ()


async def test_a_write_failing_on_its_last_triple_leaves_none_of_the_others(
    store: OxigraphGraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real pyoxigraph load is one transaction: a bad last line stores nothing before it."""
    from charmem_oxigraph import _writing

    real = _writing.plan_write

    def broken_at_the_end(*args: object, **kwargs: object) -> object:
        inserted, existing, lines = real(*args, **kwargs)  # type: ignore[arg-type]
        return inserted, existing, [*lines, "<urn:charmem:x> <urn:charmem:y> not a term ."]

    monkeypatch.setattr(_writing, "plan_write", broken_at_the_end)
    batch = _world()
    with pytest.raises(BackendError):
        await store.write_batch(batch)
    monkeypatch.undo()
    assert await store.statement_count() == 0
    store._cache().clear()
    assert await store.get_objects([o.id for o in batch.objects]) == {}
    assert (await store.write_batch(batch)).existing_ids == ()


async def test_corrupt_triples_are_a_backend_error(store: OxigraphGraphStore) -> None:
    from pyoxigraph import Literal, NamedNode, Quad

    from charmem_oxigraph import VOCAB, node_iri

    person = entity()
    await store.write_batch(GraphBatch(objects=[person]))
    assert store._shared is not None
    store._shared.store.add(
        Quad(
            NamedNode(node_iri("entity", person.id)),
            NamedNode(VOCAB + "record"),
            Literal("a second record"),
            NamedNode(store.graph_iri),
        )
    )
    with pytest.raises(BackendError, match="not a valid charmem graph"):
        await store.get_objects([person.id])


@pytest.mark.parametrize("damage", ["second record", "no record"])
async def test_a_damaged_link_is_named_by_a_cold_links_of(store: OxigraphGraphStore, damage: str) -> None:
    """``links_of`` reads a row per link; a link with two records or none is still refused."""
    from pyoxigraph import Literal, NamedNode, Quad

    from charmem_oxigraph import VOCAB, node_iri

    ep = episode()
    obs = observation(ep.id)
    joined = link(ep.id, Relation.HAS_OBSERVATION, obs.id)
    await store.write_batch(GraphBatch(objects=[ep, obs], links=[joined]))
    assert store._shared is not None
    raw = store._shared.store
    subject, predicate = NamedNode(node_iri("link", joined.id)), NamedNode(VOCAB + "record")
    graph = NamedNode(store.graph_iri)
    if damage == "second record":
        raw.add(Quad(subject, predicate, Literal("a second record"), graph))
    else:
        for quad in list(raw.quads_for_pattern(subject, predicate, None, graph)):
            raw.remove(quad)
    store._cache().clear()
    with pytest.raises(BackendError, match="not a valid charmem graph"):
        await store.links_of([ep.id], relations=None)


def test_a_turn_read_binds_each_episode_once() -> None:
    """An episode's ``has_observation`` links carry its episode IRI, stored before them or not."""
    from charmem_oxigraph import node_iri
    from charmem_oxigraph._iris import episode_turn_iris

    first, unread, notion = MemoryId.new(), MemoryId.new(), MemoryId.new()
    known = {first: "episode", notion: "entity"}
    assert episode_turn_iris([first, unread, notion], known) == [
        node_iri("episode", first),
        node_iri("episode", unread),
    ]
