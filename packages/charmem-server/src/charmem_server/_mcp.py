"""MCP tools over one collection: remember, recall, correct, forget, link.

``charmem mcp --store DIR --collection C`` serves them over stdio (for an agent host's config
file); ``charmem serve`` serves them over streamable HTTP at ``/mcp``. The descriptions are
written for the model that calls them: what to store, when to recall, which ids to keep.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Final

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel, ConfigDict, Field

from charmem import (
    CharacterMemory,
    CorrectionTarget,
    CorrectMemoryDraft,
    DerivedType,
    ForgetMemoryDraft,
    LifecycleErrorKind,
    LinkDraft,
    Relation,
    RememberInput,
    ReplacementDerivedMemoryDraft,
    RetrievalContext,
    Scene,
)
from charmem.errors import CharmemError, LifecycleValidationError
from charmem_server._version import __version__
from charmem_server._wire import converter, structure

__all__ = ["TOOL_NAMES", "build_mcp_server", "streamable_http_asgi"]

TOOL_NAMES: Final = ("remember", "recall", "correct", "forget", "link")
#: The relations a caller may write with ``link``.
CALLER_RELATIONS: Final = (
    "supports",
    "contradicts",
    "resolves",
    "creates_open_loop",
    "fulfills_commitment",
    "associated_with",
)

INSTRUCTIONS: Final = (
    "A long-term episodic memory of your conversations with this user. Call `recall` before you "
    "answer anything that may depend on the past (people, plans, preferences, promises, earlier "
    "sessions); call `remember` for each thing worth keeping (a fact about the user or their "
    "people, a decision, a promise, a preference, an event), one self-contained sentence each. "
    "Keep the ids tools return: `correct`, `forget` and `link` take them."
)

_REMEMBER: Final = """Store one thing worth remembering from the conversation, as a self-contained
sentence written so it makes sense months later without the conversation around it: who, what,
and when if known ("Ana's sister Marta moves to Lisbon in June 2025."). Remember facts about the
user and the people and things in their life, decisions, promises (yours and theirs),
preferences, and notable events. Do not store chit-chat, your own reasoning, or secrets the user
did not want kept. One call per separate fact.

occurred_at: when it happened, ISO 8601 with a UTC offset (2025-06-01T18:30:00+00:00); omit for now.
scene: optional, the occasion it happened in: its time (at), who was there (participants: a
known id, a name, or a description such as "a man with a deep voice"), where (setting: a key
such as "kitchen" and/or words) and custom key/values. Give occurred_at equal to scene.at, or
only the scene.
Returns the ids of the stored memories: keep them if you may need to correct or forget this later."""

_RECALL: Final = """Recall what you remember that is relevant to a question or topic, or to the
scene you are in. Call it before answering anything that may depend on earlier conversations: the
user's people, plans, preferences, promises, past events, or "what did I tell you about ...".
Phrase the query as the question itself or the names and topics involved.

scene: optional, instead of or with the query, when someone arrives or a conversation starts: the
time (at), who is there (participants: an id, a name, or a description), where (setting: key
and/or words) and custom key/values. It brings to mind when you last met each person, what is
owed between you, what happened last time in this place; nothing after scene.at is recalled.
Give a query, a scene, or both.
max_tokens: the most tokens of memory text to return (omit for all that was recalled).
Returns the remembered items, most relevant first, each with its date and kind, then their ids
and statuses (current, superseded, suppressed) for correct, forget and link; with a scene, also
when you last met each participant and how each participant was recognised."""

_CORRECT: Final = """Correct a memory that turned out to be wrong or out of date: the corrected
text replaces it in recall, and the old memory is kept as history. Use it when the user says
something you remembered is wrong ("No, Marta moves in July, not June").

memory_id: the id of the memory to correct (from recall or remember).
corrected_text: the right version, as a self-contained sentence.
rationale: why, in a few words ("the user corrected the month").
Returns the id of the replacement memory."""

_FORGET: Final = """Forget a memory: it no longer comes up in recall (nothing is deleted). Use it
when the user asks you to forget something, or a memory should not influence you any more.
Memories derived from it are forgotten too.

memory_id: the id of the memory (from recall or remember).
rationale: why, in a few words ("the user asked me to forget it")."""

_LINK: Final = f"""Record how two remembered things relate, so recalling one brings the other.

