"""The per-request timeout and the bounded concurrency, on a real server with a gated embedder.

An operation whose text names "slowly" (``conftest.SLOW_WORD``) waits at the test's gate, so
"slower than the timeout" and "holding the only slot" are facts the test controls, not races
against a clock.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from charmem import CharacterMemory, RememberInput, Settings
from charmem.testing import HashingEmbeddingProvider, stores_of
from charmem_server import ServerConfig

if TYPE_CHECKING:
    from conftest import Gate, GatedEmbeddingProvider, RunningServer

    Serve = Callable[..., RunningServer]

WHEN = "2024-06-01T18:30:00+00:00"
PROBLEM = "application/problem+json"
SLOW_TEXT = "Ana practises the cello slowly."


def _post(url: str, operation: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{url}/v1/collections/ana/{operation}", json=body, timeout=60)


class _InFlight:
    """A request on a thread of its own; ``response`` once it is answered."""

    def __init__(self, url: str, operation: str, body: dict[str, Any]) -> None:
        self.response: httpx.Response | None = None
        self.thread = threading.Thread(target=self._run, args=(url, operation, body), daemon=True)
        self.thread.start()

    def _run(self, url: str, operation: str, body: dict[str, Any]) -> None:
        self.response = _post(url, operation, body)

    def result(self, timeout_s: float = 30) -> httpx.Response:
        self.thread.join(timeout_s)
        assert self.response is not None, "the request got no answer"
        return self.response


def _texts_found(url: str, query: str) -> list[str]:
    recalled = _post(url, "retrieve", {"query": query})
    assert recalled.status_code == 200, recalled.text
    return [item["text"] for item in recalled.json()["items"]]


def _eventually_found(url: str, query: str, text: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in _texts_found(url, query):
        assert time.monotonic() < deadline, f"{text!r} was never written"
        time.sleep(0.05)


def _assert_timeout_problem(response: httpx.Response, what: str) -> None:
    assert response.status_code == 504, response.text
    assert response.headers["content-type"] == PROBLEM
    problem = response.json()
    assert problem["type"] == "urn:charmem:problem:timeout" and problem["status"] == 504
    assert f"while {what}" in problem["detail"] and "Traceback" not in response.text


def test_a_write_over_the_timeout_gets_504_and_still_completes(
    serve: Serve, gate: Gate, gated_embedder: GatedEmbeddingProvider
) -> None:
    running = serve(embedder=gated_embedder, config=ServerConfig(request_timeout_s=0.3))
    answer = _InFlight(running.url, "remember", {"text": SLOW_TEXT, "occurred_at": WHEN})
    gate.wait_entered()
    timed_out = answer.result()
    _assert_timeout_problem(timed_out, "running")
    # a remember mints new ids: its replay would be a second write, so the answer says so
    detail = timed_out.json()["detail"]
    assert "replaying it writes again" in detail and "prepare" in detail and "is safe" not in detail
    assert SLOW_TEXT not in _texts_found(running.url, "cello"), "the write passed the closed gate"
    gate.open()
    # the write the client saw time out runs to its end on the server, whole
    _eventually_found(running.url, "cello", SLOW_TEXT)
    checked = _post(running.url, "check", {})
    assert checked.status_code == 200, checked.text
    assert checked.json()["report"]["consistent"] is True


def test_a_read_over_the_timeout_gets_504_and_gives_its_slot_back(
    serve: Serve, gate: Gate, gated_embedder: GatedEmbeddingProvider
) -> None:
    running = serve(embedder=gated_embedder, config=ServerConfig(request_timeout_s=0.3, max_concurrency=1))
    assert _post(running.url, "remember", {"text": "Ana plays the cello.", "occurred_at": WHEN}).is_success
    _assert_timeout_problem(_post(running.url, "retrieve", {"query": "cello slowly"}), "running")
    # the read was cancelled: the only slot is free again although the gate stays closed
    assert _texts_found(running.url, "cello") == ["Ana plays the cello."]


def test_operations_beyond_the_bound_wait_for_a_slot(
    serve: Serve, gate: Gate, gated_embedder: GatedEmbeddingProvider
) -> None:
    running = serve(embedder=gated_embedder, config=ServerConfig(request_timeout_s=30, max_concurrency=1))
    write = _InFlight(running.url, "remember", {"text": SLOW_TEXT, "occurred_at": WHEN})
    gate.wait_entered()
    read = _InFlight(running.url, "retrieve", {"query": "cello"})
    read.thread.join(0.3)
    assert read.response is None, "a second operation ran beside the only slot's"
    assert httpx.get(f"{running.url}/v1/health", timeout=5).status_code == 200, "health waits for a slot"
    gate.open()
    assert write.result().status_code == 200
    # the read ran once the write had left its slot, so it sees the write
    found = read.result()
    assert found.status_code == 200, found.text
    assert [item["text"] for item in found.json()["items"]] == [SLOW_TEXT]


def test_a_wait_for_a_slot_over_the_timeout_gets_504(
    serve: Serve, gate: Gate, gated_embedder: GatedEmbeddingProvider
) -> None:
    running = serve(embedder=gated_embedder, config=ServerConfig(request_timeout_s=0.3, max_concurrency=1))
    write = _InFlight(running.url, "remember", {"text": SLOW_TEXT, "occurred_at": WHEN})
    gate.wait_entered()
    _assert_timeout_problem(_post(running.url, "retrieve", {"query": "cello"}), "waiting for a free slot")
    _assert_timeout_problem(write.result(), "running")
    gate.open()
    _eventually_found(running.url, "cello", SLOW_TEXT)


def test_a_commit_over_the_timeout_says_its_replay_is_safe(
    serve: Serve, gate: Gate, gated_embedder: GatedEmbeddingProvider
) -> None:
    running = serve(embedder=gated_embedder, config=ServerConfig(request_timeout_s=0.3))
    plan = _post(running.url, "prepare", {"text": SLOW_TEXT, "occurred_at": WHEN})
    assert plan.status_code == 200, plan.text
    answer = _InFlight(running.url, "commit", {"plan": plan.json()})
    gate.wait_entered()
    timed_out = answer.result()
    _assert_timeout_problem(timed_out, "running")
    assert "replaying the same request is safe" in timed_out.json()["detail"]
    gate.open()
    _eventually_found(running.url, "cello", SLOW_TEXT)
    replayed = _post(running.url, "commit", {"plan": plan.json()})
    assert replayed.status_code == 200 and replayed.json()["warnings"], "the replay wrote again"
    assert _texts_found(running.url, "cello") == [SLOW_TEXT]


def test_a_read_over_the_timeout_says_nothing_was_written(
    serve: Serve, gate: Gate, gated_embedder: GatedEmbeddingProvider
) -> None:
    running = serve(embedder=gated_embedder, config=ServerConfig(request_timeout_s=0.3))
    response = _post(running.url, "retrieve", {"query": "cello slowly"})
    _assert_timeout_problem(response, "running")
    assert "stopped: retrying it is safe" in response.json()["detail"]


def test_a_repair_over_the_timeout_runs_to_its_end(
    serve: Serve,
    gate: Gate,
    gated_embedder: GatedEmbeddingProvider,
    settings_of: Callable[[Path], Settings],
    tmp_path: Path,
) -> None:
    root = tmp_path / "damaged"

    async def lose_the_vector() -> None:  # a stored memory whose vector point is gone
        embedder = HashingEmbeddingProvider()
        async with CharacterMemory.open(settings_of(root), "ana", embedding_provider=embedder) as memory:
            when = datetime.fromisoformat(WHEN)
            outcome = await memory.remember(RememberInput(text=SLOW_TEXT, occurred_at=when))
            await stores_of(memory).vectors.delete(list(outcome.object_ids))

    asyncio.run(lose_the_vector())
    running = serve(root=root, embedder=gated_embedder, config=ServerConfig(request_timeout_s=0.3))
    repair = _InFlight(running.url, "check", {"repair": True})
    gate.wait_entered()  # the repair embeds the text again, at the closed gate
    _assert_timeout_problem(repair.result(), "running")
    gate.open()
    # the repair the client saw time out was not cut half-way: it runs to its end on the server
    deadline = time.monotonic() + 30
    while not _post(running.url, "check", {}).json()["report"]["consistent"]:
        assert time.monotonic() < deadline, "the repair was cancelled at the timeout"
        time.sleep(0.05)
