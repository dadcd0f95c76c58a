"""The memory commands: ``ingest-locomo``, ``recall``, ``remember``, ``demo``."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from tqdm import tqdm

from charmem import (
    CharacterMemory,
    CharmemError,
    ContinuityContextPack,
    PackItem,
    RememberDrafts,
    RememberInput,
    RememberOutcome,
    RetrievalContext,
    Settings,
)
from charmem.ports import EmbeddingProvider
from charmem_cli._common import (
    DEFAULT_COLLECTION,
    TimedEmbedder,
    announce_model_load,
    embedding_provider,
    require_collection,
)
from charmem_cli._scene_options import remembered
from charmem_cli.locomo import SessionDrafts, conversation_drafts, load_conversation

__all__ = ["DEMO_QUESTIONS", "demo", "ingest_locomo", "print_pack", "recall", "remember"]

DEMO_QUESTIONS = (
    "What instrument is Ines learning?",
    "Where did Tomas travel for work?",
    "What does Ines want to name the dog?",
)


def _collection_for(conversation_id: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "-_" else "-" for c in conversation_id.lower())
    return cleaned.strip("-_")[:128] or DEFAULT_COLLECTION


async def ingest_locomo(
    files: Sequence[Path],
    settings: Settings,
    *,
    collection: str,
    per_file: bool,
    include_facts: bool,
    progress: bool = True,
    provider: EmbeddingProvider | None = None,
) -> dict[str, Any]:
    """Ingest LoCoMo conversation files through ``RememberDrafts`` (one plan per session).

    A conversation's plans (its speakers, then each session) are committed in order with
    ``CharacterMemory.commit_many``, so its texts are embedded in calls of the provider's
    ``preferred_batch_size`` while later sessions are written.

    Args:
        files: LoCoMo conversation files.
        settings: the deployment settings.
        collection: the collection to ingest into (unless ``per_file``).
        per_file: one collection per conversation, named after it.
        include_facts: also ingest the files' facts as derived memories.
        progress: show a progress bar on stderr.
        provider: the embedder (default: the one the settings select); its model is loaded
            first, with a line on stderr, and the load counts as embedding time.

    Returns:
        dict: counts and timings (``objects``, ``seconds``, ``embedding_seconds``, ``texts``).
    """
    embedder = TimedEmbedder(provider or embedding_provider(settings))
    conversations = [load_conversation(path) for path in files]
    plans = [(c, *conversation_drafts(c, include_facts=include_facts)) for c in conversations]
    total = sum(1 + len(sessions) for _c, _n, sessions in plans)
    objects = 0
    start = time.perf_counter()
    await announce_model_load(embedder.inner)
    embedder.seconds += time.perf_counter() - start
    bar = tqdm(total=total, desc="ingest", unit="batch", disable=not progress, file=sys.stderr)
    memory: CharacterMemory | None = None
    try:
        for conversation, notions, sessions in plans:
            name = _collection_for(conversation.conversation_id) if per_file else collection
            if memory is None or memory.collection != name:
                if memory is not None:
                    await memory.close()
                memory = await CharacterMemory.open(settings, name, embedding_provider=embedder)
            outcomes = await _commit_conversation(memory, conversation.conversation_id, notions, sessions)
            objects += sum(len(outcome.object_ids) for outcome in outcomes)
            bar.update(len(outcomes))
    finally:
        bar.close()
        if memory is not None:
            await memory.close()
    seconds = time.perf_counter() - start
    return {
        "conversations": len(conversations),
        "objects": objects,
        "seconds": seconds,
        "embedding_seconds": embedder.seconds,
        "texts": embedder.texts,
    }


async def _commit_conversation(
    memory: CharacterMemory, conversation_id: str, notions: RememberDrafts, sessions: Sequence[SessionDrafts]
) -> list[RememberOutcome]:
    """Commit a conversation's notions, then its sessions, in one ``commit_many``.

    Raises:
        CharmemError: a write left repair markers (running the command again repairs them).
        PlanSequenceError: a session's plan failed (the sessions before it are committed).
    """
    drafts = (notions, *(session.drafts for session in sessions))
    outcomes = await memory.commit_many([await memory.prepare(d) for d in drafts])
    markers = [marker for outcome in outcomes for marker in outcome.repair_markers]
    if markers:
        raise CharmemError(
            f"ingest of {conversation_id} left repair markers {markers}; run the same command again to repair"
        )
    return outcomes


def print_pack(pack: ContinuityContextPack, out: Any = None) -> None:
    """Print a pack readably: one line per item, then notions, the scene's people and omissions.

    An item's line: rank, score, type, time, id, status, text and the roads that admitted it.
    """
    out = out or sys.stdout
    print(f"Recall for: {pack.query}" if pack.query is not None else "Recall for the scene", file=out)
    if not pack.items:
        print("  (nothing recalled)", file=out)
    for rank, item in enumerate(pack.items, 1):
        print(_item_line(rank, item), file=out)
    named = sorted(
        (e for e in pack.entities if e.names), key=lambda e: (e.names, e.id)
    )  # as render lists them
    names = [", ".join(e.names) for e in named]
    if names:
        print(f"  entities: {'; '.join(names)}", file=out)
    print_scene_answers(pack, out)
    if pack.omissions:
        reasons = ", ".join(f"{str(o.id)[:8]}:{o.reason}" for o in pack.omissions[:8])
        print(f"  omitted: {reasons}", file=out)


def _item_line(rank: int, item: PackItem) -> str:
    kind = item.derived_type.value if item.derived_type else item.object_type.value
    status = "" if item.status.value == "current" else f" [{item.status.value}]"
    text = " ".join(item.text.split())
    if len(text) > 160:
        text = text[:157] + "..."
    roads = f"  ({', '.join(road.value for road in item.admitted_by)})" if item.admitted_by else ""
    return (
        f"{rank:>3}. {item.score:6.3f}  {kind:<12} {item.occurred_at:%Y-%m-%d}  "
        f"{str(item.id)[:8]}{status}  {text}{roads}"
    )


def print_scene_answers(pack: ContinuityContextPack, out: Any) -> None:
    """The pack's last meetings and how each scene participant resolved, one line each."""
    names = {entity.id: ", ".join(entity.names) for entity in pack.entities if entity.names}

    def who(entity_id: Any) -> str:
        return f"{names[entity_id]} ({str(entity_id)[:8]})" if entity_id in names else str(entity_id)[:8]

    for met in pack.last_interactions:
        if met.last_met_at is None or met.elapsed is None:
            print(f"  last met: {who(met.entity_id)} never", file=out)
        else:
            print(
                f"  last met: {who(met.entity_id)} {met.last_met_at:%Y-%m-%d %H:%M} "
                f"({_ago(met.elapsed.total_seconds())} before the scene)",
                file=out,
            )
    for resolution in pack.scene_resolutions:
        found = ", ".join(who(i) for i in resolution.entity_ids)
        print(
            f"  participant {resolution.participant_index + 1}: {resolution.status.value}"
            + (f" -> {found}" if found else ""),
            file=out,
        )


