"""Long fuzzing runs: the suite's hypothesis fuzz tests with many random examples, and a report.

The fuzz tests of the test suite run a few derandomised examples each (fast, reproducible CI).
This script runs the same tests with ``CHARMEM_FUZZ_EXAMPLES=N`` (random examples from a seed it
prints, so a failure can be replayed with ``--seed``) and prints, per test, the examples run,
failing and invalid ones, the time, and the result. The full pytest output, with hypothesis'
falsifying examples, goes to ``--log``.

    python benchmarks/fuzz.py                          # 300 examples per test, every fuzz test
    python benchmarks/fuzz.py --examples 2000 --only stacks injection
    python benchmarks/fuzz.py --seed 1234 --only drafts   # replay a run
    nox -s fuzz -- --examples 1000

Exit status: 0 when every test passed, 1 otherwise. A failure found here is a bug: fix it where
it belongs and keep the falsifying input as an ``@example`` of the test.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

#: Fuzz test groups: name -> pytest node ids (relative to the repository root).
GROUPS: dict[str, list[str]] = {
    "drafts": ["packages/charmem-core/tests/test_fuzz_drafts.py"],
    "stacks": ["packages/charmem-cli/tests/test_fuzz_stacks.py"],
    "injection": [
        "packages/charmem-oxigraph/tests/test_injection_fuzz.py::test_fuzzed_text_stays_data",
        "packages/charmem-oxigraph/tests/test_injection_fuzz.py::test_ids_are_uuids_or_refused",
    ],
    "names": [
        "packages/charmem-cli/tests/test_security.py::test_an_accepted_name_is_one_plain_lowercase_path_segment"
    ],
}

_PHASE = re.compile(r"^\s*- during (\w+) phase \(([\d.]+) seconds\):")
_COUNTS = re.compile(r"^\s*- (\d+) passing, (\d+) failing, and (\d+) invalid test cases")
_TEST = re.compile(r"^(\S+::\S+):\s*$")


def parse_statistics(output: str) -> dict[str, dict[str, Any]]:
    """Per test node id: examples by phase, from pytest's ``--hypothesis-show-statistics`` text."""
    found: dict[str, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    phase = ""
    for line in output.splitlines():
        if (match := _TEST.match(line)) is not None:
            current = found.setdefault(match.group(1), {"phases": {}, "seconds": 0.0})
            continue
        if current is None:
            continue
        if (match := _PHASE.match(line)) is not None:
            phase = match.group(1)
            current["seconds"] += float(match.group(2))
        elif (match := _COUNTS.match(line)) is not None:
            passing, failing, invalid = (int(group) for group in match.groups())
            current["phases"][phase] = {"passing": passing, "failing": failing, "invalid": invalid}
    return found


def parse_results(junit: Path) -> dict[str, str]:
    """Per test node id (pytest's form): ``passed``, ``failed``, ``error`` or ``skipped``."""
    results: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        path = classname.replace(".", "/") + ".py"
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = "failed" if child.tag == "failure" else child.tag
        results[f"{path}::{name}"] = outcome
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=300, help="examples per fuzz test (default 300)")
    parser.add_argument("--seed", type=int, default=None, help="hypothesis seed (default: random, printed)")
    parser.add_argument("--only", nargs="+", choices=sorted(GROUPS), default=sorted(GROUPS))
    parser.add_argument("--log", type=Path, default=Path("fuzz-report.log"), help="full pytest output")
    parser.add_argument("--json-out", type=Path, default=None, help="write the table as JSON")
    args = parser.parse_args(argv)
    if args.examples < 1:
        parser.error("--examples must be at least 1")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    nodes = [node for group in args.only for node in GROUPS[group]]
    env = {**os.environ, "CHARMEM_FUZZ_EXAMPLES": str(args.examples), "HF_HUB_OFFLINE": "1"}
    print(f"fuzzing {', '.join(args.only)}: {args.examples} examples per test, seed {seed}", flush=True)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="charmem-fuzz-") as scratch:
        junit = Path(scratch) / "junit.xml"
        completed = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                *nodes,
                "-q",
                "-p",
                "no:cacheprovider",
                "--hypothesis-show-statistics",
                f"--hypothesis-seed={seed}",
                f"--junitxml={junit}",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        results = parse_results(junit) if junit.exists() else {}
    elapsed = time.perf_counter() - started
    output = completed.stdout + completed.stderr
    args.log.write_text(output, encoding="utf-8")
    statistics = parse_statistics(output)

    rows = []
    for node, stats in sorted(statistics.items()):
        phases = stats["phases"]
        generated = phases.get("generate", {})
        rows.append(
            {
                "test": node.split("::", 1)[-1],
                "file": node.split("::", 1)[0],
                "examples": generated.get("passing", 0) + generated.get("failing", 0),
                "failing": sum(phase.get("failing", 0) for phase in phases.values()),
                "invalid": generated.get("invalid", 0),
                "seconds": round(stats["seconds"], 1),
                "result": results.get(node, "?"),
            }
        )
    width = max([len(row["test"]) for row in rows] + [4])
    print(f"\n{'test':<{width}}  {'examples':>8}  {'failing':>7}  {'invalid':>7}  {'s':>7}  result")
    for row in rows:
        print(
            f"{row['test']:<{width}}  {row['examples']:>8}  {row['failing']:>7}  {row['invalid']:>7}  "
            f"{row['seconds']:>7}  {row['result']}"
        )
    total = sum(row["examples"] for row in rows)
    failed = [row for row in rows if row["result"] != "passed"]
    if completed.returncode != 0 and not failed:  # pytest failed outside the fuzz tests
        failed = [{"test": f"pytest exited with status {completed.returncode}"}]
    print(
        f"\n{total} generated examples in {len(rows)} tests, {elapsed:.0f} s; "
        f"{len(failed)} failed; seed {seed}; full output in {args.log}"
    )
    if args.json_out is not None:
        args.json_out.write_text(
            json.dumps({"seed": seed, "examples_per_test": args.examples, "tests": rows}, indent=2),
            encoding="utf-8",
        )
    if failed:
        print("\nfailures (replay with --seed; falsifying examples are in the log):")
        for line in output.splitlines():
            if line.startswith(("FAILED", "ERROR", "Falsifying")):
                print(f"  {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
