"""Commit throughput and where write (and retrieve) time goes: graph vs vectors vs stats.

Builds a LoCoMo-shaped synthetic history (conversations of two speakers, each a notion with a
given ``KnownAs`` name; sessions of ``--turns`` observations plus ``--facts`` derived claims
grounded on them) of about ``--memories`` memories, and commits it on the embedded default stores
(persistent Oxigraph, Qdrant Edge, SQLite stats) in one of two ways:

* ``bulk``: one plan holding everything (a bulk ingest);
* ``session``: one plan per session (how an assistant remembers as it goes);
* ``many``: the same plans per session, in one ``commit_many`` (a bulk ingest of sessions).

``--mode ingest --data LOCOMO_FILE`` measures embedding instead: it ingests the conversation as
``charmem ingest-locomo`` does, with the real local model (charmem-local-embed, offline), counts
the embedding calls and their seconds, then times ONE ``embed_documents`` call over exactly the
texts the ingest embedded (same provider, so the same torch threads; the model is warmed up
first) and prints the ratio (one call's seconds / the ingest's embedding seconds) and how far the
vectors of the two differ.

Embedding is excluded: vectors come from the hashing embedder (``--dim`` dimensions) and are
computed before the clock starts, so the numbers are charmem's own work. Every store call is
timed; the table shows the seconds spent awaiting each store and the rest (planning and
validation in Python), wall time and the process's CPU time (all threads: on a loaded machine
wall time grows, CPU time much less).

Then ``--queries`` cue texts are retrieved twice: the first pass meets a cold read cache, the
second a warm one (a long-running process). The query vector is cached, so embedding is excluded
here too; the warm pass is split into CPU spent in vector search, graph store calls, stats and
the rest (ranking, expansion and the pack in Python).

    python benchmarks/write_throughput.py                       # 5,000 memories, both modes
    python benchmarks/write_throughput.py --mode bulk --memories 20000 --queries 0
    nox -s bench-write -- --mode session
    HF_HUB_OFFLINE=1 python benchmarks/write_throughput.py --mode ingest --data conv-26.json
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from charmem import (
    BeliefAssertion,
    CharacterMemory,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    EpisodeDraft,
    KnownAs,
    MemoryId,
    ObservationDraft,
    RememberDrafts,
    Settings,
)
from charmem.domain.model import DerivedMemory, Observation
from charmem.domain.rules import voiced_text
from charmem.testing import HashingEmbeddingProvider, stores_of

WORDS = [
    "coffee",
    "garden",
    "music",
    "painting",
    "hiking",
    "dog",
    "cat",
    "school",
    "work",
    "travel",
    "beach",
    "mountain",
    "book",
    "movie",
    "family",
    "friend",
    "dinner",
    "camping",
    "guitar",
    "piano",
    "soccer",
    "yoga",
    "recipe",
    "city",
    "river",
    "festival",
    "concert",
    "museum",
    "project",
    "support",
    "group",
    "adoption",
    "career",
    "counseling",
    "pottery",
    "photography",
    "volunteer",
]
NAMES = ("Ana", "Bo", "Caro", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lea")


class MemoisedEmbedder:
    """The hashing embedder, remembering every vector: warm it, then embedding costs nothing."""

    def __init__(self, dim: int) -> None:
        self.inner = HashingEmbeddingProvider(dim, model_id="bench-hashing")
        self.vectors: dict[str, list[float]] = {}
        self.misses = 0  # texts embedded for real (not warmed)

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def vector_size(self) -> int:
        return self.inner.vector_size

    def _one(self, text: str) -> list[float]:
        vector = self.vectors.get(text)
        if vector is None:
            self.misses += 1
            vector = self.vectors[text] = self.inner.embed(text)
        return vector

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._one(text) for text in texts]

    async def embed_query(self, text: str) -> list[float]:
        return self._one(text)


class Timed:
    """Wraps a store: each awaited method call adds its seconds to ``spent[label]`` (wall time)
    and to ``cpu[label]`` (the process's CPU time meanwhile)."""

    def __init__(self, inner: Any, label: str, spent: Counter[str], cpu: Counter[str] | None = None) -> None:
        self._inner, self._label, self._spent = inner, label, spent
        self._cpu: Counter[str] = Counter() if cpu is None else cpu

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if not asyncio.iscoroutinefunction(attribute):
            return attribute

        async def timed(*args: Any, **kwargs: Any) -> Any:
            start, cpu = time.perf_counter(), time.process_time()
            try:
                return await attribute(*args, **kwargs)
            finally:
                self._spent[f"{self._label}.{name}"] += time.perf_counter() - start
                self._cpu[f"{self._label}.{name}"] += time.process_time() - cpu

        return timed


def _id(*parts: object) -> MemoryId:
    return MemoryId(uuid.uuid5(uuid.NAMESPACE_URL, "charmem-bench:" + ":".join(map(str, parts))))


def _sentence(rng: random.Random, names: Sequence[str]) -> str:
    words = rng.sample(WORDS, 6)
    if rng.random() < 0.3:
        words.insert(2, rng.choice(names))
    return "I " + " ".join(words) + "."


def history(memories: int, turns: int, facts: int, seed: int = 7) -> list[RememberDrafts]:
    """Drafts of about ``memories`` memories: per conversation its notions, then its sessions."""
    rng = random.Random(seed)
    start = datetime(2023, 1, 1, tzinfo=UTC)
    batches: list[RememberDrafts] = []
    count = conversation = 0
    while count < memories:
        pair = [f"{NAMES[(2 * conversation + k) % len(NAMES)]}{conversation}" for k in (0, 1)]
        people = {name: _id(conversation, "person", name) for name in pair}
        batches.append(
            RememberDrafts(
                entities=[EntityDraft(id=i, entity_type="person", created_at=start) for i in people.values()],
                derived=[
                    DerivedMemoryDraft(
                        DerivedType.REFLECTION,
                        f"I know this person as {name}.",
                        id=_id(conversation, "name", name),
                        entity_ids=[person],
                        assertions=[BeliefAssertion(person, KnownAs(name))],
                        given_by_application=True,
                        created_at=start,
                    )
                    for name, person in people.items()
                ],
            )
        )
        count += 4
        for session in range(25):
            if count >= memories:
                break
            when = start + timedelta(days=session, hours=conversation)
            episode = _id(conversation, session, "episode")
            said = [
                ObservationDraft(
                    id=_id(conversation, session, "turn", n),
                    text=_sentence(rng, pair),
                    episode_id=episode,
                    observed_at=when + timedelta(seconds=n),
                    speaker_entity_id=people[pair[n % 2]],
                    created_at=when,
                )
                for n in range(turns)
            ]
            claims = [
                DerivedMemoryDraft(
                    DerivedType.CLAIM,
                    f"{pair[n % 2]} {_sentence(rng, pair)}",
                    id=_id(conversation, session, "fact", n),
                    entity_ids=[people[pair[n % 2]]],
                    observation_ids=[said[rng.randrange(turns)].id],
                    created_at=when,
                )
                for n in range(facts)
            ]
            batches.append(
                RememberDrafts(
                    episodes=[
                        EpisodeDraft(
                            id=episode,
                            occurred_at=when,
                            participant_entity_ids=list(people.values()),
                            created_at=when,
                        )
                    ],
                    observations=said,
                    derived=claims,
                )
            )
            count += 1 + turns + facts
        conversation += 1
    return batches


def merged(batches: Sequence[RememberDrafts]) -> RememberDrafts:
    return RememberDrafts(
        episodes=[d for b in batches for d in b.episodes],
        observations=[d for b in batches for d in b.observations],
        entities=[d for b in batches for d in b.entities],
        derived=[d for b in batches for d in b.derived],
    )


def _settings(root: Path) -> Settings:
    return Settings.from_mapping(
        {
            "GRAPH_STORE_MODE": "persistent",
            "VECTOR_STORE_MODE": "embedded",
            "RETRIEVAL_STATS_STORE_MODE": "sqlite",
            "EMBEDDING_PROVIDER": "hashing",
        }
    ).with_store_root(root)


def _aligned(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    return [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(line, widths, strict=True))
        )
        for line in (header, *rows)
    ]


