"""QdrantServiceVectorIndex: the contract on local mode, fingerprints, failures, parity.

Each behaviour of the index runs in both service layouts (``shared``: a tenant of the shared
collection of its fingerprint; ``per_collection``: a Qdrant collection of its own); the tenants
of a shared collection are tested in test_service_tenants.py. The contract behaviours run
against ``AsyncQdrantClient(location=":memory:")`` (qdrant-client's in-process implementation
of the server API), so the adapter's code path is exercised without a server. The
``service_and_embedded_*`` parity tests need a real server: they run only with
``REQUIRE_QDRANT_TESTS=1`` and ``QDRANT_CONNECTION_STRING`` (see the README's docker compose
file), and are reported as skipped otherwise.
"""

from __future__ import annotations

import logging
import math
import os
import random
import time
import uuid
from collections.abc import AsyncIterator
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import structlog
from qdrant_client import AsyncQdrantClient, models

from charmem import MemoryId, ObjectType, Settings
from charmem.domain.retrieval import CompletenessKind, VectorRecallCompleteness
from charmem.errors import (
    BackendError,
    ConfigurationError,
    DimensionMismatchError,
    EmbedderMismatchError,
)
from charmem.ports import VectorIndex, VectorPoint, VectorQuery, VectorSearchResult
from charmem_qdrant import (
    DEFAULT_FUSION_WEIGHTS,
    SCHEMA_VERSION,
    EdgeVectorIndex,
    QdrantServiceVectorIndex,
    service_collection_name,
    shared_collection_name,
)
from charmem_qdrant._fusion import RRF_K, rrf_contribution

MODEL = "test-model"
SIZE = 3
LAYOUTS = ("shared", "per_collection")
SECRET = "qdrant-api-key-that-must-not-leak-0815"  # noqa: S105 - a fake key for the redaction tests

REQUIRE = os.environ.get("REQUIRE_QDRANT_TESTS") == "1"
SERVER = os.environ.get("QDRANT_CONNECTION_STRING")
needs_server = pytest.mark.skipif(
    not REQUIRE,
    reason="needs a Qdrant server: set REQUIRE_QDRANT_TESTS=1 and QDRANT_CONNECTION_STRING "
    "(docker compose -f docker-compose.qdrant.yml up -d; QDRANT_CONNECTION_STRING=http://127.0.0.1:6334)",
)


def point(
    vector: list[float],
    object_type: ObjectType = ObjectType.EPISODE,
    *,
    text: str = "",
    id: MemoryId | None = None,
) -> VectorPoint:
    return VectorPoint(id=id or MemoryId.new(), object_type=object_type, vector=vector, text=text)


def ids_of(result: VectorSearchResult) -> list[MemoryId]:
    return [hit.id for hit in result.hits]


