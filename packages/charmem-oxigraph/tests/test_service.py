"""The SPARQL 1.1 service store: settings, credentials, one request per write, bounded failures.

The graph behaviours (round trips, conflicts, currency, queries) run against the service mode
through ``GRAPH_MODES`` in test_roundtrip, test_write_batch and test_queries; this module covers
what only the service mode has, against real ``oxigraph serve`` processes.
"""

from __future__ import annotations

import logging
import socket
import time
import urllib.parse
from collections.abc import AsyncIterator, Iterator
from importlib.metadata import entry_points
from pathlib import Path

import httpx
import pytest
import structlog
from charmem.domain.graph import GraphBatch
from charmem.domain.model import Relation
from charmem.errors import BackendError, ConfigurationError
from charmem.settings import Settings

from charmem_oxigraph import SparqlServiceGraphStore
from charmem_oxigraph.testing import OxigraphServer, free_port

from oxigraph_builders import HOSTILE_TEXTS, derived, entity, episode, link, observation, record

SECRET = "s3cr3t-Token-value-4711"  # noqa: S105 - a fake credential that must never leak


def _settings(**extra: str) -> Settings:
    return Settings.from_mapping(
        {
            "GRAPH_STORE_MODE": "service",
            "SPARQL_QUERY_ENDPOINT": "http://127.0.0.1:9/query",
            "SPARQL_UPDATE_ENDPOINT": "http://127.0.0.1:9/update",
            **extra,
        }
    )


