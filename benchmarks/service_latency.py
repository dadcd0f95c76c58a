"""Commit and retrieve latency: the SPARQL service graph (a real ``oxigraph serve``) vs embedded Oxigraph.

Both stacks use Qdrant Edge, SQLite stats and the hashing embedder (so the graph is what differs).
Each conversation file is ingested with one commit per session (``charmem_cli.locomo``), then a
fixed set of questions (every ``--every``-th turn text of the conversation, never its gold labels)
is retrieved. Prints the median, p90 and count per stack and file.

    python benchmarks/service_latency.py                      # the bundled sample conversation
    python benchmarks/service_latency.py ../shared/datasets/locomo/conv-26.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any

from charmem import CharacterMemory, Settings
from charmem.testing import HashingEmbeddingProvider
from charmem_cli.locomo import conversation_drafts, load_conversation
from charmem_oxigraph.testing import OxigraphServer


def _settings(root: Path, server: OxigraphServer | None) -> Settings:
    common = {
        "VECTOR_STORE_MODE": "embedded",
        "VECTOR_STORE_PATH": str(root / "vectors"),
        "RETRIEVAL_STATS_STORE_MODE": "sqlite",
        "RETRIEVAL_STATS_PATH": str(root / "stats.sqlite3"),
        "EMBEDDING_PROVIDER": "hashing",
    }
    if server is None:
        return Settings.from_mapping(
            {**common, "GRAPH_STORE_MODE": "persistent", "OXIGRAPH_PATH": str(root / "g")}
        )
    return Settings.from_mapping(
        {
            **common,
            "GRAPH_STORE_MODE": "service",
            "SPARQL_QUERY_ENDPOINT": server.query_endpoint,
            "SPARQL_UPDATE_ENDPOINT": server.update_endpoint,
            "SPARQL_TIMEOUT": "60",
        }
    )


def _questions(path: Path, every: int) -> list[str]:
    conversation = load_conversation(path)
    texts = [
        str(turn["text"]) for _n, _t, turns in conversation.sessions() for turn in turns if turn.get("text")
    ]
    return texts[::every]


async def _run(path: Path, settings: Settings, questions: list[str]) -> dict[str, list[float]]:
    conversation = load_conversation(path)
    notions, sessions = conversation_drafts(conversation, include_facts=True)
    commits: list[float] = []
    retrieves: list[float] = []
    async with CharacterMemory.open(
        settings, "latency", embedding_provider=HashingEmbeddingProvider()
    ) as memory:
        for drafts in (notions, *(s.drafts for s in sessions)):
            plan = await memory.prepare(drafts)
            start = time.perf_counter()
            outcome = await memory.commit(plan)
            commits.append(time.perf_counter() - start)
            assert not outcome.repair_markers
        for question in questions:
            start = time.perf_counter()
            pack = await memory.retrieve(question)
            retrieves.append(time.perf_counter() - start)
            assert pack.items
    return {"commit": commits, "retrieve": retrieves}


def _summary(values: list[float]) -> dict[str, Any]:
    ordered = sorted(values)
    return {
        "n": len(values),
        "median_ms": round(statistics.median(ordered) * 1000, 1),
        "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))] * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument(
        "--every", type=int, default=10, help="every N-th turn text is a question (default 10)"
    )
    args = parser.parse_args()
    files = args.files
    if not files:
        sample = resources.files("charmem_cli") / "data" / "sample-conversation.json"
        files = [Path(str(sample))]
    results = []
    for path in files:
        questions = _questions(path, args.every)
        for mode in ("embedded", "service"):
            with tempfile.TemporaryDirectory() as tmp:
                root = Path(tmp)
                if mode == "service":
                    with OxigraphServer(root / "server") as server:
                        timings = asyncio.run(_run(path, _settings(root, server), questions))
                else:
                    timings = asyncio.run(_run(path, _settings(root, None), questions))
            row = {"file": path.name, "graph": mode, **{k: _summary(v) for k, v in timings.items()}}
            results.append(row)
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
