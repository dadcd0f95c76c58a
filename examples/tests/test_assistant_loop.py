"""The assistant loop example: what is remembered on one turn reaches the next turn's prompt."""

from __future__ import annotations

import importlib.util
import sys
from datetime import UTC, datetime
from pathlib import Path

from charmem import CharacterMemory
from charmem.stats import InMemoryRetrievalStatsStore
from charmem.testing import HashingEmbeddingProvider, ReferenceGraphStore, ReferenceVectorIndex

_spec = importlib.util.spec_from_file_location(
    "assistant_loop", Path(__file__).resolve().parents[1] / "assistant_loop.py"
)
assert _spec is not None
assert _spec.loader is not None
loop = importlib.util.module_from_spec(_spec)
sys.modules["assistant_loop"] = loop
_spec.loader.exec_module(loop)


async def test_second_turn_prompt_contains_what_the_first_turn_remembered() -> None:
    embedder = HashingEmbeddingProvider()
    memory = CharacterMemory(
        graph=ReferenceGraphStore("assistant"),
        vectors=ReferenceVectorIndex(
            "assistant", model_id=embedder.model_id, vector_size=embedder.vector_size
        ),
        embedder=embedder,
        stats=InMemoryRetrievalStatsStore("assistant"),
        collection="assistant",
    )
    scripted = iter(["Lovely, say hi to Ana from me!", "Your sister Ana, from Porto."])
    prompts: list[str] = []

    async def reply(prompt: str) -> str:
        prompts.append(prompt)
        return next(scripted)

    first = await loop.assistant_turn(
        memory,
        "My sister Ana is visiting from Porto next week.",
        reply,
        occurred_at=datetime(2024, 6, 1, tzinfo=UTC),
    )
    assert "nothing relevant remembered" in first.prompt
    second = await loop.assistant_turn(memory, "Who is visiting from Porto?", reply)
    assert "My sister Ana is visiting from Porto next week." in second.prompt
    assert "say hi to Ana" in second.prompt
    assert second.reply == "Your sister Ana, from Porto."
    await memory.close()
