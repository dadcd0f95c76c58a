"""Crash trials: SIGKILL a process writing to the embedded stores, then prove nothing was lost.

A child process opens the embedded stores (persistent Oxigraph, Qdrant Edge, SQLite stats; the
hashing embedder) and runs a workload of ``remember`` (prepared plans, committed), ``correct`` and
``forget`` operations. Before each operation it persists the operation as JSON in a journal
(written to a temporary file, fsynced, renamed, directory fsynced): a plan as
``RememberWritePlan.to_json()``, a lifecycle operation with explicit ids and record times so a
replay is idempotent. After the call returns it appends the operation's number to ``acked.log``
with fsync: that line is the acknowledgement.

The child dies by ``SIGKILL``, either

* at a named crash point (``charmem.testing.CrashPoints``: the real adapters wrapped so the
  process kills itself before or after a port call, e.g. after the graph batch and before the
  vector write), armed for one operation of a given kind; or
* at a random moment: the parent kills it after a random delay.

After each kill the parent reopens the stores (no manual cleanup: the locks die with the
process) and checks:

* ``lost``: an acknowledged operation that is not whole in the graph (must be 0);
* ``partial``: an operation (acknowledged or not) of which only part of the graph batch is stored,
  or any sign of a partial batch ``charmem.admin.check`` finds (must be 0);
* ``needed``: trials after which the checker found vectors or stats out of step;
* ``missed``: trials killed at a point that must leave vectors or stats behind where the checker
  said all was consistent, or the other way round (must be 0: the checker sees what a crash
  leaves);
* then it replays the unacknowledged operation(s) from the journal and checks again: ``repaired``
  counts trials the replay alone made consistent; ``rebuilt`` those that also needed
  ``charmem.admin.repair`` (must be 0: replaying the plan is the documented repair).

Run ``python benchmarks/crash_trials.py --trials 200`` (``nox -s crash``); the test suite runs a
few trials, one per named point (``packages/charmem-cli/tests/test_crash_trials.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs

from charmem import (
    CharacterMemory,
    CorrectionTarget,
    CorrectMemoryDraft,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    EpisodeDraft,
    ForgetMemoryDraft,
    LinkDraft,
    MemoryId,
    ObservationDraft,
    Relation,
    RememberDrafts,
    RememberInput,
    RememberWritePlan,
    ReplacementDerivedMemoryDraft,
    Settings,
    ThreadDraft,
)
from charmem.admin import check, repair
from charmem.domain.graph import LifecycleAction
from charmem.domain.model import BeliefAssertion, DerivedMemory, KnownAs, Observation
from charmem.domain.rules import content_equal, derived_link_id
from charmem.testing import CrashPoint, CrashPoints, stores_of
from charmem.usecases.planning import derive_links

COLLECTION = "trials"
T0 = datetime(2024, 1, 1, tzinfo=UTC)

#: The named trials: (operation kind, crash point). Each leaves another state behind.
NAMED: tuple[tuple[str, CrashPoint], ...] = (
    ("remember", CrashPoint.BEFORE_GRAPH_BATCH),
    ("remember", CrashPoint.AFTER_GRAPH_BATCH),
    ("remember", CrashPoint.BEFORE_VECTOR_UPSERT),
    ("remember", CrashPoint.BEFORE_STATS_RECORD),
    ("remember", CrashPoint.AFTER_STATS_RECORD),
    ("correct", CrashPoint.AFTER_GRAPH_BATCH),
    ("correct", CrashPoint.BEFORE_VECTOR_DELETE),
    ("correct", CrashPoint.BEFORE_STATS_RECORD),
    ("forget", CrashPoint.BEFORE_GRAPH_BATCH),
    ("forget", CrashPoint.BEFORE_VECTOR_DELETE),
    ("forget", CrashPoint.AFTER_STATS_RECORD),
)
#: Crash points after which vectors and stats are in step with the graph (nothing or all written).
_CLEAN_POINTS = frozenset({CrashPoint.BEFORE_GRAPH_BATCH, CrashPoint.AFTER_STATS_RECORD})
_MAX_OPS = 60  # a child stops after this many operations (random kills come much earlier)
_CHILD_TIMEOUT = 120.0  # seconds


def store_settings(root: Path) -> Settings:
    """The embedded default stores under ``root / "stores"``, hashing embedder."""
    return Settings.from_mapping({"EMBEDDING_PROVIDER": "hashing"}).with_store_root(root / "stores")


# -- the journal: operations persisted before they run, acknowledgements after ------------------


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Journal:
    """``journal/op-NNNNNN.json`` (one operation each, atomic) and ``acked.log`` (one number a line)."""

    def __init__(self, root: Path) -> None:
        self.dir = root / "journal"
        self.acked_path = root / "acked.log"
        self.dir.mkdir(parents=True, exist_ok=True)

    def next_seq(self) -> int:
        return max((int(p.stem.split("-")[1]) for p in self.dir.glob("op-*.json")), default=0) + 1

    def write(self, seq: int, op: dict[str, Any]) -> None:
        """Persist ``op`` durably before it runs (temporary file, fsync, rename, fsync dir)."""
        final = self.dir / f"op-{seq:06d}.json"
        with tempfile.NamedTemporaryFile("w", dir=self.dir, suffix=".tmp", delete=False) as tmp:
            json.dump(op, tmp)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp.name, final)
        _fsync_dir(self.dir)

    def ack(self, seq: int) -> None:
        """Acknowledge ``seq`` durably (the call returned)."""
        fd = os.open(self.acked_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{seq}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def ops(self, since: int) -> list[tuple[int, dict[str, Any]]]:
        """Operations numbered ``since`` or later, in order."""
        found = []
        for path in sorted(self.dir.glob("op-*.json")):
            seq = int(path.stem.split("-")[1])
            if seq >= since:
                found.append((seq, json.loads(path.read_text(encoding="utf-8"))))
        return found

    def acked(self) -> set[int]:
        """Acknowledged numbers (complete lines only)."""
        if not self.acked_path.exists():
            return set()
        text = self.acked_path.read_text(encoding="utf-8")
        return {int(line) for line in text.split("\n")[:-1] if line.strip()}


# -- the workload -------------------------------------------------------------------------------


@attrs.define
class Workload:
    """Chooses operations from what this child has seen acknowledged.

    Attributes:
        rng: the trial's random generator.
        current: current derived memories -> the observations they are grounded on.
        observations: observations not forgotten yet.
        clock: record times handed out (strictly increasing).
    """

    rng: random.Random
    current: dict[str, set[str]] = attrs.field(factory=dict)
    observations: list[str] = attrs.field(factory=list)
    clock: datetime = T0

    def tick(self) -> datetime:
        self.clock += timedelta(seconds=1)
        return self.clock

    def can(self, kind: str) -> bool:
        return kind == "remember" or bool(self.current if kind == "correct" else self.observations)

    def choose(self, forced: str | None) -> str:
        if forced is not None:
            return forced if self.can(forced) else "remember"
        kind = self.rng.choices(["remember", "correct", "forget"], weights=[6, 2, 2])[0]
        return kind if self.can(kind) else "remember"

    def _remember_item(self) -> RememberInput | RememberDrafts:
        at = self.tick()
        word = f"w{self.rng.randrange(10_000)}"
        if self.rng.random() < 0.5:
            summary = f"session summary {word}" if self.rng.random() < 0.5 else None
            return RememberInput(
                f"observed {word} at {at:%H:%M:%S}", occurred_at=at, summary=summary, created_at=at
            ).with_derived_memory(
                DerivedMemoryDraft(DerivedType.CLAIM, f"belief about {word}", created_at=at)
            )
        notion, thread, episode, observation, belief = (MemoryId.new() for _ in range(5))
        links = []
        if self.current:
            other = self.rng.choice(sorted(self.current))
            links.append(LinkDraft(belief, Relation.ASSOCIATED_WITH, MemoryId(other), recorded_at=at))
        return RememberDrafts(
            entities=[EntityDraft(id=notion, entity_type="person", created_at=at)],
            threads=[ThreadDraft(id=thread, title=f"thread {word}", created_at=at)],
            episodes=[
                EpisodeDraft(
                    id=episode,
                    summary=f"a talk about {word}",
                    occurred_at=at,
                    participant_entity_ids=[notion],
                    thread_ids=[thread],
                    created_at=at,
                )
            ],
            observations=[
                ObservationDraft(
                    id=observation,
                    episode_id=episode,
                    text=f"{word} was said",
                    speaker_entity_id=notion,
                    mentioned_entity_ids=[notion],
                    created_at=at,
                )
            ],
            derived=[
                DerivedMemoryDraft(
                    DerivedType.RELATIONSHIP_NOTE,
                    f"{word} is called {word.upper()}",
                    id=belief,
                    observation_ids=[observation],
                    entity_ids=[notion],
                    thread_ids=[thread],
                    assertions=[BeliefAssertion(notion, KnownAs(word.upper()))],
                    created_at=at,
                )
            ],
            links=links,
        )

    async def next_op(self, memory: CharacterMemory, kind: str) -> dict[str, Any]:
        """The JSON form of the next operation of ``kind``."""
        if kind == "remember":
            plan = await memory.prepare(self._remember_item())
            return {"kind": "remember", "plan": plan.to_json()}
        at = self.tick().isoformat()
        if kind == "correct":
            target = self.rng.choice(sorted(self.current))
            return {
                "kind": "correct",
                "target": target,
                "replacement_id": str(MemoryId.new()),
                "rationale": f"corrected at {at}",
                "text": f"the corrected belief of {at}",
                "recorded_at": at,
            }
        target = self.rng.choice(self.observations)
        return {"kind": "forget", "target": target, "rationale": f"forgotten at {at}", "recorded_at": at}

    def applied(self, op: dict[str, Any]) -> None:
        """Update what is current after ``op`` was acknowledged."""
        if op["kind"] == "remember":
            plan = RememberWritePlan.from_json(op["plan"])
            for obj in plan.objects:
                if isinstance(obj, Observation):
                    self.observations.append(str(obj.id))
                elif isinstance(obj, DerivedMemory):
                    self.current[str(obj.id)] = {str(i) for i in obj.observation_ids}
        elif op["kind"] == "correct":
            self.current[op["replacement_id"]] = self.current.pop(op["target"])
        else:
            self.observations.remove(op["target"])
            self.current = {d: s for d, s in self.current.items() if op["target"] not in s}


def correct_draft(op: dict[str, Any]) -> CorrectMemoryDraft:
    """The correction an operation describes (explicit replacement id and times: replayable)."""
    at = datetime.fromisoformat(op["recorded_at"])
    return CorrectMemoryDraft(
        CorrectionTarget.derived_memory(op["target"]), op["rationale"], recorded_at=at
    ).with_replacement(
        ReplacementDerivedMemoryDraft(
            DerivedType.CORRECTION, op["text"], id=MemoryId(op["replacement_id"]), created_at=at
        )
    )


async def apply_op(memory: CharacterMemory, op: dict[str, Any]) -> int:
    """Run (or replay) an operation; returns the number of repair markers."""
    if op["kind"] == "remember":
        outcome: Any = await memory.commit(RememberWritePlan.from_json(op["plan"]))
    elif op["kind"] == "correct":
        outcome = await memory.correct(correct_draft(op))
    else:
        outcome = await memory.forget(
            ForgetMemoryDraft.suppress(
                op["target"], op["rationale"], recorded_at=datetime.fromisoformat(op["recorded_at"])
            )
        )
    return len(outcome.repair_markers)


# -- the child ----------------------------------------------------------------------------------


async def _child(root: Path, seed: int, kind: str | None, point: str | None, arm_at: int) -> None:
    memory = await CharacterMemory.open(store_settings(root), COLLECTION)
    points = CrashPoints(memory)
    journal = Journal(root)
    work = Workload(random.Random(seed), clock=T0 + timedelta(days=seed))
    (root / "ready").touch()
    armed = False
    for index in range(_MAX_OPS):
        forced = kind if index >= arm_at and not armed and point is not None else None
        op_kind = work.choose("remember" if index < 2 else forced)
        op = await work.next_op(points.memory, op_kind)
        seq = journal.next_seq()
        journal.write(seq, op)
        if forced is not None and op_kind == forced:
            points.arm(CrashPoint(point))
            armed = True
        if await apply_op(points.memory, op):
            raise RuntimeError(f"operation {seq} left repair markers without an injected fault")
        journal.ack(seq)
        work.applied(op)
    await points.memory.close()


def child_main(root: str, seed: int, kind: str | None, point: str | None, arm_at: int) -> None:
    """The child process: run the workload until killed (or ``_MAX_OPS`` operations)."""
    asyncio.run(_child(Path(root), seed, kind, point, arm_at))


# -- the parent ---------------------------------------------------------------------------------


async def op_presence(memory: CharacterMemory, op: dict[str, Any]) -> tuple[int, int]:
    """How much of an operation's graph batch is stored: (items present with equal content, items).

    remember: the plan's objects, caller links and derived links. correct: the replacement, its
    derived links and the correction record. forget: the suppression records of the target and of
    the derived memories grounded on it.
    """
    graph = stores_of(memory).graph
    if op["kind"] == "remember":
        plan = RememberWritePlan.from_json(op["plan"])
        links = [*plan.links, *plan.derived_links]
        objects = await graph.get_objects(plan.object_ids)
        stored_links = await graph.get_links([link.id for link in links])
        present = sum(o.id in objects and content_equal(objects[o.id], o) for o in plan.objects)
        present += sum(k.id in stored_links and content_equal(stored_links[k.id], k) for k in links)
        return present, len(plan.objects) + len(links)
    target = MemoryId(op["target"])
    if op["kind"] == "correct":
        replacement_id = MemoryId(op["replacement_id"])
        replacement = (await graph.get_objects([replacement_id])).get(replacement_id)
        records = [
            r
            for r in await graph.get_records([target])
            if r.action is LifecycleAction.CORRECT and replacement_id in r.related_ids
        ]
        if replacement is None:
            supersedes = derived_link_id(memory.collection, replacement_id, Relation.SUPERSEDES, target)
            present = len(await graph.get_links([supersedes])) + len(records)
            return present, 3
        links = derive_links(memory.collection, [replacement])
        present = 1 + len(await graph.get_links([link.id for link in links])) + min(len(records), 1)
        return present, 2 + len(links)
    grounded = [
        link.from_id
        for link in await graph.links_of([target], relations=[Relation.DERIVED_FROM])
        if link.to_id == target
    ]
    wanted = {
        MemoryId.deterministic(memory.collection, LifecycleAction.SUPPRESS.value, m, target, op["rationale"])
        for m in [target, *grounded]
    }
    stored = {r.id for r in await graph.get_records([target, *grounded])}
    return len(wanted & stored), len(wanted)


@attrs.frozen(kw_only=True)
class TrialSpec:
    """One trial: a named crash point armed for an operation kind, or a random kill delay."""

    index: int
    seed: int
    kind: str | None = None
    point: CrashPoint | None = None
    arm_at: int = 2
    delay: float | None = None

    @property
    def label(self) -> str:
        return "random kill" if self.point is None else f"{self.kind}: {self.point.value}"


@attrs.frozen(kw_only=True)
class TrialResult:
    """What one trial found (counts are operations unless said otherwise)."""

    label: str
    killed: bool
    ops: int
    acked: int
    lost: int
    partial: int
    needed: bool
    missed: bool
    replayed: int
    repaired: bool
    rebuilt: bool
    seconds: float


async def verify(root: Path, since: int, spec: TrialSpec, started: float, killed: bool) -> TrialResult:
    """Reopen the stores after a kill, check them, replay what was not acknowledged, check again."""
    journal = Journal(root)
    ops = journal.ops(since)
    acked = journal.acked()
    async with CharacterMemory.open(store_settings(root), COLLECTION) as memory:
        before = await check(memory)
        lost = partial = 0
        for seq, op in ops:
            present, total = await op_presence(memory, op)
            lost += seq in acked and present != total
            partial += 0 < present < total
        partial += len(before.graph_problems)
        replayed = 0
        for seq, op in ops:
            if seq not in acked:
                await apply_op(memory, op)
                replayed += 1
                present, total = await op_presence(memory, op)
                partial += present != total
        after = await check(memory)
        rebuilt = False
        if not after.consistent:
            await repair(memory, after)
            rebuilt = True
            if not (await check(memory)).consistent:
                raise AssertionError(f"trial {spec.index}: still inconsistent after a rebuild")
    missed = False
    if spec.point is not None and killed:
        missed = before.consistent is not (spec.point in _CLEAN_POINTS)
    return TrialResult(
        label=spec.label,
        killed=killed,
        ops=len(ops),
        acked=sum(seq in acked for seq, _ in ops),
        lost=lost,
        partial=partial,
        needed=not before.consistent,
        missed=missed,
        replayed=replayed,
        repaired=not before.consistent and after.consistent,
        rebuilt=rebuilt,
        seconds=time.perf_counter() - started,
    )


def _context() -> Any:
    """A forkserver that has imported charmem and the adapters once: children start in ~0.1 s."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["charmem", "charmem_oxigraph", "charmem_qdrant", "charmem.admin"])
    return context


