"""Talk to a running ``charmem serve`` from another process: remember, recall, correct.

Start a server first (it owns the stores; any number of clients share it)::

    charmem serve --store ./data/shared          # http://127.0.0.1:8765, loopback only
    python examples/http_client.py               # or CHARMEM_SERVER_URL=http://host:port

The client takes and returns charmem's own types and raises charmem's own errors, exactly as the
in-process ``CharacterMemory`` does; it needs only httpx and charmem core.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from charmem import (
    CorrectionTarget,
    CorrectMemoryDraft,
    DerivedType,
    RememberInput,
    ReplacementDerivedMemoryDraft,
    RetrievalContext,
)
from charmem_server import SyncRemoteCharacterMemory


def run(url: str, collection: str = "example") -> str:
    """Remember two things, correct one, and return the prompt text of a recall."""
    with SyncRemoteCharacterMemory(url, collection, token=os.environ.get("CHARMEM_SERVER_TOKEN")) as memory:
        when = datetime(2025, 5, 1, 10, 0, tzinfo=UTC)
        moved = memory.remember(RememberInput("Marta moves to Lisbon in June.", occurred_at=when))
        memory.remember(RememberInput("Marta is looking for a flat near the river.", occurred_at=when))
        observation = moved.object_ids[-1]  # the episode, then its observation
        memory.correct(
            CorrectMemoryDraft(CorrectionTarget.source_object(observation), "she said July").with_replacement(
                ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "Marta moves to Lisbon in July.")
            )
        )
        pack = memory.retrieve(RetrievalContext(query="When does Marta move to Lisbon?"))
        return pack.render(max_tokens=200)


if __name__ == "__main__":
    print(run(os.environ.get("CHARMEM_SERVER_URL", "http://127.0.0.1:8765")))
