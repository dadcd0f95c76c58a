"""Writer race: several OS processes write one collection through one real ``oxigraph serve``.

Every worker process opens its own :class:`~charmem_oxigraph.SparqlServiceGraphStore` on the same
server and collection (vectors and statistics in memory: only the graph is shared) and runs the
same list of conflicting operations, slot by slot, so the workers race on the same ids:

* ``commit``: one episode and its observation under shared ids, with the worker's own text
  (same id, different content);
* ``batch``: a plan with one shared episode id and ids of the worker's own (observation,
  derived memory): a refused batch must leave none of its own ids behind;
* ``correct``: a correction of the slot's belief, with the worker's own rationale (its
  replacement id differs per worker: racing corrections, two candidate successors);
* ``forget``: a forget of the slot's belief, the worker's own rationale;
* ``link``: a ``supports`` link between two shared memories, default id (derived from its
  endpoints and relation), the worker's own rationale (same id, different content).

Afterwards the parent reads the graph and counts violations (each must be 0):

* ``two_records``: an id stored with two different records;
* ``two_successors``: a belief with successors from two different corrections;
* ``partial``: a refused batch of which an id of its own is stored, or an acknowledged operation
  whose content is not what is stored (a write acknowledged to two workers);
* and ``charmem.admin.check``'s graph problems on the collection (``check consistent``).

``conflicts`` counts operations refused with the error a single process gives
(``IdConflictError``, ``LifecycleValidationError``, ``PlanValidationError``).

Run ``python benchmarks/writer_race.py --processes 4 --slots 100`` (``nox -s race``: 4 processes x
500 operations each); ``--json`` prints the result as one JSON object (the test suite runs a
short race: ``packages/charmem-oxigraph/tests/test_writer_race.py``). Exit status 1 when a
violation is found or ``check`` is not consistent.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from charmem import CharacterMemory, CorrectionTarget, CorrectMemoryDraft, ForgetMemoryDraft, LinkDraft
from charmem.admin._check import check_stores
from charmem.domain.drafts import DerivedMemoryDraft, RememberInput
from charmem.domain.ids import MemoryId
from charmem.domain.model import DerivedType, Relation
from charmem.errors import (
    BackendError,
    CharmemError,
    IdConflictError,
    LifecycleValidationError,
    PlanValidationError,
)
from charmem.stats import InMemoryRetrievalStatsStore
from charmem.testing import HashingEmbeddingProvider, ReferenceVectorIndex
from charmem_oxigraph import SparqlServiceGraphStore
from charmem_oxigraph.testing import OxigraphServer

COLLECTION = "race"
OPERATIONS = ("commit", "batch", "correct", "forget", "link")
START = datetime(2026, 1, 1, tzinfo=UTC)
#: Errors a single process gives for the conflicts of the race.
CONFLICTS = (IdConflictError, LifecycleValidationError, PlanValidationError)


def shared_id(*parts: object) -> MemoryId:
    """An id every worker derives alike for a slot."""
    return MemoryId(uuid.uuid5(uuid.NAMESPACE_URL, "race:" + ":".join(map(str, parts))))


def memory(endpoint: str) -> CharacterMemory:
    graph = SparqlServiceGraphStore(
        COLLECTION, query_endpoint=f"{endpoint}/query", update_endpoint=f"{endpoint}/update", timeout=60
    )
    embedder = HashingEmbeddingProvider(vector_size=16)
    return CharacterMemory(
        graph=graph,
        vectors=ReferenceVectorIndex(
            COLLECTION, model_id=embedder.model_id, vector_size=embedder.vector_size
        ),
        embedder=embedder,
        stats=InMemoryRetrievalStatsStore(COLLECTION),
        collection=COLLECTION,
    )


def at(slot: int) -> datetime:
    return START + timedelta(minutes=slot)


async def seed(endpoint: str, slots: int) -> None:
    """The shared memories the race corrects, forgets and links: one belief per slot."""
    async with memory(endpoint) as mem:
        for slot in range(slots):
            item = RememberInput(
                f"seed {slot}",
                occurred_at=at(slot),
                episode_id=shared_id("seed-ep", slot),
                observation_id=shared_id("seed-obs", slot),
            )
            for role in ("correct", "forget", "link-a", "link-b"):
                item = item.with_derived_memory(
                    DerivedMemoryDraft(DerivedType.REFLECTION, f"{role} {slot}", id=shared_id(role, slot))
                )
            await mem.remember(item)


async def operation(mem: CharacterMemory, worker: int, kind: str, slot: int) -> dict[str, Any]:
    """Run one operation; what it wrote (own ids, shared ids) for the parent's verdict."""
    own: list[str] = []
    shared: dict[str, str] = {}
    if kind == "commit":
        observation = shared_id("obs", slot)
        await mem.remember(
            RememberInput(
                f"worker {worker} commit {slot}",
                occurred_at=at(slot),
                episode_id=shared_id("ep", slot),
                observation_id=observation,
            )
        )
        shared[str(observation)] = f"worker {worker} commit {slot}"
    elif kind == "batch":
        observation, derived = shared_id("b-obs", slot, worker), shared_id("b-der", slot, worker)
        own = [str(observation), str(derived)]
        item = RememberInput(
            f"worker {worker} batch {slot}",
            occurred_at=at(slot),
            summary=f"worker {worker} batch summary {slot}",
            episode_id=shared_id("b-ep", slot),
            observation_id=observation,
        ).with_derived_memory(
            DerivedMemoryDraft(DerivedType.REFLECTION, f"worker {worker} {slot}", id=derived)
        )
        await mem.remember(item)
    elif kind == "correct":
        outcome = await mem.correct(
            CorrectMemoryDraft(
                CorrectionTarget.derived_memory(shared_id("correct", slot)),
                f"worker {worker} corrects {slot}",
            )
        )
        shared[str(shared_id("correct", slot))] = str(outcome.replacement_ids[0])
    elif kind == "forget":
        await mem.forget(
            ForgetMemoryDraft.suppress(shared_id("forget", slot), f"worker {worker} forgets {slot}")
        )
    else:
        link = await mem.link(
            LinkDraft(
                shared_id("link-a", slot),
                Relation.SUPPORTS,
                shared_id("link-b", slot),
                rationale=f"worker {worker} links {slot}",
            )
        )
        shared[str(link.link.id)] = f"worker {worker} links {slot}"
    return {"own": own, "shared": shared}


