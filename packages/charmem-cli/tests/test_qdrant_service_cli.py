"""Qdrant service vectors in the shared layout through the CLI: tenants kept apart, migration.

The Qdrant "server" is qdrant-client's local mode: the service index's client factory is replaced
by one handing out a single in-process client (kept across commands), so every command runs the
real service adapter through the CLI, the facade and ``charmem.admin.migrate``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from qdrant_client import AsyncQdrantClient

from charmem_cli.app import main


class _KeptClient(AsyncQdrantClient):
    """A local-mode client that outlives the indexes closing it (one "server" per test)."""

    async def close(self, **kwargs: Any) -> None:
        """Kept open: the next command reaches the same points."""


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> AsyncQdrantClient:
    import charmem_qdrant._service as service

    client = _KeptClient(location=":memory:")
    monkeypatch.setattr(service, "client_from_settings", lambda settings, timeout: (client, "local-mode"))
    monkeypatch.setenv("VECTOR_STORE_MODE", "service")
    monkeypatch.setenv("QDRANT_CONNECTION_STRING", "http://127.0.0.1:6334")  # never dialled
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hashing")
    return client


def _recall(base: list[str], query: str, capsys: pytest.CaptureFixture[str]) -> list[tuple[str, str]]:
    assert main([*base, "recall", "--json", query]) == 0
    return [(item["id"], item["text"]) for item in json.loads(capsys.readouterr().out)["items"]]


async def _collections(client: AsyncQdrantClient) -> set[str]:
    return {c.name for c in (await client.get_collections()).collections}


def test_a_per_collection_deployment_is_refused_until_migrated(
    tmp_path: Path,
    server: AsyncQdrantClient,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import asyncio

    base = ["--store", str(tmp_path / "store"), "--collection", "companion"]
    monkeypatch.setenv("VECTOR_SERVICE_LAYOUT", "per_collection")
    for text in ("We adopted a dog called Biscuit.", "My sister plays the violin.", "Tea at five."):
        assert main([*base, "remember", text]) == 0
    capsys.readouterr()
    before = [_recall(base, q, capsys) for q in ("What is the dog called?", "music")]
    assert asyncio.run(_collections(server)) == {"charmem-companion"}

    monkeypatch.setenv("VECTOR_SERVICE_LAYOUT", "shared")
    assert main([*base, "recall", "dog"]) == 2
    err = capsys.readouterr().err
    assert "StoreLayoutError" in err
    assert "charmem migrate --collection companion" in err

    assert main([*base, "migrate"]) == 0
    out = capsys.readouterr().out
    moved = re.search(r"moved (\d+) vectors from charmem-companion on local-mode to (\S+)", out)
    assert moved is not None, out
    assert int(moved.group(1)) >= 3  # an episode and an observation per text, at least
    assert asyncio.run(_collections(server)) == {moved.group(2)}  # charmem-companion is gone
    after = [_recall(base, q, capsys) for q in ("What is the dog called?", "music")]
    assert after == before
    assert main([*base, "check"]) == 0
    capsys.readouterr()

    assert main([*base, "migrate", "--json"]) == 0  # nothing left to move
    report = json.loads(capsys.readouterr().out)
    assert report["vectors"] == {
        "collection": "companion",
        "source": None,
        "target": None,
        "layout": "shared",
        "points": 0,
        "seconds": 0.0,
    }


async def _tenant_points(client: AsyncQdrantClient, tenant: str) -> dict[str, Any]:
    """The tenant's points read straight from every shared collection: id -> payload, dense."""
    from qdrant_client import models

    found: dict[str, Any] = {}
    only = models.Filter(
        must=[models.FieldCondition(key="charmem_collection", match=models.MatchValue(value=tenant))]
    )
    for name in await _collections(client):
        records, _ = await client.scroll(
            name, scroll_filter=only, limit=10_000, with_payload=True, with_vectors=True
        )
        for r in records:
            dense = tuple(round(x, 5) for x in r.vector["dense"])  # type: ignore[index, call-overload]
            found[str(r.id)] = (name, r.payload, dense)
    return found


def test_rebuild_purge_and_check_of_one_tenant_leave_the_other_as_it_was(
    tmp_path: Path, server: AsyncQdrantClient, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    a = ["--store", str(tmp_path / "a"), "--collection", "tenant-a"]
    b = ["--store", str(tmp_path / "b"), "--collection", "tenant-b"]
    for base in (a, b):  # the same texts: the same vectors, in one shared collection
        for text in ("We adopted a dog called Biscuit.", "My sister plays the violin."):
            assert main([*base, "remember", text]) == 0
    capsys.readouterr()
    b_before = asyncio.run(_tenant_points(server, "tenant-b"))
    assert len(b_before) >= 2
    assert len(asyncio.run(_collections(server))) == 1

    a_items = _recall(a, "dog", capsys)
    assert {item_id for item_id, _ in a_items}.isdisjoint(
        item_id for item_id, _ in _recall(b, "dog", capsys)
    )  # each recalls its own memories
    assert main([*a, "rebuild-vectors", "--quiet"]) == 0
    assert main([*a, "rebuild-vectors", "--drop", "--quiet"]) == 0
    assert main([*a, "purge", a_items[0][0], "--yes"]) == 0
    assert main([*a, "check"]) == 0
    capsys.readouterr()
    assert a_items[0] not in _recall(a, "dog", capsys)
    assert asyncio.run(_tenant_points(server, "tenant-b")) == b_before
    assert main([*b, "check"]) == 0
