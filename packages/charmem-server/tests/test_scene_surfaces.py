"""Scenes over the server: HTTP bodies, the remote client, MCP tools, the CLI in client mode, and
the character id each collection is served as (real uvicorn servers over embedded stores)."""

from __future__ import annotations

import io
import json
import subprocess
from collections.abc import Callable
from contextlib import redirect_stdout
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from charmem import (
    AdmissionRoad,
    CharacterIdentityMismatchError,
    CharacterMemory,
    MemoryId,
    RememberInput,
    RetrievalContext,
    Scene,
    SceneParticipant,
    SceneResolutionStatus,
    SceneSetting,
    Settings,
)
from charmem.errors import ConfigurationError
from charmem.testing import HashingEmbeddingProvider
from charmem_server import RemoteCharacterMemory, SyncRemoteCharacterMemory
from charmem_server._cli import character_ids

if TYPE_CHECKING:
    from conftest import RunningServer

MET = "2025-06-01T18:30:00+02:00"
LATER = "2025-06-04T10:00:00+02:00"
ANA = MemoryId.deterministic("scene-surfaces", "ana")


def _post(http: httpx.Client, operation: str, body: Any, collection: str = "home") -> httpx.Response:
    return http.post(f"/v1/collections/{collection}/{operation}", json=body)


def _visit(http: httpx.Client) -> None:
    """Ana as a notion, a visit of hers in the kitchen, and an episode after the scene's time."""
    notion = {"drafts": {"entities": [{"id": str(ANA), "entity_type": "person"}]}}
    assert _post(http, "remember", notion).status_code == 200
    scene = {
        "at": MET,
        "participants": [{"entity_id": str(ANA)}, {"description": "a man with a deep voice"}],
        "setting": {"key": "kitchen", "words": "a warm kitchen smelling of bread"},
        "custom_values": {"activity": "baking"},
    }
    visit = {"text": "Ana and I baked bread.", "occurred_at": MET, "participant_entity_ids": [str(ANA)]}
    stored = _post(http, "remember", {**visit, "scene": scene})
    assert stored.status_code == 200, stored.text
    after = {"text": "Ana phoned about the trip.", "occurred_at": "2025-06-09T09:00:00+02:00"}
    assert _post(http, "remember", {**after, "participant_entity_ids": [str(ANA)]}).status_code == 200


def _scene_body(**extra: Any) -> dict[str, Any]:
    return {
        "scene": {"at": LATER, "participants": [{"entity_id": str(ANA)}, {"name": "Nobody Known"}]},
        **extra,
    }


def test_a_scene_without_a_query_recalls_over_http(http: httpx.Client) -> None:
    _visit(http)
    answer = _post(http, "retrieve", _scene_body(trace=True))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["query"] is None
    texts = [item["text"] for item in body["items"]]
    assert "Ana and I baked bread." in texts and "Ana phoned about the trip." not in texts
    visit = next(item for item in body["items"] if item["text"] == "Ana and I baked bread.")
    assert "participant" in visit["admitted_by"]
    [met] = body["last_interactions"]
    assert met["entity_id"] == str(ANA)
    assert datetime.fromisoformat(met["last_met_at"]) == datetime.fromisoformat(MET)
    assert met["elapsed"] == (datetime.fromisoformat(LATER) - datetime.fromisoformat(MET)).total_seconds()
    statuses = [(r["participant_index"], r["status"]) for r in body["scene_resolutions"]]
    assert statuses == [(0, "resolved"), (1, "unknown")]


