"""The embedding-provider contract suite on OpenAIEmbeddingProvider, with the real SDK answering
from a recorded-style fake endpoint (deterministic vectors per text, rows listed out of order)."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import AsyncIterator

import httpx
import pytest

from charmem.ports import EmbeddingProvider
from charmem_contract import EmbeddingProviderContract, Factory, opening
from charmem_openai import OpenAIEmbeddingProvider

SIZE = 16


def _recorded(request: httpx.Request) -> httpx.Response:
    """An embeddings endpoint: the same text always gets the same unit vector."""
    body = json.loads(request.content)
    data = []
    for index, text in enumerate(body["input"]):
        raw = [b / 255 - 0.5 for b in hashlib.shake_256(text.encode("utf-8")).digest(SIZE)]
        norm = math.sqrt(sum(x * x for x in raw)) or 1.0
        data.append({"object": "embedding", "index": index, "embedding": [x / norm for x in raw]})
    data.reverse()  # the API may list rows in any order; the provider sorts them by index
    usage = {"prompt_tokens": len(data), "total_tokens": len(data)}
    return httpx.Response(200, json={"object": "list", "data": data, "model": body["model"], "usage": usage})


class TestOpenAIEmbeddingProvider(EmbeddingProviderContract):
    @pytest.fixture
    async def embedding_provider_factory(self) -> AsyncIterator[Factory[EmbeddingProvider]]:
        def open_provider(collection: str) -> EmbeddingProvider:
            return OpenAIEmbeddingProvider(
                model="text-embedding-3-small",
                dimensions=SIZE,
                api_key="sk-contract-test",
                max_retries=0,
                max_batch_inputs=7,  # several requests per call: the order must survive batching
                http_client=httpx.AsyncClient(transport=httpx.MockTransport(_recorded)),
            )

        async with opening(open_provider) as factory:
            yield factory
