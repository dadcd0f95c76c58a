"""Pack parity: every ``retrieve`` pack over one LoCoMo conversation, to compare two versions.

For performance work on the read path, whose packs must not change. The script ingests one
LoCoMo conversation (``charmem_cli.locomo`` drafts, turns and facts) into fresh embedded stores
(persistent Oxigraph, Qdrant Edge, SQLite stats) with the deterministic hashing embedder, adds a
few lifecycle events so every branch of retrieval has something to meet (an active thread with
members, caller links, corrections that supersede facts, forgotten turns), then asks every
question of the conversation under several contexts (defaults; focus on a speaker with a recency
half-life; ``as_of`` mid-conversation with superseded and suppressed items included; an
event-time window; a small hub cap and a wider context window; a type-restricted scope) and
writes one JSON line per pack (``pack.to_dict()``) to ``--out``.

Run it on the old version and the new one and compare::

    python benchmarks/pack_parity.py --out before.jsonl          # on the base commit
    python benchmarks/pack_parity.py --out after.jsonl --compare before.jsonl

``--compare`` exits 1 at the first pack that differs and prints where (the byte-identical packs
"identical stores and queries give identical packs"). Against packs of an older format (a
baseline written before ``PACK_FORMAT_VERSION`` changed), each new pack is first written in the
baseline's format: :data:`ADDED_IN_FORMAT` lists, per format, exactly the keys that format added
(and that the comparison leaves out), and ``format_version`` is the baseline's; every other key
is compared byte for byte. Everything is deterministic:
ids are derived, every timestamp is given, the clock is fixed. ``--data`` is the LoCoMo file
(default ``../shared/datasets/locomo/conv-26.json`` next to the checkout; CC BY-NC, never copied
into the repository); ``--limit`` caps the questions.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from charmem import (
    CharacterMemory,
    CorrectionTarget,
    CorrectMemoryDraft,
    ForgetMemoryDraft,
    GraphLimits,
    LinkDraft,
    MemoryId,
    ObjectType,
    Relation,
    RememberDrafts,
    RetrievalContext,
    Settings,
    ThreadDraft,
)
from charmem.testing import HashingEmbeddingProvider
from charmem_cli.locomo import conversation_drafts, ids_for, load_conversation

#: Per pack format: the item keys and the pack keys it added to the format before it.
ADDED_IN_FORMAT: dict[int, tuple[tuple[str, ...], tuple[str, ...]]] = {
    2: (
        ("admitted_by", "seconds_since_support", "direction", "resolved_by", "trace"),
        ("last_interactions", "scene_resolutions"),
    ),
}

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "locomo" / "conv-26.json"
COLLECTION = "parity"
NOW = datetime(2024, 1, 1, tzinfo=UTC)


class FixedClock:
    """A clock that always answers :data:`NOW`."""

    def now(self) -> datetime:
        return NOW


def settings_for(store: Path) -> Settings:
    return Settings.from_mapping(
        {
            "GRAPH_STORE_MODE": "persistent",
            "VECTOR_STORE_MODE": "embedded",
            "RETRIEVAL_STATS_STORE_MODE": "sqlite",
            "EMBEDDING_PROVIDER": "hashing",
        }
    ).with_store_root(store)


async def build(memory: CharacterMemory, data: Path) -> dict[str, Any]:
    """Ingest the conversation and the lifecycle events; what the contexts need to know."""
    conversation = load_conversation(data)
    ids = ids_for(conversation.conversation_id)
    notions, sessions = conversation_drafts(conversation, include_facts=True)
    for drafts in (notions, *(session.drafts for session in sessions)):
        outcome = await memory.commit(await memory.prepare(drafts))
        if outcome.repair_markers:
            raise SystemExit(f"ingest left repair markers: {outcome.repair_markers}")
    times = [session.drafts.episodes[0].occurred_at for session in sessions]
    turns = [o.id for session in sessions for o in session.drafts.observations]
    facts = [d.id for session in sessions for d in session.drafts.derived]
    fact_texts = {d.id: d.text for session in sessions for d in session.drafts.derived}
    episodes = [session.drafts.episodes[0].id for session in sessions]
    # an active thread over facts and episodes, a resolved one over other facts, caller links
    active, closed = (MemoryId.deterministic(COLLECTION, "thread", n) for n in ("active", "closed"))
    when = times[len(times) // 2]
    created: dict[MemoryId | None, datetime | None] = {
        draft.id: draft.created_at
        for session in sessions
        for group in (session.drafts.episodes, session.drafts.observations, session.drafts.derived)
        for draft in group
    }

    def linked(from_id: MemoryId | None, relation: Relation, to_id: MemoryId | None) -> LinkDraft:
        # a link is recorded at `when`, or once both its ends exist (links are in time order)
        assert from_id is not None
        assert to_id is not None
        instants = [at for at in (when, created.get(from_id), created.get(to_id)) if at is not None]
        return link(from_id, relation, to_id, max(instants))

    threads = RememberDrafts(
        threads=[
            ThreadDraft(title="family and support", summary="what they share", id=active, created_at=when),
            ThreadDraft(title="old plans", status="resolved", id=closed, created_at=when),
        ],
        links=[linked(f, Relation.PART_OF_THREAD, active) for f in (*facts[::5], *episodes[::3])]
        + [linked(f, Relation.PART_OF_THREAD, closed) for f in facts[1::7]]
        + [linked(a, Relation.SUPPORTS, b) for a, b in zip(turns[::13], turns[5::13], strict=False)],
    )
    await memory.commit(await memory.prepare(threads))
    for n, fact in enumerate(facts[::9]):  # corrections: the replacement supersedes the fact
        await memory.correct(
            CorrectMemoryDraft(
                CorrectionTarget.derived_memory(fact),
                f"correction {n}: {fact_texts[fact]}",
                recorded_at=times[-1] + timedelta(days=n + 1),
            )
        )
    for n, turn in enumerate(turns[3::17]):  # forgotten turns
        await memory.forget(
            ForgetMemoryDraft.suppress(
                turn, f"forget {n}", recorded_at=times[-1] + timedelta(days=n + 1, hours=1)
            )
        )
    speakers = [ids.speaker(name) for name in conversation.speakers]
    questions = [str(qa["question"]) for qa in conversation.data.get("qa", []) if qa.get("question")]
    return {"times": times, "speakers": speakers, "questions": questions}


def link(from_id: MemoryId, relation: Relation, to_id: MemoryId, when: datetime) -> LinkDraft:
    """A caller link with a derived id (a link without one gets a random id)."""
    link_id = MemoryId.deterministic(COLLECTION, "link", from_id, relation.value, to_id)
    return LinkDraft(from_id, relation, to_id, id=link_id, recorded_at=when)


def contexts(question: str, known: dict[str, Any]) -> Iterator[tuple[str, RetrievalContext]]:
    """The contexts each question is asked under (module docstring)."""
    times, speakers = known["times"], known["speakers"]
    yield "default", RetrievalContext(query=question)
    yield (
        "focus+recency",
        RetrievalContext(query=question, focus_entity_ids=speakers[:1], recency=timedelta(days=60)),
    )
    yield (
        "as_of+include",
        RetrievalContext(
            query=question,
            as_of=times[-1] + timedelta(days=15),
            include_superseded=True,
            include_suppressed=True,
        ),
    )
    yield (
        "window",
        RetrievalContext(query=question, occurred_between=(times[2], times[len(times) // 2])),
    )
    yield (
        "hub+context",
        RetrievalContext(
            query=question,
            focus_entity_ids=speakers,
            graph_limits=GraphLimits(hub_edge_cap=8, context_window=3, per_node_fanout=4, node_budget=20),
            max_items=25,
        ),
    )
    yield (
        "scope",
        RetrievalContext(
            query=question,
            object_type_defaults=(ObjectType.OBSERVATION, ObjectType.THREAD),
            graph_limits=GraphLimits(
                allowed_object_types=(ObjectType.OBSERVATION, ObjectType.THREAD, ObjectType.ENTITY),
                allowed_relation_types=(Relation.PART_OF_THREAD, Relation.SUPPORTS, Relation.MENTIONS),
            ),
            time_cues=False,
        ),
    )


def added_since(version: int, current: int) -> tuple[list[str], list[str]]:
    """The item keys and pack keys formats after ``version`` up to ``current`` added, sorted.

    Raises:
        SystemExit: ``version`` is newer than ``current``, or a format between them is not in
            :data:`ADDED_IN_FORMAT`.
    """
    if current < version:
        raise SystemExit(f"the baseline's format {version} is newer than this version's {current}")
    item_keys: set[str] = set()
    pack_keys: set[str] = set()
    for newer in range(version + 1, current + 1):
        if newer not in ADDED_IN_FORMAT:
            raise SystemExit(f"pack format {newer} is not described in ADDED_IN_FORMAT")
        item_keys.update(ADDED_IN_FORMAT[newer][0])
        pack_keys.update(ADDED_IN_FORMAT[newer][1])
    return sorted(item_keys), sorted(pack_keys)


def in_format(pack: dict[str, Any], version: int) -> dict[str, Any]:
    """``pack`` (a ``to_dict()``) as format ``version`` wrote it: the keys added since left out."""
    item_keys, pack_keys = added_since(version, pack["format_version"])
    older = {key: value for key, value in pack.items() if key not in pack_keys}
    older["items"] = [{k: v for k, v in item.items() if k not in item_keys} for item in pack["items"]]
    older["format_version"] = version
    return older


def baseline_format(lines: list[str]) -> int | None:
    """The ``format_version`` of the baseline's packs (``None`` without packs)."""
    return int(json.loads(lines[0])["pack"]["format_version"]) if lines else None