def test_a_time_range_alone_is_a_cue(http: httpx.Client) -> None:
    _visit(http)
    body = _post(http, "retrieve", {"time_range": ["2025-05-31T00:00:00+00:00", "2025-06-02T00:00:00+00:00"]})
    assert body.status_code == 200, body.text
    assert "Ana and I baked bread." in [item["text"] for item in body.json()["items"]]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({}, "a query, a scene, an activity or a time_range"),
        ({"query": None, "trace": True}, "a query, a scene, an activity or a time_range"),
        ({"scene": {"at": "2025-06-04T10:00:00"}}, "timezone-aware"),
        ({"scene": {"at": "tomorrow"}}, "ISO 8601"),
        ({"scene": {"at": LATER, "participants": [{}]}}, "scene.participants[0]: a SceneParticipant needs"),
        ({"scene": {"at": LATER, "setting": {}}}, "a SceneSetting needs a key or words"),
        ({"scene": {"at": LATER, "custom_values": {"floor": 3}}}, "custom_values"),
        ({"scene": {"at": LATER, "participants": [{"nick": "A"}]}}, "unknown keys ['nick']"),
        ({"time_range": ["2025-06-01T00:00:00+00:00"]}, "time_range"),
    ],
)
def test_a_bad_scene_or_no_cue_is_a_422_saying_what_to_give(
    http: httpx.Client, body: dict[str, Any], says: str
) -> None:
    answer = _post(http, "retrieve", body)
    assert answer.status_code == 422, answer.text
    problem = answer.json()
    assert problem["error"] == "DraftValidationError" and says in problem["detail"], problem["detail"]


def test_a_remember_with_a_bad_scene_is_a_422_and_writes_nothing(http: httpx.Client) -> None:
    answer = _post(http, "remember", {"text": "x", "scene": {"at": MET, "participants": [{"name": " "}]}})
    assert answer.status_code == 422 and "scene.participants[0]" in answer.json()["detail"]
    assert _post(http, "retrieve", {"query": "x"}).json()["items"] == []


def test_the_openapi_document_describes_scenes_and_the_pack_answers(http: httpx.Client) -> None:
    document = http.get("/openapi.json").json()
    schemas = document["components"]["schemas"]
    context = schemas["RetrievalContext"]
    assert "query" not in context.get("required", [])
    for field in ("scene", "activity", "time_range", "trace"):
        assert field in context["properties"]
    assert schemas["Scene"]["required"] == ["at"]
    assert set(schemas["SceneParticipant"]["properties"]) == {"entity_id", "name", "description"}
    assert set(schemas["SceneSetting"]["properties"]) == {"key", "words"}
    assert schemas["Scene"]["properties"]["custom_values"]["additionalProperties"] == {"type": "string"}
    assert "scene" in schemas["RememberInput"]["properties"]
    retrieve = document["paths"]["/v1/collections/{collection}/retrieve"]["post"]
    request = retrieve["requestBody"]["content"]["application/json"]["schema"]
    assert request["anyOf"] == [{"required": [c]} for c in ("query", "scene", "activity", "time_range")]
    pack = schemas["ContinuityContextPack"]["properties"]
    assert pack["last_interactions"]["items"] == {"$ref": "#/components/schemas/LastInteraction"}
    assert "admitted_by" in schemas["PackItem"]["properties"]
    assert "CharacterIdentityMismatchError" in retrieve["responses"]["409"]["description"]
    import jsonschema  # the MCP SDK's dependency; OpenAPI 3.1 schemas are JSON Schema 2020-12

    validator = jsonschema.Draft202012Validator({**request, "components": document["components"]})
    assert validator.is_valid(
        {"scene": {"at": LATER, "participants": [{"name": "Ana"}], "setting": {"key": "k"}}}
    )
    assert validator.is_valid({"time_range": [MET, LATER], "trace": True})
    assert not validator.is_valid({"trace": True})  # no cue
    assert not validator.is_valid({"scene": {"participants": []}})  # a scene needs its time