class Recorder(httpx.AsyncBaseTransport):
    """Forwards to a real transport and records each request (method, URL, headers, body)."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.requests: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        self.requests.append(request)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[OxigraphServer]:
    """A server of this test alone (it may be killed and restarted)."""
    running = OxigraphServer(tmp_path / "server")
    running.start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
async def recorded(sparql_server: OxigraphServer) -> AsyncIterator[tuple[SparqlServiceGraphStore, Recorder]]:
    recorder = Recorder()
    client = httpx.AsyncClient(transport=recorder)
    store = SparqlServiceGraphStore(
        f"recorded-{time.monotonic_ns()}",
        query_endpoint=sparql_server.query_endpoint,
        update_endpoint=sparql_server.update_endpoint,
        client=client,
    )
    try:
        yield store, recorder
    finally:
        await store.close()
        await client.aclose()


def test_entry_point_names_the_service_store() -> None:
    found = {ep.name: ep for ep in entry_points(group="charmem.graph_stores")}
    assert found["service"].load().adapter is SparqlServiceGraphStore


def test_from_settings_reads_endpoints_and_timeout() -> None:
    store = SparqlServiceGraphStore.from_settings(_settings(SPARQL_TIMEOUT="2.5"), "svc")
    assert store.collection == "svc"
    assert store.graph_iri == "urn:charmem:collection:svc"
    assert store.query_endpoint == "http://127.0.0.1:9/query"
    assert store.update_endpoint == "http://127.0.0.1:9/update"
    assert store.timeout == 2.5
    only_query = Settings.from_mapping(
        {"GRAPH_STORE_MODE": "service", "SPARQL_QUERY_ENDPOINT": "http://127.0.0.1:9/sparql"}
    )
    assert SparqlServiceGraphStore.from_settings(only_query, "svc").update_endpoint == (
        "http://127.0.0.1:9/sparql"
    )


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ({"SPARQL_USERNAME": "ada"}, "SPARQL_PASSWORD"),
        ({"SPARQL_PASSWORD": SECRET}, "SPARQL_USERNAME"),
        ({"SPARQL_BEARER_TOKEN": SECRET, "SPARQL_USERNAME": "ada"}, "SPARQL_BEARER_TOKEN"),
        (
            {"SPARQL_AUTH_SCHEME": "ntlm", "SPARQL_USERNAME": "ada", "SPARQL_PASSWORD": SECRET},
            "SPARQL_AUTH_SCHEME",
        ),
        ({"SPARQL_AUTH_SCHEME": "digest"}, "SPARQL_AUTH_SCHEME"),
        ({"SPARQL_TIMEOUT": "0"}, "SPARQL_TIMEOUT"),
        ({"SPARQL_TIMEOUT": "soon"}, "SPARQL_TIMEOUT"),
        ({"SPARQL_QUERY_ENDPOINT": "ftp://example/query"}, "SPARQL_QUERY_ENDPOINT"),
    ],
)
def test_from_settings_rejects_bad_keys(extra: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        SparqlServiceGraphStore.from_settings(_settings(**extra), "svc")
    assert caught.value.key == key
    assert SECRET not in str(caught.value)


def test_from_settings_refuses_another_mode() -> None:
    with pytest.raises(ConfigurationError):
        SparqlServiceGraphStore.from_settings(Settings(graph_store_mode="persistent"), "svc")


@pytest.mark.parametrize(
    "extra",
    [
        {"SPARQL_USERNAME": "ada", "SPARQL_PASSWORD": SECRET},
        {"SPARQL_BEARER_TOKEN": SECRET},
        {"SPARQL_USERNAME": "ada", "SPARQL_PASSWORD": SECRET, "SPARQL_AUTH_SCHEME": "digest"},
        {"SPARQL_QUERY_ENDPOINT": f"http://ada:{SECRET}@127.0.0.1:9/query"},
    ],
)
async def test_credentials_never_show_in_repr_errors_or_logs(
    extra: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()  # nothing listens there
    extra = {
        "SPARQL_QUERY_ENDPOINT": f"http://127.0.0.1:{port}/query",
        "SPARQL_UPDATE_ENDPOINT": f"http://127.0.0.1:{port}/update",
        **{k: v.replace("127.0.0.1:9", f"127.0.0.1:{port}") for k, v in extra.items()},
    }
    caplog.set_level(logging.DEBUG)
    with structlog.testing.capture_logs() as logs:
        store = SparqlServiceGraphStore.from_settings(_settings(**extra, SPARQL_TIMEOUT="2"), "svc")
        with pytest.raises(BackendError) as caught:
            await store.statement_count()
        with pytest.raises(BackendError) as caught_write:
            await store.write_batch(GraphBatch(objects=[entity()]))
        await store.close()
    for text in (repr(store), str(caught.value), str(caught_write.value), caplog.text, repr(logs)):
        assert SECRET not in text
    assert f"127.0.0.1:{port}" in str(caught.value)


async def test_user_info_of_an_endpoint_never_reaches_a_log_line(
    sparql_server: OxigraphServer, caplog: pytest.LogCaptureFixture
) -> None:
    """httpx logs every request URL at INFO: user-info must be sent as basic auth, not in the URL."""
    seen: list[httpx.Request] = []

    async def remember(request: httpx.Request) -> None:
        seen.append(request)

    caplog.set_level(logging.DEBUG)
    with_user = {
        "SPARQL_QUERY_ENDPOINT": sparql_server.query_endpoint.replace("http://", f"http://ada:{SECRET}@"),
        "SPARQL_UPDATE_ENDPOINT": sparql_server.update_endpoint.replace("http://", f"http://ada:{SECRET}@"),
    }
    store = SparqlServiceGraphStore.from_settings(_settings(**with_user), "user-info")
    store._http().event_hooks["request"].append(remember)
    try:
        await store.write_batch(GraphBatch(objects=[entity()]))
        assert await store.statement_count() > 0
    finally:
        await store.close()
    assert "HTTP Request: POST http://127.0.0.1" in caplog.text  # the line that leaked it before
    assert SECRET not in caplog.text
    assert seen
    assert all(SECRET not in str(request.url) for request in seen)
    assert all(request.headers["Authorization"].startswith("Basic ") for request in seen)


async def test_authentication_headers_are_sent(sparql_server: OxigraphServer) -> None:
    seen: list[httpx.Request] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(401, text="who are you")

    for extra, expected in (
        ({"SPARQL_BEARER_TOKEN": SECRET}, f"Bearer {SECRET}"),
        ({"SPARQL_USERNAME": "ada", "SPARQL_PASSWORD": SECRET}, httpx.BasicAuth("ada", SECRET)),
    ):
        settings = _settings(**extra)
        store = SparqlServiceGraphStore.from_settings(settings, "svc")
        client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
        authed = SparqlServiceGraphStore(
            "svc",
            query_endpoint=store.query_endpoint,
            auth=store._auth,
            client=client,
        )
        with pytest.raises(BackendError, match="HTTP 401") as caught:
            await authed.statement_count()
        assert "SPARQL_BEARER_TOKEN" in str(caught.value)
        assert SECRET not in str(caught.value)
        header = seen[-1].headers["Authorization"]
        if isinstance(expected, str):
            assert header == expected
        else:
            assert header.startswith("Basic ")
            assert SECRET not in header  # base64 of user:password
        await authed.close()
        await store.close()
        await client.aclose()


async def test_one_update_request_per_write_batch(
    recorded: tuple[SparqlServiceGraphStore, Recorder],
) -> None:
    store, recorder = recorded
    person = entity()
    ep = episode(summary=HOSTILE_TEXTS[0], participant_entity_ids=[person.id])
    obs = observation(ep.id, text="\n".join(HOSTILE_TEXTS))
    belief = derived(episode_ids=[ep.id], entity_ids=[person.id])
    batch = GraphBatch(
        objects=[person, ep, obs, belief],
        links=[link(ep.id, Relation.HAS_OBSERVATION, obs.id)],
        records=[record(belief.id)],
    )
    await store.write_batch(batch)
    # the writer lease: read the claims, claim, read back; after the write, confirm; release
    assert [r.url.path for r in recorder.requests if _lease(r)] == [
        *("/query", "/update", "/query"),
        *("/query", "/update"),
    ]
    updates = [r for r in recorder.requests if r.url.path == "/update" and not _lease(r)]
    queries = [r for r in recorder.requests if r.url.path == "/query" and not _lease(r)]
    assert len(updates) == 1
    # the stored items (then cached), the purged ids among them, and (a first write into an empty
    # collection) whether the layout version is recorded
    assert len(queries) == 3
    body = updates[0].content.decode("utf-8")
    assert body.startswith("INSERT DATA { GRAPH <urn:charmem:collection:")
    assert updates[0].headers["Content-Type"] == "application/sparql-update"

    recorder.requests.clear()
    replay = await store.write_batch(batch)  # equal content: checked, nothing sent
    assert len(replay.existing_ids) == 6
    assert [r.url.path for r in recorder.requests if not _lease(r)] == ["/query", "/query"]  # items, purged

    recorder.requests.clear()
    await store.write_batch(GraphBatch(objects=[entity()]))  # the layout is known recorded now
    assert [r.url.path for r in recorder.requests if not _lease(r)] == ["/query", "/query", "/update"]


def _lease(request: httpx.Request) -> bool:
    """Whether ``request`` reads or writes a collection's writer lease (a query may be URL-encoded)."""
    return b"urn:charmem:writers:" in urllib.parse.unquote_to_bytes(request.content)


