"""Secrets stay masked, foreign error text stays short, and misuse says what to do instead.

* URL passwords and secret-valued keys are masked by one function (``charmem.errors.mask_secrets``)
  in the settings' repr, in log events and in every charmem error.
* A provider's error text quoted in an error or a repair marker is cut to 200 characters.
* A settings key one typo away from a known key is logged with the key it probably meant.
* An object that is not an ``EmbeddingProvider`` is refused before anything opens.
* ``CharacterMemory.open(...)`` used without ``await`` says to await it, and warns if never awaited.
"""

from __future__ import annotations

import gc
import logging
import warnings
from collections.abc import Sequence
from typing import Any

import pytest

from charmem import (
    BackendError,
    CharacterMemory,
    CharmemError,
    ConfigurationError,
    MemoryNotOpenedError,
    RememberInput,
    RepairMarker,
    Settings,
)
from charmem.errors import EXCERPT_CHARS, excerpt, mask_secrets
from charmem.log import get_logger
from charmem.settings import KNOWN_SETTINGS_KEYS
from charmem.stats import InMemoryRetrievalStatsStore
from charmem.testing import HashingEmbeddingProvider, ReferenceGraphStore, ReferenceVectorIndex

PASSWORD = "hunter2"
IN_MEMORY = {
    "GRAPH_STORE_MODE": "reference",
    "VECTOR_STORE_MODE": "in_memory",
    "RETRIEVAL_STATS_STORE_MODE": "in_memory",
}


def _memory(embedder: Any) -> CharacterMemory:
    return CharacterMemory(
        graph=ReferenceGraphStore("c"),
        vectors=ReferenceVectorIndex("c", model_id="charmem-hashing-v1", vector_size=256),
        embedder=embedder,
        stats=InMemoryRetrievalStatsStore("c"),
        collection="c",
    )


# ---------------------------------------------------------------- masking


def test_url_passwords_are_masked_in_the_settings_repr() -> None:
    settings = Settings.from_mapping(
        {
            "GRAPH_STORE_MODE": "service",
            "SPARQL_QUERY_ENDPOINT": f"http://alice:{PASSWORD}@db.example:7878/query",
            "SPARQL_UPDATE_ENDPOINT": f"https://alice:{PASSWORD}@db.example/update?token=t0ps3cret",
            "VECTOR_STORE_MODE": "service",
            "QDRANT_CONNECTION_STRING": f"http://bob:{PASSWORD}@qdrant.example:6334",
            "OPENAI_BASE_URL": f"https://carol:{PASSWORD}@llm.example/v1",
            "OPENAI_API_KEY": "sk-live-secret",
            "QDRANT_API_KEY": "qdrant-secret",
            "SPARQL_PASSWORD": "sparql-secret",
        }
    )
    shown = repr(settings)
    for secret in (PASSWORD, "t0ps3cret", "sk-live-secret", "qdrant-secret", "sparql-secret"):
        assert secret not in shown
    assert "http://alice:***@db.example:7878/query" in shown  # the user and host stay readable
    assert "bob:***@qdrant.example" in shown
    assert (
        settings.sparql_query_endpoint == f"http://alice:{PASSWORD}@db.example:7878/query"
    )  # the value is intact