async def ingest(mode: str, args: argparse.Namespace, root: Path) -> tuple[list[str], str, Path]:
    """Commit the history in ``mode``; returns a table row, the split per store call and the
    store directory."""
    batches = history(args.memories, args.turns, args.facts)
    embedder = MemoisedEmbedder(args.dim)
    store = root / mode
    spent: Counter[str] = Counter()
    async with CharacterMemory.open(_settings(store), "bench", embedding_provider=embedder) as memory:
        plans = [await memory.prepare(b) for b in ([merged(batches)] if mode == "bulk" else batches)]
        # Embedding excluded: every vector is computed before the clock starts, of the texts
        # commit embeds (an utterance voiced with its speaker's name, as ``embedding_texts`` does).
        names = {
            a.subject: (a.predicate.name,)
            for plan in plans
            for o in plan.objects
            if isinstance(o, DerivedMemory)
            for a in o.assertions
        }
        speakers = {
            o.id: o.speaker_entity_id
            for plan in plans
            for o in plan.objects
            if isinstance(o, Observation) and o.speaker_entity_id is not None
        }
        for plan in plans:
            await embedder.embed_documents(
                [
                    voiced_text(e.text, names.get(speakers[e.id], ())) if e.id in speakers else e.text
                    for e in plan.index_entries
                ]
            )
        embedder.misses = 0
        memory._graph = Timed(stores_of(memory).graph, "graph", spent)
        memory._vectors = Timed(stores_of(memory).vectors, "vectors", spent)
        memory._stats = Timed(stores_of(memory).stats, "stats", spent)
        cpu, wall = time.process_time(), time.perf_counter()
        outcomes = (
            await memory.commit_many(plans)
            if mode == "many"
            else [await memory.commit(plan) for plan in plans]
        )
        if markers := [m for outcome in outcomes for m in outcome.repair_markers]:
            raise SystemExit(f"commit left repair markers: {markers}")
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        spent = Counter(spent)  # the commits' calls only, not the closing ones
        if embedder.misses:
            raise SystemExit(f"{embedder.misses} texts were embedded inside the clock; warm them first")
    objects = sum(len(p.objects) for p in plans)
    links = sum(len(p.links) + len(p.derived_links) for p in plans)

    def share(prefix: str) -> str:
        seconds = sum(v for k, v in spent.items() if k.startswith(prefix))
        return f"{seconds:.2f} ({seconds / wall:.0%})"

    rest = wall - sum(spent.values())
    row = [
        mode,
        str(len(plans)),
        str(objects),
        str(links),
        f"{wall:.2f}",
        f"{cpu:.2f}",
        f"{objects / wall:.0f}",
        f"{objects / cpu:.0f}",
        share("graph.write_batch"),
        share("graph."),
        share("vectors."),
        share("stats."),
        f"{rest:.2f} ({rest / wall:.0%})",
    ]
    split = ", ".join(f"{k} {v:.2f}" for k, v in spent.most_common())
    return row, f"{mode}: seconds per store call: {split}", store


