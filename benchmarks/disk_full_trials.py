"""Disk-full trials: the embedded stores on a nearly full file system never crash the process.

Each trial mounts a fresh 8 MiB tmpfs (root only), and a child process opens the embedded stores
(persistent Oxigraph, Qdrant Edge, SQLite stats; the hashing embedder) on it. A filler file
leaves the child little free space, in one of three phases:

* ``open``: 1-3 MB free before the collection is created (its vector shard needs more);
* ``write``: the collection is open, then 1-3 MB are left free and a memory is remembered;
* ``full``: the collection is open, then nothing is left free and a memory is remembered.

The child records what happened (a typed ``CharmemError``, a repair marker caused by one, or
success), deletes the filler and, in the same process (``write`` and ``full`` on the same open
memory, without reopening it; ``open`` by calling ``open`` again), remembers again and recalls
every acknowledged memory. A child killed by a signal (``SIGBUS`` inside Qdrant Edge's memory
maps was the failure before the free-space checks) is a crash.

The table: ``trials``, ``crashes`` (killed by a signal), ``typed errors`` (a ``CharmemError``
raised or carried by a repair marker; ``InsufficientStorageError`` expected), ``recovered``
(everything acknowledged is recalled after the space was freed).

Run ``python benchmarks/disk_full_trials.py --trials 20`` as root (``nox -s disk-full``); the test
suite runs a few trials (``packages/charmem-cli/tests/test_disk_full.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs

PHASES = ("open", "write", "full")
TMPFS_SIZE = "8m"
MIB = 1024 * 1024


@attrs.frozen(kw_only=True)
class TrialResult:
    """One trial: the phase, the free bytes left, and what the child reported."""

    index: int
    phase: str
    free: int
    returncode: int
    outcome: str  # the CharmemError's class name, "repair:<cause>", "ok", or "crash"
    recovered: bool
    detail: str = ""

    @property
    def crashed(self) -> bool:
        return self.returncode < 0

    @property
    def typed(self) -> bool:
        return self.outcome.endswith("Error")


def can_mount() -> bool:
    """Whether this process may mount a tmpfs (root on Linux)."""
    return sys.platform.startswith("linux") and hasattr(os, "geteuid") and os.geteuid() == 0


@contextlib.contextmanager
def mounted_tmpfs(directory: Path, size: str = TMPFS_SIZE) -> Iterator[Path]:
    """Mount a tmpfs of ``size`` at ``directory`` for the block; unmounted in ``finally``."""
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)], check=True)
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


def _fill(root: Path, free: int) -> Path:
    """Write a filler file so that about ``free`` bytes stay free on ``root``'s file system."""
    filler = root / "filler"
    chunk = b"\0" * 65536
    with filler.open("ab") as handle:
        while shutil.disk_usage(root).free > free:
            want = shutil.disk_usage(root).free - free
            try:
                handle.write(chunk[: max(1, min(len(chunk), want))])
                handle.flush()
            except OSError:
                break
    return filler


def _settings(root: Path) -> Any:
    from charmem import Settings

    return Settings.from_mapping(
        {
            "GRAPH_STORE_MODE": "persistent",
            "OXIGRAPH_PATH": str(root / "oxigraph"),
            "VECTOR_STORE_MODE": "embedded",
            "VECTOR_STORE_PATH": str(root / "vectors"),
            "RETRIEVAL_STATS_STORE_MODE": "sqlite",
            "RETRIEVAL_STATS_PATH": str(root / "stats.sqlite3"),
            "EMBEDDING_PROVIDER": "hashing",
        }
    )


