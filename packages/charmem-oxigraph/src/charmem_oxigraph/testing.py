"""A real ``oxigraph serve`` process for tests, benchmarks and local trials of the service mode.

The ``oxigraph`` PyPI distribution ships the server binary; this module starts it on a free
loopback port, waits until it answers, and stops it::

    with OxigraphServer(tmp_path / "server") as server:
        settings = Settings.from_mapping(
            {
                "GRAPH_STORE_MODE": "service",
                "SPARQL_QUERY_ENDPOINT": server.query_endpoint,
                "SPARQL_UPDATE_ENDPOINT": server.update_endpoint,
            }
        )
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Final

import httpx

__all__ = ["OxigraphServer", "find_oxigraph_binary", "free_port"]

_POLL: Final = 0.05  # seconds between readiness probes


def find_oxigraph_binary() -> str | None:
    """The ``oxigraph`` server binary: on ``PATH``, or beside this interpreter (a venv's ``bin``)."""
    beside = Path(sys.executable).parent / "oxigraph"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("oxigraph")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class OxigraphServer:
    """``oxigraph serve --location LOCATION --bind 127.0.0.1:PORT`` as a child process.

    Args:
        location: the store directory (created if missing); kept across :meth:`stop` /
            :meth:`start`, so a restarted server serves the same data.
        port: the port to bind (default: a free one, kept across restarts).
        startup_timeout: seconds to wait for the server to answer ``ASK {}``.
        binary: the ``oxigraph`` binary (default: :func:`find_oxigraph_binary`).

    Raises:
        FileNotFoundError: no ``oxigraph`` binary is installed (``pip install oxigraph``).
    """

    def __init__(
        self,
        location: str | os.PathLike[str],
        *,
        port: int | None = None,
        startup_timeout: float = 20.0,
        binary: str | None = None,
    ) -> None:
        found = binary or find_oxigraph_binary()
        if found is None:
            raise FileNotFoundError(
                "the oxigraph server binary is not installed; "
                "pip install oxigraph (it ships `oxigraph serve`)"
            )
        self.binary = found
        self.location = Path(location)
        self.port = port or free_port()
        self.startup_timeout = startup_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def query_endpoint(self) -> str:
        """The SPARQL query endpoint, ``<base_url>/query``."""
        return f"{self.base_url}/query"

    @property
    def update_endpoint(self) -> str:
        """The SPARQL update endpoint, ``<base_url>/update``."""
        return f"{self.base_url}/update"

    @property
    def running(self) -> bool:
        """Whether the child process is alive."""
        return self._process is not None and self._process.poll() is None

    def start(self) -> OxigraphServer:
        """Start the server and wait until it answers a query.

        Returns:
            OxigraphServer: self.

        Raises:
            RuntimeError: the server exited or did not answer within ``startup_timeout`` seconds
                (its output is in the message).
        """
        if self.running:
            return self
        self.location.mkdir(parents=True, exist_ok=True)
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        self._process = subprocess.Popen(  # noqa: S603 - our own binary and arguments
            [self.binary, "serve", "--location", str(self.location), "--bind", f"127.0.0.1:{self.port}"],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + self.startup_timeout
        with httpx.Client(timeout=1.0) as client:
            while True:
                if self._process.poll() is not None:
                    output = self._output()
                    self.stop()
                    raise RuntimeError(f"oxigraph serve exited at start: {output}")
                try:
                    response = client.post(
                        self.query_endpoint,
                        content=b"ASK {}",
                        headers={"Content-Type": "application/sparql-query"},
                    )
                    if response.status_code == 200:
                        return self
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    output = self._output()
                    self.stop()
                    raise RuntimeError(
                        f"oxigraph serve did not answer on {self.base_url} within "
                        f"{self.startup_timeout:g} s: {output}"
                    )
                time.sleep(_POLL)

    def _output(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read()[-2000:].decode("utf-8", "replace")

    def stop(self) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after 5 s); idempotent. Data stay on disk."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        if self._log is not None:
            self._log.close()
            self._log = None

    def kill(self) -> None:
        """Kill the server abruptly (SIGKILL), as a crash would; :meth:`start` brings it back."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=5)
        self.stop()

    def __enter__(self) -> OxigraphServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
