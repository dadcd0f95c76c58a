"""The writer lease of the SPARQL service store, on a real ``oxigraph serve``.

Exclusion among many contenders, takeover of an expired claim, a live claim holding writers off,
the time fence before a write and the confirmation after it, and re-entry from a use case's block.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import attrs
import httpx
import pytest
from charmem.domain.graph import GraphBatch
from charmem.errors import BackendError
from charmem.ports import WriterExclusion
from pyoxigraph import Literal, NamedNode

from charmem_oxigraph import SparqlServiceGraphStore
from charmem_oxigraph import _writers as wl
from charmem_oxigraph.testing import OxigraphServer

from oxigraph_builders import entity

FAST = wl.LeasePolicy(seconds=2.0, requests_per_lease=1, clock_margin=0.0, wait_leases=0.5)


@pytest.fixture
def store(service_store: SparqlServiceGraphStore) -> SparqlServiceGraphStore:
    return service_store


def _graph(store: SparqlServiceGraphStore) -> str:
    return wl.writers_graph(store.graph_iri)


async def _claims(store: SparqlServiceGraphStore) -> list[tuple[str, str]]:
    rows = await store._select(wl.claims_query(_graph(store)), "read claims")
    return [(w.value, e.value) for w, e in rows]


async def _claim(store: SparqlServiceGraphStore, writer: str, expires: datetime) -> None:
    literal = Literal(expires.isoformat(), datatype=NamedNode("http://www.w3.org/2001/XMLSchema#dateTime"))
    triple = f"<{writer}> <urn:charmem:vocab#leaseExpires> {literal}"
    await store._update(f"INSERT DATA {{ GRAPH <{_graph(store)}> {{ {triple} }} }}", "claim")


def _acquire(store: SparqlServiceGraphStore, policy: wl.LeasePolicy = FAST) -> asyncio.Future[wl.Lease]:
    return asyncio.ensure_future(
        wl.acquire(
            lambda query: store._select(query, "lease"),
            lambda update: store._update(update, "lease"),
            graph=_graph(store),
            request_timeout=1.0,
            collection=store.collection,
            policy=policy,
        )
    )


def test_live_and_expired_claims_are_told_apart() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)

    def row(writer: str, expires: str) -> tuple[NamedNode, Literal]:
        return NamedNode(writer), Literal(expires)

    live, expired = wl.live_claims(
        [
            row("urn:charmem:writer:a", (now + timedelta(seconds=1)).isoformat()),
            row("urn:charmem:writer:b", now.isoformat()),  # expires now: expired
            row("urn:charmem:writer:c", "not an instant"),  # unreadable: expired
        ],
        now,
    )
    assert live == {"urn:charmem:writer:a"}
    assert len(expired) == 2
    assert all(line.startswith(("<urn:charmem:writer:b>", "<urn:charmem:writer:c>")) for line in expired)


def test_the_lease_lasts_several_request_timeouts() -> None:
    assert wl.LEASE_POLICY.lifetime(1.0) == wl.LEASE_POLICY.seconds
    assert wl.LEASE_POLICY.lifetime(30.0) == 30.0 * wl.LEASE_POLICY.requests_per_lease


async def test_at_most_one_contender_holds_the_lease(store: SparqlServiceGraphStore) -> None:
    holding, most, rounds = 0, 0, 0

    async def contend() -> None:
        nonlocal holding, most, rounds
        for _ in range(5):
            lease = await _acquire(store, wl.LeasePolicy(seconds=10.0, requests_per_lease=1))
            holding += 1
            most = max(most, holding)
            await asyncio.sleep(0.002)  # hold it across a few other contenders' requests
            holding -= 1
            rounds += 1
            await lease.release(lambda update: store._update(update, "release"))

    await asyncio.gather(*(contend() for _ in range(6)))
    assert (most, rounds) == (1, 30)
    assert await _claims(store) == []  # every claim released


async def test_an_expired_claim_is_taken_over_and_deleted(store: SparqlServiceGraphStore) -> None:
    dead = "urn:charmem:writer:00000000-0000-0000-0000-000000000001"
    await _claim(store, dead, datetime.now(UTC) - timedelta(seconds=1))
    lease = await _acquire(store)
    assert [writer for writer, _ in await _claims(store)] == [lease.writer]


async def test_a_live_claim_holds_writers_off_until_the_wait_ends(store: SparqlServiceGraphStore) -> None:
    await _claim(store, "urn:charmem:writer:live", datetime.now(UTC) + timedelta(minutes=5))
    started = time.monotonic()
    with pytest.raises(BackendError, match="another process holds it"):
        await _acquire(store)  # waits half a lifetime (1 s), then gives up
    assert 0.9 < time.monotonic() - started < 5.0


async def test_a_write_that_could_outlast_its_lease_is_not_sent(store: SparqlServiceGraphStore) -> None:
    lease = await _acquire(store)
    lease.ends = time.monotonic() + 0.5  # less than the store's request timeout left
    with pytest.raises(BackendError, match="nothing was written"):
        await store._leases.fenced(lease, "INSERT DATA { GRAPH <urn:x> { <urn:a> <urn:b> <urn:c> } }", "")


async def test_a_write_after_its_lease_was_taken_over_says_to_repair(store: SparqlServiceGraphStore) -> None:
    person = entity()
    async with store.exclusive_writes():
        # another writer deems the claim expired and deletes it while this one writes
        await store._update(f"DROP SILENT GRAPH <{_graph(store)}>", "take over")
        with pytest.raises(BackendError, match="check --repair"):
            await store.write_batch(GraphBatch(objects=[person]))
    assert person.id in await store.get_objects([person.id])  # stored, and reported


async def test_writes_inside_a_block_use_its_lease(
    sparql_server: OxigraphServer, store: SparqlServiceGraphStore
) -> None:
    seen: list[bytes] = []

    async def record(request: httpx.Request) -> None:
        seen.append(request.content)

    async with httpx.AsyncClient(event_hooks={"request": [record]}) as client:
        recorded = SparqlServiceGraphStore(
            store.collection,
            query_endpoint=sparql_server.query_endpoint,
            update_endpoint=sparql_server.update_endpoint,
            client=client,
        )
        assert isinstance(recorded, WriterExclusion)
        async with recorded.exclusive_writes():
            await recorded.write_batch(GraphBatch(objects=[entity()]))
            await recorded.write_batch(GraphBatch(objects=[entity()]))
        claims = [body for body in seen if b"INSERT DATA { GRAPH <urn:charmem:writers:" in body]
        assert len(claims) == 1  # one lease for the block; each write confirmed it
        assert sum(b"leaseExpires" in body and b"SELECT" in body for body in seen) == 2 + 2
        await recorded.close()
    assert await _claims(store) == []


async def test_a_write_that_fails_without_an_answer_holds_writers_off_until_its_claim_lapses(
    store: SparqlServiceGraphStore,
) -> None:
    """A timed-out write may still land: its claim is left to lapse, other writers wait, and the
    same process's next writer waits too (then it goes on: a replay is accepted)."""
    real = store._leases.update

    async def lost(update: str, action: str) -> None:
        if store.graph_iri in update:  # the data write, not a lease request
            await real(update, action)  # the server applies it, the answer never arrives
            raise BackendError("the SPARQL endpoint did not answer within 1 s")
        await real(update, action)

    store._leases = attrs.evolve(store._leases, update=lost, timeout=1.0, policy=FAST)
    batch = GraphBatch(objects=[entity()])
    with pytest.raises(BackendError, match="may still apply this write") as failed:
        await store.write_batch(batch)
    assert "within" in str(failed.value)
    assert "replay the same plan" in str(failed.value)
    assert await _claims(store), "the claim is left to lapse, not released"
    with pytest.raises(BackendError, match="no writer lease"):
        await _acquire(store)  # another process's writer is held off meanwhile
    store._leases = attrs.evolve(store._leases, update=real)
    started = time.monotonic()
    result = await store.write_batch(batch)  # this process waits for the lapse, then replays
    assert time.monotonic() - started > 0.5
    assert result.existing_ids == (batch.objects[0].id,)