async def work(endpoint: str, worker: int, slots: int, out: Path) -> None:
    """One worker: every operation kind on every slot, in the same order as every other worker."""
    lines = []
    async with memory(endpoint) as mem:
        for slot in range(slots):
            for kind in OPERATIONS:
                entry: dict[str, Any] = {
                    "worker": worker,
                    "kind": kind,
                    "slot": slot,
                    "own": [],
                    "shared": {},
                }
                try:
                    entry.update(await operation(mem, worker, kind, slot), ok=True)
                except CONFLICTS as exc:
                    entry.update(ok=False, error=type(exc).__name__, conflict=True)
                except CharmemError as exc:
                    entry.update(ok=False, error=f"{type(exc).__name__}: {exc}", conflict=False)
                lines.append(json.dumps(entry))
    await asyncio.to_thread(out.write_text, "\n".join(lines) + "\n", encoding="utf-8")


def run_workers(endpoint: str, processes: int, slots: int, folder: Path) -> list[dict[str, Any]]:
    """Start the workers as OS processes at once and collect their journals."""
    children = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--worker",
                str(w),
                "--endpoint",
                endpoint,
                "--slots",
                str(slots),
                "--out",
                str(folder / f"worker-{w}.jsonl"),
            ]
        )
        for w in range(processes)
    ]
    for child in children:
        if child.wait() != 0:
            raise SystemExit(f"a worker failed with exit status {child.returncode}")
    return [
        json.loads(line)
        for w in range(processes)
        for line in (folder / f"worker-{w}.jsonl").read_text(encoding="utf-8").splitlines()
    ]


