"""OpenAIEmbeddingProvider at the HTTP layer: the real SDK over an httpx mock transport."""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

import httpx
import pytest
import structlog

from charmem import BackendError, CharacterMemory, ConfigurationError, DimensionMismatchError, Settings
from charmem.testing import stores_of
from charmem_openai import OpenAIEmbeddingProvider

KEY = "sk-proj-ThisIsAFakeKeyThatMustNeverLeak0123456789"

Handler = Callable[[httpx.Request], httpx.Response]


def vector_for(text: str, size: int) -> list[float]:
    """A deterministic unit vector for ``text`` (what the fake API answers)."""
    raw = [b / 255 - 0.5 for b in hashlib.shake_256(text.encode("utf-8")).digest(size)]
    norm = math.sqrt(sum(x * x for x in raw)) or 1.0
    return [x / norm for x in raw]


class FakeAPI:
    """An embeddings endpoint: records each request body, answers rows in reverse index order."""

    def __init__(self, size: int = 8, *, reverse: bool = True) -> None:
        self.size = size
        self.reverse = reverse
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[httpx.Headers] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        self.headers.append(request.headers)
        size = body.get("dimensions", self.size)
        data = [
            {"object": "embedding", "index": i, "embedding": vector_for(text, size)}
            for i, text in enumerate(body["input"])
        ]
        if self.reverse:
            data.reverse()
        usage = {"prompt_tokens": len(body["input"]), "total_tokens": len(body["input"])}
        return httpx.Response(
            200, json={"object": "list", "data": data, "model": body["model"], "usage": usage}
        )


def provider(handler: Handler, **kwargs: Any) -> OpenAIEmbeddingProvider:
    kwargs.setdefault("model", "text-embedding-3-small")
    kwargs.setdefault("api_key", KEY)
    kwargs.setdefault("max_retries", 0)
    http_client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return OpenAIEmbeddingProvider(http_client=http_client, **kwargs)


def openai_settings(**extra: str) -> Settings:
    return Settings.from_mapping(
        {
            "EMBEDDING_PROVIDER": "openai",
            "OPENAI_API_KEY": KEY,
            "EMBEDDING_MODEL": "text-embedding-3-small",
            "OPENAI_BASE_URL": "http://embeddings.test/v1",
            **extra,
        }
    )


# ---------------------------------------------------------------- sizes and settings


def test_entry_point_names_the_provider() -> None:
    found = {ep.name: ep for ep in entry_points(group="charmem.embedders")}
    assert found["openai"].load().adapter is OpenAIEmbeddingProvider


@pytest.mark.parametrize(
    ("model", "size"),
    [("text-embedding-3-small", 1536), ("text-embedding-3-large", 3072), ("text-embedding-ada-002", 1536)],
)
def test_vector_size_of_known_models(model: str, size: int) -> None:
    assert provider(FakeAPI(), model=model).vector_size == size


async def test_dimensions_are_sent_and_become_the_vector_size() -> None:
    api = FakeAPI()
    shortened = OpenAIEmbeddingProvider.from_settings(
        openai_settings(EMBEDDING_DIMENSIONS="256"),
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(api)),
    )
    assert (shortened.model_id, shortened.vector_size, shortened.dimensions) == (
        "text-embedding-3-small",
        256,
        256,
    )
    rows = await shortened.embed_documents(["a walk by the harbour"])
    assert len(rows[0]) == 256
    assert api.bodies[-1]["dimensions"] == 256
    assert api.bodies[-1]["encoding_format"] == "float"
    assert str(api.headers[-1]["authorization"]) == f"Bearer {KEY}"
    api.size = 1536
    native = provider(api)
    assert len(await native.embed_query("tea")) == 1536
    assert "dimensions" not in api.bodies[-1]


async def test_unknown_model_size_is_asked_once_or_refused() -> None:
    api = FakeAPI(size=12)
    settings = openai_settings(EMBEDDING_MODEL="my-local-model")
    client = httpx.AsyncClient(transport=httpx.MockTransport(api))
    probed = OpenAIEmbeddingProvider.from_settings(settings, http_client=client)
    assert probed.vector_size == 12
    assert [body["input"] for body in api.bodies] == [["dimension probe"]]
    assert (await OpenAIEmbeddingProvider.from_settings_async(settings, http_client=client)).vector_size == 12
    with pytest.raises(ConfigurationError, match="EMBEDDING_DIMENSIONS") as caught:
        provider(api, model="my-local-model")
    assert caught.value.key == "EMBEDDING_DIMENSIONS"
    assert provider(api, model="my-local-model", vector_size=12).vector_size == 12


