"""The provider behind charmem-core's own composition: entry point, facade, recall by meaning."""

from __future__ import annotations

import datetime as dt

from charmem import CharacterMemory, RememberInput, RetrievalContext, Settings
from charmem.composition import load_adapter
from charmem_local_embed import LocalEmbeddingProvider

SETTINGS = {
    "EMBEDDING_PROVIDER": "local",
    "GRAPH_STORE_MODE": "reference",
    "VECTOR_STORE_MODE": "in_memory",
    "RETRIEVAL_STATS_STORE_MODE": "in_memory",
}


def test_core_composition_finds_the_local_embedder() -> None:
    assert load_adapter("embedder", "local") is LocalEmbeddingProvider


async def test_recall_by_meaning_through_the_facade() -> None:
    occurred_at = dt.datetime(2026, 5, 1, 18, 30, tzinfo=dt.UTC)
    async with CharacterMemory.open(Settings.from_mapping(SETTINGS), "local-embed-test") as memory:
        assert isinstance(memory.embedder, LocalEmbeddingProvider)
        for text in [
            "My sister moved to Lisbon last spring.",
            "The quarterly revenue report is due on Friday.",
            "I adopted a cat named Miso.",
        ]:
            await memory.remember(RememberInput(text, occurred_at=occurred_at))
        pack = await memory.retrieve(RetrievalContext(query="Where does my sister live now?"))
    assert pack.items[0].text == "My sister moved to Lisbon last spring."