async def open_local(
    collection: str = "memories", *, client: AsyncQdrantClient | None = None, **kwargs: object
) -> QdrantServiceVectorIndex:
    return await QdrantServiceVectorIndex.open(
        client or AsyncQdrantClient(location=":memory:"),
        collection,
        model_id=str(kwargs.pop("model_id", MODEL)),
        vector_size=int(kwargs.pop("vector_size", SIZE)),  # type: ignore[call-overload]
        owns_client=client is None,
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.fixture(params=LAYOUTS)
def layout(request: pytest.FixtureRequest) -> str:
    """Each service layout in turn."""
    return str(request.param)


@pytest.fixture
async def index(layout: str) -> AsyncIterator[QdrantServiceVectorIndex]:
    opened = await open_local(layout=layout)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def lexical_index(layout: str) -> AsyncIterator[QdrantServiceVectorIndex]:
    opened = await open_local("lexical", lexical=True, layout=layout)
    try:
        yield opened
    finally:
        await opened.close()


# ---------------------------------------------------------------- the contract, on local mode


async def test_canary_fixture_starts_empty(index: QdrantServiceVectorIndex) -> None:
    assert await index.count() == 0
    assert await index.point_ids() == set()
    result = await index.search(VectorQuery(vector=[1.0, 0.0, 0.0], limit=5))
    assert result.hits == ()
    port: VectorIndex = index
    assert (port.model_id, port.vector_size) == (MODEL, SIZE)


async def test_search_orders_by_cosine_score(index: QdrantServiceVectorIndex) -> None:
    near, middle, far = point([1, 0, 0]), point([1, 1, 0]), point([0, 0, 1])
    await index.upsert([far, near, middle])
    result = await index.search(VectorQuery(vector=[2.0, 0.0, 0.0], limit=10))
    assert ids_of(result) == [near.id, middle.id, far.id]
    assert [hit.score for hit in result.hits] == pytest.approx(
        [1.0, 1 / math.sqrt(2), 0.0], abs=1e-6
    )
    assert [hit.object_type for hit in result.hits] == [ObjectType.EPISODE] * 3


async def test_search_filters_by_object_type_and_reports_the_filtered_scan(
    index: QdrantServiceVectorIndex,
) -> None:
    episode = point([1, 0, 0], ObjectType.EPISODE)
    observation = point([1, 0.1, 0], ObjectType.OBSERVATION)
    derived = point([1, 0.2, 0], ObjectType.DERIVED)
    thread = point([1, 0.3, 0], ObjectType.THREAD)
    await index.upsert([episode, observation, derived, thread])
    query = [1.0, 0.0, 0.0]
    only = await index.search(
        VectorQuery(vector=query, limit=10, object_types=(ObjectType.DERIVED,))
    )
    assert ids_of(only) == [derived.id]
    assert only.completeness == VectorRecallCompleteness(
        CompletenessKind.EXHAUSTIVE, scanned=1, fetched=1
    )
    two = await index.search(
        VectorQuery(vector=query, limit=1, object_types=(ObjectType.THREAD, ObjectType.EPISODE))
    )
    assert ids_of(two) == [episode.id]
    assert two.completeness == VectorRecallCompleteness(
        CompletenessKind.EXHAUSTIVE, scanned=2, fetched=1
    )
    none = await index.search(
        VectorQuery(vector=query, limit=10, object_types=(ObjectType.ENTITY,))
    )
    assert none.hits == ()
    nothing = await index.search(VectorQuery(vector=query, limit=0))
    assert nothing.completeness == VectorRecallCompleteness(
        CompletenessKind.EXHAUSTIVE, scanned=4, fetched=0
    )


@pytest.mark.parametrize("limit", [1, 10, 37, 60, 100])
async def test_ties_are_ordered_by_id_whatever_the_insertion_order(limit: int, layout: str) -> None:
    rng = random.Random(limit)
    ids = [MemoryId(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(60)]
    forward = list(ids)
    rng.shuffle(forward)
    results = []
    for order in (forward, list(reversed(forward))):
        index = await open_local("ties", layout=layout)
        try:
            half = len(order) // 2
            await index.upsert([point([0.3, 0.3, 0.3], id=i) for i in order[:half]])
            await index.upsert([point([0.3, 0.3, 0.3], id=i) for i in order[half:]])
            results.append(
                ids_of(await index.search(VectorQuery(vector=[1.0, 1.0, 1.0], limit=limit)))
            )
        finally:
            await index.close()
    expected = sorted(ids, key=str)[:limit]
    assert results == [expected, expected]


async def test_ties_below_better_points_are_ordered_by_id(index: QdrantServiceVectorIndex) -> None:
    best = point([1, 0, 0])
    tied = [point([0, 1, 0]) for _ in range(30)]
    await index.upsert([point([0, 0, 1]), *reversed(tied), best])
    result = await index.search(VectorQuery(vector=[1.0, 1.0, 0.0], limit=12))
    assert ids_of(result) == sorted([best.id, *(p.id for p in tied)], key=str)[:12]


async def test_upsert_replaces_and_delete_ignores_absent_ids(
    index: QdrantServiceVectorIndex,
) -> None:
    first = point([1, 0, 0], ObjectType.EPISODE)
    other = point([0, 1, 0])
    await index.upsert([first, other])
    await index.upsert([point([0, 0, 1], ObjectType.DERIVED, id=first.id)])
    assert await index.count() == 2
    result = await index.search(VectorQuery(vector=[0.0, 0.0, 1.0], limit=1))
    assert (result.hits[0].id, result.hits[0].object_type) == (first.id, ObjectType.DERIVED)
    await index.delete([other.id, MemoryId.new()])
    assert await index.point_ids() == {first.id}
    await index.upsert([])
    await index.delete([])
    assert await index.count() == 1


async def test_point_ids_pages_through_every_point(index: QdrantServiceVectorIndex) -> None:
    points = [point([1, i, 0]) for i in range(1100)]
    await index.upsert(points)
    assert await index.point_ids() == {p.id for p in points}
    assert await index.count() == 1100


async def test_wrong_dimension_and_non_finite_vectors_are_refused(
    index: QdrantServiceVectorIndex,
) -> None:
    with pytest.raises(DimensionMismatchError) as caught:
        await index.upsert([point([1, 0, 0]), point([1, 0])])
    assert (caught.value.expected, caught.value.actual) == (3, 2)
    with pytest.raises(BackendError, match="NaN or infinite"):
        await index.upsert([point([math.nan, 0, 0])])
    assert await index.count() == 0
    with pytest.raises(DimensionMismatchError):
        await index.search(VectorQuery(vector=[1.0, 0.0, 0.0, 0.0], limit=1))


async def test_lexical_cue_fuses_bm25_with_rrf(lexical_index: QdrantServiceVectorIndex) -> None:
    weather = point([1, 0, 0], text="we talked about the weather on a sunny afternoon")
    train = point([0.8, 0.6, 0], text="the train was late again this morning")
    biscuit = point(
        [0.6, 0.8, 0], ObjectType.OBSERVATION, text="my sister adopted a greyhound named Biscuit"
    )
    await lexical_index.upsert([weather, train, biscuit])
    vector = [1.0, 0.0, 0.0]
    assert ids_of(await lexical_index.search(VectorQuery(vector=vector, limit=3))) == [
        weather.id,
        train.id,
        biscuit.id,
    ]
    fused = await lexical_index.search(VectorQuery(vector=vector, limit=3, text="Biscuit?"))
    assert ids_of(fused) == [biscuit.id, weather.id, train.id]
    assert fused.hits[0].score == pytest.approx(
        rrf_contribution(2, DEFAULT_FUSION_WEIGHTS[0]) + 1 / RRF_K, rel=1e-5
    )  # RRF k=60, 0-based ranks, the dense stage weighted
    scoped = await lexical_index.search(
        VectorQuery(vector=vector, limit=3, text="Biscuit", object_types=(ObjectType.EPISODE,))
    )
    assert ids_of(scoped) == [weather.id, train.id]
    stopwords = await lexical_index.search(VectorQuery(vector=vector, limit=3, text="the of a"))
    assert stopwords.hits[0].score == pytest.approx(1.0, abs=1e-6)


async def _fused_ties(
    order: list[MemoryId], limit: int, layout: str
) -> tuple[list[tuple[MemoryId, float]], VectorRecallCompleteness]:
    index = await open_local("fused-ties", lexical=True, layout=layout)
    try:
        best = point([1, 0, 0], text="a garden party", id=MemoryId(uuid.UUID(int=1, version=4)))
        tied = [point([0.6, 0.8, 0], text="hello garden world", id=i) for i in order]
        await index.upsert([*tied[:20], best])
        await index.upsert(tied[20:])
        result = await index.search(VectorQuery(vector=[1.0, 0.0, 0.0], limit=limit, text="garden"))
        return [(hit.id, hit.score) for hit in result.hits], result.completeness
    finally:
        await index.close()


@pytest.mark.parametrize("limit", [1, 5, 30, 100])
async def test_fused_ties_do_not_depend_on_the_insertion_order(limit: int, layout: str) -> None:
    """Tied in both stages (70 points, more than a stage's 64): one fused score, cut by id."""
    rng = random.Random(limit)
    ids = [MemoryId(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(70)]
    forward = list(ids)
    rng.shuffle(forward)
    first = await _fused_ties(forward, limit, layout)
    second = await _fused_ties(list(reversed(forward)), limit, layout)
    assert first == second
    hits, completeness = first
    assert completeness == VectorRecallCompleteness(
        CompletenessKind.EXHAUSTIVE, scanned=71, fetched=min(limit, 71)
    )
    assert hits[0][0] == MemoryId(uuid.UUID(int=1, version=4))
    kept = min(limit, 71) - 1
    assert [hit_id for hit_id, _ in hits[1:]] == sorted(ids, key=str)[:kept]
    assert len({score for _, score in hits[1:]}) <= 1, "tied points got different fused scores"


async def test_fusion_weights_are_read_and_applied() -> None:
    index = await open_local("weighted", lexical=True, fusion_weights=(1.0, 3.0))
    try:
        assert index.fusion_weights == (1.0, 3.0)
        weather = point([1, 0, 0], text="we talked about the weather on a sunny afternoon")
        biscuit = point([0.6, 0.8, 0], text="my sister adopted a greyhound named Biscuit")
        await index.upsert([weather, biscuit])
        fused = await index.search(VectorQuery(vector=[1.0, 0.0, 0.0], limit=2, text="biscuit"))
        assert ids_of(fused) == [biscuit.id, weather.id]
        assert fused.hits[0].score == pytest.approx(
            1 / (RRF_K + 1) + 1 / (1 / 3 + RRF_K - 1), rel=1e-12
        )
    finally:
        await index.close()
    with pytest.raises(ConfigurationError) as caught:
        await open_local("weighted", fusion_weights=(1.0, 0.0))
    assert caught.value.key == "fusion_weights"
    default = await open_local("default-weights")
    assert default.fusion_weights == DEFAULT_FUSION_WEIGHTS
    await default.close()
    # from_settings_async reads VECTOR_LEXICAL_WEIGHT with the parser both indexes share
    from charmem_qdrant._recall import weights_from_settings

    settings = _service_settings("http://127.0.0.1:6334", VECTOR_LEXICAL_WEIGHT="2")
    assert weights_from_settings(settings) == (DEFAULT_FUSION_WEIGHTS[0], 2.0)


async def test_lexical_cue_is_off_unless_asked(index: QdrantServiceVectorIndex) -> None:
    weather, biscuit = (
        point([1, 0, 0], text="weather"),
        point([0.6, 0.8, 0], text="Biscuit the greyhound"),
    )
    await index.upsert([weather, biscuit])
    result = await index.search(VectorQuery(vector=[1.0, 0.0, 0.0], limit=2, text="Biscuit"))
    assert ids_of(result) == [weather.id, biscuit.id]


async def test_payload_and_sparse_vectors_are_those_of_the_embedded_shard(
    index: QdrantServiceVectorIndex,
) -> None:
    import qdrant_edge as qe

    stored = point([1, 0, 0], ObjectType.DERIVED, text="prefers green tea in the evening")
    await index.upsert([stored])
    client = index._client
    assert client is not None
    scope = index._scope
    records = await client.retrieve(
        index.qdrant_collection, [scope.point_id(str(stored.id))], with_vectors=True
    )
    expected_payload = {"object_type": "derived", "memory_id": str(stored.id)}
    if index.layout == "shared":  # the tenant key, and a point id of the tenant's own
        expected_payload["charmem_collection"] = "memories"
        assert records[0].id == str(uuid.uuid5(uuid.UUID(str(stored.id)), "memories"))
    else:
        assert records[0].id == str(stored.id)
    assert records[0].payload == expected_payload
    expected = qe.Bm25().embed_document(stored.text)
    sparse = records[0].vector["lexical"]  # type: ignore[index, call-overload]
    assert (list(sparse.indices), list(sparse.values)) == (
        list(expected.indices),
        list(expected.values),
    )
    info = await client.get_collection(index.qdrant_collection)
    assert info.config.params.sparse_vectors["lexical"].modifier == models.Modifier.IDF  # type: ignore[index]


async def test_closed_index_refuses_work(index: QdrantServiceVectorIndex) -> None:
    await index.close()
    await index.close()  # idempotent
    assert index.closed
    with pytest.raises(BackendError, match="closed"):
        await index.count()
    with pytest.raises(BackendError, match="closed"):
        await index.upsert([point([1, 0, 0])])


# ---------------------------------------------------------------- fingerprint and collection


async def test_fingerprint_is_stored_in_the_collection_metadata() -> None:
    client = AsyncQdrantClient(location=":memory:")
    index = await open_local("fingerprint", client=client, layout="per_collection")
    await index.upsert([point([1, 0, 0])])
    info = await client.get_collection("charmem-fingerprint")
    assert info.config.metadata == {
        "charmem": {
            "collection": "fingerprint",
            "dense_vector": "dense",
            "distance": "cosine",
            "format": "charmem-shard",
            "lexical_vector": "lexical",
            "model_id": MODEL,
            "schema_version": SCHEMA_VERSION,
            "vector_size": SIZE,
        }
    }
    await index.close()
    with pytest.raises(DimensionMismatchError, match="rebuild_vectors=True") as caught:
        await open_local("fingerprint", client=client, vector_size=4, layout="per_collection")
    assert (caught.value.expected, caught.value.actual) == (SIZE, 4)
    with pytest.raises(EmbedderMismatchError, match="rebuild_vectors=True"):
        await open_local(
            "fingerprint", client=client, model_id="another-model", layout="per_collection"
        )
    # same fingerprint: points kept
    again = await open_local("fingerprint", client=client, layout="per_collection")
    assert await again.count() == 1
    await again.close()
    await client.close()


async def test_an_unmarked_collection_is_adopted_when_empty_and_refused_with_points() -> None:
    client = AsyncQdrantClient(location=":memory:")
    for name in ("charmem-empty", "charmem-full"):
        await client.create_collection(
            name,
            vectors_config={
                "dense": models.VectorParams(size=SIZE, distance=models.Distance.COSINE)
            },
            sparse_vectors_config={
                "lexical": models.SparseVectorParams(modifier=models.Modifier.IDF)
            },
        )
    await client.upsert(
        "charmem-full", [models.PointStruct(id=str(uuid.uuid4()), vector={"dense": [1, 0, 0]})]
    )
    adopted = await open_local("empty", client=client, layout="per_collection")
    await adopted.close()
    assert (await client.get_collection("charmem-empty")).config.metadata["charmem"][
        "model_id"
    ] == MODEL  # type: ignore[index]
    with pytest.raises(ConfigurationError, match="no charmem fingerprint") as caught:
        await open_local("full", client=client, layout="per_collection")
    assert caught.value.key == "QDRANT_CONNECTION_STRING"
    await client.create_collection(
        "charmem-foreign",
        vectors_config=models.VectorParams(size=SIZE, distance=models.Distance.COSINE),
    )
    with pytest.raises(ConfigurationError, match="no dense vector"):
        await open_local("foreign", client=client, layout="per_collection")
    await client.close()


async def test_drop_removes_the_collection_whatever_its_fingerprint(layout: str) -> None:
    client = AsyncQdrantClient(location=":memory:")
    index = await open_local("dropped", client=client, layout=layout)
    await index.upsert([point([1, 0, 0])])
    await index.close()
    assert await QdrantServiceVectorIndex.drop_async(client, "dropped", layout=layout) is True
    assert await QdrantServiceVectorIndex.drop_async(client, "dropped", layout=layout) is False
    fresh = await open_local(
        "dropped", client=client, vector_size=5, model_id="bigger", layout=layout
    )
    assert await fresh.count() == 0
    await fresh.close()
    await client.close()


def test_collection_names_are_derived_and_checked() -> None:
    assert service_collection_name("my-assistant-memory") == "charmem-my-assistant-memory"
    with pytest.raises(ConfigurationError):
        service_collection_name("../escape")
    # one shared collection per fingerprint; a charmem collection name never holds a "."
    name = shared_collection_name("all-MiniLM-L6-v2", 384)
    assert name.startswith("charmem-shared.384.")
    assert len(name.rsplit(".", 1)[1]) == 16
    assert name != shared_collection_name("all-MiniLM-L6-v2", 768)
    assert name != shared_collection_name("all-MiniLM-L12-v2", 384)
    assert shared_collection_name("org/model:v1 ä", 8).count(".") == 2


# ---------------------------------------------------------------- settings and failures


def _service_settings(connection: str, **extra: str) -> Settings:
    return Settings.from_mapping(
        {"VECTOR_STORE_MODE": "service", "QDRANT_CONNECTION_STRING": connection, **extra}
    )


def test_entry_point_names_the_service_index() -> None:
    found = {ep.name: ep for ep in entry_points(group="charmem.vector_indexes")}
    assert found["service"].load().adapter is QdrantServiceVectorIndex


@pytest.mark.parametrize(
    ("mapping", "key"),
    [
        ({"QDRANT_CONNECTION_STRING": "127.0.0.1:6334"}, "QDRANT_CONNECTION_STRING"),
        (
            {"QDRANT_CONNECTION_STRING": "http://127.0.0.1:6334", "QDRANT_TIMEOUT": "-1"},
            "QDRANT_TIMEOUT",
        ),
        (
            {"QDRANT_CONNECTION_STRING": "http://127.0.0.1:6334", "VECTOR_LEXICAL_CUE": "maybe"},
            "VECTOR_LEXICAL_CUE",
        ),
        (
            {"QDRANT_CONNECTION_STRING": "http://127.0.0.1:6334", "VECTOR_LEXICAL_WEIGHT": "0"},
            "VECTOR_LEXICAL_WEIGHT",
        ),
    ],
)
async def test_from_settings_rejects_malformed_keys(mapping: dict[str, str], key: str) -> None:
    settings = Settings.from_mapping({"VECTOR_STORE_MODE": "service", **mapping})
    with pytest.raises(ConfigurationError) as caught:
        await QdrantServiceVectorIndex.from_settings_async(
            settings, "c", model_id=MODEL, vector_size=SIZE
        )
    assert caught.value.key == key


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")
async def test_unreachable_server_is_a_backend_error_naming_it_within_the_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = _closed_port()
    settings = _service_settings(
        f"http://127.0.0.1:{port}", QDRANT_API_KEY=SECRET, QDRANT_TIMEOUT="3"
    )
    caplog.set_level(logging.DEBUG)
    with structlog.testing.capture_logs() as logs:
        start = time.monotonic()
        with pytest.raises(BackendError) as caught:
            await QdrantServiceVectorIndex.from_settings_async(
                settings, "c", model_id=MODEL, vector_size=SIZE
            )
        elapsed = time.monotonic() - start
    assert elapsed < 3 + 1
    assert f"http://127.0.0.1:{port}" in str(caught.value)
    assert caught.value.__cause__ is not None
    for text in (str(caught.value), repr(caught.value), caplog.text, repr(logs)):
        assert SECRET not in text

    start = time.monotonic()
    with pytest.raises(BackendError, match=f"127.0.0.1:{port}"):
        QdrantServiceVectorIndex.from_settings(settings, "c", model_id=MODEL, vector_size=SIZE)
    with pytest.raises(BackendError, match=f"127.0.0.1:{port}"):
        QdrantServiceVectorIndex.drop_from_settings(settings, "c")
    assert time.monotonic() - start < 2 * (3 + 1)


@pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")
async def test_api_key_never_shows_in_the_repr() -> None:
    client = AsyncQdrantClient(location=":memory:")
    index = await QdrantServiceVectorIndex.open(
        client, "c", model_id=MODEL, vector_size=SIZE, api_key=SECRET, endpoint="http://q:6334"
    )
    assert SECRET not in repr(index)
    assert "http://q:6334" in repr(index)
    await index.close()
    await client.close()


async def test_driver_errors_are_backend_errors_with_the_key_scrubbed() -> None:
    class Failing:
        async def count(self, *args: object, **kwargs: object) -> object:
            raise RuntimeError(f"server said: bad key {SECRET}")

    index = QdrantServiceVectorIndex(
        Failing(),  # type: ignore[arg-type]
        "c",
        model_id=MODEL,
        vector_size=SIZE,
        api_key=SECRET,
        endpoint="http://q:6334",
    )
    with pytest.raises(BackendError, match=r"http://q:6334.*count points") as caught:
        await index.count()
    assert SECRET not in str(caught.value)
    assert isinstance(caught.value.__cause__, RuntimeError)


async def test_a_slow_server_fails_after_the_timeout() -> None:
    import asyncio

    class Slow:
        async def count(self, *args: object, **kwargs: object) -> object:
            await asyncio.sleep(30)
            raise AssertionError("not reached")

    index = QdrantServiceVectorIndex(
        Slow(),  # type: ignore[arg-type]
        "c",
        model_id=MODEL,
        vector_size=SIZE,
        timeout=0.3,
        endpoint="http://q:6334",
    )
    start = time.monotonic()
    with pytest.raises(BackendError, match=r"did not answer within 0\.3 s"):
        await index.count()
    assert time.monotonic() - start < 2


# ---------------------------------------------------------------- parity with the embedded shard

_WORDS = [
    *("tea", "coffee", "harbour", "walk", "sister", "greyhound", "biscuit", "violin", "lesson"),
    *("train", "late", "morning", "rain", "garden", "bread", "bakery", "project", "deadline"),
    *("birthday", "cake", "museum", "painting", "river", "bicycle"),
]


def _dataset(seed: int) -> list[VectorPoint]:
    """Points with random vectors and texts of distinct lengths, plus two tied groups.

    The tied groups hold identical points (one with no text, one with the same text), so both the
    dense and the BM25 stage hold ties; the fusion gives tied points one rank per stage, so fused
    candidates compare exactly too (see the README's fusion rule).
    """
    rng = random.Random(seed)
    kinds = (ObjectType.EPISODE, ObjectType.OBSERVATION, ObjectType.DERIVED, ObjectType.THREAD)
    points = []
    for n in range(120):
        vector = [rng.uniform(-1, 1) for _ in range(SIZE)]
        words = [rng.choice(_WORDS) for _ in range(3 + n)]  # a distinct length per text
        points.append(point(vector, kinds[n % 4], text=" ".join(words)))
    points += [point([0.2, 0.4, 0.6], ObjectType.DERIVED) for _ in range(25)]  # tied, no text
    tied_text = "tea garden walk rain"  # the BM25 stage of queries with these words ties
    points += [point([-0.5, 0.1, 0.3], ObjectType.EPISODE, text=tied_text) for _ in range(25)]
    return points


def _queries(seed: int) -> list[VectorQuery]:
    rng = random.Random(seed)
    queries = []
    for limit in (1, 7, 30, 200):
        for types in ((), (ObjectType.DERIVED,), (ObjectType.EPISODE, ObjectType.OBSERVATION)):
            vector = [rng.uniform(-1, 1) for _ in range(SIZE)]
            queries.append(VectorQuery(vector=vector, limit=limit, object_types=types))
            queries.append(
                VectorQuery(vector=[0.1, 0.2, 0.3], limit=limit, object_types=types)
            )  # ties
            queries.append(
                VectorQuery(
                    vector=vector, limit=limit, object_types=types, text=f"{rng.choice(_WORDS)}"
                )
            )
    return queries


async def _compare(service: QdrantServiceVectorIndex, root: Path, *, lexical: bool) -> int:
    embedded = EdgeVectorIndex(root, "parity", model_id=MODEL, vector_size=SIZE, lexical=lexical)
    try:
        points = _dataset(7)
        for chunk in (points[:50], points[50:]):
            await service.upsert(chunk)
            await embedded.upsert(list(reversed(chunk)))
        compared = 0
        for query in _queries(11):
            if query.text is not None and not lexical:
                continue
            expected = await embedded.search(query)
            got = await service.search(query)
            assert ids_of(got) == ids_of(expected), query
            assert [h.object_type for h in got.hits] == [h.object_type for h in expected.hits]
            assert [h.score for h in got.hits] == pytest.approx(
                [h.score for h in expected.hits], abs=1e-5
            )
            assert got.completeness == expected.completeness
            compared += 1
        assert await service.point_ids() == await embedded.point_ids()
        return compared
    finally:
        await embedded.close()


@pytest.mark.parametrize("lexical", [False, True], ids=["dense", "lexical"])
async def test_local_mode_and_embedded_give_identical_candidates(
    tmp_path: Path, lexical: bool, layout: str
) -> None:
    service = await open_local("parity", lexical=lexical, layout=layout)
    try:
        assert await _compare(service, tmp_path, lexical=lexical) > 20
    finally:
        await service.close()


@pytest.fixture
def server_settings(layout: str) -> Settings:
    """The real server's settings, in each layout (``layout`` is parametrized)."""
    if not SERVER:
        pytest.fail(
            "REQUIRE_QDRANT_TESTS=1 needs QDRANT_CONNECTION_STRING (e.g. http://127.0.0.1:6334)"
        )
    return _service_settings(
        SERVER,
        VECTOR_SERVICE_LAYOUT=layout,
        **(
            {"QDRANT_API_KEY": os.environ["QDRANT_API_KEY"]}
            if os.environ.get("QDRANT_API_KEY")
            else {}
        ),
    )


async def _server_index(
    settings: Settings, *, lexical: bool, collection: str
) -> QdrantServiceVectorIndex:
    await QdrantServiceVectorIndex.drop_from_settings_async(settings, collection)
    index = await QdrantServiceVectorIndex.from_settings_async(
        settings, collection, model_id=MODEL, vector_size=SIZE
    )
    index._lexical = lexical
    return index


@needs_server
@pytest.mark.parametrize("lexical", [False, True], ids=["dense", "lexical"])
async def test_service_and_embedded_give_identical_candidates(
    server_settings: Settings, tmp_path: Path, lexical: bool
) -> None:
    collection = f"parity-{uuid.uuid4().hex[:12]}"
    index = await _server_index(server_settings, lexical=lexical, collection=collection)
    try:
        assert await _compare(index, tmp_path, lexical=lexical) > 20
    finally:
        await index.close()
        await QdrantServiceVectorIndex.drop_from_settings_async(server_settings, collection)


@needs_server
async def test_service_and_embedded_order_ties_by_id(
    server_settings: Settings, tmp_path: Path
) -> None:
    collection = f"ties-{uuid.uuid4().hex[:12]}"
    index = await _server_index(server_settings, lexical=False, collection=collection)
    embedded = EdgeVectorIndex(tmp_path, "ties", model_id=MODEL, vector_size=SIZE)
    try:
        rng = random.Random(3)
        ids = [MemoryId(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(80)]
        await index.upsert([point([0.3, 0.3, 0.3], id=i) for i in ids])
        await embedded.upsert([point([0.3, 0.3, 0.3], id=i) for i in reversed(ids)])
        for limit in (1, 10, 79, 80, 100):
            query = VectorQuery(vector=[1.0, 1.0, 1.0], limit=limit)
            expected = sorted(ids, key=str)[:limit]
            assert ids_of(await index.search(query)) == expected
            assert ids_of(await embedded.search(query)) == expected
    finally:
        await embedded.close()
        await index.close()
        await QdrantServiceVectorIndex.drop_from_settings_async(server_settings, collection)


@needs_server
async def test_service_and_embedded_refuse_another_fingerprint(server_settings: Settings) -> None:
    collection = f"fingerprint-{uuid.uuid4().hex[:12]}"
    index = await _server_index(server_settings, lexical=False, collection=collection)
    await index.close()
    try:
        with pytest.raises(DimensionMismatchError):
            await QdrantServiceVectorIndex.from_settings_async(
                server_settings, collection, model_id=MODEL, vector_size=SIZE + 1
            )
        with pytest.raises(EmbedderMismatchError):
            await QdrantServiceVectorIndex.from_settings_async(
                server_settings, collection, model_id="another-model", vector_size=SIZE
            )
        blocking = QdrantServiceVectorIndex.from_settings(
            server_settings, collection, model_id=MODEL, vector_size=SIZE
        )
        assert await blocking.count() == 0
        await blocking.close()
    finally:
        await QdrantServiceVectorIndex.drop_from_settings_async(server_settings, collection)