@pytest.mark.parametrize(
    ("mapping", "key"),
    [
        ({"OPENAI_API_KEY": ""}, "OPENAI_API_KEY"),
        ({"EMBEDDING_MODEL": ""}, "EMBEDDING_MODEL"),
        ({"OPENAI_TIMEOUT": "never"}, "OPENAI_TIMEOUT"),
        ({"OPENAI_MAX_RETRIES": "-1"}, "OPENAI_MAX_RETRIES"),
    ],
)
def test_from_settings_names_the_bad_key(mapping: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        OpenAIEmbeddingProvider.from_settings(openai_settings(**mapping))
    assert caught.value.key == key
    assert KEY not in str(caught.value)


def test_sdk_retry_and_timeout_settings_are_exposed() -> None:
    built = OpenAIEmbeddingProvider.from_settings(
        openai_settings(OPENAI_MAX_RETRIES="5", OPENAI_TIMEOUT="2.5")
    )
    assert (built.max_retries, built.timeout) == (5, 2.5)
    assert built._client.max_retries == 5
    assert built._client.timeout == 2.5
    assert built.endpoint == "http://embeddings.test/v1"
    assert KEY not in repr(built)


# ---------------------------------------------------------------- batching and order


async def test_batches_stay_within_the_input_limit_and_keep_the_order() -> None:
    api = FakeAPI(size=4)
    texts = [f"memory number {n}" for n in range(5000)]
    rows = await provider(api, vector_size=4).embed_documents(texts)
    assert [len(body["input"]) for body in api.bodies] == [2048, 2048, 904]
    assert rows == [vector_for(text, 4) for text in texts]  # the API listed each batch reversed


async def test_batches_stay_within_the_token_budget() -> None:
    api = FakeAPI(size=4)
    subject = provider(api, vector_size=4, max_batch_tokens=100)
    texts = ["x" * 30] * 7 + ["y" * 250, "z"]  # 30 estimated tokens each; one text over the budget
    assert [len(batch) for batch in subject.batches(texts)] == [3, 3, 1, 1, 1]
    assert [len(batch) for batch in subject.batches(["x" * 30] * 7 + ["z"])] == [3, 3, 2]
    rows = await subject.embed_documents(texts)
    assert [len(body["input"]) for body in api.bodies] == [3, 3, 1, 1, 1]
    assert rows == [vector_for(text, 4) for text in texts]
    multibyte = ["é" * 30]  # 60 bytes: the estimate counts UTF-8 bytes
    assert [len(b) for b in subject.batches(multibyte * 3)] == [1, 1, 1]


async def test_empty_text_is_sent_as_a_space_and_no_text_sends_nothing() -> None:
    api = FakeAPI(size=4)
    subject = provider(api, vector_size=4)
    assert await subject.embed_documents([]) == []
    assert api.bodies == []
    rows = await subject.embed_documents(["", "tea"])
    assert api.bodies[-1]["input"] == [" ", "tea"]
    assert rows[1] == vector_for("tea", 4)


async def test_rows_of_another_size_are_a_dimension_mismatch() -> None:
    subject = provider(FakeAPI(size=6), model="text-embedding-3-small", vector_size=4)
    with pytest.raises(DimensionMismatchError) as caught:
        await subject.embed_query("tea")
    assert (caught.value.expected, caught.value.actual) == (4, 6)


async def test_missing_rows_are_a_backend_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        data = [{"object": "embedding", "index": 0, "embedding": [1.0, 0.0]}]
        usage = {"prompt_tokens": 1, "total_tokens": 1}
        return httpx.Response(
            200, json={"object": "list", "data": data, "model": body["model"], "usage": usage}
        )

    with pytest.raises(BackendError, match=r"1 rows .* for 2 texts"):
        await provider(handler, vector_size=2).embed_documents(["a", "b"])


# ---------------------------------------------------------------- errors and the key


def error_handler(status: int, message: str, code: str) -> Handler:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            status, json={"error": {"message": message, "type": "invalid_request_error", "code": code}}
        )

    return handler


