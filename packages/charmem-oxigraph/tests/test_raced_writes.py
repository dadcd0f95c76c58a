"""Writes that raced (a write stored after its writer lost the lease): the winner rule, check, repair.

A writer paused longer than its lease can store an id another writer stored meanwhile with other
content; the node then holds both records. These tests store such a node on a real ``oxigraph
serve`` (the loser's triples sent directly, as the late write would have) and check that
``check`` reports it, that settling keeps the winner's content and every triple both contents
share, and that ``repair`` settles it through the facade.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import attrs
import pytest
from charmem import CharacterMemory
from charmem.admin import check, repair
from charmem.admin._check import check_stores
from charmem.admin._report import GraphProblemKind
from charmem.domain.drafts import DerivedMemoryDraft, LinkDraft, RememberInput
from charmem.domain.graph import GraphBatch
from charmem.domain.ids import MemoryId
from charmem.domain.model import DerivedType, Relation
from charmem.errors import BackendError
from charmem.ports import RacedWrites
from charmem.stats import InMemoryRetrievalStatsStore
from charmem.testing import HashingEmbeddingProvider, ReferenceVectorIndex
from charmem.usecases.planning import derive_links

from charmem_oxigraph import SparqlServiceGraphStore
from charmem_oxigraph import _logic as lg
from charmem_oxigraph import _queries as q
from charmem_oxigraph import _writers as wl
from charmem_oxigraph import _writing as wr
from charmem_oxigraph._codec import record_json
from charmem_oxigraph.testing import OxigraphServer

from oxigraph_builders import episode, observation

_names = itertools.count()


@pytest.fixture
def store(service_store: SparqlServiceGraphStore) -> SparqlServiceGraphStore:
    return service_store


async def _late_write(store: SparqlServiceGraphStore, batch: GraphBatch, kinds: dict[Any, str]) -> None:
    """Store ``batch``'s triples unchecked, as a write landing after its lease was lost would."""
    _, _, lines = wr.plan_write(wr.prepare_batch(batch), {}, kinds)
    await store._insert(lines)


async def _triples(store: SparqlServiceGraphStore) -> set[str]:
    """Every triple of the collection, its graph's IRI written ``<g>`` (to compare collections)."""
    query = f"SELECT ?s ?p ?o WHERE {{ GRAPH <{store.graph_iri}> {{ ?s ?p ?o }} }}"
    rows = await store._select(query, "read")
    return {f"{s} {p} {o}".replace(f"<{store.graph_iri}>", "<g>") for s, p, o in rows}


def test_the_winner_is_the_lowest_content_hash_whatever_the_order() -> None:
    records = ['{"text": "a"}', '{"text": "b"}', '{"text": "c"}']
    winner = wr.winning_record(records)
    assert all(wr.winning_record(order) == winner for order in itertools.permutations(records))


async def test_a_raced_id_is_settled_keeping_the_winner_and_the_shared_triples(
    store: SparqlServiceGraphStore, sparql_server: OxigraphServer
) -> None:
    ep = episode()
    first = observation(ep.id, text="what the first writer heard")
    links = derive_links(store.collection, [ep, first])
    await store.write_batch(GraphBatch(objects=[ep, first], links=links))
    second = attrs.evolve(first, text="what the late writer heard", raw_ref="turn 7")
    await _late_write(
        store, GraphBatch(objects=[second]), {ep.id: "episode"}
    )  # its derived link is the same: stored once

    assert isinstance(store, RacedWrites)
    assert await store.raced_writes() == [first.id]
    report = await check_stores(store, None, None)
    assert [(p.kind, p.id) for p in report.graph_problems] == [(GraphProblemKind.RACED_WRITE, first.id)]
    assert report.repairable

    rows = await store._select(q.raced_nodes(store.graph_iri), "read")
    (settlement,) = [wr.settle_raced(node) for node in lg.group_rows(rows)]
    winner = first if settlement.kept and "first writer" in settlement.kept else second
    assert await store.settle_raced_writes() == [first.id]
    assert (await store.get_objects([first.id]))[first.id] == winner
    # exactly the triples a store that only ever saw the winner holds (rdf:type, shared fields kept)
    alone = SparqlServiceGraphStore(
        f"alone-{next(_names)}",
        query_endpoint=sparql_server.query_endpoint,
        update_endpoint=sparql_server.update_endpoint,
    )
    await alone.write_batch(GraphBatch(objects=[ep, winner], links=links))
    assert await _triples(store) == await _triples(alone)
    await alone.close()
    assert await store.raced_writes() == []
    assert (await check_stores(store, None, None)).graph_consistent