@pytest.mark.parametrize(
    ("key", "value", "masked"),
    [
        ("OPENAI_API_KEY", "sk-abc", "***"),
        ("QDRANT_API_KEY", "k", "***"),
        ("SPARQL_PASSWORD", "p", "***"),
        ("SPARQL_BEARER_TOKEN", "t", "***"),
        ("api_key", "k", "***"),
        ("token_counter", "local", "local"),  # a counter of tokens, not a token
        ("OPENAI_API_KEY", "", ""),
        (
            None,
            f"grpc://u:{PASSWORD}@h:6334 and http://h/x?api_key=abc&q=1",
            "grpc://u:***@h:6334 and http://h/x?api_key=***&q=1",
        ),
        (None, f"http://u:p@ss:{PASSWORD}@h/", "http://u:***@h/"),  # an unencoded '@' in the password
        (None, "http://h:8080/a@b mail x@y.z", "http://h:8080/a@b mail x@y.z"),  # no user-info
        (None, f"q:{PASSWORD}@localhost:6334", "q:***@localhost:6334"),  # no scheme
        (None, f"alice:{PASSWORD}@db:7878/query", "alice:***@db:7878/query"),
        (None, "ana@example.com at 12:30", "ana@example.com at 12:30"),
    ],
)
def test_one_function_masks_secret_keys_and_url_passwords(key: str | None, value: str, masked: str) -> None:
    assert mask_secrets(value, key=key) == masked


def test_charmem_errors_and_log_events_never_carry_a_url_password(caplog: pytest.LogCaptureFixture) -> None:
    error = ConfigurationError(f"cannot reach http://alice:{PASSWORD}@db.example/query", key="X")
    assert PASSWORD not in str(error) and PASSWORD not in repr(error)
    assert "alice:***@db.example" in str(error)
    caplog.set_level(logging.DEBUG, logger="charmem")
    get_logger("charmem.test").warning(
        "endpoint_failed", endpoint=f"http://alice:{PASSWORD}@db.example/", api_key="sk-live-secret"
    )
    assert "endpoint_failed" in caplog.text
    assert PASSWORD not in caplog.text and "sk-live-secret" not in caplog.text


# ---------------------------------------------------------------- provider error text


class Failing:
    """A provider whose calls fail with a long error text holding a URL password."""

    model_id = "failing"
    vector_size = 256

    def __init__(self) -> None:
        self.message = f"upstream http://svc:{PASSWORD}@embed.example said: " + "<html>" + "x" * 5000

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        raise RuntimeError(self.message)

    async def embed_query(self, text: str) -> list[float]:
        raise RuntimeError(self.message)


async def test_a_provider_error_is_quoted_masked_and_cut_to_200_characters() -> None:
    memory = _memory(Failing())
    outcome = await memory.remember(RememberInput("The tea is black."))
    [marker] = outcome.repair_markers
    assert isinstance(marker, RepairMarker.VectorMaintenance)
    assert len(marker.cause) <= EXCERPT_CHARS
    assert marker.cause.endswith("...")
    assert marker.cause.startswith("BackendError: the embedding provider 'failing' failed on 1 text(s)")
    assert PASSWORD not in marker.cause
    with pytest.raises(BackendError) as info:
        await memory.retrieve("tea")
    message = str(info.value)
    assert "RuntimeError: upstream http://svc:***@embed.example said: <html>xxx" in message
    assert "x" * EXCERPT_CHARS not in message
    assert len(message) < 2 * EXCERPT_CHARS


def test_an_excerpt_joins_whitespace_and_cuts_long_text() -> None:
    assert excerpt("short\n\n  text") == "short text"
    long = excerpt("y" * 1000)
    assert len(long) == EXCERPT_CHARS and long.endswith("...")


# ---------------------------------------------------------------- near-miss settings keys


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("EMBEDING_PROVIDER", "EMBEDDING_PROVIDER"),
        ("OPENAI_APIKEY", "OPENAI_API_KEY"),
        ("VECTOR_STORE_MOD", "VECTOR_STORE_MODE"),
        ("EMBEDDING_TIMEOUT", "EMBEDDING_TIMEOUT_S"),
        ("embedding_provider", "EMBEDDING_PROVIDER"),
    ],
)
def test_a_near_miss_settings_key_logs_a_warning_naming_the_known_key(
    typo: str, meant: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="charmem")
    Settings.from_mapping({typo: "local"})
    [record] = [r for r in caplog.records if "settings_key_unknown" in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert f"did_you_mean='{meant}'" in record.getMessage()
    assert f"key='{typo}'" in record.getMessage()


def test_known_keys_and_unrelated_environment_variables_log_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="charmem")
    unrelated = ["PATH", "HOME", "LANG", "OPENAI_API_BASE", "OPENAI_ORG_ID", "QDRANT_HOST", "HF_HOME"]
    Settings.from_mapping({**dict.fromkeys(KNOWN_SETTINGS_KEYS, ""), **dict.fromkeys(unrelated, "x")})
    assert "settings_key_unknown" not in caplog.text