async def test_the_remote_client_sends_a_scene_and_rebuilds_the_pack(
    server: RunningServer, http: httpx.Client
) -> None:
    _visit(http)
    scene = Scene(
        at=datetime.fromisoformat(LATER),
        participants=[SceneParticipant(entity_id=ANA), SceneParticipant(description="a tall woman")],
        setting=SceneSetting(key="kitchen"),
        custom_values={"activity": "baking"},
    )
    async with RemoteCharacterMemory(server.url, "home") as memory:
        pack = await memory.retrieve(RetrievalContext(scene=scene))
    [met] = pack.last_interactions
    assert met.entity_id == ANA and met.elapsed == timedelta(days=2, hours=15, minutes=30)
    assert [r.status for r in pack.scene_resolutions] == [
        SceneResolutionStatus.RESOLVED,
        SceneResolutionStatus.UNKNOWN,
    ]
    assert AdmissionRoad.PARTICIPANT in next(i for i in pack.items if "baked" in i.text).admitted_by
    with SyncRemoteCharacterMemory(server.url, "home") as blocking:
        assert blocking.retrieve(RetrievalContext(scene=scene)) == pack
        plan = blocking.prepare(RememberInput("Ana brought jam.").with_scene(scene))  # at: the scene's
        [episode] = [o for o in plan.objects if getattr(o, "scene", None) is not None]
        assert episode.scene == scene  # type: ignore[attr-defined]  # the plan's JSON carries it
        assert blocking.commit(plan).episode_ids