async def verdict(endpoint: str, journal: list[dict[str, Any]]) -> dict[str, Any]:
    """Count the violations the graph shows after the race."""
    async with memory(endpoint) as mem:
        graph = mem._graph  # the race reads the graph authority directly
        try:
            problems = [p.kind.value for p in (await check_stores(graph, None, None)).graph_problems]
        except BackendError as exc:  # a node with two records does not decode
            problems = [f"check failed: {str(exc)[:120]}"]
        records = await graph._select(
            "SELECT ?s (COUNT(DISTINCT ?r) AS ?n) WHERE { GRAPH <urn:charmem:collection:race> "
            "{ ?s <urn:charmem:vocab#record> ?r } } GROUP BY ?s HAVING (COUNT(DISTINCT ?r) > 1)",
            "count duplicated records",
        )
        correct_slots = {e["slot"] for e in journal if e["kind"] == "correct"}
        targets = [shared_id("correct", slot) for slot in sorted(correct_slots)]
        successors: dict[MemoryId, set[MemoryId]] = {}
        for link in await graph.links_of(targets, relations=[Relation.SUPERSEDES]):
            successors.setdefault(link.to_id, set()).add(link.from_id)
        partial = 0
        own = [MemoryId(i) for e in journal if not e["ok"] for i in e["own"]]
        stored = {**await graph.get_objects(own), **await graph.get_links(own)} if own else {}
        partial += len(stored)
        for entry in (e for e in journal if e["ok"]):
            try:
                partial += await _acknowledged_lost(mem, entry, successors)
            except BackendError:  # an id with two records: counted as such
                continue
    errors = Counter(e["error"] for e in journal if not e["ok"] and not e.get("conflict"))
    return {
        "processes": len({e["worker"] for e in journal}),
        "operations": len(journal),
        "acknowledged": sum(e["ok"] for e in journal),
        "conflicts": sum(bool(e.get("conflict")) for e in journal),
        "other_errors": dict(errors),
        "two_records": len(records),
        "two_successors": sum(len(s) > 1 for s in successors.values()),
        "partial": partial,
        "check_problems": problems,
    }


async def _acknowledged_lost(
    mem: CharacterMemory, entry: dict[str, Any], successors: dict[MemoryId, set[MemoryId]]
) -> int:
    """1 when an acknowledged operation's content is not what the graph holds."""
    graph = mem._graph
    lost = 0
    for key, value in entry["shared"].items():
        memory_id = MemoryId(key)
        if entry["kind"] == "commit":
            stored = (await graph.get_objects([memory_id])).get(memory_id)
            lost += getattr(stored, "text", None) != value
        elif entry["kind"] == "link":
            link = (await graph.get_links([memory_id])).get(memory_id)
            lost += link is None or link.rationale != value
        elif entry["kind"] == "correct":
            lost += MemoryId(value) not in successors.get(memory_id, set())
    return lost


def table(result: dict[str, Any], seconds: float) -> str:
    violations = result["two_records"] + result["two_successors"] + result["partial"]
    rows = [
        ("processes", result["processes"]),
        ("operations", result["operations"]),
        ("acknowledged", result["acknowledged"]),
        ("conflicts detected", result["conflicts"]),
        ("other errors", sum(result["other_errors"].values())),
        ("violations: id with two records", result["two_records"]),
        ("violations: belief with two successors", result["two_successors"]),
        ("violations: partial or lost writes", result["partial"]),
        ("violations (total, must be 0)", violations),
        ("check consistent", not result["check_problems"]),
        ("seconds", f"{seconds:.1f}"),
    ]
    return "\n".join(f"| {name:<40} | {value!s:>8} |" for name, value in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument(
        "--slots", type=int, default=100, help="slots; each worker runs 5 operations per slot"
    )
    parser.add_argument("--endpoint", help="a running oxigraph serve (default: start one)")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        asyncio.run(work(args.endpoint, args.worker, args.slots, args.out))
        return
    with tempfile.TemporaryDirectory(prefix="writer-race-") as folder:
        server = None if args.endpoint else OxigraphServer(Path(folder) / "oxigraph").start()
        endpoint = args.endpoint or server.base_url  # type: ignore[union-attr]
        try:
            asyncio.run(seed(endpoint, args.slots))
            started = time.perf_counter()
            journal = run_workers(endpoint, args.processes, args.slots, Path(folder))
            seconds = time.perf_counter() - started
            result = asyncio.run(verdict(endpoint, journal))
        finally:
            if server is not None:
                server.stop()
    result["seconds"] = round(seconds, 2)
    print(json.dumps(result) if args.json else table(result, seconds))
    if result["two_records"] + result["two_successors"] + result["partial"] or result["check_problems"]:
        raise SystemExit(1)  # an invariant broke: the nox session fails


if __name__ == "__main__":
    main()
