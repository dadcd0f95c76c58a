"""nox sessions: tests, demo, lint, bench, bench-compare, bench-locomo, crash, disk-full, fuzz, race.

Plain pip: uv does not see the local CPU torch wheel.
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["lint", "tests"]

OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def install_all(session: nox.Session) -> None:
    # torch first: the CPU build on this machine; a bare `torch` would pull a CUDA build.
    session.install("torch==2.13.0")
    session.install("-r", "requirements/dev.txt")


@nox.session
def tests(session: nox.Session) -> None:
    """Every package's tests."""
    install_all(session)
    session.run("pytest", *session.posargs, env=OFFLINE)


@nox.session
def demo(session: nox.Session) -> None:
    """Ingest the bundled sample conversation on the embedded stores and print packs."""
    install_all(session)
    session.run("charmem", "--store", "data/demo", "demo", *session.posargs, env=OFFLINE)


@nox.session(name="bench-locomo")
def bench_locomo(session: nox.Session) -> None:
    """LoCoMo recall: charmem retrieve vs plain dense and BM25 (args after -- go to the script)."""
    install_all(session)
    session.run("python", "benchmarks/locomo.py", *session.posargs, env=OFFLINE)


@nox.session(name="bench-write")
def bench_write(session: nox.Session) -> None:
    """Commit throughput (bulk and per session) and the graph/vector/stats shares (args after --)."""
    install_all(session)
    session.run("python", "benchmarks/write_throughput.py", *session.posargs, env=OFFLINE)


@nox.session(name="bench-server")
def bench_server(session: nox.Session) -> None:
    """50 clients mixing remember and retrieve for 60 s against one charmem serve (args after --)."""
    install_all(session)
    session.run("python", "benchmarks/server_load.py", *session.posargs, env=OFFLINE)


@nox.session
def crash(session: nox.Session) -> None:
    """Crash trials: SIGKILL a writer on the embedded stores, check nothing acknowledged is lost."""
    install_all(session)
    session.run("python", "benchmarks/crash_trials.py", *session.posargs, env=OFFLINE)


@nox.session(name="disk-full")
def disk_full(session: nox.Session) -> None:
    """Disk-full trials on a small tmpfs (root): no crash, typed errors, recovery once space is freed.

    Arguments after -- go to benchmarks/disk_full_trials.py (e.g. -- --trials 50).
    """
    install_all(session)
    session.run("python", "benchmarks/disk_full_trials.py", *session.posargs, env=OFFLINE)


@nox.session
def race(session: nox.Session) -> None:
    """Writer race: 4 OS processes x 500 conflicting operations on one real oxigraph serve.

    Prints operations, conflicts detected, violations (must be 0) and whether ``check`` finds the
    collection consistent. Arguments after -- go to benchmarks/writer_race.py (e.g. -- --slots 200).
    """
    install_all(session)
    session.run("python", "benchmarks/writer_race.py", *session.posargs, env=OFFLINE)


@nox.session
def fuzz(session: nox.Session) -> None:
    """Long fuzzing run of the fuzz tests (args after -- go to benchmarks/fuzz.py, e.g. --examples 2000)."""
    install_all(session)
    session.run("python", "benchmarks/fuzz.py", *session.posargs, env=OFFLINE)


@nox.session
def bench(session: nox.Session) -> None:
    """Latency and scale table: retrieve, the vector index, numpy and qdrant-client, HNSW recall.

    Arguments after -- go to benchmarks/latency.py (e.g. -- --sizes 100,1000,5000,50000 --large).
    """
    install_all(session)
    session.run("python", "benchmarks/latency.py", *session.posargs, env=OFFLINE)


@nox.session(name="bench-compare")
def bench_compare(session: nox.Session) -> None:
    """charmem side by side with qdrant-client local mode and chromadb on the same vectors.

    chromadb and qdrant-client go into this session's venv only (not requirements/dev.txt: CI
    installs that). Arguments after -- go to benchmarks/compare.py (e.g. -- --sizes 5000 --footprint).
    """
    install_all(session)
    session.install("chromadb", "qdrant-client")
    session.run("python", "benchmarks/compare.py", *session.posargs, env=OFFLINE)


#: What the lint session type-checks (in one mypy run, strict by pyproject.toml): every
#: distribution's sources and the contract suite.
TYPED_SOURCES = (
    "packages/charmem-core/src",
    "packages/charmem-oxigraph/src",
    "packages/charmem-qdrant/src",
    "packages/charmem-local-embed/src",
    "packages/charmem-openai/src",
    "packages/charmem-cli/src",
    "packages/charmem-server/src",
    "contract-tests/src",
)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint and format check) and mypy --strict on every package, without torch.

    charmem-local-embed and charmem-cli (which needs it) go in without their dependencies:
    sentence-transformers pulls torch, gigabytes mypy does not need. What their sources import
    besides torch and sentence-transformers is installed by name; pyproject.toml lets mypy treat
    those two as missing.
    """
    session.install("--no-deps", "-e", "packages/charmem-local-embed", "-e", "packages/charmem-cli")
    session.install(
        *("-e", "packages/charmem-core", "-e", "packages/charmem-oxigraph", "-e", "packages/charmem-qdrant"),
        *("-e", "packages/charmem-openai", "-e", "packages/charmem-server", "-e", "contract-tests"),
        *("tokenizers>=0.19", "transformers>=4.40", "tqdm>=4.66"),  # local-embed's and cli's light imports
        *("ruff>=0.8", "mypy>=1.14"),
    )
    session.run("python", "-c", "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is not None)")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy", *TYPED_SOURCES)
