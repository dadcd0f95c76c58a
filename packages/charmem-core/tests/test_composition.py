"""Adapter factories: what entry points name, the default factory, and classes registered before."""

from __future__ import annotations

import importlib
import importlib.metadata as metadata
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import charmem.composition
from charmem import CharacterMemory, ConfigurationError, RememberInput, Settings
from charmem.composition import AdapterFactory, ClassFactory, load_adapter, load_factory
from charmem.testing import HashingEmbeddingProvider, ReferenceGraphStore

CORE_PYPROJECT = Path(__file__).parents[1] / "pyproject.toml"
REFERENCE = {
    "GRAPH_STORE_MODE": "reference",
    "VECTOR_STORE_MODE": "in_memory",
    "RETRIEVAL_STATS_STORE_MODE": "in_memory",
    "EMBEDDING_PROVIDER": "hashing",
    "TOKEN_COUNTER": "whitespace",
}


class _EntryPoint:
    """An entry point that loads ``loaded`` (what ``importlib.metadata`` would import)."""

    def __init__(self, name: str, loaded: object) -> None:
        self.name = name
        self.value = f"third_party:{name}"
        self._loaded = loaded

    def load(self) -> object:
        return self._loaded


def _register(monkeypatch: pytest.MonkeyPatch, group: str, name: str, loaded: object) -> None:
    """Register ``name`` -> ``loaded`` in ``group`` first, for the settings and the composition."""
    for module in (metadata, charmem.composition):
        real: Callable[..., Any] = module.entry_points

        def fake(real: Callable[..., Any] = real, **params: str) -> list[Any]:
            found = list(real(**params))
            return [_EntryPoint(name, loaded), *found] if params.get("group") == group else found

        monkeypatch.setattr(module, "entry_points", fake)


def test_core_entry_points_name_factories() -> None:
    """Every entry point of charmem-core's pyproject names an AdapterFactory of the right class."""
    groups = tomllib.loads(CORE_PYPROJECT.read_text())["project"]["entry-points"]
    expected = {
        ("charmem.graph_stores", "reference"): "ReferenceGraphStore",
        ("charmem.vector_indexes", "in_memory"): "ReferenceVectorIndex",
        ("charmem.stats_stores", "sqlite"): "SQLiteRetrievalStatsStore",
        ("charmem.stats_stores", "in_memory"): "InMemoryRetrievalStatsStore",
        ("charmem.embedders", "hashing"): "HashingEmbeddingProvider",
    }
    found = {}
    for group, entries in groups.items():
        for name, value in entries.items():
            module, _, attribute = value.partition(":")
            factory = getattr(importlib.import_module(module), attribute)
            assert isinstance(factory, AdapterFactory)
            assert isinstance(factory, ClassFactory)
            found[(group, name)] = factory.adapter.__name__
    assert found == expected


def test_the_sqlite_factory_tells_whether_its_file_exists(tmp_path: Path) -> None:
    from charmem.stats._factory import in_memory, sqlite

    settings = Settings.from_mapping({"RETRIEVAL_STATS_PATH": str(tmp_path / "stats.sqlite3")})
    assert sqlite.exists(settings, "c") is False
    (tmp_path / "stats.sqlite3").write_bytes(b"")
    assert sqlite.exists(settings, "c") is True
    assert in_memory.exists(settings, "c") is None


async def test_the_default_factory_builds_with_from_settings_and_knows_nothing_else() -> None:
    factory = ClassFactory(ReferenceGraphStore)
    settings = Settings.from_mapping(REFERENCE)
    built = factory.build(settings, "c")
    opened = await factory.open(settings, "c")
    assert (built.collection, opened.collection) == ("c", "c")
    assert factory.exists(settings, "c") is None
    assert await factory.drop(settings, "c") is False
    embedder = await ClassFactory(HashingEmbeddingProvider).open(settings)
    assert embedder.vector_size == HashingEmbeddingProvider().vector_size


class _OldStyleIndex:
    """A vector adapter class registered as charmem-core 0.1's adapters were, with every hook."""

    calls: list[str] = []

    @classmethod
    def from_settings(cls, settings: Settings, collection: str, **options: Any) -> str:
        cls.calls.append("from_settings")
        return f"built {collection}"

    @classmethod
    async def from_settings_async(cls, settings: Settings, collection: str, **options: Any) -> str:
        cls.calls.append(f"from_settings_async {sorted(options)}")
        return f"opened {collection}"

    @classmethod
    def exists_from_settings(cls, settings: Settings, collection: str) -> int:
        return 0

    @classmethod
    def drop_from_settings(cls, settings: Settings, collection: str) -> int:
        cls.calls.append("drop_from_settings")
        return 1


class _FromSettingsOnly:
    @classmethod
    def from_settings(cls, settings: Settings, collection: str) -> str:
        return f"built {collection}"


async def test_a_registered_class_keeps_working_with_its_optional_hooks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _register(monkeypatch, "charmem.vector_indexes", "old", _OldStyleIndex)
    _register(monkeypatch, "charmem.stats_stores", "plain", _FromSettingsOnly)
    settings = Settings.from_mapping(REFERENCE)
    old: AdapterFactory[Any] = load_factory("vectors", "old")
    assert isinstance(old, AdapterFactory)
    assert load_adapter("vectors", "old") is _OldStyleIndex
    assert await old.open(settings, "c", model_id="m", vector_size=3) == "opened c"
    assert old.build(settings, "c") == "built c"
    assert old.exists(settings, "c") is False
    assert await old.drop(settings, "c") is True
    assert _OldStyleIndex.calls == [
        "from_settings_async ['model_id', 'vector_size']",
        "from_settings",
        "drop_from_settings",
    ]
    plain: AdapterFactory[Any] = load_factory("stats", "plain")
    assert await plain.open(settings, "c") == "built c"
    assert plain.exists(settings, "c") is None
    assert await plain.drop(settings, "c") is False


def test_an_entry_point_naming_neither_a_factory_nor_an_adapter_class_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _register(monkeypatch, "charmem.vector_indexes", "embedded", object())
    with pytest.raises(ConfigurationError) as info:
        load_factory("vectors", "embedded")
    message = str(info.value)
    assert info.value.key == "VECTOR_STORE_MODE"
    for part in ("VECTOR_STORE_MODE='embedded'", "charmem.vector_indexes", "pip install -U charmem-qdrant"):
        assert part in message


class _CountingGraphFactory(ClassFactory[ReferenceGraphStore]):
    """A third-party factory: the facade opens through it, from the event loop."""

    opened: list[str] = []

    async def open(
        self, settings: Settings, collection: str | None = None, /, **options: Any
    ) -> ReferenceGraphStore:
        assert collection is not None
        self.opened.append(collection)
        return ReferenceGraphStore(collection)


async def test_the_facade_opens_each_store_through_its_factory(monkeypatch: pytest.MonkeyPatch) -> None:
    _register(monkeypatch, "charmem.graph_stores", "counted", _CountingGraphFactory(ReferenceGraphStore))
    settings = Settings.from_mapping({**REFERENCE, "GRAPH_STORE_MODE": "counted"})
    async with CharacterMemory.open(settings, "factories") as memory:
        outcome = await memory.remember(RememberInput("I adopted a cat named Miso."))
        assert outcome.object_ids
    assert _CountingGraphFactory.opened == ["factories"]
