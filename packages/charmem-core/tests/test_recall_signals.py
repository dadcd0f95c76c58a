"""The recall-signal contract on the reference stack (hashing embedder, no lexical cue)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from charmem import CharacterMemory
from charmem.testing import HashingEmbeddingProvider
from charmem_contract import RecallSignalsContract, reference_memory


class TestReferenceRecallSignals(RecallSignalsContract):
    async def make_memory(self, collection: str) -> AsyncIterator[CharacterMemory]:
        memory = reference_memory(collection, HashingEmbeddingProvider())
        try:
            yield memory
        finally:
            await memory.close()
