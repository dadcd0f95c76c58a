"""Fixtures: settings for the embedded default stores (persistent Oxigraph, Qdrant Edge, SQLite)
under a temporary directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from charmem import Settings

REPO_ROOT = Path(__file__).resolve().parents[3]


def embedded_env(root: Path, embedder: str = "hashing") -> dict[str, str]:
    """Environment selecting the embedded defaults with every store under ``root``."""
    return {
        "GRAPH_STORE_MODE": "persistent",
        "OXIGRAPH_PATH": str(root / "oxigraph"),
        "VECTOR_STORE_MODE": "embedded",
        "VECTOR_STORE_PATH": str(root / "vectors"),
        "RETRIEVAL_STATS_STORE_MODE": "sqlite",
        "RETRIEVAL_STATS_PATH": str(root / "retrieval-stats.sqlite3"),
        "EMBEDDING_PROVIDER": embedder,
        "HF_HUB_OFFLINE": "1",
    }


@pytest.fixture
def env_for() -> object:
    """``env_for(root, embedder)``: settings mapping for the embedded stores under ``root``."""
    return embedded_env


@pytest.fixture
def store_root(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def embedded_settings(store_root: Path) -> Settings:
    return Settings.from_mapping(embedded_env(store_root))


@pytest.fixture
def child_env(store_root: Path) -> dict[str, str]:
    """The environment of a child process that opens the same embedded stores."""
    return {**os.environ, **embedded_env(store_root)}