def _ago(seconds: float) -> str:
    """``3 days``, ``5 hours``, ``12 minutes`` (the largest whole unit)."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{int(seconds)} seconds"


async def recall(settings: Settings, collection: str, context: RetrievalContext, as_json: bool) -> None:
    """``charmem recall``: print the pack for ``context`` (``pack.to_dict()`` as JSON with ``as_json``).

    Raises:
        ConfigurationError: no graph store there, or the collection holds nothing.
    """
    await require_collection(settings, collection)
    provider = embedding_provider(settings)
    await announce_model_load(provider)
    async with CharacterMemory.open(settings, collection, embedding_provider=provider) as memory:
        pack = await memory.retrieve(context)
    if as_json:
        print(json.dumps(pack.to_dict(), ensure_ascii=False, indent=2))
    else:
        print_pack(pack)


async def remember(settings: Settings, collection: str, item: RememberInput) -> None:
    """``charmem remember``: remember ``item`` as an episode; print the new ids as JSON."""
    provider = embedding_provider(settings)
    await announce_model_load(provider)
    async with CharacterMemory.open(settings, collection, embedding_provider=provider) as memory:
        outcome = await memory.remember(item)
    print(json.dumps(remembered(outcome)))


async def demo(settings: Settings, questions: Sequence[str]) -> None:
    """``charmem demo``: ingest the bundled sample conversation, then recall ``questions``."""
    provider = embedding_provider(settings)
    sample = resources.files("charmem_cli") / "data" / "sample-conversation.json"
    with resources.as_file(sample) as path:
        report = await ingest_locomo(
            [path], settings, collection="demo", per_file=False, include_facts=True, provider=provider
        )
    print(
        f"ingested {report['objects']} objects in {report['seconds']:.1f} s "
        f"({report['embedding_seconds']:.1f} s embedding) into collection 'demo'\n"
    )
    async with CharacterMemory.open(settings, "demo", embedding_provider=provider) as memory:
        for question in questions:
            pack = await memory.retrieve(RetrievalContext(query=question, max_items=6))
            print_pack(pack)
            counter = pack.token_counter.name if pack.token_counter else "whitespace"
            print(f"\n  rendered for the prompt (at most 120 tokens, counted by {counter}):")
            for line in pack.render(max_tokens=120).splitlines():
                print(f"    {line}")
            print()
