"""Which ``RETRIEVAL_STATS_STORE_MODE`` applies when the key is unset."""

from __future__ import annotations

import importlib.metadata as metadata

import pytest

import charmem.composition
from charmem import Settings

SERVICE = {"GRAPH_STORE_MODE": "service", "SPARQL_QUERY_ENDPOINT": "http://127.0.0.1:9/query"}


def _stats_modes_registered(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Make the ``charmem.stats_stores`` group hold ``sqlite``, ``in_memory`` and ``names``."""
    real = metadata.entry_points
    registered = [
        metadata.EntryPoint(name=name, value="no_such_adapter:factory", group="charmem.stats_stores")
        for name in ("sqlite", "in_memory", *names)
    ]

    def fake(**params: str) -> object:
        return registered if params.get("group") == "charmem.stats_stores" else real(**params)

    monkeypatch.setattr(metadata, "entry_points", fake)
    monkeypatch.setattr(charmem.composition, "entry_points", fake)


def test_service_mode_defaults_to_graph_stats_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    _stats_modes_registered(monkeypatch, "graph")
    assert Settings.from_mapping(SERVICE).retrieval_stats_store_mode == "graph"
    assert (
        Settings.from_mapping({**SERVICE, "RETRIEVAL_STATS_STORE_MODE": ""}).retrieval_stats_store_mode
        == "graph"
    )
    assert Settings.from_mapping({}).retrieval_stats_store_mode == "sqlite"  # embedded: one process
    chosen = Settings.from_mapping({**SERVICE, "RETRIEVAL_STATS_STORE_MODE": "sqlite"})
    assert chosen.retrieval_stats_store_mode == "sqlite"  # still selectable
    assert chosen.retrieval_stats_path.name == "retrieval-stats.sqlite3"


def test_without_the_graph_stats_adapter_service_mode_keeps_sqlite(monkeypatch: pytest.MonkeyPatch) -> None:
    _stats_modes_registered(monkeypatch)
    assert Settings.from_mapping(SERVICE).retrieval_stats_store_mode == "sqlite"
