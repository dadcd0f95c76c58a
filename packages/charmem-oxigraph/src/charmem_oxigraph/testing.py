"""Real SPARQL servers for tests, benchmarks and local trials of the service mode.

:class:`OxigraphServer` runs ``oxigraph serve`` (the ``oxigraph`` PyPI distribution ships the
binary); :class:`VirtuosoServer` runs Virtuoso Open Source 7 (``virtuoso-t``, Debian's
``virtuoso-opensource-7-bin``) in a directory of its own. Each starts on free loopback ports,
waits until it answers, and stops::

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
from typing import IO, Final, Self

import httpx

__all__ = [
    "OxigraphServer",
    "VirtuosoServer",
    "find_oxigraph_binary",
    "find_virtuoso_binaries",
    "free_port",
]

_POLL: Final = 0.05  # seconds between readiness probes


def find_oxigraph_binary() -> str | None:
    """The ``oxigraph`` server binary: on ``PATH``, or beside this interpreter (a venv's ``bin``)."""
    beside = Path(sys.executable).parent / "oxigraph"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("oxigraph")


def find_virtuoso_binaries() -> tuple[str, str] | None:
    """Virtuoso's server and SQL client, ``(virtuoso-t, isql-vt)``, when both are on ``PATH``."""
    server, client = shutil.which("virtuoso-t"), shutil.which("isql-vt")
    return (server, client) if server and client else None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class _ServerProcess:
    """A SPARQL server as a child process: start it, wait until it answers, stop it.

    Subclasses give the command line (:meth:`_command`), the readiness probe (:meth:`_probe`) and
    what to do once it answers (:meth:`_configure`).
    """

    name = "server"
    location: Path
    startup_timeout: float

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def running(self) -> bool:
        """Whether the child process is alive."""
        return self._process is not None and self._process.poll() is None

    def _command(self) -> list[str]:
        raise NotImplementedError

    def _probe(self, client: httpx.Client) -> bool:
        raise NotImplementedError

    def _configure(self) -> None:
        """Run once the server answers (nothing by default)."""

    def start(self) -> Self:
        """Start the server and wait until it answers a query.

        Returns:
            Self: self.

        Raises:
            RuntimeError: the server exited or did not answer within ``startup_timeout`` seconds
                (its output is in the message).
        """
        if self.running:
            return self
        self.location.mkdir(parents=True, exist_ok=True)
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in stop()
        self._process = subprocess.Popen(  # noqa: S603 - our own binary and arguments
            self._command(), stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + self.startup_timeout
        with httpx.Client(timeout=1.0) as client:
            while not self._answers(client):
                if time.monotonic() > deadline:
                    output = self._output()
                    self.stop()
                    raise RuntimeError(
                        f"{self.name} did not answer within {self.startup_timeout:g} s: {output}"
                    )
                time.sleep(_POLL)
        try:
            self._configure()
        except BaseException:
            self.stop()
            raise
        return self

    def _answers(self, client: httpx.Client) -> bool:
        if self._process is not None and self._process.poll() is not None:
            output = self._output()
            self.stop()
            raise RuntimeError(f"{self.name} exited at start: {output}")
        try:
            return self._probe(client)
        except httpx.HTTPError:
            return False

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

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class OxigraphServer(_ServerProcess):
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

    name = "oxigraph serve"

    def __init__(
        self,
        location: str | os.PathLike[str],
        *,
        port: int | None = None,
        startup_timeout: float = 20.0,
        binary: str | None = None,
    ) -> None:
        super().__init__()
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

    def _command(self) -> list[str]:
        return [self.binary, "serve", "--location", str(self.location), "--bind", f"127.0.0.1:{self.port}"]

    def _probe(self, client: httpx.Client) -> bool:
        response = client.post(
            self.query_endpoint, content=b"ASK {}", headers={"Content-Type": "application/sparql-query"}
        )
        return response.status_code == 200


class VirtuosoServer(_ServerProcess):
    """Virtuoso Open Source 7 (``virtuoso-t -f -c LOCATION/virtuoso.ini``) as a child process.

    The server keeps its database, transaction log and ``virtuoso.ini`` (written at each
    :meth:`start`) in ``location``, listens on 127.0.0.1 only (SQL and HTTP ports), and serves
    SPARQL query and update at ``/sparql``: once it answers, ``isql-vt`` grants ``SPARQL_UPDATE``
    to its anonymous ``SPARQL`` user, so the endpoint takes updates without authentication. That
    suits a throwaway server on the loopback interface only; a shared one needs authentication
    (see the README's "Virtuoso" section). A new database takes about 10 s to start.

    Args:
        location: the database directory (created if missing); kept across :meth:`stop` /
            :meth:`start`.
        http_port: the HTTP port (default: a free one, kept across restarts).
        sql_port: the SQL (ODBC/isql) port (default: a free one, kept across restarts).
        startup_timeout: seconds to wait for the server to answer ``ASK {}``.
        max_rows: the server's ``[SPARQL] ResultSetMaxRows`` (rows a ``SELECT`` answers at most).
        binaries: ``(virtuoso-t, isql-vt)`` (default: :func:`find_virtuoso_binaries`).

    Raises:
        FileNotFoundError: Virtuoso is not installed (``apt-get install virtuoso-opensource-7-bin``).
    """

    name = "virtuoso-t"
    DBA_PASSWORD: Final = "dba"  # noqa: S105 - Virtuoso's default for a new database; loopback only

    def __init__(
        self,
        location: str | os.PathLike[str],
        *,
        http_port: int | None = None,
        sql_port: int | None = None,
        startup_timeout: float = 60.0,
        max_rows: int = 1_000_000,
        binaries: tuple[str, str] | None = None,
    ) -> None:
        super().__init__()
        found = binaries or find_virtuoso_binaries()
        if found is None:
            raise FileNotFoundError(
                "Virtuoso is not installed (virtuoso-t and isql-vt on PATH); "
                "apt-get install virtuoso-opensource-7-bin"
            )
        self.binary, self.isql = found
        self.location = Path(location)
        self.http_port = http_port or free_port()
        self.sql_port = sql_port or free_port()
        while sql_port is None and self.sql_port == self.http_port:  # two probes, one free port
            self.sql_port = free_port()
        self.startup_timeout = startup_timeout
        self.max_rows = max_rows

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<http_port>``."""
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def query_endpoint(self) -> str:
        """The SPARQL endpoint, ``<base_url>/sparql`` (queries and updates)."""
        return f"{self.base_url}/sparql"

    @property
    def update_endpoint(self) -> str:
        """The same endpoint as :attr:`query_endpoint`: Virtuoso takes updates at ``/sparql``."""
        return self.query_endpoint

    def ini(self) -> str:
        """The ``virtuoso.ini`` text :meth:`start` writes into ``location``."""
        root = self.location.resolve()
        return _VIRTUOSO_INI.format(
            root=root, sql_port=self.sql_port, http_port=self.http_port, max_rows=int(self.max_rows)
        )

    def _command(self) -> list[str]:
        ini = self.location / "virtuoso.ini"
        ini.write_text(self.ini(), encoding="utf-8")
        return [self.binary, "+foreground", "+configfile", str(ini)]

    def _probe(self, client: httpx.Client) -> bool:
        # Form-encoded: Virtuoso 7.2 never answers a query POSTed as application/sparql-query.
        response = client.post(self.query_endpoint, data={"query": "ASK {}"})
        return response.status_code == 200

    def sql(self, statement: str) -> str:
        """Run one SQL statement through ``isql-vt`` as ``dba``; its output.

        Raises:
            RuntimeError: ``isql-vt`` failed or reported an error (its output is in the message).
        """
        done = subprocess.run(  # noqa: S603 - our own binary and arguments
            [self.isql, f"127.0.0.1:{self.sql_port}", "dba", self.DBA_PASSWORD, f"exec={statement}"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        output = done.stdout + done.stderr
        if done.returncode != 0 or "*** Error" in output:
            raise RuntimeError(f"isql-vt failed to run {statement!r}: {output[-2000:]}")
        return output

    def _configure(self) -> None:
        try:
            self.sql('GRANT SPARQL_UPDATE TO "SPARQL"')
        except RuntimeError as exc:
            if "U0013" not in str(exc):  # U0013: granted already (a restarted database)
                raise


# Small buffers (a test database), no automatic checkpoint, loopback ports only; the [SPARQL]
# section lifts the default 10,000-row cap and the anytime-query timeout, which truncate answers.
_VIRTUOSO_INI: Final = """\
[Database]
DatabaseFile = {root}/virtuoso.db
ErrorLogFile = {root}/virtuoso.log
LockFile = {root}/virtuoso.lck
TransactionFile = {root}/virtuoso.trx
xa_persistent_file = {root}/virtuoso.pxa
Striping = 0
TempStorage = TempDatabase

[TempDatabase]
DatabaseFile = {root}/virtuoso-temp.db
TransactionFile = {root}/virtuoso-temp.trx

[Parameters]
ServerPort = 127.0.0.1:{sql_port}
DisableUnixSocket = 1
NumberOfBuffers = 20000
MaxDirtyBuffers = 15000
ServerThreads = 10
CheckpointInterval = 0
DirsAllowed = {root}

[HTTPServer]
ServerPort = 127.0.0.1:{http_port}
ServerRoot = {root}
ServerThreads = 10
MaxClientConnections = 10

[SPARQL]
ResultSetMaxRows = {max_rows}
MaxQueryExecutionTime = 0
MaxQueryCostEstimationTime = 0
"""
