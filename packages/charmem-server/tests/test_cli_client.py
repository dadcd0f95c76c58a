"""The charmem CLI as a client of a running server (CHARMEM_SERVER_URL or --server)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conftest import RunningServer


def _run(cli: Any, root: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli.command(*args), env=cli.env(root, **env), capture_output=True, text=True, timeout=120
    )


def test_recall_remember_and_check_go_to_the_server(server: RunningServer, cli: Any, tmp_path: Path) -> None:
    local = tmp_path / "no-store-here"
    url = {"CHARMEM_SERVER_URL": server.url}
    remembered = _run(cli, local, "--collection", "ana", "remember", "Ana learns the cello.", **url)
    assert remembered.returncode == 0, remembered.stderr
    assert len(json.loads(remembered.stdout)["object_ids"]) == 2
    recalled = _run(cli, local, "--collection", "ana", "recall", "--json", "What does Ana learn?", **url)
    assert recalled.returncode == 0, recalled.stderr
    assert json.loads(recalled.stdout)["items"][0]["text"] == "Ana learns the cello."
    readable = _run(cli, local, "--server", server.url, "--collection", "ana", "recall", "cello")
    assert "Ana learns the cello." in readable.stdout
    checked = _run(cli, local, "--collection", "ana", "check", **url)
    assert (checked.returncode, checked.stdout.strip()) == (0, "consistent")
    assert not local.exists(), "client mode opened stores in the client process"


def test_store_commands_are_refused_in_client_mode(server: RunningServer, cli: Any, tmp_path: Path) -> None:
    refused = _run(cli, tmp_path / "x", "rebuild-vectors", CHARMEM_SERVER_URL=server.url)
    assert refused.returncode == 2
    assert "`charmem rebuild-vectors` works on the stores themselves" in refused.stderr
    assert "not available through a server" in refused.stderr


def test_server_errors_keep_their_class_in_the_cli(server: RunningServer, cli: Any, tmp_path: Path) -> None:
    failed = _run(cli, tmp_path / "x", "--collection", "ana", "check", CHARMEM_SERVER_URL=server.url)
    assert failed.returncode == 2
    assert "RemoteError" in failed.stderr and "first write" in failed.stderr
    blank = _run(cli, tmp_path / "x", "remember", "   ", CHARMEM_SERVER_URL=server.url)
    assert blank.returncode == 2 and "DraftValidationError" in blank.stderr