@pytest.mark.parametrize(
    ("status", "expected"),
    [(401, "refused the API key.*HTTP 401"), (429, "rate limited"), (400, "HTTP 400"), (503, "HTTP 503")],
)
async def test_api_errors_are_backend_errors_without_the_key(
    status: int, expected: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    subject = provider(
        error_handler(status, f"Incorrect API key provided: {KEY}. Or {KEY[:12]}abcdef", "boom")
    )
    with structlog.testing.capture_logs() as logs, pytest.raises(BackendError, match=expected) as caught:
        await subject.embed_documents(["tea"])
    error = caught.value
    assert "http://" in str(error) or "https://" in str(error)  # names the endpoint
    for text in (str(error), repr(error), repr(subject), caplog.text, repr(logs), str(error.__cause__)):
        assert KEY not in text
        assert KEY[:12] + "abcdef" not in text
    assert error.__cause__ is not None
    assert getattr(error.__cause__, "status_code", None) == status


@pytest.mark.parametrize(
    "base_url",
    [f"https://user:{KEY}@proxy.test/v1", f"http://{KEY}@proxy.test/v1", "http://a:b@[::1]:8080/v1"],
)
def test_a_base_url_with_credentials_is_refused_without_echoing_it(base_url: str) -> None:
    """User-info would show in the repr, every error and httpx's request log lines."""
    with pytest.raises(ConfigurationError) as caught:
        OpenAIEmbeddingProvider(model="text-embedding-3-small", api_key=KEY, base_url=base_url)
    assert caught.value.key == "OPENAI_BASE_URL"
    assert KEY not in str(caught.value)
    assert "a:b@" not in str(caught.value)


async def test_memory_text_and_the_key_never_reach_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    """With every logger at DEBUG (the SDK's and httpx's too) only ids, counts and URLs are logged."""
    caplog.set_level(logging.DEBUG)
    secret_text = "my diary: the secret recipe is 7 spoons of salt"
    rows = await provider(FakeAPI(size=8), vector_size=8).embed_documents([secret_text, "tea"])
    assert len(rows) == 2
    with pytest.raises(BackendError):
        await provider(error_handler(400, "bad input", "invalid")).embed_query(secret_text)
    assert "HTTP Request: POST" in caplog.text  # httpx did log the requests
    assert "secret recipe" not in caplog.text
    assert KEY not in caplog.text


async def test_an_error_without_the_key_chains_the_sdk_exception() -> None:
    import openai

    subject = provider(error_handler(500, "the server is sad", "server_error"))
    with pytest.raises(BackendError, match="HTTP 500: the server is sad") as caught:
        await subject.embed_query("tea")
    assert isinstance(caught.value.__cause__, openai.InternalServerError)


async def test_a_long_error_body_is_quoted_in_at_most_200_characters() -> None:
    """A compatible server may put a whole page or trace in its error: only its start is quoted."""
    long_message = "Bad gateway:\n" + "x" * 5000 + " end of trace"
    with pytest.raises(BackendError, match="HTTP 502") as caught:
        await provider(error_handler(502, long_message, "bad_gateway")).embed_query("tea")
    message = str(caught.value)
    assert "Bad gateway: xxx" in message  # whitespace runs joined into one line
    assert message.endswith("...")
    assert "x" * 200 not in message
    assert "end of trace" not in message


async def test_connection_errors_and_timeouts_are_backend_errors() -> None:
    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    with pytest.raises(
        BackendError, match=r"could not reach OpenAI embeddings at http://embeddings\.test/v1"
    ):
        await provider(refused, base_url="http://embeddings.test/v1").embed_query("tea")
    with pytest.raises(BackendError, match=r"did not answer within 1\.5 s"):
        await provider(slow, timeout=1.5).embed_query("tea")


async def test_the_sdk_retries_max_retries_times() -> None:
    calls: list[int] = []

    def flaky(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) < 2:
            return httpx.Response(500, json={"error": {"message": "try again", "type": "server_error"}})
        return FakeAPI(size=4)(request)

    rows = await provider(flaky, vector_size=4, max_retries=1).embed_query("tea")
    assert rows == vector_for("tea", 4)
    assert len(calls) == 2


# ---------------------------------------------------------------- with the facade


async def test_an_explicit_provider_ignores_the_openai_keys() -> None:
    settings = Settings.from_mapping(
        {
            "GRAPH_STORE_MODE": "reference",
            "VECTOR_STORE_MODE": "in_memory",
            "RETRIEVAL_STATS_STORE_MODE": "in_memory",
        }
    )  # EMBEDDING_PROVIDER defaults to openai, with neither key set
    with pytest.raises(ConfigurationError) as caught:
        await CharacterMemory.open(settings, "no-key")
    assert caught.value.key == "OPENAI_API_KEY"
    subject = provider(FakeAPI(size=16), model="text-embedding-3-small", dimensions=16)
    async with CharacterMemory.open(settings, "explicit", embedding_provider=subject) as memory:
        assert stores_of(memory).vectors.vector_size == 16
        assert stores_of(memory).vectors.model_id == "text-embedding-3-small"
        from charmem import RememberInput

        await memory.remember(RememberInput("We adopted a greyhound called Biscuit."))
        pack = await memory.retrieve("We adopted a greyhound called Biscuit.")
        assert pack.items
