"""What differs on Virtuoso 7 and how the service store handles it, on real servers.

The graph contract runs on Virtuoso in test_contract_virtuoso; this module covers the differences
the contract cannot show with a generous server: a server that cuts answers at a small row cap
(``ResultSetMaxRows``), and the query form each server is sent. Skipped when Virtuoso is not
installed, failed then under ``REQUIRE_VIRTUOSO_TESTS=1`` (see conftest).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
from collections.abc import AsyncIterator

import httpx
import pytest
from charmem.domain.graph import GraphBatch
from charmem.domain.ids import MemoryId
from charmem.errors import BackendError
from charmem.settings import Settings
from pyoxigraph import Literal

from charmem_oxigraph import OxigraphGraphStore, SparqlServiceGraphStore
from charmem_oxigraph._queries import INSERT_DATA_MAX_TRIPLES
from charmem_oxigraph.testing import OxigraphServer, VirtuosoServer

from oxigraph_builders import HOSTILE_TEXTS, episode, observation

CAP = 20  # rows conftest's capped_virtuoso answers at most
_names = itertools.count()


class ContentTypes(httpx.AsyncBaseTransport):
    """Forwards to a real transport and records each request's ``Content-Type``."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.seen: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request.headers["content-type"])
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture
async def capped_store(capped_virtuoso: VirtuosoServer) -> AsyncIterator[SparqlServiceGraphStore]:
    """A store on the capped server holding one episode and more observations than :data:`CAP`."""
    store = SparqlServiceGraphStore(
        f"capped-{next(_names)}",
        query_endpoint=capped_virtuoso.query_endpoint,
        update_endpoint=capped_virtuoso.update_endpoint,
    )
    held = episode()
    await store.write_batch(GraphBatch(objects=[held, *(observation(held.id) for _ in range(CAP))]))
    try:
        yield store
    finally:
        await store.close()


async def test_an_answer_cut_at_the_row_cap_is_refused(capped_store: SparqlServiceGraphStore) -> None:
    """Virtuoso leaves rows past ResultSetMaxRows out and says so only in X-SPARQL-MaxRows: a
    read that would silently miss memories fails, naming the setting to raise."""
    with pytest.raises(BackendError, match="ResultSetMaxRows") as caught:
        await capped_store.object_ids()
    assert f"row cap of {CAP} rows" in str(caught.value)


async def test_an_export_cut_at_the_row_cap_is_refused(capped_store: SparqlServiceGraphStore) -> None:
    """Virtuoso cuts a CONSTRUCT answer at the cap without any sign: the export counts the
    statements first, refuses a shorter answer and writes nothing."""
    out = io.BytesIO()
    with pytest.raises(BackendError, match="ResultSetMaxRows"):
        await capped_store.export_graph(out)
    assert out.getvalue() == b""


async def test_answers_under_the_cap_are_read(capped_virtuoso: VirtuosoServer) -> None:
    """Reads of fewer rows than the cap are not refused (the header comes only at the cap)."""
    async with SparqlServiceGraphStore(
        f"capped-{next(_names)}",
        query_endpoint=capped_virtuoso.query_endpoint,
        update_endpoint=capped_virtuoso.update_endpoint,
    ) as store:
        held = episode()
        turn = observation(held.id, text=HOSTILE_TEXTS[0])
        await store.write_batch(GraphBatch(objects=[held, turn]))
        assert sorted(await store.object_ids()) == sorted([held.id, turn.id])
        out = io.BytesIO()
        assert (await store.export_graph(out)).statements == await store.statement_count()


async def _query_content_types(query_endpoint: str, update_endpoint: str) -> list[str]:
    transport = ContentTypes()
    async with (
        httpx.AsyncClient(transport=transport) as client,
        SparqlServiceGraphStore(
            f"form-{next(_names)}",
            query_endpoint=query_endpoint,
            update_endpoint=update_endpoint,
            client=client,
        ) as store,
    ):
        for _ in range(3):
            await store.object_ids()
    return transport.seen


async def test_oxigraph_is_sent_queries_directly_after_the_first(sparql_server: OxigraphServer) -> None:
    """The first query goes URL-encoded (every server takes that form); once the answer names
    Oxigraph, queries go as the request body (half the cost for a large query, measured)."""
    seen = await _query_content_types(sparql_server.query_endpoint, sparql_server.update_endpoint)
    direct = "application/sparql-query"
    assert seen == ["application/x-www-form-urlencoded", direct, direct]


