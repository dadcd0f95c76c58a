"""The HTTP API on a real uvicorn server: operations, problem+json errors, auth, limits."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from charmem import (
    CorrectionTarget,
    CorrectMemoryDraft,
    DerivedMemoryDraft,
    DerivedType,
    DraftValidationError,
    EpisodeDraft,
    ForgetMemoryDraft,
    IdConflictError,
    LifecycleErrorKind,
    LifecycleValidationError,
    LinkDraft,
    MemoryId,
    PlanValidationError,
    Relation,
    RememberDrafts,
    RememberInput,
    ReplacementDerivedMemoryDraft,
    RetrievalContext,
)
from charmem_server import (
    RemoteCharacterMemory,
    RemoteError,
    ServerConfig,
    SyncRemoteCharacterMemory,
    hash_token,
)
from charmem_server._wire import converter, decode_pack
from charmem_server.client import _TokenCounterByName

if TYPE_CHECKING:
    from conftest import RunningServer

WHEN = "2024-06-01T18:30:00+00:00"
PROBLEM = "application/problem+json"


def _remember(http: httpx.Client, text: str, collection: str = "ana", **extra: Any) -> httpx.Response:
    return http.post(
        f"/v1/collections/{collection}/remember", json={"text": text, "occurred_at": WHEN, **extra}
    )


def _recall(http: httpx.Client, query: str, collection: str = "ana", **extra: Any) -> dict[str, Any]:
    response = http.post(f"/v1/collections/{collection}/retrieve", json={"query": query, **extra})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def holds(answer: Any, expected: Any) -> bool:
    """Whether ``answer`` carries ``expected``: every key of every object, every value equal."""
    if isinstance(expected, dict):
        return isinstance(answer, dict) and all(
            k in answer and holds(answer[k], v) for k, v in expected.items()
        )
    if isinstance(expected, list):
        return isinstance(answer, list) and len(answer) == len(expected) and all(map(holds, answer, expected))
    return bool(answer == expected)


def test_remember_then_retrieve_answers_the_pack_and_its_rendering(
    http: httpx.Client,
) -> None:
    stored = _remember(http, "Ana is visiting from Porto next week.")
    assert stored.status_code == 200, stored.text
    outcome = stored.json()
    assert outcome["format_version"] == 1 and len(outcome["object_ids"]) == 2
    body = _recall(http, "Who is visiting from Porto?", render_max_tokens=40)
    assert body["items"][0]["text"] == "Ana is visiting from Porto next week."
    assert body["rendered"].startswith("- [2024-06-01] observation: Ana is visiting")
    pack = decode_pack(body, _TokenCounterByName(body["token_counter"]))  # as the client rebuilds it
    expected = json.loads(json.dumps(pack.to_dict()))
    assert holds(body, expected), "the answer does not carry pack.to_dict()"
    assert pack.render(40) == body["rendered"]


def test_the_drafts_path_prepare_validate_and_commit(http: httpx.Client) -> None:
    episode = MemoryId.deterministic("http", "episode")
    drafts = RememberDrafts(
        episodes=[EpisodeDraft(summary="a walk by the river", occurred_at=None, id=episode)]
    )
    plan = http.post("/v1/collections/ana/prepare", json={"drafts": converter.unstructure(drafts)})
    assert plan.status_code == 200, plan.text
    assert [o["id"] for o in plan.json()["objects"]] == [str(episode)]
    validated = http.post("/v1/collections/ana/validate", content=plan.content)
    assert [v["status"] for v in validated.json()["validations"]] == ["valid"]
    committed = http.post("/v1/collections/ana/commit", content=plan.content)
    assert committed.status_code == 200 and committed.json()["object_ids"] == [str(episode)]
    again = http.post("/v1/collections/ana/commit", json={"plan": plan.json()})
    assert again.status_code == 200 and again.json()["warnings"], "a replay is accepted with a warning"


@pytest.mark.parametrize(
    ("body", "status", "error", "field"),
    [
        ({"text": "   ", "occurred_at": WHEN}, 422, "DraftValidationError", "text"),
        ({"text": "naive time", "occurred_at": "2024-06-01T18:30:00"}, 422, "DraftValidationError", None),
        ({"text": "x", "colour": "blue"}, 422, "DraftValidationError", "body"),
        ({"text": 42}, 422, "DraftValidationError", "text"),
        (
            {"text": "x", "scene": {"at": WHEN, "participants": [{"name": 5}]}},
            422,
            "DraftValidationError",
            "scene.participants[0].name",
        ),
        ([1, 2, 3], 422, "DraftValidationError", None),
        ({"drafts": {"episodes": "nope"}}, 422, "DraftValidationError", None),
        ({"text": "x", "format_version": 99}, 422, "DraftValidationError", "format_version"),
    ],
)
def test_malformed_bodies_get_422_problems_and_write_nothing(
    http: httpx.Client, server: RunningServer, body: Any, status: int, error: str, field: str | None
) -> None:
    response = http.post("/v1/collections/ana/remember", json=body)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    problem = response.json()
    assert problem["error"] == error and problem["status"] == status and problem["detail"]
    assert "Traceback" not in response.text
    if field is not None:
        assert problem["fields"]["field"] == field
    assert not (Path(server.registry.settings.vector_store_path) / "ana").exists(), (
        "a refused write created the collection"
    )


def test_a_body_that_is_not_json_is_a_422_problem(http: httpx.Client) -> None:
    response = http.post(
        "/v1/collections/ana/remember", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert (response.status_code, response.json()["error"]) == (422, "DraftValidationError")
    assert "not JSON" in response.json()["detail"]


def test_a_body_nesting_too_deeply_is_a_422_problem(http: httpx.Client) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    response = http.post(
        "/v1/collections/ana/retrieve", content=deep, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422 and response.headers["content-type"] == PROBLEM, response.text
    problem = response.json()
    assert (problem["error"], problem["fields"]["field"]) == ("DraftValidationError", "body")
    assert "nests too deeply" in problem["detail"]


def test_validate_refuses_a_plan_of_another_collection_as_commit_does(http: httpx.Client) -> None:
    plan = http.post("/v1/collections/ana/prepare", json={"text": "Ana bakes bread.", "occurred_at": WHEN})
    assert plan.status_code == 200, plan.text
    validated = http.post("/v1/collections/ben/validate", content=plan.content)
    committed = http.post("/v1/collections/ben/commit", content=plan.content)
    assert committed.status_code == 422 and "prepared for collection 'ana'" in committed.json()["detail"]
    assert validated.status_code == committed.status_code, validated.text
    assert validated.json()["error"] == committed.json()["error"] == "PlanValidationError"
    assert validated.json()["detail"] == committed.json()["detail"]


def test_routing_errors_are_problems(http: httpx.Client) -> None:
    wrong_method = http.get("/v1/collections/ana/retrieve")
    assert wrong_method.status_code == 405 and wrong_method.headers["content-type"] == PROBLEM
    assert wrong_method.json()["status"] == 405 and "POST" in wrong_method.json()["detail"]
    assert wrong_method.headers["allow"] == "POST"
    nowhere = http.post("/v2/anything", json={})
    assert nowhere.status_code == 404 and nowhere.headers["content-type"] == PROBLEM
    assert nowhere.json()["status"] == 404 and "/openapi.json" in nowhere.json()["detail"]


def test_an_id_conflict_is_409_with_its_ids_and_writes_nothing(http: httpx.Client) -> None:
    episode = MemoryId.deterministic("http", "conflict")
    first = RememberInput("the first words", occurred_at=None, episode_id=episode)
    assert http.post("/v1/collections/ana/remember", json=converter.unstructure(first)).status_code == 200
    before = _recall(http, "another afternoon entirely")["items"]
    clash = RememberDrafts(episodes=[EpisodeDraft(summary="another afternoon entirely", id=episode)])
    response = http.post("/v1/collections/ana/remember", json={"drafts": converter.unstructure(clash)})
    assert response.status_code == 409
    problem = response.json()
    assert problem["error"] == "IdConflictError" and str(episode) in problem["fields"]["ids"]
    assert "PlanValidationError" in problem["error_bases"]
    assert _recall(http, "another afternoon entirely")["items"] == before


def test_replayed_corrections_links_and_forgets_write_nothing_new(http: httpx.Client) -> None:
    """The 504 advice says these writes are safe to replay: the same body gives the same ids."""
    first = _remember(http, "Ana moves to Lisbon in June.").json()["object_ids"]
    second = _remember(http, "Ana looks for a flat.").json()["object_ids"]
    bodies = {
        "correct": converter.unstructure(
            CorrectMemoryDraft(CorrectionTarget.source_object(first[-1]), "the month").with_replacement(
                ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "Ana moves to Lisbon in July.")
            )
        ),
        "link": converter.unstructure(LinkDraft(second[-1], Relation.ASSOCIATED_WITH, first[-1])),
        "forget": converter.unstructure(ForgetMemoryDraft.suppress(second[-1], "asked to")),
    }
    for operation, body in bodies.items():
        once = http.post(f"/v1/collections/ana/{operation}", json=body)
        again = http.post(f"/v1/collections/ana/{operation}", json=body)
        assert once.status_code == again.status_code == 200, (operation, once.text, again.text)
        drop = {"warnings", "repair_markers"}
        assert {k: v for k, v in once.json().items() if k not in drop} == {
            k: v for k, v in again.json().items() if k not in drop
        }, operation
    assert [i["text"] for i in _recall(http, "Lisbon")["items"] if "Lisbon" in i["text"]].count(
        "Ana moves to Lisbon in July."
    ) == 1


def test_a_lifecycle_refusal_is_422_with_its_kind(http: httpx.Client) -> None:
    draft = ForgetMemoryDraft.suppress(MemoryId.deterministic("http", "never"), "gone")
    response = http.post("/v1/collections/ana/forget", json=converter.unstructure(draft))
    assert response.status_code == 422
    problem = response.json()
    assert (problem["error"], problem["fields"]["kind"]) == (
        "LifecycleValidationError",
        "missing_forget_target",
    )


def test_unknown_operations_and_bad_collection_names(http: httpx.Client) -> None:
    unknown = http.post("/v1/collections/ana/delete", json={})
    assert unknown.status_code == 404 and unknown.headers["content-type"] == PROBLEM
    bad = http.post("/v1/collections/Not-Allowed/retrieve", json={"query": "x"})
    assert (bad.status_code, bad.json()["error"], bad.json()["fields"]["key"]) == (
        400,
        "ConfigurationError",
        "collection",
    )


def test_reading_an_unknown_collection_answers_empty_and_creates_nothing(
    http: httpx.Client, server: RunningServer
) -> None:
    body = _recall(http, "anything", collection="nobody")
    assert body["items"] == [] and body["omissions"] == []
    plan = http.post("/v1/collections/nobody/prepare", json={"text": "x", "occurred_at": WHEN})
    assert plan.status_code == 200
    assert http.post("/v1/collections/nobody/validate", content=plan.content).status_code == 200
    assert not (Path(server.registry.settings.vector_store_path) / "nobody").exists()
    check = http.post("/v1/collections/nobody/check", json={})
    assert check.status_code == 404 and "first write" in check.json()["detail"]


def test_check_reports_a_consistent_collection(http: httpx.Client) -> None:
    _remember(http, "We adopted a dog called Biscuit.")
    response = http.post("/v1/collections/ana/check", json={})
    assert response.status_code == 200, response.text
    assert response.json()["report"]["consistent"] is True


def test_health_and_openapi(http: httpx.Client) -> None:
    assert http.get("/v1/health").json()["status"] == "ok"
    document = http.get("/openapi.json").json()
    assert document["openapi"].startswith("3.1")
    for operation in (
        "remember",
        "prepare",
        "validate",
        "commit",
        "retrieve",
        "correct",
        "forget",
        "link",
        "check",
    ):
        assert f"/v1/collections/{{collection}}/{operation}" in document["paths"]
    schemas = document["components"]["schemas"]
    assert {
        "RememberInput",
        "RememberOutcome",
        "RetrievalContext",
        "ContinuityContextPack",
        "Problem",
    } <= set(schemas)
    assert "occurred_at" in schemas["RememberInput"]["properties"]


# -- limits ----------------------------------------------------------------------------------


def test_an_oversized_body_gets_413_and_writes_nothing(serve: Callable[..., RunningServer]) -> None:
    running = serve(ServerConfig(max_body_bytes=2048))
    with httpx.Client(base_url=running.url, timeout=30) as http:
        big = {"text": "word " * 2000, "occurred_at": WHEN}
        response = http.post("/v1/collections/ana/remember", json=big)
        assert response.status_code == 413
        assert response.headers["content-type"] == PROBLEM and "2048 bytes" in response.json()["detail"]
        # a streamed body without Content-Length is cut at the limit too
        chunks = (b'{"text": "' + b"w" * 1024 for _ in range(8))
        streamed = http.post("/v1/collections/ana/remember", content=chunks)
        assert streamed.status_code == 413
        assert not (Path(running.registry.settings.vector_store_path) / "ana").exists()
        assert _remember(http, "small enough").status_code == 200


def test_host_and_origin_of_other_sites_are_refused(http: httpx.Client, server: RunningServer) -> None:
    rebound = http.post(
        "/v1/collections/ana/remember", json={"text": "x"}, headers={"host": "evil.example:80"}
    )
    assert rebound.status_code == 421 and rebound.headers["content-type"] == PROBLEM
    page = http.post(
        "/v1/collections/ana/remember", json={"text": "x"}, headers={"origin": "http://evil.example"}
    )
    assert page.status_code == 403
    port = server.config.port
    same = http.get("/v1/health", headers={"host": f"localhost:{port}", "origin": f"http://localhost:{port}"})
    assert same.status_code == 200
    assert not (Path(server.registry.settings.vector_store_path) / "ana").exists()


# -- tokens ----------------------------------------------------------------------------------


def _token_file(tmp_path: Path, entries: list[dict[str, Any]], mode: int = 0o600) -> Path:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"tokens": entries}))
    os.chmod(path, mode)
    return path


def test_tokens_scopes_and_collections(serve: Callable[..., RunningServer], tmp_path: Path) -> None:
    from charmem_server import load_tokens

    tokens = load_tokens(
        _token_file(
            tmp_path,
            [
                {
                    "name": "writer",
                    "sha256": hash_token("w-secret"),
                    "collections": ["ana"],
                    "scopes": ["read", "write"],
                },
                {"name": "reader", "sha256": hash_token("r-secret"), "collections": "*", "scopes": ["read"]},
                {"name": "ops", "sha256": hash_token("o-secret"), "collections": "*", "scopes": ["admin"]},
            ],
        )
    )
    running = serve(ServerConfig(tokens=tokens))

    def client(token: str | None) -> httpx.Client:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=running.url, headers=headers, timeout=30)

    with (
        client(None) as anonymous,
        client("wrong") as wrong,
        client("w-secret") as writer,
        client("r-secret") as reader,
        client("o-secret") as ops,
    ):
        assert anonymous.get("/v1/health").status_code == 200, "health needs no token"
        for who in (anonymous, wrong):
            refused = _remember(who, "sneaky")
            assert refused.status_code == 401 and refused.headers["content-type"] == PROBLEM
            assert "www-authenticate" in refused.headers
        assert _remember(reader, "read only").status_code == 403
        assert _remember(writer, "elsewhere", collection="ben").status_code == 403
        forbidden = ops.post("/v1/collections/ana/retrieve", json={"query": "x"})
        assert forbidden.status_code == 403 and "'ops'" in forbidden.json()["detail"]
        assert not (Path(running.registry.settings.vector_store_path) / "ana").exists(), (
            "a refused write wrote"
        )
        assert _remember(writer, "Ana plays the violin.").status_code == 200
        assert _recall(reader, "violin")["items"][0]["text"] == "Ana plays the violin."
        assert reader.post("/v1/collections/ana/check", json={}).status_code == 403
        assert ops.post("/v1/collections/ana/check", json={}).json()["report"]["consistent"] is True
        assert "secret" not in refused.text


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660])
def test_a_token_file_others_can_read_is_refused(tmp_path: Path, mode: int) -> None:
    from charmem import ConfigurationError
    from charmem_server import load_tokens

    path = _token_file(tmp_path, [{"sha256": hash_token("t"), "collections": "*", "scopes": ["read"]}], mode)
    with pytest.raises(ConfigurationError, match="chmod 600"):
        load_tokens(path)


def test_a_token_file_holding_a_plain_token_is_refused(tmp_path: Path) -> None:
    from charmem import ConfigurationError
    from charmem_server import load_tokens

    path = _token_file(tmp_path, [{"sha256": "my-plain-token", "collections": "*", "scopes": ["read"]}])
    with pytest.raises(ConfigurationError, match="64 lowercase hex digits") as caught:
        load_tokens(path)
    assert "my-plain-token" not in str(caught.value)


# -- the remote client -----------------------------------------------------------------------


async def test_the_remote_client_raises_the_same_errors_with_their_fields(server: RunningServer) -> None:
    async with RemoteCharacterMemory(server.url, "ana") as memory:
        episode = MemoryId.deterministic("remote", "episode")
        await memory.remember(RememberInput("first", episode_id=episode))
        with pytest.raises(IdConflictError) as conflict:
            await memory.remember(RememberDrafts(episodes=[EpisodeDraft(summary="other", id=episode)]))
        assert conflict.value.ids == (str(episode),) and conflict.value.reasons
        with pytest.raises(LifecycleValidationError) as lifecycle:
            await memory.forget(ForgetMemoryDraft.suppress(MemoryId.deterministic("remote", "x"), "gone"))
        assert lifecycle.value.kind is LifecycleErrorKind.MISSING_FORGET_TARGET
        belief = MemoryId.deterministic("remote", "belief")
        with pytest.raises(PlanValidationError) as plan:
            await memory.remember(
                RememberDrafts(derived=[DerivedMemoryDraft(DerivedType.CLAIM, "floating", id=belief)])
            )
        assert str(belief) in plan.value.reasons and isinstance(plan.value.reasons[str(belief)], tuple)
        with pytest.raises(DraftValidationError):
            await memory.remember(RememberInput("x"), options=RetrievalContext(query="x"))  # type: ignore[arg-type]
    with pytest.raises(RemoteError) as missing:
        async with RemoteCharacterMemory(server.url, "nobody") as other:
            await other.check()
    assert missing.value.status == 404


def test_the_blocking_client_and_an_unreachable_server(server: RunningServer) -> None:
    from charmem import BackendError

    with SyncRemoteCharacterMemory(server.url, "ana") as memory:
        memory.remember(RememberInput("Biscuit is a beagle."))
        pack = memory.retrieve("What kind of dog is Biscuit?")
        assert pack.items[0].text == "Biscuit is a beagle."
        assert pack.render(max_tokens=50).endswith("Biscuit is a beagle.")
    nowhere = SyncRemoteCharacterMemory("http://127.0.0.1:9", "ana", timeout_s=2)
    with nowhere, pytest.raises(BackendError, match="did not answer"):
        nowhere.retrieve("x")