# ---------------------------------------------------------------- provider objects


class NoSize:
    model_id = "m"

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return []

    async def embed_query(self, text: str) -> list[float]:
        return []


class Blocking:
    model_id = "m"
    vector_size = 3

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [[0.0] * 3 for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        return [0.0] * 3


class HalfDone:
    model_id = ""
    vector_size = True

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return []


@pytest.mark.parametrize(
    ("provider", "problems"),
    [
        (NoSize(), ["it has no vector_size (an int >= 1)"]),
        (Blocking(), ["its embed_documents is not an async def", "its embed_query is not an async def"]),
        (
            HalfDone(),
            [
                "its model_id is '', not a non-empty str",
                "its vector_size is True, not an int >= 1",
                "it has no embed_query method (an async def)",
            ],
        ),
        (
            "text-embedding-3-small",
            ["it has no model_id", "it has no vector_size", "it has no embed_documents"],
        ),
    ],
)
async def test_an_object_that_is_not_an_embedding_provider_is_refused_naming_what_it_lacks(
    provider: object, problems: list[str]
) -> None:
    with pytest.raises(ConfigurationError, match="is not an EmbeddingProvider") as built:
        _memory(provider)
    with pytest.raises(ConfigurationError, match="is not an EmbeddingProvider") as opened:
        await CharacterMemory.open(Settings.from_mapping(IN_MEMORY), "c", embedding_provider=provider)  # type: ignore[arg-type]
    for info in (built, opened):
        assert info.value.key == "embedding_provider"
        for problem in problems:
            assert problem in str(info.value)


# ---------------------------------------------------------------- open without await


async def test_open_used_without_await_says_to_await_it() -> None:
    opening = CharacterMemory.open(
        Settings.from_mapping(IN_MEMORY), "c", embedding_provider=HashingEmbeddingProvider()
    )
    with pytest.raises(
        MemoryNotOpenedError, match=r"write `memory = await CharacterMemory.open\(...\)`"
    ) as info:
        await opening.remember(RememberInput("The tea is black."))  # type: ignore[attr-defined]
    assert "async with CharacterMemory.open(...) as memory" in str(info.value)
    assert "'remember'" in str(info.value)
    assert isinstance(info.value, CharmemError) and isinstance(info.value, AttributeError)
    assert not hasattr(opening, "collection")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # told once already: no second warning when collected
        del opening
        gc.collect()


async def test_open_in_a_blocking_with_says_to_use_async_with_or_the_sync_facade() -> None:
    opening = CharacterMemory.open(
        Settings.from_mapping(IN_MEMORY), "c", embedding_provider=HashingEmbeddingProvider()
    )
    with pytest.raises(MemoryNotOpenedError, match=r"SyncCharacterMemory\.open"), opening:
        pass
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # told once already: no warning when collected
        del opening
        gc.collect()


async def test_an_open_never_awaited_warns_like_a_coroutine() -> None:
    settings = Settings.from_mapping(IN_MEMORY)
    with pytest.warns(RuntimeWarning, match=r"CharacterMemory.open\(...\) was never awaited"):
        CharacterMemory.open(
            settings, "c", embedding_provider=HashingEmbeddingProvider()
        )  # collected at once
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        memory = await CharacterMemory.open(settings, "c", embedding_provider=HashingEmbeddingProvider())
        await memory.close()
        async with CharacterMemory.open(settings, "c", embedding_provider=HashingEmbeddingProvider()):
            pass
        gc.collect()
