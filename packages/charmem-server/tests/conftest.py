"""Real servers for the tests: uvicorn on 127.0.0.1 with an ephemeral port, over embedded stores.

``serve(...)`` runs the application in a uvicorn server on a thread of this process (its own
event loop, a real socket); ``charmem_process(...)`` starts ``charmem serve`` or ``charmem mcp``
as a subprocess. Every store is a real embedded one (Oxigraph, Qdrant Edge, SQLite) under the
test's temporary directory; embeddings come from the hashing embedder. A :class:`Gate` makes an
operation slow on demand: the :class:`GatedEmbeddingProvider` holds every text naming
:data:`SLOW_WORD` until the test opens the gate (in this process, or in a server subprocess
started with ``command=gated_command``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import uvicorn

from charmem import Settings
from charmem.testing import HashingEmbeddingProvider
from charmem_server import MemoryRegistry, ServerConfig, create_app

REPO_ROOT = Path(__file__).resolve().parents[3]
TESTS_DIR = Path(__file__).resolve().parent

#: A text holding this word waits at the gate before it is embedded.
SLOW_WORD = "slowly"


@attrs.frozen
class Gate:
    """Two marker files: ``entered`` once an embedding waits, ``open`` to let it through.

    Files, not events, so that a server subprocess and the test share the gate.
    """

    directory: Path

    @property
    def entered(self) -> Path:
        return self.directory / "entered"

    @property
    def opened(self) -> Path:
        return self.directory / "open"

    def open(self) -> None:
        self.opened.touch()

    def wait_entered(self, timeout_s: float = 30) -> None:
        """Return once an operation waits at the gate (a failure after ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        while not self.entered.exists():
            assert time.monotonic() < deadline, "no operation reached the gate"
            time.sleep(0.01)


class GatedEmbeddingProvider(HashingEmbeddingProvider):
    """The hashing embedder, holding every text naming :data:`SLOW_WORD` at ``gate``."""

    def __init__(self, gate: Gate) -> None:
        super().__init__()
        self.gate = gate

    async def _pass(self, texts: Sequence[str]) -> None:
        if not any(SLOW_WORD in text for text in texts):
            return
        self.gate.entered.touch()
        while not self.gate.opened.exists():
            await asyncio.sleep(0.01)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        await self._pass(texts)
        return await super().embed_documents(texts)

    async def embed_query(self, text: str) -> list[float]:
        await self._pass([text])
        return await super().embed_query(text)


@pytest.fixture
def gate(tmp_path: Path) -> Gate:
    """A closed gate under the test's temporary directory."""
    directory = tmp_path / "gate"
    directory.mkdir()
    return Gate(directory)


@pytest.fixture
def gated_embedder(gate: Gate) -> GatedEmbeddingProvider:
    """The hashing embedder holding texts that name :data:`SLOW_WORD` at ``gate``."""
    return GatedEmbeddingProvider(gate)


def store_env(root: Path) -> dict[str, str]:
    """Settings keys for the embedded stores under ``root`` with the hashing embedder."""
    return {
        "GRAPH_STORE_MODE": "persistent",
        "OXIGRAPH_PATH": str(root / "oxigraph"),
        "VECTOR_STORE_MODE": "embedded",
        "VECTOR_STORE_PATH": str(root / "vectors"),
        "RETRIEVAL_STATS_STORE_MODE": "sqlite",
        "RETRIEVAL_STATS_PATH": str(root / "retrieval-stats.sqlite3"),
        "EMBEDDING_PROVIDER": "hashing",
        "TOKEN_COUNTER": "whitespace",
        "VECTOR_LEXICAL_CUE": "false",
    }


@pytest.fixture
def settings_of() -> Callable[[Path], Settings]:
    """``settings_of(root)``: the settings of the embedded stores under ``root`` (as a server's)."""
    return lambda root: Settings.from_mapping(store_env(root))


@attrs.define
class RunningServer:
    """A uvicorn server on a thread of this process."""

    url: str
    registry: MemoryRegistry
    server: uvicorn.Server
    thread: threading.Thread
    config: ServerConfig

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=60)
        assert not self.thread.is_alive(), "the server did not stop"


