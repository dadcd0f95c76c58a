"""The spec's typical assistant loop, with a pluggable reply function.

1. The user says something.  2. Retrieve relevant memories.  3. Put them in the prompt.
4. The assistant responds.   5. Remember the exchange.      6. Later turns are more continuous.

Run it on the embedded default stores with local embeddings (offline)::

    python examples/assistant_loop.py --store ./data/assistant

The default reply function only echoes what it recalled; plug in any LLM call with the same
signature (``async def reply(prompt: str) -> str``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from charmem import CharacterMemory, RememberInput, RetrievalContext, Settings

ReplyFunction = Callable[[str], Awaitable[str]]

SYSTEM = "You are a warm, attentive companion. Use what you remember when it helps."


@dataclass(frozen=True)
class Turn:
    """One pass of the loop: the prompt the model saw and its reply."""

    prompt: str
    reply: str


def build_prompt(memory_context: str, user_message: str) -> str:
    """The LLM prompt: system text, the rendered context pack, the user's message."""
    remembered = memory_context or "(nothing relevant remembered yet)"
    return f"{SYSTEM}\n\nWhat you remember:\n{remembered}\n\nUser: {user_message}\nAssistant:"


async def assistant_turn(
    memory: CharacterMemory,
    user_message: str,
    reply: ReplyFunction,
    *,
    occurred_at: datetime | None = None,
    max_tokens: int = 400,
) -> Turn:
    """Run one turn: retrieve, prompt, reply, remember the exchange."""
    pack = await memory.retrieve(RetrievalContext(query=user_message, max_items=8))
    prompt = build_prompt(pack.render(max_tokens=max_tokens), user_message)
    answer = await reply(prompt)
    await memory.remember(
        RememberInput(f"User: {user_message}\nAssistant: {answer}", occurred_at=occurred_at)
    )
    return Turn(prompt=prompt, reply=answer)


async def echo_reply(prompt: str) -> str:
    """A stand-in for an LLM: says how many memories the prompt carried."""
    remembered = prompt.split("What you remember:\n", 1)[1].split("\n\nUser:", 1)[0]
    count = sum(1 for line in remembered.splitlines() if line.startswith("- "))
    return f"(I recalled {count} memories.)"


async def main(store: str, messages: list[str]) -> None:
    """Run the loop over ``messages`` on the embedded stores under ``store``."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    settings = Settings.from_mapping({**os.environ, "EMBEDDING_PROVIDER": "local"}).with_store_root(
        __import__("pathlib").Path(store)
    )
    async with CharacterMemory.open(settings, "assistant") as memory:
        for message in messages:
            turn = await assistant_turn(memory, message, echo_reply)
            print(f"--- prompt ---\n{turn.prompt}\n--- reply ---\n{turn.reply}\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", default="./data/assistant")
    parser.add_argument(
        "messages",
        nargs="*",
        default=["My sister Ana is visiting from Porto next week.", "Who is coming to visit me?"],
    )
    args = parser.parse_args()
    asyncio.run(main(args.store, args.messages))
