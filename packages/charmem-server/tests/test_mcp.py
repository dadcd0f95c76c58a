"""MCP: an SDK client session launching ``charmem mcp`` over stdio, and one over ``/mcp``."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from charmem import CharacterMemory, MemoryId, Settings
from charmem.testing import HashingEmbeddingProvider

if TYPE_CHECKING:
    from conftest import RunningServer


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def _exercise(session: ClientSession) -> list[dict[str, Any]]:
    """List the tools and call each one; returns the transcript of the calls."""
    await session.initialize()
    tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == {"remember", "recall", "correct", "forget", "link"}
    assert "occurred_at" in tools["remember"].input_schema["properties"]
    assert "recall" in tools["recall"].description.lower()
    transcript: list[dict[str, Any]] = []

    async def call(name: str, arguments: dict[str, Any]) -> Any:
        result = await session.call_tool(name, arguments)
        transcript.append(
            {
                "tool": name,
                "arguments": arguments,
                "is_error": result.is_error,
                "text": _text(result),
                "structured": result.structured_content,
            }
        )
        assert not result.is_error, _text(result)
        return result

    first = await call(
        "remember",
        {"text": "Ana's sister Marta moves to Lisbon in June.", "occurred_at": "2025-05-01T10:00:00+00:00"},
    )
    second = await call("remember", {"text": "Marta is looking for a flat near the river."})
    first_ids = first.structured_content["object_ids"]
    second_ids = second.structured_content["object_ids"]
    recalled = await call("recall", {"query": "When does Marta move to Lisbon?", "max_tokens": 200})
    items = recalled.structured_content["items"]
    now = datetime.now(UTC).isoformat()
    met = await call("recall", {"scene": {"at": now, "participants": [{"name": "Ana"}]}})  # no query
    assert "a flat near the river" in _text(met) and "participant 0: unknown" in _text(met)
    observation = next(i["id"] for i in items if i["id"] in first_ids and i["object_type"] == "observation")
    assert "Marta moves to Lisbon in June" in _text(recalled) and observation in _text(recalled)
    corrected = await call(
        "correct",
        {
            "memory_id": observation,
            "corrected_text": "Marta moves to Lisbon in July.",
            "rationale": "the user corrected the month",
        },
    )
    [replacement] = corrected.structured_content["replacement_ids"]
    after = await call("recall", {"query": "When does Marta move to Lisbon?"})
    statuses = {i["id"]: i["status"] for i in after.structured_content["items"]}
    assert statuses.get(replacement) == "current" and "July" in _text(after)
    linked = await call(
        "link", {"from_id": second_ids[-1], "relation": "associated_with", "to_id": replacement}
    )
    assert linked.structured_content["link"]["relation"] == "associated_with"
    await call("forget", {"memory_id": second_ids[-1], "rationale": "the user asked me to forget it"})
    gone = await call("recall", {"query": "a flat near the river"})
    assert second_ids[-1] not in [i["id"] for i in gone.structured_content["items"]]
    refused = await session.call_tool("forget", {"memory_id": "not-an-id", "rationale": "x"})
    assert refused.is_error and "DraftValidationError" in _text(refused)
    return transcript


async def test_an_mcp_session_over_stdio_calls_every_tool(
    tmp_path: Path, cli: Any, settings_of: Callable[[Path], Settings]
) -> None:
    root = tmp_path / "store"
    character = MemoryId.new()
    command = cli.command(
        "mcp", "--store", str(root), "--collection", "assistant", "--character-id", str(character)
    )
    params = StdioServerParameters(command=command[0], args=command[1:], env=cli.env(root))
    with (tmp_path / "mcp-stderr.log").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            transcript = await _exercise(session)
    print(json.dumps(transcript[:3], indent=2, ensure_ascii=False))  # the transcript, with -s
    assert (root / "vectors" / "assistant").is_dir(), "the tools wrote to another collection"
    async with CharacterMemory.open(
        settings_of(root), "assistant", embedding_provider=HashingEmbeddingProvider()
    ) as memory:
        assert memory.character_id == character  # --character-id was recorded on the first open


async def test_an_mcp_session_over_streamable_http(server: RunningServer) -> None:
    async with (
        streamable_http_client(f"{server.url}/mcp") as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await _exercise(session)
    assert "charmem" in server.registry.collections


async def test_a_blank_remember_is_a_tool_error_naming_the_field(
    server: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    async with (
        streamable_http_client(f"{server.url}/mcp") as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        for text in ("", "   "):
            refused = await session.call_tool("remember", {"text": text})
            assert refused.is_error and "DraftValidationError" in _text(refused), _text(refused)
            assert "text must not be blank" in _text(refused)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "a refusal logged an error"


def test_the_mcp_endpoint_needs_read_and_write_on_its_collection(serve: Any, tmp_path: Path) -> None:
    import os

    import httpx

    from charmem_server import ServerConfig, hash_token, load_tokens

    path = tmp_path / "tokens.json"
    path.write_text(
        json.dumps(
            {
                "tokens": [
                    {"name": "reader", "sha256": hash_token("r"), "collections": "*", "scopes": ["read"]},
                    {
                        "name": "agent",
                        "sha256": hash_token("a"),
                        "collections": ["charmem"],
                        "scopes": ["read", "write"],
                    },
                ]
            }
        )
    )
    os.chmod(path, 0o600)
    running = serve(ServerConfig(tokens=load_tokens(path)))
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    headers = {"accept": "application/json, text/event-stream"}
    with httpx.Client(base_url=running.url, timeout=30, headers=headers) as http:
        assert http.post("/mcp", json=initialize).status_code == 401
        refused = http.post("/mcp", json=initialize, headers={"authorization": "Bearer r"})
        assert refused.status_code == 403 and "read and write" in refused.json()["detail"]
        allowed = http.post("/mcp", json=initialize, headers={"authorization": "Bearer a"})
        assert allowed.status_code == 200, allowed.text