def start_server(
    root: Path,
    config: ServerConfig | None = None,
    embedder: HashingEmbeddingProvider | None = None,
    character_ids: dict[str, Any] | None = None,
) -> RunningServer:
    """Serve the embedded stores under ``root`` on 127.0.0.1 and an ephemeral port."""
    settings = Settings.from_mapping(store_env(root))
    registry = MemoryRegistry(
        settings,
        embedder=embedder or HashingEmbeddingProvider(),
        store_root=root,
        character_ids=character_ids,
    )
    sock = socket.socket(socket.AF_INET)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    config = attrs.evolve(config or ServerConfig(), host="127.0.0.1", port=port)
    server = uvicorn.Server(uvicorn.Config(create_app(registry, config), log_config=None, lifespan="on"))
    failure: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(server.serve(sockets=[sock]))
        except BaseException as exc:  # noqa: BLE001 - reported by the waiting test
            failure.append(exc)
        finally:
            sock.close()

    thread = threading.Thread(target=run, name="charmem-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if failure or not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the test server did not start: {failure!r}")
        time.sleep(0.02)
    return RunningServer(f"http://127.0.0.1:{port}", registry, server, thread, config)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., RunningServer]]:
    """``serve(config=None, root=None, embedder=None, character_ids=None)``: start a server (stopped
    after the test)."""
    started: list[RunningServer] = []

    def start(
        config: ServerConfig | None = None,
        root: Path | None = None,
        embedder: HashingEmbeddingProvider | None = None,
        character_ids: dict[str, Any] | None = None,
    ) -> RunningServer:
        running = start_server(root or tmp_path / f"store{len(started)}", config, embedder, character_ids)
        started.append(running)
        return running

    yield start
    for running in reversed(started):
        running.stop()


@pytest.fixture
def server(serve: Callable[..., RunningServer]) -> RunningServer:
    """A server with the default configuration (loopback, no token file)."""
    return serve()


@pytest.fixture
def http(server: RunningServer) -> Iterator[httpx.Client]:
    """An httpx client of ``server``."""
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client


def cli_env(root: Path, **extra: str) -> dict[str, str]:
    """The environment of a ``charmem`` subprocess: this worktree's sources first, stores under root."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHARMEM_", "OXIGRAPH", "VECTOR_"))}
    env.update(store_env(root))
    env.update(extra)
    env.setdefault("HF_HUB_OFFLINE", "1")
    paths = [str(p) for p in sorted((REPO_ROOT / "packages").glob("*/src"))] + [
        str(REPO_ROOT / "contract-tests/src")
    ]
    env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def charmem_command(*args: str) -> list[str]:
    """``python -m charmem_cli ...`` with this interpreter."""
    return [sys.executable, "-m", "charmem_cli", *args]


def gated_command(*args: str) -> list[str]:
    """The charmem CLI whose embedder is a :class:`GatedEmbeddingProvider` at ``$TEST_GATE_DIR``."""
    return [sys.executable, str(TESTS_DIR / "gated_charmem.py"), *args]


@contextlib.contextmanager
def charmem_process(
    root: Path, *args: str, command: Callable[..., list[str]] = charmem_command, **extra: str
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Start ``charmem serve --port 0 ...`` and wait for its URL (read from its stderr log)."""
    process = subprocess.Popen(
        command(*args),
        env=cli_env(root, **extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = ""
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 60
        assert process.stderr is not None
        while time.monotonic() < deadline:
            line = process.stderr.readline()
            if not line:
                break
            lines.append(line)
            if "listening on http://" in line:
                url = line.split("listening on ", 1)[1].split()[0]
            if "Application startup complete" in line:
                break
        if not url:
            process.wait(timeout=30)
        yield process, url or "".join(lines)
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def read_rest(process: subprocess.Popen[str]) -> str:
    """What is left on a finished process's stderr."""
    assert process.stderr is not None
    return process.stderr.read()


def json_of(response: httpx.Response) -> Any:
    """The decoded JSON of a response (problem or result)."""
    return response.json()


@pytest.fixture
def cli() -> Any:
    """The subprocess helpers: ``cli.command``, ``cli.gated_command``, ``cli.process``, ``cli.env``,
    ``cli.read_rest``."""
    import types

    return types.SimpleNamespace(
        command=charmem_command,
        gated_command=gated_command,
        process=charmem_process,
        env=cli_env,
        read_rest=read_rest,
    )
