"""The facade operations behind ``POST /v1/collections/{collection}/{operation}``.

Each operation takes the decoded JSON body and the raw text, calls the collection's memory with
the library's own types, and answers a JSON object. Writes create the collection; reads of a
collection that does not exist answer as an empty one.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import attrs

from charmem import (
    CommitOptions,
    CorrectMemoryDraft,
    ForgetMemoryDraft,
    LinkDraft,
    PrepareOptions,
    RememberDrafts,
    RememberInput,
    RememberOptions,
    RememberWritePlan,
    RetrievalContext,
)
from charmem.errors import CharmemError, DraftValidationError
from charmem_server._auth import Scope
from charmem_server._registry import MemoryRegistry
from charmem_server._wire import RemoteError, encode, encode_pack, structure

__all__ = ["OPERATIONS", "Operation"]

Handler = Callable[[MemoryRegistry, str, Any, str], Awaitable[dict[str, Any]]]


@attrs.frozen
class Operation:
    """One route: its scope, whether it writes, its handler and a line for the docs.

    Attributes:
        mints_ids: a write that gives what it stores new ids, so the same body sent again is a
            second write (``remember``); the other writes take or derive their ids from the body
            and accept equal content, so a replay writes nothing new.
    """

    scope: Scope
    writes: bool
    handler: Handler
    summary: str
    mints_ids: bool = False

    @property
    def retry_advice(self) -> str:
        """What a caller whose request was cut short (a 504) should know before sending it again."""
        if not self.writes:
            return "it was stopped: retrying it is safe"
        if self.mints_ids:
            return (
                "the write runs to its end on the server and may have completed: replaying it writes "
                "again, with new ids (to retry safely, prepare a plan and commit it: a replayed commit "
                "is accepted)"
            )
        return (
            "the write runs to its end on the server: replaying the same request is safe (equal "
            "content is accepted)"
        )


def _object(data: Any, what: str) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise DraftValidationError(f"the body must be a JSON object ({what}), not {type(data).__name__}")
    return dict(data)


def _remember_item(data: dict[str, Any]) -> RememberInput | RememberDrafts:
    """``{"drafts": {...}}`` is a RememberDrafts; anything else a RememberInput."""
    if "drafts" in data:
        extra = set(data) - {"drafts", "format_version"}
        if extra:
            raise DraftValidationError(
                f"a body with drafts holds nothing else but options, not {sorted(extra)}", field="drafts"
            )
        return structure(data["drafts"], RememberDrafts, field="drafts")
    return structure(data, RememberInput)


def _plan(data: Any, raw: str) -> tuple[RememberWritePlan, Any]:
    """The plan of a validate or commit body: the plan's JSON, or ``{"plan": ..., "options": ...}``."""
    if isinstance(data, Mapping) and "plan" in data:
        return RememberWritePlan.from_json(json.dumps(data["plan"])), data.get("options")
    return RememberWritePlan.from_json(raw), None


async def _remember(registry: MemoryRegistry, collection: str, data: Any, _raw: str) -> dict[str, Any]:
    body = _object(data, "RememberInput fields, or drafts")
    options = body.pop("options", None)
    item = _remember_item(body)
    chosen = structure(options, RememberOptions, field="options") if options is not None else None
    memory = await registry.get(collection, create=True)
    assert memory is not None
    return encode(await memory.remember(item, chosen))


async def _prepare(registry: MemoryRegistry, collection: str, data: Any, _raw: str) -> dict[str, Any]:
    body = _object(data, "RememberInput fields, or drafts")
    options = body.pop("options", None)
    item = _remember_item(body)
    chosen = structure(options, PrepareOptions, field="options") if options is not None else None
    async with registry.reading(collection) as memory:
        return encode(await memory.prepare(item, chosen))


async def _validate(registry: MemoryRegistry, collection: str, data: Any, raw: str) -> dict[str, Any]:
    plan, _ = _plan(data, raw)
    async with registry.reading(collection) as memory:
        return encode(await memory.validate_plan(plan))


async def _commit(registry: MemoryRegistry, collection: str, data: Any, raw: str) -> dict[str, Any]:
    plan, options = _plan(data, raw)
    chosen = structure(options, CommitOptions, field="options") if options is not None else None
    memory = await registry.get(collection, create=True)
    assert memory is not None
    return encode(await memory.commit(plan, chosen))


async def _retrieve(registry: MemoryRegistry, collection: str, data: Any, _raw: str) -> dict[str, Any]:
    body = _object(data, "a RetrievalContext")
    budget = body.pop("render_max_tokens", None)
    context = structure(body, RetrievalContext)
    async with registry.reading(collection) as memory:
        pack = await memory.retrieve(context)
    answer = encode_pack(pack)
    if budget is not None:
        answer["rendered"] = pack.render(budget)
    return answer


def _lifecycle(cls: type[Any], method: str) -> Handler:
    async def run(registry: MemoryRegistry, collection: str, data: Any, _raw: str) -> dict[str, Any]:
        draft = structure(data, cls)
        memory = await registry.get(collection, create=True)
        assert memory is not None
        return encode(await getattr(memory, method)(draft))

    return run


async def _check(registry: MemoryRegistry, collection: str, data: Any, _raw: str) -> dict[str, Any]:
    from charmem.admin import check, repair

    body = _object(data if data is not None else {}, '{"repair": false}')
    unknown = set(body) - {"repair", "format_version"}
    if unknown or not isinstance(body.get("repair", False), bool):
        raise DraftValidationError('the check body is {"repair": true|false}', field="repair")
    memory = await registry.get(collection, create=False)
    if memory is None:
        raise RemoteError(
            f"collection {collection!r} does not exist on this server (it is created by its first write)",
            status=404,
            problem_type="urn:charmem:problem:unknown-collection",
        )
    report = await check(memory)
    answer: dict[str, Any] = {"format_version": 1, "report": report.to_dict(), "repaired": None}
    if body.get("repair") and not report.consistent:
        outcome = await repair(memory, report)
        after = await check(memory)
        answer = {
            "format_version": 1,
            "report": after.to_dict(),
            "before": report.to_dict(),
            "repaired": _plain(outcome),
        }
    return answer


def _plain(value: Any) -> Any:
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    from charmem_server._wire import converter

    return converter.unstructure(value)


#: Every operation by its path segment.
OPERATIONS: Final[Mapping[str, Operation]] = {
    "remember": Operation(Scope.WRITE, True, _remember, "prepare + validate + commit", mints_ids=True),
    "prepare": Operation(Scope.READ, False, _prepare, "build a write plan; writes nothing"),
    "validate": Operation(Scope.READ, False, _validate, "check a plan against the graph; read-only"),
    "commit": Operation(Scope.WRITE, True, _commit, "re-validate and persist a plan"),
    "retrieve": Operation(Scope.READ, False, _retrieve, "recall a continuity context pack"),
    "correct": Operation(Scope.WRITE, True, _lifecycle(CorrectMemoryDraft, "correct"), "correct a memory"),
    "forget": Operation(Scope.WRITE, True, _lifecycle(ForgetMemoryDraft, "forget"), "forget by suppression"),
    "link": Operation(Scope.WRITE, True, _lifecycle(LinkDraft, "link"), "link two stored memories"),
    # writes: a repair must run to its end, like any write, even past the request timeout
    "check": Operation(Scope.ADMIN, True, _check, "vectors and stats in step with the graph? (repair)"),
}


def is_charmem_error(exc: BaseException) -> bool:
    """Whether ``exc`` is one of charmem's own errors (answered as problem+json with its class)."""
    return isinstance(exc, CharmemError)