async def retrieve(args: argparse.Namespace, store: Path) -> list[str]:
    """Retrieve ``--queries`` cues twice (cold, then warm read cache); a table of both passes."""
    rng = random.Random(11)
    cues = [
        f"{_sentence(rng, NAMES)} What did {NAMES[n % len(NAMES)]}{n % 5} say?" for n in range(args.queries)
    ]
    embedder = MemoisedEmbedder(args.dim)
    for cue in cues:
        await embedder.embed_query(cue)
    lines: list[str] = []
    async with CharacterMemory.open(_settings(store), "bench", embedding_provider=embedder) as memory:
        rows = []
        cpu: Counter[str] = Counter()
        for label in ("cold", "warm"):
            if label == "warm":
                spent: Counter[str] = Counter()
                memory._graph = Timed(stores_of(memory).graph, "graph", spent, cpu)
                memory._vectors = Timed(stores_of(memory).vectors, "vectors", spent, cpu)
                memory._stats = Timed(stores_of(memory).stats, "stats", spent, cpu)
            walls, cpus = [], []
            for cue in cues:
                started, wall = time.process_time(), time.perf_counter()
                pack = await memory.retrieve(cue)
                walls.append(time.perf_counter() - wall)
                cpus.append(time.process_time() - started)
                if not pack.items:
                    raise SystemExit(f"empty pack for {cue!r}")
            rows.append(
                [
                    label,
                    str(len(cues)),
                    f"{statistics.median(walls) * 1000:.1f}",
                    f"{sorted(walls)[int(len(walls) * 0.9)] * 1000:.1f}",
                    f"{statistics.median(cpus) * 1000:.1f}",
                    f"{statistics.mean(cpus) * 1000:.1f}",
                ]
            )
        warm_cpu = Counter(cpu)  # the calls of the warm pass, not the closing ones
        lines += _aligned(["pass", "queries", "p50_ms", "p90_ms", "cpu_p50_ms", "cpu_mean_ms"], rows)
        in_stores = sum(warm_cpu.values()) / len(cues) * 1000
        split = ", ".join(f"{k} {v / len(cues) * 1000:.1f}" for k, v in warm_cpu.most_common())
        rest = statistics.mean(cpus) * 1000 - in_stores
        lines.append(f"warm pass, CPU ms per retrieve: {split}; the rest (retrieval in Python) {rest:.1f}")
    return lines


