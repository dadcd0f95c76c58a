"""Collection names, the shard marker and the embedder fingerprint, on real shards."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from charmem import MemoryId, ObjectType
from charmem.errors import (
    BackendError,
    ConfigurationError,
    DimensionMismatchError,
    EmbedderMismatchError,
    StoreCorruptedError,
    StoreLockedError,
)
from charmem.ports import VectorPoint
from charmem_qdrant import MARKER_FILE_NAME, SCHEMA_VERSION, EdgeVectorIndex

# the embedder fingerprint of the conftest fixtures (tests run with --import-mode=importlib,
# so conftest is not importable)
MODEL = "test-model"
SIZE = 3


def open_index(root: Path, collection: str = "memories", **kwargs: object) -> EdgeVectorIndex:
    options: dict[str, object] = {"model_id": MODEL, "vector_size": SIZE, **kwargs}
    return EdgeVectorIndex(root, collection, **options)  # type: ignore[arg-type]


def make_shard(root: Path, collection: str = "memories", *, points: int = 0) -> Path:
    index = open_index(root, collection)
    try:
        if points:
            asyncio.run(
                index.upsert(
                    [
                        VectorPoint(
                            id=MemoryId.new(), object_type=ObjectType.EPISODE, vector=[1, i, 0]
                        )
                        for i in range(points)
                    ]
                )
            )
        return index.path
    finally:
        index._close_blocking()


@pytest.mark.parametrize("name", ["../x", "A", "x/y", "", "a" * 129, ".hidden", "-x", "x y", "é"])
def test_unsafe_collection_names_are_rejected_before_any_directory(root: Path, name: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        open_index(root, name)
    assert caught.value.key == "collection"
    assert not root.exists()
    assert list(root.parent.iterdir()) == []


def test_longest_allowed_name_is_accepted(root: Path) -> None:
    name = "a" + "b" * 127
    index = open_index(root, name)
    try:
        assert index.path.name == name
    finally:
        index._close_blocking()


def test_a_link_escaping_the_root_is_rejected(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root.mkdir()
    (root / "escape").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ConfigurationError, match="outside the vector store root"):
        open_index(root, "escape")
    assert list(outside.iterdir()) == []


def test_marker_is_written_at_creation(root: Path) -> None:
    path = make_shard(root)
    marker = json.loads((path / MARKER_FILE_NAME).read_text(encoding="utf-8"))
    assert marker == {
        "collection": "memories",
        "dense_vector": "dense",
        "distance": "cosine",
        "format": "charmem-shard",
        "lexical_vector": "lexical",
        "model_id": MODEL,
        "schema_version": SCHEMA_VERSION,
        "vector_size": SIZE,
    }
    assert [p.name for p in path.iterdir() if p.name.endswith(".tmp")] == []


def test_other_dimension_raises_dimension_mismatch(root: Path) -> None:
    make_shard(root)
    # the refused opener has no memory to call rebuild_vector_index() on: the hint names what works
    with pytest.raises(DimensionMismatchError, match=r"rebuild_vectors=True") as caught:
        open_index(root, vector_size=SIZE + 1)
    assert (caught.value.expected, caught.value.actual) == (SIZE, SIZE + 1)
    # the dimension wins over the model: both differ here
    with pytest.raises(DimensionMismatchError):
        open_index(root, model_id="other-model", vector_size=8)


def test_other_model_of_same_size_raises_embedder_mismatch(root: Path) -> None:
    make_shard(root)
    with pytest.raises(EmbedderMismatchError, match=r"rebuild_vectors=True") as caught:
        open_index(root, model_id="other-model")
    assert "old model" in str(caught.value)
    # the refused opener did not take the lock or change the marker
    again = open_index(root)
    again._close_blocking()


def test_marker_of_another_collection_is_refused(root: Path) -> None:
    source = make_shard(root, "original")
    shutil.copytree(source, root / "copy")
    with pytest.raises(ConfigurationError, match="belongs to collection 'original'"):
        open_index(root, "copy")


@pytest.mark.parametrize(
    "content", [b"{not json", bytes(range(128, 256))], ids=["not-json", "not-utf8"]
)
def test_unreadable_marker_is_a_damaged_store_with_the_way_back(root: Path, content: bytes) -> None:
    path = make_shard(root)
    (path / MARKER_FILE_NAME).write_bytes(content)
    with pytest.raises(StoreCorruptedError, match="unreadable") as info:
        open_index(root)
    assert "charmem rebuild-vectors --drop" in str(info.value)
    assert info.value.path == str(path / MARKER_FILE_NAME)


def test_newer_schema_version_is_refused(root: Path) -> None:
    path = make_shard(root)
    marker_path = path / MARKER_FILE_NAME
    marker = json.loads(marker_path.read_text(encoding="utf-8"))
    marker["schema_version"] = SCHEMA_VERSION + 1
    marker_path.write_text(json.dumps(marker), encoding="utf-8")
    with pytest.raises(ConfigurationError, match="upgrade charmem-qdrant"):
        open_index(root)


def test_empty_shard_without_marker_is_adopted(root: Path) -> None:
    """A crash between shard creation and the marker write leaves an empty, unmarked shard."""
    path = make_shard(root)
    (path / MARKER_FILE_NAME).unlink()
    index = open_index(root)
    index._close_blocking()
    assert (path / MARKER_FILE_NAME).is_file()


def test_shard_with_points_but_no_marker_is_refused(root: Path) -> None:
    path = make_shard(root, points=2)
    (path / MARKER_FILE_NAME).unlink()
    with pytest.raises(ConfigurationError, match="2 points but no"):
        open_index(root)
    assert not (path / MARKER_FILE_NAME).exists()


def test_driver_errors_become_backend_errors_with_the_cause(root: Path) -> None:
    """A marker edited to another size than the shard's: Qdrant Edge refuses the config."""
    path = make_shard(root)
    marker_path = path / MARKER_FILE_NAME
    marker = json.loads(marker_path.read_text(encoding="utf-8"))
    marker["vector_size"] = SIZE + 2
    marker_path.write_text(json.dumps(marker), encoding="utf-8")
    with pytest.raises(
        BackendError, match=r"cannot open the shard.*rebuild-vectors --drop"
    ) as caught:
        open_index(root, vector_size=SIZE + 2)
    assert caught.value.__cause__ is not None
    assert "incompatible" in str(caught.value.__cause__)


