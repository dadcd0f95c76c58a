"""Settings: defaults, per-mode required keys, typed errors naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from charmem import ConfigurationError, Settings
from charmem.composition import load_adapter
from charmem.settings import validate_collection_name
from charmem.testing import HashingEmbeddingProvider


def test_defaults_match_the_design() -> None:
    s = Settings.from_mapping({})
    assert s.vector_store_mode == "embedded"
    assert s.vector_store_path == Path("./data/vectors")
    assert s.graph_store_mode == "persistent"
    assert s.oxigraph_path == Path("./data/oxigraph")
    assert s.retrieval_stats_store_mode == "sqlite"
    assert s.retrieval_stats_path == Path("./data/retrieval-stats.sqlite3")
    assert s.embedding_provider == "openai"
    assert s.local_embedding_model == "all-MiniLM-L6-v2"


@pytest.mark.parametrize(
    ("mapping", "key"),
    [
        ({"GRAPH_STORE_MODE": "service"}, "SPARQL_QUERY_ENDPOINT"),
        ({"VECTOR_STORE_MODE": "service"}, "QDRANT_CONNECTION_STRING"),
        ({"VECTOR_STORE_MODE": "cloud"}, "VECTOR_STORE_MODE"),
        ({"EMBEDDING_DIMENSIONS": "zero"}, "EMBEDDING_DIMENSIONS"),
    ],
)
def test_missing_or_malformed_keys_name_the_key(mapping: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        Settings.from_mapping(mapping)
    assert info.value.key == key
    assert key in str(info.value)


def test_openai_without_key_fails_at_open_naming_the_key() -> None:
    settings = Settings.from_mapping({"EMBEDDING_PROVIDER": "openai", "EMBEDDING_MODEL": "m"})
    with pytest.raises(ConfigurationError) as info:
        settings.require_embedding_keys()
    assert info.value.key == "OPENAI_API_KEY"


async def test_open_with_provider_object_needs_no_embedding_keys(tmp_path: Path) -> None:
    from charmem import CharacterMemory

    settings = Settings.from_mapping(
        {
            "GRAPH_STORE_MODE": "reference",
            "VECTOR_STORE_MODE": "in_memory",
            "RETRIEVAL_STATS_STORE_MODE": "in_memory",
        }
    )
    async with CharacterMemory.open(settings, "c", embedding_provider=HashingEmbeddingProvider()) as memory:
        assert memory.collection == "c"
    with pytest.raises(ConfigurationError) as info:
        await CharacterMemory.open(settings, "c")
    assert info.value.key == "OPENAI_API_KEY"


def test_unused_backend_keys_are_not_required() -> None:
    s = Settings.from_mapping(
        {
            "VECTOR_STORE_MODE": "in_memory",
            "GRAPH_STORE_MODE": "in_memory",
            "RETRIEVAL_STATS_STORE_MODE": "in_memory",
            "EMBEDDING_PROVIDER": "local",
        }
    )
    assert s.qdrant_connection_string is None
    assert s.sparql_query_endpoint is None
    s.require_embedding_keys()


def test_secrets_are_not_in_the_repr() -> None:
    s = Settings.from_mapping(
        {
            "OPENAI_API_KEY": "sk-secret-123",
            "EMBEDDING_MODEL": "m",
            "QDRANT_API_KEY": "qk-secret",
            "VECTOR_STORE_MODE": "service",
            "QDRANT_CONNECTION_STRING": "http://127.0.0.1:6334",
        }
    )
    assert "sk-secret-123" not in repr(s)
    assert "qk-secret" not in repr(s)


@pytest.mark.parametrize("name", ["", "A", "../x", "x/y", "-x", "a" * 129, "a b", "é"])
def test_unsafe_collection_names_are_rejected(name: str) -> None:
    with pytest.raises(ConfigurationError):
        validate_collection_name(name)


def test_missing_adapter_names_setting_group_and_package() -> None:
    with pytest.raises(ConfigurationError) as info:
        load_adapter("embedder", "openai") if False else load_adapter("graph", "no_such_mode")
    message = str(info.value)
    assert "GRAPH_STORE_MODE" in message
    assert "charmem.graph_stores" in message


def test_a_mode_registered_by_an_installed_adapter_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata as metadata

    real = metadata.entry_points
    shelf = metadata.EntryPoint(
        name="shelf", value="shelf_adapter:ShelfIndex", group="charmem.vector_indexes"
    )

    def fake(**params: str) -> object:
        found = list(real(**params))
        return [*found, shelf] if params.get("group") == "charmem.vector_indexes" else found

    monkeypatch.setattr(metadata, "entry_points", fake)
    assert Settings.from_mapping({"VECTOR_STORE_MODE": "shelf"}).vector_store_mode == "shelf"
    with pytest.raises(ConfigurationError, match="shelf"):
        Settings.from_mapping({"VECTOR_STORE_MODE": "cloud"})


def _token_counters_registered(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Make the ``charmem.token_counters`` group hold exactly ``names`` (others unchanged)."""
    import importlib.metadata as metadata

    import charmem.composition

    real = metadata.entry_points
    registered = [
        metadata.EntryPoint(name=name, value="no_such_adapter:Counter", group="charmem.token_counters")
        for name in names
    ]

    def fake(**params: str) -> object:
        return registered if params.get("group") == "charmem.token_counters" else real(**params)

    monkeypatch.setattr(metadata, "entry_points", fake)
    monkeypatch.setattr(charmem.composition, "entry_points", fake)


