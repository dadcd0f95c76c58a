"""``charmem serve`` and ``charmem mcp`` as real processes: one owner per store, clean stops."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest


def test_a_second_server_on_the_same_store_refuses_to_start(tmp_path: Path, cli: Any) -> None:
    root = tmp_path / "store"
    with cli.process(root, "serve", "--store", str(root), "--port", "0") as (first, url):
        assert url.startswith("http://127.0.0.1:"), url
        written = httpx.post(
            f"{url}/v1/collections/ana/remember", json={"text": "Ana plays the violin."}, timeout=60
        )
        assert written.status_code == 200, written.text
        second = subprocess.run(
            cli.command("serve", "--store", str(root), "--port", "0"),
            env=cli.env(root),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert second.returncode == 2, second.stderr
        assert (
            f"another charmem server (pid {first.pid}) already serves the stores under {root}"
            in second.stderr
        )
        assert "Traceback" not in second.stderr
        # the first one still serves
        recalled = httpx.post(f"{url}/v1/collections/ana/retrieve", json={"query": "violin"}, timeout=60)
        assert recalled.json()["items"][0]["text"] == "Ana plays the violin."


def test_sigterm_stops_cleanly_and_releases_the_stores(tmp_path: Path, cli: Any) -> None:
    root = tmp_path / "store"
    with cli.process(root, "serve", "--store", str(root), "--port", "0") as (process, url):
        assert (
            httpx.post(f"{url}/v1/collections/ana/remember", json={"text": "kept"}, timeout=60).status_code
            == 200
        )
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
        log = cli.read_rest(process)
        assert "collection_closed" in log and "server_stopped" in log
        assert process.stdout is not None and process.stdout.read() == "", "serve printed to stdout"
    # the stores are free again, and what was acknowledged is there
    with cli.process(root, "serve", "--store", str(root), "--port", "0") as (_again, url):
        recalled = httpx.post(f"{url}/v1/collections/ana/retrieve", json={"query": "kept"}, timeout=60)
        assert recalled.json()["items"][0]["text"] == "kept"


def test_sigterm_lets_the_request_in_flight_finish_and_refuses_new_connections(
    tmp_path: Path, cli: Any, gate: Any
) -> None:
    root = tmp_path / "store"
    gated = {"command": cli.gated_command, "TEST_GATE_DIR": str(gate.directory)}
    with cli.process(root, "serve", "--store", str(root), "--port", "0", **gated) as (process, url):
        assert url.startswith("http://127.0.0.1:"), url
        answers: list[httpx.Response] = []
        body = {"text": "Ana practises the cello slowly."}
        in_flight = threading.Thread(
            target=lambda: answers.append(
                httpx.post(f"{url}/v1/collections/ana/remember", json=body, timeout=60)
            )
        )
        in_flight.start()
        gate.wait_entered()
        process.send_signal(signal.SIGTERM)
        address = url.removeprefix("http://").rsplit(":", 1)
        _wait_refused(address[0], int(address[1]))
        assert process.poll() is None, "the server exited with a request in flight"
        gate.open()
        in_flight.join(timeout=60)
        assert [answer.status_code for answer in answers] == [200], answers[0].text if answers else ""
        assert process.wait(timeout=60) == 0
        assert "server_stopped" in cli.read_rest(process)
    # the stores are free again, and the request that finished during the stop is there
    with cli.process(root, "serve", "--store", str(root), "--port", "0") as (_again, url):
        recalled = httpx.post(f"{url}/v1/collections/ana/retrieve", json={"query": "cello"}, timeout=60)
        assert recalled.json()["items"][0]["text"] == "Ana practises the cello slowly."


def test_sigterm_drains_a_write_whose_client_got_504(tmp_path: Path, cli: Any, gate: Any) -> None:
    root = tmp_path / "store"
    gated = {"command": cli.gated_command, "TEST_GATE_DIR": str(gate.directory)}
    args = ("serve", "--store", str(root), "--port", "0", "--request-timeout", "0.3")
    with cli.process(root, *args, **gated) as (process, url):
        body = {"text": "Ana practises the cello slowly."}
        timed_out = httpx.post(f"{url}/v1/collections/ana/remember", json=body, timeout=60)
        assert timed_out.status_code == 504, timed_out.text
        gate.wait_entered()
        process.send_signal(signal.SIGTERM)
        with pytest.raises(subprocess.TimeoutExpired):
            process.wait(timeout=0.5)  # no request in flight, but an operation: the stop waits
        gate.open()
        assert process.wait(timeout=60) == 0
        log = cli.read_rest(process)
        assert "'server_stopping' operations=1" in log, log  # the lifespan waited for it
    with cli.process(root, "serve", "--store", str(root), "--port", "0") as (_again, url):
        recalled = httpx.post(f"{url}/v1/collections/ana/retrieve", json={"query": "cello"}, timeout=60)
        assert recalled.json()["items"][0]["text"] == "Ana practises the cello slowly."
        checked = httpx.post(f"{url}/v1/collections/ana/check", json={}, timeout=60)
        assert checked.json()["report"]["consistent"] is True


def _wait_refused(host: str, port: int, timeout_s: float = 30) -> None:
    """Return once ``host:port`` refuses new connections (a failure after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, port), timeout=1).close()
        except ConnectionRefusedError:
            return
        time.sleep(0.02)
    raise AssertionError(f"{host}:{port} still accepts connections after SIGTERM")


def test_serving_off_loopback_needs_a_token_file(tmp_path: Path, cli: Any) -> None:
    root = tmp_path / "store"
    refused = subprocess.run(
        cli.command("serve", "--store", str(root), "--host", "0.0.0.0", "--port", "0"),
        env=cli.env(root),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2
    assert "refusing to serve on 0.0.0.0 without --tokens" in refused.stderr
    assert not root.exists(), "a refused start touched the store"


def test_hash_token_prints_the_hash_for_the_token_file(tmp_path: Path, cli: Any) -> None:
    done = subprocess.run(
        cli.command("serve", "--hash-token"),
        env=cli.env(tmp_path),
        input="s3cret\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    from charmem_server import hash_token

    assert done.stdout.strip() == hash_token("s3cret")
    assert json.dumps(done.stdout.strip())  # a plain string for the file