async def _child(phase: str, root: Path, free: int) -> dict[str, Any]:
    """What a child does (see the module); returns its report."""
    from charmem import CharacterMemory, CharmemError, RememberInput

    settings = _settings(root)
    texts = ["the lighthouse keeper counted ships at dawn", "a parcel of saffron arrived from Ghent"]
    outcome = "ok"
    memory = None
    if phase == "open":
        filler = _fill(root, free)
        try:
            memory = await CharacterMemory.open(settings, "trial")
        except CharmemError as exc:
            outcome = type(exc).__name__
        filler.unlink()
        if memory is None:
            memory = await CharacterMemory.open(settings, "trial")
        await memory.remember(RememberInput(texts[0]))
        await memory.remember(RememberInput(texts[1]))
    else:
        memory = await CharacterMemory.open(settings, "trial")
        await memory.remember(RememberInput(texts[0]))
        filler = _fill(root, 0 if phase == "full" else free)
        try:
            done = await memory.remember(RememberInput(texts[1]))
            if done.repair_markers:
                outcome = "repair:" + done.repair_markers[0].cause.split(":")[0]
        except CharmemError as exc:
            outcome = type(exc).__name__
        filler.unlink()
        await memory.remember(RememberInput(texts[1]))  # the same memory object: no reopen
    found = []
    for text in texts:
        pack = await memory.retrieve(text)
        found.append(any(item.text == text for item in pack.items))
    await memory.close()
    return {"outcome": outcome, "recovered": all(found)}


def run_trial(index: int, phase: str, free: int, workdir: Path) -> TrialResult:
    """Mount a tmpfs, run one child on it, unmount; a signal is reported as ``crash``."""
    with mounted_tmpfs(workdir / f"tmpfs-{index}") as root:
        child = subprocess.run(
            [sys.executable, __file__, "--child", phase, str(root), str(free)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    if child.returncode < 0:
        return TrialResult(
            index=index, phase=phase, free=free, returncode=child.returncode, outcome="crash", recovered=False
        )
    try:
        report = json.loads(child.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return TrialResult(
            index=index,
            phase=phase,
            free=free,
            returncode=child.returncode,
            outcome="failed",
            recovered=False,
            detail=child.stderr[-2000:],
        )
    return TrialResult(
        index=index,
        phase=phase,
        free=free,
        returncode=child.returncode,
        outcome=str(report["outcome"]),
        recovered=bool(report["recovered"]),
    )


def plan(trials: int, seed: int) -> list[tuple[int, str, int]]:
    """(index, phase, free bytes) of each trial: phases in turn, 1-3 MB free (0 when ``full``)."""
    rng = random.Random(seed)
    return [
        (
            i,
            PHASES[i % len(PHASES)],
            0 if PHASES[i % len(PHASES)] == "full" else rng.randint(1 * MIB, 3 * MIB),
        )
        for i in range(trials)
    ]


def summarise(results: list[TrialResult]) -> dict[str, int]:
    """The table's counts."""
    return {
        "trials": len(results),
        "crashes": sum(r.crashed for r in results),
        "typed errors": sum(r.typed for r in results),
        "recovered": sum(r.recovered for r in results),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--child", nargs=3, metavar=("PHASE", "ROOT", "FREE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        phase, root, free = args.child
        print(json.dumps(asyncio.run(_child(phase, Path(root), int(free)))))
        return 0
    if not can_mount():
        print("disk-full trials mount a tmpfs: run them as root on Linux", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="charmem-disk-full-") as work:
        results = [run_trial(i, phase, free, Path(work)) for i, phase, free in plan(args.trials, args.seed)]
    print(f"{'trial':>5} {'phase':>6} {'free KiB':>9} {'outcome':>34} {'recovered':>9}")
    for r in results:
        print(f"{r.index:>5} {r.phase:>6} {r.free // 1024:>9} {r.outcome:>34} {r.recovered!s:>9}")
        if r.detail:
            print(r.detail, file=sys.stderr)
    total = summarise(results)
    print()
    print(" | ".join(f"{key}: {value}" for key, value in total.items()))
    return 0 if total["crashes"] == 0 and total["recovered"] == total["trials"] else 1


if __name__ == "__main__":
    sys.exit(main())