from_id, to_id: memory ids (from recall or remember).
relation: one of {", ".join(CALLER_RELATIONS)} ("resolves": from_id settles the open matter
to_id; "fulfills_commitment": from_id keeps the promise to_id).
rationale: optional, why they relate.
Returns the id of the link."""


class SceneParticipantArgument(BaseModel):
    """Someone present: an id, a name, a description, or several."""

    model_config = ConfigDict(extra="forbid")

    entity_id: str | None = Field(default=None, description="a notion id you were given (UUID)")
    name: str | None = Field(default=None, description='a name as spoken ("Ana")')
    description: str | None = Field(default=None, description='words about them ("a tall man with a cane")')


class SceneSettingArgument(BaseModel):
    """Where: a key and/or words."""

    model_config = ConfigDict(extra="forbid")

    key: str | None = Field(default=None, description='an exact key ("kitchen", a place id)')
    words: str | None = Field(default=None, description='a description ("a noisy cafe by the sea")')


class SceneArgument(BaseModel):
    """An occasion: when, who, where, and custom key/values."""

    model_config = ConfigDict(extra="forbid")

    at: str = Field(description="ISO 8601 with a UTC offset, e.g. 2025-06-01T18:30:00+02:00")
    participants: list[SceneParticipantArgument] = Field(default_factory=list)
    setting: SceneSettingArgument | None = None
    custom_values: dict[str, str] = Field(default_factory=dict, description='e.g. {"activity": "chess"}')


def _scene(argument: SceneArgument | None) -> Scene | None:
    """The charmem :class:`Scene` of a tool argument, read as the HTTP API reads one.

    Raises:
        ToolError: a bad time, an empty participant or setting (the message says what to fix).
    """
    if argument is None:
        return None
    try:
        return structure(argument.model_dump(exclude_none=True), Scene, field="scene")
    except CharmemError as exc:
        raise ToolError(f"scene: {exc}") from None


GetMemory = Callable[[], Awaitable[CharacterMemory | None]]
Reading = Callable[[], contextlib.AbstractAsyncContextManager[CharacterMemory]]


def _result(text: str, structured: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


def _tool_error(exc: CharmemError) -> ToolError:
    return ToolError(f"{type(exc).__name__}: {exc}")


def _when(occurred_at: str | None) -> datetime | None:
    if occurred_at is None or not occurred_at.strip():
        return None
    try:
        value = datetime.fromisoformat(occurred_at.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ToolError(
            f"occurred_at {occurred_at!r} is not ISO 8601; write e.g. 2025-06-01T18:30:00+00:00"
        ) from None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _recall_text(pack: Any, max_tokens: int | None) -> tuple[str, list[dict[str, Any]]]:
    rendered = pack.render(max_tokens)
    shown = sum(1 for line in rendered.splitlines() if line.startswith("- "))
    items = [
        {"id": str(item.id), "object_type": item.object_type.value, "status": item.status.value}
        for item in pack.items[:shown]
    ]
    if not items:
        return "Nothing relevant is remembered.", []
    ids = "\n".join(f"{n}. {i['id']} ({i['object_type']}, {i['status']})" for n, i in enumerate(items, 1))
    return f"{rendered}\n\nIds of the items above, in the same order:\n{ids}", items


def _scene_answer(pack: Any) -> tuple[str, dict[str, Any]]:
    """Text and structured form of the pack's last interactions and scene resolutions."""
    structured = {
        "last_interactions": converter.unstructure(pack.last_interactions),
        "scene_resolutions": converter.unstructure(pack.scene_resolutions),
    }
    names = {entity.id: ", ".join(entity.names) for entity in pack.entities if entity.names}

    def who(entity_id: Any) -> str:
        return f"{names[entity_id]} ({entity_id})" if entity_id in names else str(entity_id)

    lines = []
    for met in pack.last_interactions:
        when = "never met" if met.last_met_at is None else f"last met {met.last_met_at.isoformat()}"
        lines.append(f"- {who(met.entity_id)}: {when}")
    for resolution in pack.scene_resolutions:
        found = ", ".join(who(i) for i in resolution.entity_ids) or "no one known"
        lines.append(f"- participant {resolution.participant_index}: {resolution.status.value} ({found})")
    text = "\n\nThe people of the scene:\n" + "\n".join(lines) if lines else ""
    return text, structured


def build_mcp_server(get_memory: GetMemory, *, reading: Reading) -> MCPServer[Any]:
    """An MCP server whose tools act on one collection.

    Args:
        get_memory: returns the collection's memory, creating the collection (for writes).
        reading: an async context manager giving a memory to read from (an empty one when the
            collection does not exist yet).

    Returns:
        MCPServer: run it with ``run_stdio_async()`` or mount its streamable HTTP app.
    """
    server: MCPServer[Any] = MCPServer(
        "charmem", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )

    async def memory() -> CharacterMemory:
        found = await get_memory()
        assert found is not None
        return found

    tools: list[tuple[Callable[..., Awaitable[CallToolResult]], str]] = [
        (_remember_tool(memory), _REMEMBER),
        (_recall_tool(reading), _RECALL),
        (_correct_tool(memory), _CORRECT),
        (_forget_tool(memory), _FORGET),
        (_link_tool(memory), _LINK),
    ]
    for tool, description in tools:
        server.tool(description=description)(tool)
    return server


