"""Load on one ``charmem serve``: concurrent clients mixing remember and retrieve over HTTP.

Starts ``charmem serve`` on 127.0.0.1 (an ephemeral port) over the embedded stores in a fresh
directory, runs ``--clients`` concurrent clients for ``--seconds`` (each loops: a remember with
probability ``--write-share``, else a retrieve), then stops the load and verifies:

* every acknowledged write is stored: each remembered text is recalled by a retrieve of that
  text, with the observation id its remember answered;
* ``check`` reports the collection consistent (vectors and stats in step with the graph).

Reports errors by status, throughput, and p50 / p99 latency per operation. Exit code 1 when a
write is missing, check is inconsistent or a request failed with a 5xx.

    python benchmarks/server_load.py                      # 50 clients, 60 s (nox -s bench-server)
    python benchmarks/server_load.py --clients 8 --seconds 5 --embedder hashing   # CI's short run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import httpx

WORDS = [
    "violin",
    "garden",
    "Porto",
    "river",
    "dog",
    "Biscuit",
    "sister",
    "Lisbon",
    "flat",
    "cello",
    "tomatoes",
    "rain",
    "train",
    "birthday",
    "promise",
    "dinner",
    "holiday",
    "book",
    "museum",
    "bicycle",
    "coffee",
    "market",
    "letter",
    "piano",
]


def _start_server(store: Path, embedder: str, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``charmem serve`` with its log in ``log`` (a pipe nobody reads would block it)."""
    env = {**os.environ, "EMBEDDING_PROVIDER": embedder, "HF_HUB_OFFLINE": "1"}
    command = [
        *(sys.executable, "-m", "charmem_cli", "serve", "--store", str(store)),
        *("--port", "0", "--max-concurrency", "64"),
    ]
    with log.open("wb") as sink:
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=sink)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and process.poll() is None:
        text = log.read_text(errors="replace")
        if "Application startup complete" in text and "listening on http://" in text:
            return process, text.split("listening on ", 1)[1].split()[0]
        time.sleep(0.1)
    process.kill()
    raise SystemExit(f"charmem serve did not start:\n{log.read_text(errors='replace')[-2000:]}")


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")


async def _client(
    number: int, url: str, collection: str, stop_at: float, write_share: float, results: dict[str, Any]
) -> None:
    rng = random.Random(number)
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        sequence = 0
        while time.monotonic() < stop_at:
            sequence += 1
            if rng.random() < write_share:
                text = f"client {number} note {sequence}: " + " ".join(rng.sample(WORDS, 5))
                operation, path, body = "remember", "remember", {"text": text}
            else:
                text = ""
                operation, path, body = "retrieve", "retrieve", {"query": " ".join(rng.sample(WORDS, 3))}
            start = time.perf_counter()
            try:
                response = await http.post(f"/v1/collections/{collection}/{path}", json=body)
            except httpx.HTTPError as exc:
                results["errors"][f"{operation}: {type(exc).__name__}"] += 1
                continue
            results["latency"][operation].append(time.perf_counter() - start)
            if response.status_code != 200:
                results["errors"][f"{operation}: {response.status_code}"] += 1
            elif operation == "remember":
                results["acknowledged"].append((text, response.json()["object_ids"][-1]))


async def _verify(url: str, collection: str, acknowledged: list[tuple[str, str]]) -> dict[str, Any]:
    missing: list[str] = []
    slots = asyncio.Semaphore(16)

    async def find(http: httpx.AsyncClient, text: str, observation: str) -> None:
        async with slots:
            response = await http.post(
                f"/v1/collections/{collection}/retrieve", json={"query": text, "max_items": 64}
            )
        ids = [item["id"] for item in response.json().get("items", [])]
        if observation not in ids:
            missing.append(observation)

    async with httpx.AsyncClient(base_url=url, timeout=300) as http:
        await asyncio.gather(*(find(http, text, observation) for text, observation in acknowledged))
        check = (await http.post(f"/v1/collections/{collection}/check", json={})).json()
    return {"missing": missing, "consistent": check.get("report", {}).get("consistent")}


async def run(url: str, clients: int, seconds: float, write_share: float) -> dict[str, Any]:
    """Drive the load and verify; returns the report (see the module docstring)."""
    collection = "load"
    results: dict[str, Any] = {"latency": defaultdict(list), "errors": Counter(), "acknowledged": []}
    started = time.monotonic()
    stop_at = started + seconds
    await asyncio.gather(
        *(_client(n, url, collection, stop_at, write_share, results) for n in range(clients))
    )
    elapsed = time.monotonic() - started
    verified = await _verify(url, collection, results["acknowledged"])
    operations = {
        name: {
            "count": len(values),
            "per_s": len(values) / elapsed,
            "p50_ms": 1000 * _percentile(values, 0.50),
            "p99_ms": 1000 * _percentile(values, 0.99),
        }
        for name, values in sorted(results["latency"].items())
    }
    return {
        "clients": clients,
        "seconds": elapsed,
        "operations": operations,
        "errors": dict(results["errors"]),
        "acknowledged_writes": len(results["acknowledged"]),
        "missing_writes": len(verified["missing"]),
        "check_consistent": verified["consistent"],
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 0 when every acknowledged write is found and check is consistent."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--write-share", type=float, default=0.3, help="share of remembers (default 0.3)")
    parser.add_argument(
        "--embedder", default="local", help="EMBEDDING_PROVIDER of the server (default local)"
    )
    parser.add_argument("--store", type=Path, help="directory of the stores (default: a temporary one)")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="charmem-load-") as scratch:
        store = args.store or Path(scratch) / "store"
        process, url = _start_server(store, args.embedder, Path(scratch) / "serve.log")
        try:
            report = asyncio.run(run(url, args.clients, args.seconds, args.write_share))
        finally:
            process.terminate()
            stopped = process.wait(timeout=120)
            log = (Path(scratch) / "serve.log").read_text(errors="replace").splitlines()
    report["server_exit_code"] = stopped
    report["server_warnings"] = [line for line in log if " WARNING " in line or " ERROR " in line][:20]
    print(f"{report['clients']} clients for {report['seconds']:.1f} s against {url}")
    print(f"{'operation':<10} {'count':>7} {'per s':>8} {'p50 ms':>8} {'p99 ms':>8}")
    for name, row in report["operations"].items():
        print(
            f"{name:<10} {row['count']:>7} {row['per_s']:>8.1f} {row['p50_ms']:>8.1f} {row['p99_ms']:>8.1f}"
        )
    print(f"errors: {report['errors'] or 'none'}")
    for line in report["server_warnings"]:
        print(f"  server: {line[:300]}")
    print(
        f"acknowledged writes: {report['acknowledged_writes']}, missing: {report['missing_writes']}, "
        f"check consistent: {report['check_consistent']}"
    )
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=2))
    server_errors = sum(count for key, count in report["errors"].items() if ": 5" in key)
    ok = report["missing_writes"] == 0 and report["check_consistent"] is True and server_errors == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