@pytest.mark.parametrize(("model_id", "vector_size"), [("", 3), ("  ", 3), ("m", 0), ("m", True)])
def test_bad_fingerprint_is_a_configuration_error(
    root: Path, model_id: str, vector_size: int
) -> None:
    with pytest.raises(ConfigurationError):
        EdgeVectorIndex(root, "memories", model_id=model_id, vector_size=vector_size)
    assert not root.exists()


def test_drop_lets_a_collection_be_rebuilt_with_another_embedder(root: Path) -> None:
    path = make_shard(root, points=3)
    assert EdgeVectorIndex.drop(root, "memories") is True
    assert not path.exists()
    # no tombstone left behind (the per-collection lock file stays, like any lock file)
    assert [p.name for p in root.iterdir()] == [".memories.lock"]
    assert EdgeVectorIndex.drop(root, "memories") is False

    rebuilt = open_index(root, model_id="bigger-model", vector_size=8)
    try:
        assert asyncio.run(rebuilt.count()) == 0
    finally:
        rebuilt._close_blocking()
    marker = json.loads((path / MARKER_FILE_NAME).read_text(encoding="utf-8"))
    assert (marker["model_id"], marker["vector_size"]) == ("bigger-model", 8)


def test_drop_refuses_a_shard_in_use(root: Path) -> None:
    index = open_index(root)
    try:
        with pytest.raises(StoreLockedError):
            EdgeVectorIndex.drop(root, "memories", lock_timeout=0.1)
        assert (index.path / MARKER_FILE_NAME).is_file()
    finally:
        index._close_blocking()


def test_drop_checks_the_collection_name(root: Path) -> None:
    with pytest.raises(ConfigurationError):
        EdgeVectorIndex.drop(root, "../vectors")