class CountingEmbedder:
    """Wraps a provider: counts ``embed_documents`` calls, texts and seconds, keeps every row."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[int] = []
        self.seconds = 0.0
        self.rows: dict[str, list[float]] = {}

    def __getattr__(self, name: str) -> Any:  # model_id, vector_size, preferred_batch_size
        return getattr(self.inner, name)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        started = time.perf_counter()
        rows: list[list[float]] = await self.inner.embed_documents(texts)
        self.seconds += time.perf_counter() - started
        self.calls.append(len(texts))
        self.rows.update(zip(texts, rows, strict=True))
        return rows

    async def embed_query(self, text: str) -> list[float]:
        row: list[float] = await self.inner.embed_query(text)
        return row


async def _per_session(data: Path, settings: Settings, embedder: CountingEmbedder) -> int:
    """The ingest as it was before ``commit_many``: one ``commit`` per session; objects written."""
    from charmem_cli.locomo import conversation_drafts, load_conversation

    notions, sessions = conversation_drafts(load_conversation(data), include_facts=True)
    objects = 0
    async with CharacterMemory.open(settings, "bench", embedding_provider=embedder) as memory:
        for drafts in (notions, *(s.drafts for s in sessions)):
            objects += len((await memory.commit(await memory.prepare(drafts))).object_ids)
    return objects


async def _ingest_way(
    way: str, args: argparse.Namespace, root: Path, provider: Any
) -> tuple[CountingEmbedder, float, int]:
    """One ingest of ``--data`` into fresh stores: the embedder's counts, wall seconds, objects."""
    from charmem_cli._memory_commands import ingest_locomo

    embedder = CountingEmbedder(provider)
    settings = _settings(root)
    started = time.perf_counter()
    if way == "per-session":
        objects = await _per_session(args.data, settings, embedder)
    else:
        report = await ingest_locomo(
            [args.data], settings, collection="bench", per_file=False, include_facts=True,
            progress=False, provider=embedder,
        )  # fmt: skip
        objects = int(report["objects"])
    return embedder, time.perf_counter() - started, objects