#: The collection's memory for a write (created when missing).
_Memory = Callable[[], Awaitable[CharacterMemory]]


def _remember_tool(memory: _Memory) -> Callable[..., Awaitable[CallToolResult]]:
    async def remember(
        text: str, occurred_at: str | None = None, scene: SceneArgument | None = None
    ) -> CallToolResult:
        chosen = _scene(scene)
        when = _when(occurred_at) or (chosen.at if chosen is not None else None)
        try:
            item = RememberInput(text, occurred_at=when)
            if chosen is not None:
                item = item.with_scene(chosen)
            outcome = await (await memory()).remember(item)
        except CharmemError as exc:
            raise _tool_error(exc) from None
        ids = [str(i) for i in outcome.object_ids]
        structured = converter.unstructure(outcome)
        return _result(f"Remembered. Memory ids: {', '.join(ids)}", structured)

    return remember


def _recall_tool(reading: Reading) -> Callable[..., Awaitable[CallToolResult]]:
    async def recall(
        query: str | None = None, scene: SceneArgument | None = None, max_tokens: int | None = None
    ) -> CallToolResult:
        chosen = _scene(scene)
        try:
            context = RetrievalContext(query=query or None, scene=chosen)
            async with reading() as source:
                pack = await source.retrieve(context)
            text, items = _recall_text(pack, max_tokens)
        except CharmemError as exc:
            raise _tool_error(exc) from None
        people, structured = _scene_answer(pack)
        return _result(text + people, {"items": items, "omitted": len(pack.omissions), **structured})

    return recall


def _correct_tool(memory: _Memory) -> Callable[..., Awaitable[CallToolResult]]:
    async def correct(memory_id: str, corrected_text: str, rationale: str) -> CallToolResult:
        try:
            replacement = ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, corrected_text)
            target = await memory()
            try:
                outcome = await target.correct(
                    CorrectMemoryDraft(
                        CorrectionTarget.derived_memory(memory_id), rationale
                    ).with_replacement(replacement)
                )
            except LifecycleValidationError as exc:
                if exc.kind not in (
                    LifecycleErrorKind.MISSING_CORRECTION_TARGET,
                    LifecycleErrorKind.UNSUPPORTED_LIFECYCLE_TARGET,
                ):
                    raise
                # not a belief: an episode or observation (nothing was written by the first try)
                outcome = await target.correct(
                    CorrectMemoryDraft(CorrectionTarget.source_object(memory_id), rationale).with_replacement(
                        replacement
                    )
                )
        except CharmemError as exc:
            raise _tool_error(exc) from None
        ids = [str(i) for i in outcome.replacement_ids]
        return _result(f"Corrected. Replacement memory id: {', '.join(ids)}", converter.unstructure(outcome))

    return correct


def _forget_tool(memory: _Memory) -> Callable[..., Awaitable[CallToolResult]]:
    async def forget(memory_id: str, rationale: str) -> CallToolResult:
        try:
            outcome = await (await memory()).forget(ForgetMemoryDraft.suppress(memory_id, rationale))
        except CharmemError as exc:
            raise _tool_error(exc) from None
        count = len(outcome.graph_mutated_object_ids)
        return _result(f"Forgotten ({count} memories no longer recalled).", converter.unstructure(outcome))

    return forget


def _link_tool(memory: _Memory) -> Callable[..., Awaitable[CallToolResult]]:
    async def link(from_id: str, relation: str, to_id: str, rationale: str | None = None) -> CallToolResult:
        if relation not in CALLER_RELATIONS:
            raise ToolError(f"relation must be one of {', '.join(CALLER_RELATIONS)}, not {relation!r}")
        try:
            outcome = await (await memory()).link(
                LinkDraft(from_id, Relation(relation), to_id, rationale=rationale)
            )
        except CharmemError as exc:
            raise _tool_error(exc) from None
        return _result(f"Linked. Link id: {outcome.link.id}", converter.unstructure(outcome))

    return link


def streamable_http_asgi(
    server: MCPServer[Any], *, max_body_bytes: int
) -> tuple[Any, Callable[[], contextlib.AbstractAsyncContextManager[None]]]:
    """The ``/mcp`` route of ``server``'s streamable HTTP transport and the lifespan it needs.

    Host, Origin and tokens are checked by the server's own gate in front of every route, so
    the SDK's DNS-rebinding check (which assumes loopback names) is off here.

    Returns:
        (the Starlette route list to add, a context manager to run for the app's lifetime).
    """
    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        max_request_body_size=max_body_bytes,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )

    @contextlib.asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        async with server.session_manager.run():
            yield

    return list(app.routes), lifespan