async def run(args: argparse.Namespace) -> int:
    expected: list[str] | None = None
    version: int | None = None
    if args.compare is not None:
        expected = args.compare.read_text(encoding="utf-8").splitlines()
        version = baseline_format(expected)
    with tempfile.TemporaryDirectory(prefix="charmem-parity-") as scratch:
        settings = settings_for(Path(scratch))
        async with CharacterMemory.open(
            settings,
            COLLECTION,
            embedding_provider=HashingEmbeddingProvider(args.dim),
            clock=FixedClock(),
        ) as memory:
            known = await build(memory, args.data)
            questions = known["questions"][: args.limit]
            lines: list[str] = []
            start = time.perf_counter()
            for question in questions:
                for label, context in contexts(question, known):
                    pack = await memory.retrieve(context)
                    record = {"context": label, "pack": pack.to_dict()}
                    lines.append(json.dumps(record, ensure_ascii=False, sort_keys=True))
            seconds = time.perf_counter() - start
    print(f"{len(lines)} packs ({len(questions)} questions) in {seconds:.1f} s", file=sys.stderr)
    if args.out is not None:
        args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    if expected is None:
        return 0
    current = json.loads(lines[0])["pack"]["format_version"] if lines else None
    if version is not None and current is not None and current != version:
        item_keys, pack_keys = added_since(version, current)
        print(f"compared in format {version}: left out item keys {item_keys}, pack keys {pack_keys}")
        lines = [
            json.dumps({**rec, "pack": in_format(rec["pack"], version)}, ensure_ascii=False, sort_keys=True)
            for rec in map(json.loads, lines)
        ]
    for n, (got, want) in enumerate(zip(lines, expected, strict=False)):
        if got != want:
            got_pack, want_pack = json.loads(got), json.loads(want)
            keys = [k for k in want_pack["pack"] if got_pack["pack"].get(k) != want_pack["pack"][k]]
            print(f"pack {n} ({want_pack['context']}: {want_pack['pack']['query']!r}) differs in {keys}")
            return 1
    if len(lines) != len(expected):
        print(f"{len(lines)} packs, {len(expected)} expected")
        return 1
    print(f"all {len(lines)} packs identical")
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a LoCoMo conversation file")
    parser.add_argument("--out", type=Path, help="write the packs here (JSON lines)")
    parser.add_argument("--compare", type=Path, help="packs of another version to compare with")
    parser.add_argument("--limit", type=int, help="most questions (default: all)")
    parser.add_argument("--dim", type=int, default=256, help="hashing embedder dimensions (default 256)")
    sys.exit(asyncio.run(run(parser.parse_args())))


if __name__ == "__main__":
    main()