def run_trial(root: Path, spec: TrialSpec, context: Any) -> TrialResult:
    """Run one child on the stores under ``root``, kill it, verify; raises if the child misbehaved."""
    started = time.perf_counter()
    since = Journal(root).next_seq()
    ready = root / "ready"
    ready.unlink(missing_ok=True)
    point = None if spec.point is None else spec.point.value
    child = context.Process(
        target=child_main, args=(str(root), spec.seed, spec.kind, point, spec.arm_at), daemon=True
    )
    child.start()
    if spec.delay is not None:
        deadline = time.monotonic() + _CHILD_TIMEOUT
        while not ready.exists() and child.is_alive() and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(spec.delay)
        child.kill()
    child.join(_CHILD_TIMEOUT)
    if child.exitcode is None:
        child.kill()
        child.join()
        raise RuntimeError(f"trial {spec.index} ({spec.label}): the child hung")
    killed = child.exitcode == -signal.SIGKILL
    if not killed and (spec.point is not None or child.exitcode != 0):
        raise RuntimeError(f"trial {spec.index} ({spec.label}): the child exited with {child.exitcode}")
    return asyncio.run(verify(root, since, spec, started, killed))


def schedule(trials: int, seed: int, *, named_only: bool = False) -> list[TrialSpec]:
    """Alternate the named points (in turn) and random kills; or only the named points."""
    rng = random.Random(seed)
    specs = []
    for index in range(trials):
        trial_seed = seed * 1_000_003 + index
        if named_only or index % 2 == 0:
            kind, point = NAMED[(index if named_only else index // 2) % len(NAMED)]
            specs.append(
                TrialSpec(index=index, seed=trial_seed, kind=kind, point=point, arm_at=rng.randint(2, 4))
            )
        else:
            specs.append(TrialSpec(index=index, seed=trial_seed, delay=rng.uniform(0.0, 1.5)))
    return specs


def run_trials(
    specs: Sequence[TrialSpec], workdir: Path, *, per_store: int = 20, progress: bool = False
) -> list[TrialResult]:
    """Run ``specs`` in order, a fresh set of stores every ``per_store`` trials."""
    context = _context()
    results: list[TrialResult] = []
    for number, spec in enumerate(specs):
        root = workdir / f"stores-{number // per_store:03d}"
        root.mkdir(parents=True, exist_ok=True)
        result = run_trial(root, spec, context)
        results.append(result)
        if progress:
            print(
                f"trial {number + 1}/{len(specs)} {result.label}: acked {result.acked}, lost {result.lost}, "
                f"partial {result.partial}, needed {result.needed}, {result.seconds:.1f} s",
                file=sys.stderr,
            )
    return results


_COLUMNS = (
    "trials",
    "killed",
    "acked ops",
    "lost",
    "partial",
    "missed",
    "needed",
    "replayed",
    "repaired",
    "rebuilt",
)


def summarise(results: Sequence[TrialResult]) -> dict[str, int]:
    """Totals over ``results`` (the table's columns)."""
    return {
        "trials": len(results),
        "killed": sum(r.killed for r in results),
        "acked ops": sum(r.acked for r in results),
        "lost": sum(r.lost for r in results),
        "partial": sum(r.partial for r in results),
        "missed": sum(r.missed for r in results),
        "needed": sum(r.needed for r in results),
        "replayed": sum(r.replayed for r in results),
        "repaired": sum(r.repaired for r in results),
        "rebuilt": sum(r.rebuilt for r in results),
    }


def print_table(results: Sequence[TrialResult]) -> None:
    """One row per trial kind, then the totals (rich table on stdout)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="crash trials (embedded Oxigraph + Qdrant Edge + SQLite, SIGKILL)")
    table.add_column("trial kind")
    for column in _COLUMNS:
        table.add_column(column, justify="right")
    labels = sorted({r.label for r in results}, key=lambda label: (label == "random kill", label))
    for label in labels:
        row = summarise([r for r in results if r.label == label])
        table.add_row(label, *(str(row[c]) for c in _COLUMNS))
    total = summarise(results)
    table.add_row("all", *(str(total[c]) for c in _COLUMNS), style="bold")
    Console(width=max(140, shutil.get_terminal_size().columns)).print(table)
    seconds = sorted(r.seconds for r in results)
    print(f"per trial: median {seconds[len(seconds) // 2]:.2f} s, max {seconds[-1]:.2f} s")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the trials, print the table; exit 1 if anything acknowledged was lost or half-written."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=200, help="number of trials (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--per-store", type=int, default=20, help="trials sharing one set of stores")
    parser.add_argument("--workdir", type=Path, help="keep the stores here (default: a temporary directory)")
    parser.add_argument("--json-out", type=Path, help="write every trial's result as JSON")
    parser.add_argument("--quiet", action="store_true", help="no line per trial on stderr")
    args = parser.parse_args(argv)
    specs = schedule(args.trials, args.seed)
    started = time.perf_counter()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="charmem-crash-"))
    try:
        results = run_trials(specs, workdir, per_store=args.per_store, progress=not args.quiet)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print_table(results)
    print(f"{len(results)} trials in {time.perf_counter() - started:.0f} s")
    if args.json_out:
        args.json_out.write_text(json.dumps([attrs.asdict(r) for r in results], indent=2), encoding="utf-8")
    total = summarise(results)
    bad = total["lost"] + total["partial"] + total["missed"] + total["rebuilt"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
