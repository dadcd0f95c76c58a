"""The shared service layout: tenants isolated in one Qdrant collection, detection, migration.

Two charmem collections (tenants A and B) share the Qdrant collection of their fingerprint on
qdrant-client's local mode. Whatever A does (search, count, scroll, upsert, delete, drop), B's
points are read back **directly through the client** (not through B's index) and compared with
a snapshot: ids, vectors and payload unchanged. B holds a point with the same memory id as one of
A's (an imported copy), the case where a layout keyed by memory id alone would overwrite it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import attrs
import pytest
from qdrant_client import AsyncQdrantClient, models

from charmem import MemoryId, ObjectType
from charmem.errors import (
    ConfigurationError,
    DimensionMismatchError,
    EmbedderMismatchError,
    StoreLayoutError,
)
from charmem.ports import VectorPoint, VectorQuery, VectorSearchResult, VectorSurface
from charmem_qdrant import SCHEMA_VERSION, QdrantServiceVectorIndex, shared_collection_name
from charmem_qdrant._service_collection import collection_config, payload_indexes
from charmem_qdrant._service_layout import TENANT_KEY
from charmem_qdrant._service_points import ScopedPoints

MODEL = "test-model"
SIZE = 3
SHARED = shared_collection_name(MODEL, SIZE)


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


async def open_index(
    client: AsyncQdrantClient, collection: str, *, layout: str = "shared", **kwargs: Any
) -> QdrantServiceVectorIndex:
    return await QdrantServiceVectorIndex.open(
        client,
        collection,
        model_id=kwargs.pop("model_id", MODEL),
        vector_size=kwargs.pop("vector_size", SIZE),
        layout=layout,
        **kwargs,
    )


async def tenant_points(client: AsyncQdrantClient, tenant: str) -> dict[str, Any]:
    """Every point of ``tenant`` read straight from the shared collection.

    Returns:
        point id -> (payload, dense vector rounded to 5 places: local mode re-normalises stored
        vectors when it compacts, moving the last float32 digits, sparse vector or None).
    """
    records, _ = await client.scroll(
        SHARED,
        scroll_filter=models.Filter(
            must=[models.FieldCondition(key=TENANT_KEY, match=models.MatchValue(value=tenant))]
        ),
        limit=10_000,
        with_payload=True,
        with_vectors=True,
    )
    found: dict[str, Any] = {}
    for record in records:
        vectors: dict[str, Any] = record.vector  # type: ignore[assignment]
        dense = tuple(round(x, 5) for x in vectors["dense"])
        found[str(record.id)] = (record.payload, dense, vectors.get("lexical"))
    return found


@pytest.fixture
async def client() -> AsyncIterator[AsyncQdrantClient]:
    opened = AsyncQdrantClient(location=":memory:")
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def tenants(
    client: AsyncQdrantClient,
) -> AsyncIterator[tuple[QdrantServiceVectorIndex, QdrantServiceVectorIndex, list[VectorPoint]]]:
    """Tenants A and B in one shared collection; B holds 5 points, one sharing an id with A."""
    a = await open_index(client, "tenant-a", lexical=True)
    b = await open_index(client, "tenant-b", lexical=True)
    try:
        b_points = [point([1, 0, 0], text="green tea"), *(point([0, 1, i]) for i in range(3))]
        twin = point([0.9, 0.1, 0], ObjectType.DERIVED, text="green tea twin")
        await b.upsert([*b_points, twin])
        yield a, b, [*b_points, twin]
    finally:
        await a.close()
        await b.close()


async def test_both_tenants_live_in_one_qdrant_collection_of_their_fingerprint(
    client: AsyncQdrantClient, tenants: tuple[QdrantServiceVectorIndex, ...]
) -> None:
    a, b, *_ = tenants
    assert a.qdrant_collection == b.qdrant_collection == SHARED
    assert a.layout == "shared"
    names = {c.name for c in (await client.get_collections()).collections}
    assert names == {SHARED}  # no per-collection Qdrant collection was made
    assert len(await tenant_points(client, "tenant-b")) == 5


async def test_nothing_tenant_a_does_touches_tenant_b(
    client: AsyncQdrantClient,
    tenants: tuple[QdrantServiceVectorIndex, QdrantServiceVectorIndex, list[VectorPoint]],
) -> None:
    a, b, b_points = tenants
    before = await tenant_points(client, "tenant-b")
    twin = b_points[-1]
    # A stores a point with B's twin id (an imported copy), and points of its own
    mine = [point([1, 0, 0], text="green tea", id=twin.id), point([0, 0, 1], text="coffee")]
    await a.upsert(mine)
    # search: only A's points, whatever the filter, the cue or ``within``
    found = await a.search(VectorQuery(vector=[1.0, 0.0, 0.0], limit=20, text="green tea"))
    assert set(ids_of(found)) == {p.id for p in mine}
    assert found.completeness.scanned == 2
    within = await a.search(
        VectorQuery(vector=[1.0, 0.0, 0.0], limit=20, within=frozenset(p.id for p in b_points))
    )
    assert ids_of(within) == [twin.id]  # A's own twin, not B's points
    assert within.hits[0].object_type == ObjectType.EPISODE  # A's payload, not B's DERIVED
    # count and scroll
    assert await a.count() == 2
    assert await a.point_ids() == {p.id for p in mine}
    # delete: A's twin goes, B's stays; deleting B's ids from A removes nothing of B's
    await a.delete([twin.id, *(p.id for p in b_points)])
    assert await a.point_ids() == {mine[1].id}
    assert await tenant_points(client, "tenant-b") == before
    # B sees its own points only, all of them
    assert await b.point_ids() == {p.id for p in b_points}
    assert await b.count() == 5


async def test_an_upsert_never_replaces_a_point_of_another_tenant(
    client: AsyncQdrantClient,
    tenants: tuple[QdrantServiceVectorIndex, QdrantServiceVectorIndex, list[VectorPoint]],
) -> None:
    """Even at an id B holds (a uuid5 collision, forced here), A's upsert leaves B's point."""
    a, _, _ = tenants
    mine = point([0, 0, 1], text="coffee")
    squatted = a._scope.point_id(str(mine.id))
    await client.upsert(
        SHARED,
        [
            models.PointStruct(
                id=squatted,
                vector={"dense": [1.0, 0.0, 0.0]},
                payload={
                    "object_type": "episode",
                    "memory_id": str(mine.id),
                    TENANT_KEY: "tenant-b",
                },
            )
        ],
    )
    before = await tenant_points(client, "tenant-b")
    await a.upsert([mine])
    assert await tenant_points(client, "tenant-b") == before
    assert await a.count() == 0


async def test_dropping_a_tenant_removes_its_points_and_marker_only(
    client: AsyncQdrantClient,
    tenants: tuple[QdrantServiceVectorIndex, QdrantServiceVectorIndex, list[VectorPoint]],
) -> None:
    a, b, _ = tenants
    await a.upsert([point([1, 0, 0]), point([0, 1, 0])])
    before = await tenant_points(client, "tenant-b")
    total = (await client.count(SHARED)).count
    assert await QdrantServiceVectorIndex.drop_async(client, "tenant-a") is True
    assert await tenant_points(client, "tenant-a") == {}
    assert await tenant_points(client, "tenant-b") == before
    assert (await client.count(SHARED)).count == total - 3  # 2 points and A's marker
    assert await QdrantServiceVectorIndex.drop_async(client, "tenant-a") is False
    # A comes back with another embedder: its own tenant elsewhere; B is untouched
    other = await open_index(client, "tenant-a", model_id="bigger", vector_size=5)
    assert other.qdrant_collection == shared_collection_name("bigger", 5)
    await other.close()
    assert await b.count() == 5


async def test_a_tenant_made_by_another_embedder_is_refused(client: AsyncQdrantClient) -> None:
    first = await open_index(client, "fingerprint")
    await first.upsert([point([1, 0, 0])])
    await first.close()
    with pytest.raises(DimensionMismatchError, match="rebuild_vectors=True") as caught:
        await open_index(client, "fingerprint", vector_size=4)
    assert (caught.value.expected, caught.value.actual) == (SIZE, 4)
    with pytest.raises(EmbedderMismatchError, match="rebuild_vectors=True"):
        await open_index(client, "fingerprint", model_id="another-model")
    names = {c.name for c in (await client.get_collections()).collections}
    assert names == {SHARED}, "a refused open created a shared collection"
    again = await open_index(client, "fingerprint")
    assert await again.count() == 1
    await again.close()


async def test_the_tenant_marker_records_the_fingerprint_and_is_in_no_tenant(
    client: AsyncQdrantClient,
) -> None:
    index = await open_index(client, "marked")
    scope = index._scope
    records = await client.retrieve(SHARED, [scope.marker_id], with_payload=True)
    assert records[0].payload == {
        "charmem": {
            "collection": "marked",
            "dense_vector": "dense",
            "distance": "cosine",
            "format": "charmem-shard",
            "lexical_vector": "lexical",
            "model_id": MODEL,
            "schema_version": SCHEMA_VERSION,
            "vector_size": SIZE,
        }
    }
    assert records[0].payload is not None
    assert TENANT_KEY not in records[0].payload
    assert await index.count() == 0
    assert await index.point_ids() == set()
    info = await client.get_collection(SHARED)
    assert info.config.metadata["charmem"]["collection"] == SHARED  # type: ignore[index]
    # a marker from a newer charmem-qdrant is refused, not overwritten
    newer = {**records[0].payload["charmem"], "schema_version": 99}
    await client.set_payload(SHARED, {"charmem": newer}, points=[scope.marker_id])
    await index.close()
    with pytest.raises(ConfigurationError, match="newer"):
        await open_index(client, "marked")


def test_the_shared_collection_has_a_tenant_index_and_per_tenant_hnsw() -> None:
    """Local mode ignores both, so the request the server gets is checked here."""
    from charmem_qdrant._marker import ShardMarker

    marker = ShardMarker(collection=SHARED, model_id=MODEL, vector_size=SIZE)
    shared = collection_config(marker, shared=True)
    assert shared["hnsw_config"] == models.HnswConfigDiff(m=0, payload_m=16)
    assert "optimizers_config" not in shared
    indexes = dict(payload_indexes(shared=True))
    assert indexes[TENANT_KEY] == models.KeywordIndexParams(
        type=models.KeywordIndexType.KEYWORD, is_tenant=True
    )
    assert indexes["object_type"] == models.PayloadSchemaType.KEYWORD
    alone = collection_config(marker, shared=False)
    assert alone["optimizers_config"] == models.OptimizersConfigDiff(indexing_threshold=0)
    assert "hnsw_config" not in alone
    assert dict(payload_indexes(shared=False)) == {
        "object_type": models.PayloadSchemaType.KEYWORD,
        "surface": models.PayloadSchemaType.KEYWORD,
    }


class _Recording:
    """A client that records the filter or selector of every data call, then answers empty."""

    def __init__(self) -> None:
        self.filters: list[tuple[str, Any]] = []

    async def count(self, name: str, *, count_filter: Any = None, exact: bool) -> Any:
        self.filters.append(("count", count_filter))
        return models.CountResult(count=1)

    async def scroll(self, name: str, *, scroll_filter: Any = None, **kwargs: Any) -> Any:
        self.filters.append(("scroll", scroll_filter))
        return [], None

    async def delete(self, name: str, selector: Any, *, wait: bool) -> None:
        self.filters.append(("delete", selector.filter))

    async def upsert(
        self, name: str, points: list[models.PointStruct], *, wait: bool, update_filter: Any
    ) -> None:
        self.filters.append(("upsert", update_filter))
        self.filters.append(("payload", [p.payload for p in points]))

    async def query_batch_points(self, name: str, *, requests: list[Any]) -> list[Any]:
        self.filters.extend(("query", r.filter) for r in requests)
        return [SimpleNamespace(points=[]) for _ in requests]


async def test_every_data_call_carries_the_tenant_filter() -> None:
    """Count, scroll, search stages, delete and upsert of a tenant, as sent to the server."""
    recording = _Recording()
    index = QdrantServiceVectorIndex(
        recording,  # type: ignore[arg-type]
        "tenant-a",
        model_id=MODEL,
        vector_size=SIZE,
        lexical=True,
    )
    await index.count()
    await index.point_ids()
    await index.search(VectorQuery(vector=[1.0, 0.0, 0.0], limit=3, text="tea"))
    await index.search(
        VectorQuery(vector=[1.0, 0.0, 0.0], limit=3, object_types=(ObjectType.DERIVED,))
    )
    await index.delete([MemoryId.new()])
    await index.upsert([point([1, 0, 0])])
    tenant = models.FieldCondition(key=TENANT_KEY, match=models.MatchValue(value="tenant-a"))
    kinds = {kind for kind, _ in recording.filters}
    assert kinds == {"count", "scroll", "query", "delete", "upsert", "payload"}
    for kind, sent in recording.filters:
        if kind == "payload":
            assert all(payload[TENANT_KEY] == "tenant-a" for payload in sent)
        else:
            assert sent is not None, kind
            assert sent.must[0] == tenant, kind
    assert isinstance(index._points("check"), ScopedPoints)


# ---------------------------------------------------------------- detection and migration


async def _per_collection_deployment(
    client: AsyncQdrantClient, *, scenes: bool = False
) -> tuple[list[VectorPoint], list[VectorQuery], list[list[tuple[MemoryId, float]]]]:
    """Collection "legacy" in the per-collection layout: its points, queries and answers.

    ``scenes``: the first episode also has its two scene surfaces' points.
    """
    old = await open_index(client, "legacy", layout="per_collection", lexical=True)
    points = [
        point([1, 0, 0], text="green tea in the evening"),
        point([0.8, 0.6, 0], ObjectType.OBSERVATION, text="the train was late"),
        point([0.6, 0.8, 0], ObjectType.DERIVED, text="my sister adopted Biscuit"),
        *(point([0.1 * i, 1, 0.5]) for i in range(1500)),  # more than one scroll page
    ]
    if scenes:  # the first episode's scene surfaces: points of their own, kept apart by the move
        points += [
            attrs.evolve(point([0, 0, 1], text="a rainy harbour"), id=points[0].id, surface=surface)
            for surface in (VectorSurface.SETTING_WORDS, VectorSurface.PERSON_WORDS)
        ]
    await old.upsert(points)
    queries = [
        VectorQuery(vector=[1.0, 0.0, 0.0], limit=10),
        VectorQuery(vector=[1.0, 0.0, 0.0], limit=5, text="Biscuit"),
        VectorQuery(vector=[0.0, 1.0, 0.0], limit=30, object_types=(ObjectType.EPISODE,)),
        VectorQuery(
            vector=[0.0, 0.0, 1.0], limit=5, text="harbour", surface=VectorSurface.PERSON_WORDS
        ),
    ]
    answers = [[(h.id, h.score) for h in (await old.search(q)).hits] for q in queries]
    await old.close()
    return points, queries, answers


async def test_a_per_collection_deployment_is_refused_then_migrated(
    client: AsyncQdrantClient,
) -> None:
    points, queries, answers = await _per_collection_deployment(client, scenes=True)
    neighbour = await open_index(client, "neighbour")  # a tenant already in the shared collection
    await neighbour.upsert([point([1, 0, 0])])
    before = await tenant_points(client, "neighbour")

    with pytest.raises(StoreLayoutError) as caught:
        await open_index(client, "legacy", lexical=True)
    error = caught.value
    assert "charmem migrate --collection legacy" in str(error)
    assert "VECTOR_SERVICE_LAYOUT=per_collection" in str(error)
    assert (error.found, error.expected) == (1, 2)
    assert "charmem-legacy" in error.store
    assert await tenant_points(client, "legacy") == {}  # refused before anything was written

    report = await QdrantServiceVectorIndex.migrate_async(client, "legacy")
    assert report.points == len(points)
    assert report.layout == "shared"
    assert report.source is not None
    assert report.source.startswith("charmem-legacy")
    assert report.target is not None
    assert report.target.startswith(SHARED)
    assert not await client.collection_exists("charmem-legacy")
    assert await tenant_points(client, "neighbour") == before

    migrated = await open_index(client, "legacy", lexical=True)
    try:
        for surface in VectorSurface:
            assert await migrated.point_ids(surface) == {
                p.id for p in points if p.surface is surface
            }
        for query, expected in zip(queries, answers, strict=True):
            got = [(h.id, h.score) for h in (await migrated.search(query)).hits]
            assert [i for i, _ in got] == [i for i, _ in expected]
            assert [s for _, s in got] == pytest.approx([s for _, s in expected], abs=1e-6)
    finally:
        await migrated.close()
    again = await QdrantServiceVectorIndex.migrate_async(client, "legacy")  # idempotent
    assert (again.points, again.source) == (0, None)


async def test_an_interrupted_migration_is_finished_by_running_it_again(
    client: AsyncQdrantClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    points, _, _ = await _per_collection_deployment(client)
    copy = ScopedPoints.copy
    pages = 0

    async def copy_one_page_then_fail(self: ScopedPoints, page: Any) -> int:
        nonlocal pages
        pages += 1
        if pages > 1:
            raise ConnectionError("the server went away")
        return await copy(self, page)

    monkeypatch.setattr(ScopedPoints, "copy", copy_one_page_then_fail)
    with pytest.raises(Exception, match="went away"):
        await QdrantServiceVectorIndex.migrate_async(client, "legacy")
    assert await client.collection_exists("charmem-legacy")  # nothing deleted
    with pytest.raises(StoreLayoutError):  # still refused: half-moved is never read
        await open_index(client, "legacy")
    monkeypatch.setattr(ScopedPoints, "copy", copy)
    report = await QdrantServiceVectorIndex.migrate_async(client, "legacy")
    assert report.points == len(points)
    migrated = await open_index(client, "legacy")
    assert await migrated.count() == len(points)
    await migrated.close()


async def test_a_rerun_after_a_purge_in_the_old_layout_does_not_bring_the_point_back(
    client: AsyncQdrantClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    points, _, _ = await _per_collection_deployment(client)
    copy = ScopedPoints.copy

    async def copy_then_fail(self: ScopedPoints, page: Any) -> int:
        await copy(self, page)
        raise ConnectionError("the server went away")

    monkeypatch.setattr(ScopedPoints, "copy", copy_then_fail)
    with pytest.raises(Exception, match="went away"):
        await QdrantServiceVectorIndex.migrate_async(client, "legacy")
    monkeypatch.setattr(ScopedPoints, "copy", copy)
    copied = {
        uuid.UUID(p["memory_id"]) for p, _, _ in (await tenant_points(client, "legacy")).values()
    }
    purged = next(p.id for p in points if uuid.UUID(str(p.id)) in copied)  # copied, then purged
    old = await open_index(client, "legacy", layout="per_collection")  # still the old layout
    await old.delete([purged])
    await old.close()

    report = await QdrantServiceVectorIndex.migrate_async(client, "legacy")
    migrated = await open_index(client, "legacy")
    try:
        assert purged not in await migrated.point_ids()
        assert report.points == await migrated.count() == len(points) - 1
    finally:
        await migrated.close()


async def test_a_per_collection_opening_of_a_shared_tenant_is_refused(
    client: AsyncQdrantClient,
) -> None:
    tenant = await open_index(client, "moved")
    await tenant.upsert([point([1, 0, 0]), point([0, 1, 0])])
    await tenant.close()
    with pytest.raises(StoreLayoutError) as caught:
        await open_index(client, "moved", layout="per_collection")
    assert "VECTOR_SERVICE_LAYOUT=shared" in str(caught.value)
    assert "2 vectors" in str(caught.value)
    assert (caught.value.found, caught.value.expected) == (2, 1)
    assert not await client.collection_exists("charmem-moved")  # nothing was created
    marker_only = await open_index(client, "marked")  # a new tenant: its marker alone
    await marker_only.close()
    with pytest.raises(StoreLayoutError):
        await open_index(client, "marked", layout="per_collection")


async def test_an_empty_per_collection_collection_is_not_refused(client: AsyncQdrantClient) -> None:
    empty = await open_index(client, "empty-old", layout="per_collection")
    await empty.close()
    shared = await open_index(client, "empty-old")
    assert await shared.count() == 0
    await shared.close()
    report = await QdrantServiceVectorIndex.migrate_async(client, "empty-old")
    assert report.points == 0
    assert report.target is not None  # its marker named a fingerprint: the tenant is there
    assert not await client.collection_exists("charmem-empty-old")


async def test_migrating_an_empty_leftover_keeps_the_tenants_points(
    client: AsyncQdrantClient,
) -> None:
    """An empty ``charmem-c`` beside a tenant written in the shared layout: only it goes."""
    leftover = await open_index(client, "in-use", layout="per_collection")
    await leftover.close()
    shared = await open_index(client, "in-use")
    await shared.upsert([point([1, 0, 0]), point([0, 1, 0])])
    await shared.close()
    report = await QdrantServiceVectorIndex.migrate_async(client, "in-use")
    assert report.points == 0
    assert not await client.collection_exists("charmem-in-use")
    assert len(await tenant_points(client, "in-use")) == 2


async def test_ids_in_the_shared_collection_are_the_tenants_own() -> None:
    """The same memory id in two tenants is two points (``uuid5(memory id, collection)``)."""
    from charmem_qdrant._service_layout import ServiceScope

    memory_id = str(MemoryId.new())
    a = ServiceScope.of("a", model_id=MODEL, vector_size=SIZE, layout="shared")
    b = ServiceScope.of("b", model_id=MODEL, vector_size=SIZE, layout="shared")
    assert a.point_id(memory_id) != b.point_id(memory_id)
    assert a.point_id(memory_id) == str(uuid.uuid5(uuid.UUID(memory_id), "a"))
    alone = ServiceScope.of("a", model_id=MODEL, vector_size=SIZE, layout="per_collection")
    assert alone.point_id(memory_id) == memory_id
    assert alone.filter() is None