async def test_repair_settles_a_raced_link_and_rebuilds_what_derives_from_it(
    store: SparqlServiceGraphStore,
) -> None:
    embedder = HashingEmbeddingProvider(vector_size=16)
    memory = CharacterMemory(
        graph=store,
        vectors=ReferenceVectorIndex(
            store.collection, model_id=embedder.model_id, vector_size=embedder.vector_size
        ),
        embedder=embedder,
        stats=InMemoryRetrievalStatsStore(store.collection),
        collection=store.collection,
    )
    one, two = MemoryId.new(), MemoryId.new()
    await memory.remember(
        RememberInput("we talked about the garden")
        .with_derived_memory(DerivedMemoryDraft(DerivedType.REFLECTION, "she likes roses", id=one))
        .with_derived_memory(DerivedMemoryDraft(DerivedType.REFLECTION, "she grows roses", id=two))
    )
    first = (await memory.link(LinkDraft(one, Relation.SUPPORTS, two, rationale="first writer"))).link
    late = attrs.evolve(first, rationale="late writer")
    await _late_write(store, GraphBatch(links=[late]), {one: "derived", two: "derived"})

    report = await check(memory)
    assert [p.kind for p in report.graph_problems] == [GraphProblemKind.RACED_WRITE]
    outcome = await repair(memory, report)
    assert outcome.settled_ids == (first.id,)
    assert outcome.stats_rows is not None  # rebuilt: a removed content may have counted
    assert (await check(memory)).consistent
    records = [record_json(first), record_json(late)]
    kept = (await store.get_links([first.id]))[first.id]
    assert kept.rationale == ("first writer" if wr.winning_record(records) == records[0] else "late writer")


async def test_a_holder_paused_past_its_lease_is_fenced_or_told_and_repair_settles(
    store: SparqlServiceGraphStore, sparql_server: OxigraphServer
) -> None:
    """The whole story of a late write: two fences, then check and repair for what passes both."""
    rival = SparqlServiceGraphStore(
        store.collection,
        query_endpoint=sparql_server.query_endpoint,
        update_endpoint=sparql_server.update_endpoint,
    )
    ep = episode()
    await store.write_batch(GraphBatch(objects=[ep], links=derive_links(store.collection, [ep])))
    mine = observation(ep.id, text="the paused writer's turn")
    theirs = attrs.evolve(mine, text="the rival's turn")
    batch = GraphBatch(objects=[mine], links=derive_links(store.collection, [mine]))  # same links for both
    _, _, lines = wr.plan_write(wr.prepare_batch(batch), {}, {ep.id: "episode"})

    def select(query: str) -> Any:
        return store._select(query, "lease")

    def update(text: str) -> Any:
        return store._update(text, "lease")

    short = wl.LeasePolicy(seconds=0.3, requests_per_lease=1, clock_margin=0.0)
    lease = await wl.acquire(
        select,
        update,
        graph=wl.writers_graph(store.graph_iri),
        request_timeout=0.1,
        collection=store.collection,
        policy=short,
    )
    await asyncio.sleep(0.5)  # paused past the lease: the rival takes it over and writes the id
    await rival.write_batch(GraphBatch(objects=[theirs], links=batch.links))
    with pytest.raises(BackendError, match="nothing was written"):  # fence 1: its own clock
        await store._leases.fenced(lease, q.insert_data(store.graph_iri, lines), "write")
    assert await store.raced_writes() == []

    lease.ends = float("inf")  # a clock that disagrees: the write goes out, the confirmation fails
    with pytest.raises(BackendError, match="check --repair"):
        await store._leases.fenced(lease, q.insert_data(store.graph_iri, lines), "write")
    report = await check_stores(store, None, None)
    assert [(p.kind, p.id) for p in report.graph_problems] == [(GraphProblemKind.RACED_WRITE, mine.id)]
    assert await rival.settle_raced_writes() == [mine.id]  # any process settles it alike
    stored = (await store.get_objects([mine.id]))[mine.id]
    records = [record_json(mine), record_json(theirs)]
    assert stored == (mine if wr.winning_record(records) == records[0] else theirs)
    assert (await check_stores(store, None, None)).graph_consistent
    await rival.close()
