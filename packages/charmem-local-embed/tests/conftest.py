"""Shared fixtures: the real packaged model (offline) and a fake for failure paths."""

from __future__ import annotations

import os

# Before anything imports huggingface_hub: the whole test session is offline.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest

from charmem_local_embed import LocalEmbeddingProvider


@pytest.fixture(scope="session")
def provider() -> LocalEmbeddingProvider:
    """The packaged all-MiniLM-L6-v2, loaded once for the session."""
    loaded = LocalEmbeddingProvider()
    loaded.load()
    return loaded


class FakeSentenceTransformer:
    """Stands in for ``sentence_transformers.SentenceTransformer`` (constructor and encode)."""

    instances: list[FakeSentenceTransformer] = []
    on_init: Callable[[FakeSentenceTransformer], None] | None = None
    on_encode: Callable[[Sequence[str]], Any] | None = None

    def __init__(self, path: str, **kwargs: Any) -> None:
        self.path = path
        self.kwargs = kwargs
        self.environ = {name: os.environ.get(name) for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
        self.prompts: dict[str, str] = {}
        type(self).instances.append(self)
        hook = type(self).on_init
        if hook is not None:
            hook(self)

    def get_embedding_dimension(self) -> int:
        return 384

    def encode(self, texts: Sequence[str], **kwargs: Any) -> Any:
        encode = type(self).on_encode
        if encode is not None:
            return encode(texts)
        rows = np.zeros((len(texts), 384), dtype=np.float32)
        rows[:, 0] = 1.0
        return rows


@pytest.fixture
def fake_model(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[FakeSentenceTransformer]]:
    """Replace the real model class for the duration of one test."""
    import sentence_transformers

    FakeSentenceTransformer.instances = []
    FakeSentenceTransformer.on_init = None
    FakeSentenceTransformer.on_encode = None
    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", FakeSentenceTransformer)
    yield FakeSentenceTransformer
    FakeSentenceTransformer.on_init = None
    FakeSentenceTransformer.on_encode = None
