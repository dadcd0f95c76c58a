"""``charmem serve`` and ``charmem mcp`` as real processes: one owner per store, clean stops."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx


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