async def test_the_mcp_tools_take_a_scene(server: RunningServer) -> None:
    async with (
        streamable_http_client(f"{server.url}/mcp") as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        recall_schema = tools["recall"].input_schema
        assert "scene" in recall_schema["properties"] and "query" not in recall_schema.get("required", [])
        assert "scene" in tools["remember"].input_schema["properties"]
        scene = {
            "at": MET,
            "participants": [{"name": "Ana"}, {"description": "a man with a deep voice"}],
            "setting": {"key": "kitchen"},
            "custom_values": {"activity": "baking"},
        }
        stored = await session.call_tool("remember", {"text": "Ana and I baked bread.", "scene": scene})
        assert not stored.is_error, stored.content
        later = {"at": LATER, "participants": [{"name": "Ana"}]}
        recalled = await session.call_tool("recall", {"scene": later})
        assert not recalled.is_error, recalled.content
        text = recalled.content[0].text  # type: ignore[union-attr]
        assert "Ana and I baked bread." in text and "participant 0: unknown" in text
        structured = recalled.structured_content
        assert structured is not None
        assert structured["scene_resolutions"] == [
            {"participant_index": 0, "status": "unknown", "entity_ids": []}
        ]
        nothing = await session.call_tool("recall", {})
        assert nothing.is_error and "a query, a scene" in nothing.content[0].text  # type: ignore[union-attr]
        naive = await session.call_tool("recall", {"scene": {"at": "2025-06-04T10:00:00"}})
        assert naive.is_error and "scene" in naive.content[0].text  # type: ignore[union-attr]
        empty = await session.call_tool("remember", {"text": "x", "scene": {"at": MET, "participants": [{}]}})
        assert empty.is_error and "SceneParticipant" in empty.content[0].text  # type: ignore[union-attr]


def test_the_cli_in_client_mode_sends_the_scene_and_prints_the_same(
    serve: Callable[..., RunningServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from charmem_cli.app import main

    # the test server's embedder, token counter and lexical cue, for the run on its stores below
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hashing")
    monkeypatch.setenv("TOKEN_COUNTER", "whitespace")
    monkeypatch.setenv("VECTOR_LEXICAL_CUE", "false")
    monkeypatch.delenv("CHARMEM_SERVER_URL", raising=False)
    root = tmp_path / "served"
    running = serve(root=root)
    remote = ["--server", running.url, "--store", str(tmp_path / "unused"), "--collection", "cli"]
    scene = ["--participant", "name:Ana", "--participant", "desc:a man with a deep voice"]
    scene += ["--setting-key", "kitchen", "--custom", "activity=baking"]

    def run(where: list[str], *args: str) -> str:
        out = io.StringIO()
        with redirect_stdout(out):
            assert main([*where, *args]) == 0
        return out.getvalue()

    stored = json.loads(run(remote, "remember", "Ana and I baked bread.", *scene, "--at", MET))
    assert len(stored["episode_ids"]) == 1 and stored["warnings"] == []
    recall = ["recall", "--participant", "Ana", "--at", LATER]
    shown = run(remote, *recall)
    assert shown.startswith("Recall for the scene\n")
    assert "Ana and I baked bread." in shown and "participant 1: unknown" in shown
    as_json = json.loads(run(remote, *recall, "--json"))
    assert as_json["query"] is None and as_json["items"][0]["text"] == "Ana and I baked bread."
    assert not (tmp_path / "unused").exists(), "client mode opened stores in the client process"
    running.stop()
    local = ["--store", str(root), "--collection", "cli"]
    assert run(local, *recall) == shown  # on the stores themselves: the same lines
    assert json.loads(run(local, *recall, "--json")) == as_json


def test_character_id_values_of_serve_and_mcp() -> None:
    ana, ben = MemoryId.new(), MemoryId.new()
    assert character_ids([str(ana), f"work={ben}"], "home") == {"home": ana, "work": ben}
    for bad in (["not-a-uuid"], [f"Bad Name={ana}"], [str(ana), f"home={ben}"]):
        with pytest.raises(ConfigurationError) as refused:
            character_ids(bad, "home")
        assert refused.value.key == "--character-id"


async def test_a_collection_of_another_character_answers_409_and_the_others_are_served(
    serve: Callable[..., RunningServer], settings_of: Callable[[Path], Settings], tmp_path: Path
) -> None:
    root = tmp_path / "stores"
    settings = settings_of(root)
    ana, ben = MemoryId.new(), MemoryId.new()
    async with CharacterMemory.open(
        settings, "ana-memory", embedding_provider=HashingEmbeddingProvider(), character_id=ana
    ) as memory:
        await memory.remember(RememberInput("Ana keeps bees."))
    running = serve(root=root, character_ids={"ana-memory": ben, "ben-memory": ben})
    assert running.registry.collections == []  # left closed at start, logged
    with httpx.Client(base_url=running.url, timeout=60) as http:
        refused = _post(http, "retrieve", {"query": "bees"}, collection="ana-memory")
        assert refused.status_code == 409
        problem = refused.json()
        assert problem["error"] == "CharacterIdentityMismatchError"
        assert problem["fields"]["recorded"] == str(ana) and problem["fields"]["given"] == str(ben)
        assert "is the memory of character" in problem["detail"]
        written = _post(http, "remember", {"text": "Ben rides a bike."}, collection="ben-memory")
        assert written.status_code == 200, written.text
    async with RemoteCharacterMemory(running.url, "ana-memory") as remote:
        with pytest.raises(CharacterIdentityMismatchError) as raised:
            await remote.retrieve("bees")
    assert raised.value.collection == "ana-memory"  # type: ignore[attr-defined]
    running.stop()
    with pytest.raises(CharacterIdentityMismatchError):  # the server recorded ben's id on first open
        await CharacterMemory.open(
            settings, "ben-memory", embedding_provider=HashingEmbeddingProvider(), character_id=ana
        )


async def test_charmem_serve_records_the_character_id_it_is_given(
    tmp_path: Path, cli: Any, settings_of: Callable[[Path], Settings]
) -> None:
    root = tmp_path / "store"
    ana = MemoryId.new()
    with cli.process(root, "serve", "--store", str(root), "--port", "0", "--character-id", f"home={ana}") as (
        process,
        url,
    ):
        assert url.startswith("http://127.0.0.1:"), url
        written = httpx.post(
            f"{url}/v1/collections/home/remember", json={"text": "Ana keeps bees."}, timeout=60
        )
        assert written.status_code == 200, written.text
        process.terminate()
        assert process.wait(timeout=60) == 0
    async with CharacterMemory.open(
        settings_of(root), "home", embedding_provider=HashingEmbeddingProvider()
    ) as memory:
        assert memory.character_id == ana
    refused = subprocess.run(
        cli.command("mcp", "--store", str(root), "--character-id", "nope"),
        env=cli.env(root),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2 and "--character-id 'nope': give ID or COLLECTION=ID" in refused.stderr