async def test_http_error_status_is_a_backend_error() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, text="the disk is on fire")

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    store = SparqlServiceGraphStore("svc", query_endpoint="http://sparql.invalid/query", client=client)
    with pytest.raises(BackendError, match=r"sparql\.invalid/query.*HTTP 500.*disk is on fire"):
        await store.get_objects([entity().id])
    await client.aclose()


async def test_an_answer_that_is_not_sparql_results_is_a_backend_error() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>a proxy's login page</html>")

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    store = SparqlServiceGraphStore("svc", query_endpoint="http://sparql.invalid/query", client=client)
    with pytest.raises(BackendError, match="not SPARQL JSON results"):
        await store.object_ids()
    await client.aclose()


async def test_unreachable_endpoint_fails_fast_naming_it() -> None:
    port = free_port()
    store = SparqlServiceGraphStore(
        "svc",
        query_endpoint=f"http://127.0.0.1:{port}/query",
        update_endpoint=f"http://127.0.0.1:{port}/update",
    )
    start = time.monotonic()
    with pytest.raises(BackendError, match=f"127.0.0.1:{port}/query") as caught:
        await store.currency([entity().id])
    assert time.monotonic() - start < 2.0
    assert isinstance(caught.value.__cause__, httpx.ConnectError)
    with pytest.raises(BackendError, match=f"127.0.0.1:{port}/query to write a batch"):
        await store.write_batch(GraphBatch(objects=[entity()]))  # the check query fails first
    await store.close()