def test_token_counter_defaults_to_a_real_tokenizer_only_when_one_is_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _token_counters_registered(monkeypatch)
    assert Settings.from_mapping({}).token_counter == "whitespace"
    assert Settings().token_counter == "whitespace"
    _token_counters_registered(monkeypatch, "local")
    assert Settings.from_mapping({}).token_counter == "local"
    assert Settings.from_mapping({"TOKEN_COUNTER": ""}).token_counter == "local"
    assert Settings.from_mapping({"TOKEN_COUNTER": " Whitespace "}).token_counter == "whitespace"


def test_unknown_token_counter_names_the_key() -> None:
    with pytest.raises(ConfigurationError) as info:
        Settings.from_mapping({"TOKEN_COUNTER": "tiktoken"})
    assert info.value.key == "TOKEN_COUNTER"
    assert "TOKEN_COUNTER='tiktoken'" in str(info.value)
    assert "whitespace" in str(info.value)


def test_whitespace_counter_is_built_in_with_no_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    from charmem.composition import load_token_counter
    from charmem.tokens import WhitespaceTokenCounter

    _token_counters_registered(monkeypatch)
    counter = load_token_counter(Settings.from_mapping({"TOKEN_COUNTER": "whitespace"}))
    assert isinstance(counter, WhitespaceTokenCounter)
    assert counter.count("one two") == 2


async def test_open_uses_the_token_counter_setting_and_names_a_missing_adapter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from charmem import CharacterMemory

    _token_counters_registered(monkeypatch)
    base = {
        "GRAPH_STORE_MODE": "reference",
        "VECTOR_STORE_MODE": "in_memory",
        "RETRIEVAL_STATS_STORE_MODE": "in_memory",
        "EMBEDDING_PROVIDER": "hashing",
    }
    async with CharacterMemory.open(Settings.from_mapping(base), "c") as memory:
        assert memory.token_counter.name == "whitespace"
        pack = await memory.retrieve("anything")
        assert pack.to_dict()["token_counter"] == "whitespace"
    with pytest.raises(ConfigurationError) as info:
        await CharacterMemory.open(Settings.from_mapping({**base, "TOKEN_COUNTER": "local"}), "c")
    assert info.value.key == "TOKEN_COUNTER"
    assert "charmem-local-embed" in str(info.value)
    assert "charmem.token_counters" in str(info.value)


@pytest.mark.parametrize("name", ["con", "nul", "aux", "prn", "com1", "lpt9"])
def test_windows_device_names_are_rejected(name: str) -> None:
    with pytest.raises(ConfigurationError, match="device") as caught:
        validate_collection_name(name)
    assert caught.value.key == "collection"
    assert validate_collection_name(f"{name}-memory") == f"{name}-memory"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, False), ("", False), ("true", True), ("TRUE", True), ("1", True), ("on", True), ("no", False)],
)
def test_log_memory_text_is_an_opt_in_flag(raw: str | None, expected: bool) -> None:
    mapping = {} if raw is None else {"LOG_MEMORY_TEXT": raw}
    assert Settings.from_mapping(mapping).log_memory_text is expected


def test_a_malformed_log_memory_text_names_the_key() -> None:
    with pytest.raises(ConfigurationError) as caught:
        Settings.from_mapping({"LOG_MEMORY_TEXT": "verbose"})
    assert caught.value.key == "LOG_MEMORY_TEXT"


@pytest.mark.parametrize("mapping", [{"GRAPH_STORE_MODE": 5}, {"OXIGRAPH_PATH": None}, {3: "x"}])
def test_values_that_are_not_strings_are_a_configuration_error(mapping: dict[object, object]) -> None:
    with pytest.raises(ConfigurationError, match="str to str"):
        Settings.from_mapping(mapping)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("raw", "expected"), [(None, True), ("", True), ("true", True), ("false", False), ("0", False)]
)
def test_vector_rebuild_on_open_is_on_by_default(raw: str | None, expected: bool) -> None:
    mapping = {} if raw is None else {"VECTOR_REBUILD_ON_OPEN": raw}
    assert Settings.from_mapping(mapping).vector_rebuild_on_open is expected


def test_a_malformed_vector_rebuild_on_open_names_the_key() -> None:
    with pytest.raises(ConfigurationError, match="true or false") as caught:
        Settings.from_mapping({"VECTOR_REBUILD_ON_OPEN": "sometimes"})
    assert caught.value.key == "VECTOR_REBUILD_ON_OPEN"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, "shared"), ("", "shared"), ("shared", "shared"), (" Per_Collection ", "per_collection")],
)
def test_vector_service_layout_is_shared_by_default(raw: str | None, expected: str) -> None:
    mapping = {"VECTOR_STORE_MODE": "service", "QDRANT_CONNECTION_STRING": "http://127.0.0.1:6334"}
    if raw is not None:
        mapping["VECTOR_SERVICE_LAYOUT"] = raw
    assert Settings.from_mapping(mapping).vector_service_layout == expected


def test_an_unknown_vector_service_layout_names_the_key_and_the_choices() -> None:
    with pytest.raises(ConfigurationError, match=r"shared .* per_collection") as caught:
        Settings.from_mapping(
            {
                "VECTOR_STORE_MODE": "service",
                "QDRANT_CONNECTION_STRING": "http://127.0.0.1:6334",
                "VECTOR_SERVICE_LAYOUT": "per_tenant",
            }
        )
    assert caught.value.key == "VECTOR_SERVICE_LAYOUT"
