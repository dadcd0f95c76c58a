"""The examples of the server: the HTTP client runs against a real server; the host config is valid."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import RunningServer

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_the_http_client_example_runs_against_a_server(server: RunningServer) -> None:
    spec = importlib.util.spec_from_file_location("http_client", EXAMPLES / "http_client.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    prompt = example.run(server.url)
    assert "Marta moves to Lisbon in July." in prompt
    assert "in June" not in prompt, "the corrected memory is still recalled as current"


def test_the_mcp_host_config_launches_charmem_mcp() -> None:
    config = json.loads((EXAMPLES / "mcp_host_config.json").read_text())
    server = config["mcpServers"]["charmem"]
    assert server["command"] == "charmem" and server["args"][0] == "mcp"
    assert "--collection" in server["args"] and "--store" in server["args"]
