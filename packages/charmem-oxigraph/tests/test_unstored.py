"""Links written before their endpoints carry ``vocab:unstoredEndpoint``, so cold link reads bind less.

A coherent store reads every mark once; then a link read binds one IRI per endpoint of known kind
(plus the IRIs marks name it by), never one per kind a relation may declare. Every test runs on a
real store and checks both what is found and what was bound.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from charmem.domain.graph import GraphBatch, GraphErasure
from charmem.domain.ids import MemoryId
from charmem.domain.model import Relation

from charmem_oxigraph import OxigraphGraphStore
from charmem_oxigraph._cache import GraphCache
from charmem_oxigraph._reads import GraphReader

from oxigraph_builders import derived, entity, episode, link, observation, spy_queries, thread

MARK = "urn:charmem:vocab#unstoredEndpoint"


def _bound(query: str) -> list[str]:
    """The IRIs every ``VALUES`` block of ``query`` binds."""
    return [iri for block in re.findall(r"VALUES \?\w+ \{([^}]*)\}", query) for iri in block.split()]


async def test_a_cold_link_read_binds_one_iri_per_endpoint_of_known_kind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reopened, with the kinds of the ids known (objects read first): 2 IRIs an id, one per side."""
    ep = episode()
    observations = [observation(ep.id) for _ in range(3)]
    links = [link(ep.id, Relation.HAS_OBSERVATION, o.id) for o in observations]
    path = tmp_path / "store"
    async with await OxigraphGraphStore.open_async("test", path=path) as store:
        await store.write_batch(GraphBatch(objects=[ep, *observations], links=links))
    async with await OxigraphGraphStore.open_async("test", path=path) as store:
        ids = [o.id for o in observations]
        await store.get_objects(ids)
        queries = spy_queries(store, monkeypatch)
        assert await store.links_of(ids) == sorted(links, key=lambda lk: lk.id)
        (read,) = [q for q in queries if "SELECT DISTINCT ?l" in q]
        assert sorted(_bound(read)) == sorted(f"<urn:charmem:observation:{i}>" for i in [*ids, *ids])


async def test_marks_a_write_adds_are_known_to_a_store_that_read_them_already(
    tmp_path: Path,
) -> None:
    """The writer keeps the marks in step: links written early are found in the same process."""
    async with await OxigraphGraphStore.open_async("test", path=tmp_path / "store") as store:
        assert await store.links_of([MemoryId.new()]) == []  # the marks are read (none yet)
        belief, source, arc, odd = derived(), observation(MemoryId.new()), thread(), entity()
        early = [
            link(belief.id, Relation.DERIVED_FROM, source.id),  # to: object:
            link(arc.id, Relation.SUPPORTS, odd.id),  # object: on both sides
            link(odd.id, Relation.HAS_OBSERVATION, source.id),  # from: episode: for an entity
        ]
        await store.write_batch(GraphBatch(links=early))
        await store.write_batch(GraphBatch(objects=[belief, source, arc, odd]))
        every = [belief.id, source.id, arc.id, odd.id]
        assert len(await store.get_objects(every)) == 4  # their kinds are known
        for memory_id in every:
            touching = [lk for lk in early if memory_id in (lk.from_id, lk.to_id)]
            assert await store.links_of([memory_id]) == sorted(touching, key=lambda lk: lk.id)


async def test_too_many_marks_are_not_held_and_reads_bind_every_kind(tmp_path: Path) -> None:
    """A cache that cannot hold every mark keeps binding each kind a relation declares."""
    async with await OxigraphGraphStore.open_async("test", path=tmp_path / "store") as store:
        sources = [observation(MemoryId.new()) for _ in range(3)]
        belief = derived()
        early = [link(belief.id, Relation.DERIVED_FROM, s.id) for s in sources]
        await store.write_batch(GraphBatch(links=early))
        await store.write_batch(GraphBatch(objects=[belief, *sources]))
        small = GraphReader(GraphCache(max_entries=2), store.graph_iri)
        ids = [s.id for s in sources]
        store._drive(small.items(ids, ("observation",)))  # their kinds are known
        found = store._drive(small.links_of(ids, None))
        assert found == sorted(early, key=lambda lk: lk.id)
        assert small.cache.unstored_kinds(ids) is None
        assert not small.cache.wants_unstored()


def test_a_cache_of_a_shared_server_never_reads_marks() -> None:
    """Other processes may write to a SPARQL server: its cache binds every kind, as before."""
    cache = GraphCache(coherent=False)
    assert not cache.wants_unstored()
    assert cache.unstored_kinds([MemoryId.new()]) is None


async def test_a_link_names_its_early_endpoints_in_the_dump(tmp_path: Path) -> None:
    """The marks are triples of the link node: exported, and erased with the link."""
    async with await OxigraphGraphStore.open_async("test", path=tmp_path / "store") as store:
        belief, source = derived(), observation(MemoryId.new())
        await store.write_batch(GraphBatch(objects=[belief]))
        early = link(belief.id, Relation.DERIVED_FROM, source.id)
        await store.write_batch(GraphBatch(links=[early]))
        on_time = link(belief.id, Relation.ABOUT, belief.id)
        await store.write_batch(GraphBatch(links=[on_time]))
        rows = store._select(f"SELECT ?l ?x WHERE {{ GRAPH <{store.graph_iri}> {{ ?l <{MARK}> ?x }} }}")
        assert [(r["l"].value, r["x"].value) for r in rows] == [
            (f"urn:charmem:link:{early.id}", f"urn:charmem:object:{source.id}")
        ]
        await store.erase(GraphErasure(link_ids=[early.id]))
        assert not store._select(f"SELECT ?l WHERE {{ GRAPH <{store.graph_iri}> {{ ?l <{MARK}> ?x }} }}")