async def ingest_locomo_measure(args: argparse.Namespace, root: Path) -> list[str]:
    """Ingest a LoCoMo file as ``charmem ingest-locomo`` does (and, for comparison, one commit per
    session), with the real local model, and time one ``embed_documents`` call over exactly the
    texts the ingest embedded; ``--repeat`` interleaved runs, the best of each kept."""
    import numpy as np

    from charmem_local_embed import LocalEmbeddingProvider

    provider = LocalEmbeddingProvider(**({"preferred_batch_size": args.batch} if args.batch else {}))
    await asyncio.to_thread(provider.load)
    warm = [f"warm-up sentence number {n} about {WORDS[n % len(WORDS)]}" for n in range(256)]
    await provider.embed_documents(warm)  # first forward passes allocate; not timed
    ways = ("per-session", "ingest-locomo")
    runs: dict[str, list[tuple[CountingEmbedder, float, int]]] = {way: [] for way in ways}
    once: list[float] = []
    for run in range(args.repeat):
        for way in ways:
            runs[way].append(await _ingest_way(way, args, root / f"{way}-{run}", provider))
        texts = list(runs["ingest-locomo"][-1][0].rows)
        started = time.perf_counter()
        rows = await provider.embed_documents(texts)
        once.append(time.perf_counter() - started)
    table = []
    for way in ways:
        embed_s = min(e.seconds for e, _w, _o in runs[way])
        embedder, _wall, objects = runs[way][-1]
        calls = len(embedder.calls)
        table.append([
            way, str(len(embedder.rows)), str(calls), f"{len(embedder.rows) / max(calls, 1):.1f}",
            f"{embed_s:.2f}", f"{min(once):.2f}", f"{min(once) / embed_s:.2f}",
            f"{min(w for _e, w, _o in runs[way]):.2f}", str(objects),
        ])  # fmt: skip
    embedder = runs["ingest-locomo"][-1][0]
    alone = np.asarray(rows, dtype=np.float64)
    batched = np.asarray([embedder.rows[t] for t in texts], dtype=np.float64)
    single = np.asarray(
        [(await provider.embed_documents([t]))[0] for t in texts[: args.alone]], dtype=np.float64
    )
    per_run = "; ".join(f"{way} {', '.join(f'{e.seconds:.2f}' for e, _w, _o in runs[way])}" for way in ways)
    header = ["ingest", "texts", "calls", "texts/call", "embed_s", "one_call_s", "ratio", "wall_s", "objects"]
    return [
        f"{args.data.name}, local model {provider.model_id} (preferred_batch_size "
        f"{provider.preferred_batch_size}), the provider's torch threads, warmed up; "
        f"best of {args.repeat} interleaved runs",
        *_aligned(header, table),
        f"embedding seconds per run: {per_run}; one call: {', '.join(f'{o:.2f}' for o in once)}",
        f"ingest-locomo call sizes: {sorted(Counter(embedder.calls).items())}; texts embedded twice: "
        f"{sum(embedder.calls) - len(texts)}",
        f"vectors, ingest-locomo vs one call: max |diff| {np.abs(batched - alone).max():.2e}, min cosine "
        f"{float((batched * alone).sum(axis=1).min()):.8f}; the first {len(single)} texts alone vs in "
        f"one call: max |diff| {np.abs(single - alone[: len(single)]).max():.2e}",
    ]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=5000, help="about this many memories (default 5000)")
    parser.add_argument("--mode", choices=("bulk", "session", "many", "both", "ingest"), default="both")
    parser.add_argument("--dim", type=int, default=1536, help="vector dimensions (default 1536)")
    parser.add_argument("--turns", type=int, default=20, help="observations per session")
    parser.add_argument("--facts", type=int, default=4, help="derived claims per session")
    parser.add_argument(
        "--queries", type=int, default=40, help="cues retrieved after the bulk ingest (0: none)"
    )
    parser.add_argument(
        "--store", type=Path, help="keep the stores in this directory (default: a temporary one)"
    )
    parser.add_argument(
        "--data", type=Path, help="--mode ingest: a LoCoMo conversation file (read where it is)"
    )
    parser.add_argument(
        "--alone", type=int, default=64, help="--mode ingest: texts also embedded one per call"
    )
    parser.add_argument("--repeat", type=int, default=2, help="--mode ingest: interleaved runs, best kept")
    parser.add_argument("--batch", type=int, help="--mode ingest: the model's preferred_batch_size")
    args = parser.parse_args()
    if args.mode == "ingest":
        if args.data is None:
            parser.error("--mode ingest needs --data LOCOMO_FILE")
        with tempfile.TemporaryDirectory(prefix="charmem-bench-") as scratch:
            print("\n".join(await ingest_locomo_measure(args, args.store or Path(scratch))))
        return
    modes = ("bulk", "session") if args.mode == "both" else (args.mode,)
    with tempfile.TemporaryDirectory(prefix="charmem-bench-") as scratch:
        root = args.store or Path(scratch)
        rows, splits, stores = [], [], {}
        for mode in modes:
            row, split, stores[mode] = await ingest(mode, args, root)
            rows.append(row)
            splits.append(split)
        header = [
            "mode", "commits", "objects", "links", "wall_s", "cpu_s", "obj/s", "obj/s_cpu",
            "graph_write_s", "graph_s", "vectors_s", "stats_s", "rest_s",
        ]  # fmt: skip
        print(f"commit throughput, {args.memories} memories x {args.dim}-d, embedding excluded")
        print("\n".join(_aligned(header, rows)))
        print("\n".join(splits))
        if args.queries:
            print(f"\nretrieve after the {modes[0]} ingest, query embedding excluded")
            print("\n".join(await retrieve(args, stores[modes[0]])))


if __name__ == "__main__":
    asyncio.run(main())