async def test_virtuoso_is_sent_queries_url_encoded(virtuoso_server: VirtuosoServer) -> None:
    """Virtuoso 7 never answers a query POSTed as application/sparql-query: every query to it
    goes URL-encoded."""
    seen = await _query_content_types(virtuoso_server.query_endpoint, virtuoso_server.update_endpoint)
    assert seen == ["application/x-www-form-urlencoded"] * 3


async def test_a_dump_larger_than_one_insert_operation_restores(virtuoso_server: VirtuosoServer) -> None:
    """Virtuoso refuses an INSERT DATA operation of more than 4,989 triples: a restore (one update
    request) of a larger dump is sent as several operations and loads every statement."""
    name = f"restore-{next(_names)}"
    held = episode()
    turns = [observation(held.id, text=HOSTILE_TEXTS[i % len(HOSTILE_TEXTS)]) for i in range(2_000)]
    dump = io.BytesIO()
    async with await OxigraphGraphStore.open_async(name) as source:
        await source.write_batch(GraphBatch(objects=[held, *turns]))
        exported = await source.export_graph(dump)
    assert exported.statements > 1.5 * INSERT_DATA_MAX_TRIPLES
    async with SparqlServiceGraphStore(
        name, query_endpoint=virtuoso_server.query_endpoint, update_endpoint=virtuoso_server.update_endpoint
    ) as restored:
        loaded = await restored.import_graph(io.BytesIO(dump.getvalue()), exported.media_type)
        assert loaded == exported.statements
        assert await restored.statement_count() == exported.statements
        assert (await restored.get_objects([turns[-1].id]))[turns[-1].id] == turns[-1]


def _auth_settings(server: VirtuosoServer, **extra: str) -> Settings:
    endpoint = f"{server.base_url}/sparql-auth"
    return Settings.from_mapping(
        {"GRAPH_STORE_MODE": "service", "SPARQL_QUERY_ENDPOINT": endpoint, "SPARQL_USERNAME": "dba", **extra}
    )


async def test_sparql_auth_takes_digest_credentials(virtuoso_server: VirtuosoServer) -> None:
    """Virtuoso's authenticated endpoint (/sparql-auth) asks for HTTP digest, not basic:
    SPARQL_AUTH_SCHEME=digest sends the username and password that way."""
    settings = _auth_settings(
        virtuoso_server, SPARQL_PASSWORD=VirtuosoServer.DBA_PASSWORD, SPARQL_AUTH_SCHEME="digest"
    )
    held = episode()
    async with SparqlServiceGraphStore.from_settings(settings, f"auth-{next(_names)}") as store:
        await store.write_batch(GraphBatch(objects=[held]))
        assert await store.get_objects([held.id]) == {held.id: held}
    basic = _auth_settings(virtuoso_server, SPARQL_PASSWORD=VirtuosoServer.DBA_PASSWORD)
    async with SparqlServiceGraphStore.from_settings(basic, f"auth-{next(_names)}") as store:
        with pytest.raises(BackendError, match=r"HTTP 401 .*SPARQL_USERNAME"):
            await store.object_ids()


async def test_an_update_cut_by_a_crash_is_all_or_nothing(own_virtuoso: VirtuosoServer) -> None:
    """Virtuoso killed while it applies one INSERT DATA request (the store's write) comes back
    with all of it or none of it, never a part; a restarted server serves the store again."""
    text = Literal("x" * 200)
    lines = [f"<urn:charmem:observation:{MemoryId.new()}> <urn:p> {text} ." for _ in range(3_900)]
    server = own_virtuoso
    for n, delay in enumerate((0.2, 0.5, 0.8)):
        async with SparqlServiceGraphStore(
            f"crash-{n}", query_endpoint=server.query_endpoint, update_endpoint=server.update_endpoint
        ) as store:
            write = asyncio.create_task(store._insert(lines, "write a batch"))
            await asyncio.sleep(delay)
            server.kill()
            with contextlib.suppress(BackendError):
                await write
            server.start()
            assert await store.statement_count() in (0, len(lines))
