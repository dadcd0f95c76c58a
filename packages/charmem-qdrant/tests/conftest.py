"""Shared fixtures: real Qdrant Edge shards in ``tmp_path`` (no mocks)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from charmem_qdrant import EdgeVectorIndex

MODEL = "test-model"
SIZE = 3


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The vector store root (not created yet: the index creates it)."""
    return tmp_path / "vectors"


@pytest.fixture
def index(root: Path) -> Iterator[EdgeVectorIndex]:
    """An empty, open index over a fresh shard; closed afterwards."""
    opened = EdgeVectorIndex(root, "memories", model_id=MODEL, vector_size=SIZE)
    try:
        yield opened
    finally:
        opened._close_blocking()


@pytest.fixture
def lexical_index(root: Path) -> Iterator[EdgeVectorIndex]:
    """An empty index with the BM25 lexical cue on; closed afterwards."""
    opened = EdgeVectorIndex(root, "lexical", model_id=MODEL, vector_size=SIZE, lexical=True)
    try:
        yield opened
    finally:
        opened._close_blocking()