async def test_a_server_that_never_answers_times_out() -> None:
    """A listening socket that never replies: the request fails after ``timeout`` seconds."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        store = SparqlServiceGraphStore("svc", query_endpoint=f"http://127.0.0.1:{port}/query", timeout=0.5)
        start = time.monotonic()
        with pytest.raises(BackendError, match=r"did not answer within 0\.5 s"):
            await store.statement_count()
        assert time.monotonic() - start < 2.0
        await store.close()


async def test_closed_store_refuses_work(sparql_server: OxigraphServer) -> None:
    store = SparqlServiceGraphStore("svc", query_endpoint=sparql_server.query_endpoint)
    await store.ping()
    await store.close()
    await store.close()  # idempotent
    assert store.closed
    with pytest.raises(BackendError, match="closed"):
        await store.statement_count()


async def test_server_killed_mid_session_then_restarted(server: OxigraphServer) -> None:
    store = SparqlServiceGraphStore(
        "crash", query_endpoint=server.query_endpoint, update_endpoint=server.update_endpoint, timeout=3
    )
    try:
        before = entity()
        await store.write_batch(GraphBatch(objects=[before]))
        server.kill()

        start = time.monotonic()
        with pytest.raises(BackendError, match=server.base_url):
            await store.get_objects([before.id])
        with pytest.raises(BackendError, match=server.base_url):
            await store.write_batch(GraphBatch(objects=[entity()]))
        assert time.monotonic() - start < 2 * store.timeout

        server.start()  # same location, same port
        assert await store.get_objects([before.id]) == {before.id: before}
        after = entity()
        assert (await store.write_batch(GraphBatch(objects=[after]))).inserted_ids == (after.id,)
        assert set(await store.object_ids()) == {before.id, after.id}
    finally:
        await store.close()


def _graph_group_parts(query: str) -> tuple[list[str], str]:
    """The ``{ ... }`` groups directly inside a query's ``GRAPH <g> { ... }``, and the text around them."""
    start = query.index("{", query.index("GRAPH <")) + 1
    groups: list[str] = []
    around: list[str] = []
    depth, opened = 0, start
    for i in range(start, len(query)):
        char = query[i]
        if char == "{":
            if depth == 0:
                opened = i
            depth += 1
        elif char == "}":
            if depth == 0:
                return groups, "".join(around)  # the end of the GRAPH group
            depth -= 1
            if depth == 0:
                groups.append(query[opened + 1 : i].strip())
        elif depth == 0:
            around.append(char)
    raise AssertionError(f"unbalanced query: {query}")


async def test_every_read_binds_its_values_inside_the_group_it_binds(
    recorded: tuple[SparqlServiceGraphStore, Recorder],
) -> None:
    """A ``VALUES`` block outside the ``UNION`` branches it binds makes each branch read the whole
    collection before the join (a currency read of 512 ids took 7 s at 17,000 objects, so ``charmem
    check`` grew quadratically); inside each branch, Oxigraph starts from the ids. Checked on the
    requests a real server answers, with the answers."""
    store, recorder = recorded
    person = entity()
    ep = episode(participant_entity_ids=[person.id])
    obs = observation(ep.id, mentioned_entity_ids=[person.id])
    old, new = derived(entity_ids=[person.id]), derived(entity_ids=[person.id])
    await store.write_batch(
        GraphBatch(
            objects=[person, ep, obs, old, new],
            links=[link(ep.id, Relation.HAS_OBSERVATION, obs.id), link(new.id, Relation.SUPERSEDES, old.id)],
            records=[record(obs.id)],
        )
    )
    recorder.requests.clear()
    every = [person.id, ep.id, obs.id, old.id, new.id]
    currency = await store.currency(every)
    assert [currency[i].value for i in every] == ["current", "current", "suppressed", "superseded", "current"]
    await store.get_objects(every)
    await store.links_of(every)
    await store.get_records(every)
    await store.episode_turns([ep.id])
    await store.tombstones(every)

    queries = [r.content.decode("utf-8") for r in recorder.requests if r.url.path == "/query"]
    assert any(" UNION " in query for query in queries)
    for query in (q for q in queries if "VALUES" in q):
        groups, around = _graph_group_parts(query)
        if "UNION" in around:
            assert "VALUES" not in around, f"a VALUES block outside the UNION branches: {query[:300]}"
            assert all(g.startswith("VALUES") or "VALUES" not in g for g in groups), query[:300]
