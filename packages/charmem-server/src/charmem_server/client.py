"""The remote client: the facade's methods over HTTP, the same types in and out.

:class:`RemoteCharacterMemory` (async) and :class:`SyncRemoteCharacterMemory` (blocking) talk to
a running ``charmem serve``. They take and return charmem's own types (``RememberInput``,
``RememberWritePlan``, ``ContinuityContextPack``...) and raise charmem's own exception classes
with their fields (``IdConflictError.ids``, ``LifecycleValidationError.kind``,
``PlanValidationError.reasons``, ``ConfigurationError.key``), rebuilt from the server's
problem+json. Refusals of the server itself (token, scope, size, timeout) raise
:class:`RemoteError` with the HTTP status; an unreachable server raises ``BackendError``.

This module imports only httpx and charmem core, so a client needs neither the web server nor
the MCP SDK::

    async with RemoteCharacterMemory("http://127.0.0.1:8765", "my-assistant") as memory:
        await memory.remember(RememberInput("Ana is visiting from Porto.", occurred_at=when))
        pack = await memory.retrieve(RetrievalContext(query="Who is visiting?"))
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from types import TracebackType
from typing import Any, Final, Generic, TypeVar

import attrs
import httpx

from charmem import (
    CommitOptions,
    ContinuityContextPack,
    CorrectMemoryDraft,
    ForgetMemoryDraft,
    LifecycleMutationOutcome,
    LinkDraft,
    LinkOutcome,
    PrepareOptions,
    RememberDrafts,
    RememberInput,
    RememberOptions,
    RememberOutcome,
    RememberWritePlan,
    RetrievalContext,
)
from charmem.domain.plan import CandidateValidation
from charmem.errors import BackendError, CharmemError, ConfigurationError, DraftValidationError
from charmem.settings import validate_collection_name
from charmem_server._wire import RemoteError, converter, decode_pack, error_from_problem

__all__ = ["SERVER_URL_ENV", "TOKEN_ENV", "RemoteCharacterMemory", "RemoteError", "SyncRemoteCharacterMemory"]

#: The environment variables the CLI and :meth:`RemoteCharacterMemory.from_env` read.
SERVER_URL_ENV: Final = "CHARMEM_SERVER_URL"
TOKEN_ENV: Final = "CHARMEM_SERVER_TOKEN"  # noqa: S105 - the variable's name
DEFAULT_TIMEOUT_S: Final = 120.0

T = TypeVar("T")


@attrs.frozen
class _Call(Generic[T]):
    """One request: the operation's path segment, its JSON body, how to read the answer."""

    operation: str
    body: Any
    decode: Callable[[Any], T]


def _type_error(argument: object, *expected: type) -> DraftValidationError:
    names = " or ".join("None" if t is type(None) else t.__name__ for t in expected)
    return DraftValidationError(f"expected a {names}, not {type(argument).__name__}")


def _check(argument: object, *expected: type) -> None:
    if not isinstance(argument, expected):
        raise _type_error(argument, *expected)


def _outcome(cls: type[T]) -> Callable[[Any], T]:
    def decode(data: Any) -> T:
        body = {k: v for k, v in data.items() if k != "format_version"}
        try:
            return converter.structure(body, cls)
        except Exception as exc:  # noqa: BLE001 - a server of another version
            raise RemoteError(
                f"the server's {cls.__name__} could not be read ({type(exc).__name__}); install the "
                "server's charmem version in this client",
                status=200,
            ) from None

    return decode


class _TokenCounterByName:
    """The counter a pack was counted with on the server, found here by its name on first use.

    ``whitespace`` is core's; any other name is looked for among the installed counters
    (entry-point group ``charmem.token_counters``), so ``pack.render(max_tokens=...)`` counts
    as the server did. None installed under that name: ``ConfigurationError`` naming it.
    """

    def __init__(self, name: str | None) -> None:
        self.name = name or "whitespace"
        self._inner: Any = None

    def _load(self) -> Any:
        from importlib.metadata import entry_points

        from charmem import Settings
        from charmem.tokens import WhitespaceTokenCounter

        if self.name == WhitespaceTokenCounter().name:
            return WhitespaceTokenCounter()
        settings = Settings.from_mapping({})
        for entry in entry_points(group="charmem.token_counters"):
            try:
                counter = entry.load().from_settings(settings)
            except Exception:  # noqa: BLE001, S112 - another counter may be the one
                continue
            if counter.name == self.name:
                return counter
        raise ConfigurationError(
            f"this pack was counted with {self.name!r} on the server, which is not installed here: "
            "install it (charmem-local-embed for wordpiece), or ask the server to render "
            "(POST /retrieve with render_max_tokens)",
            key="TOKEN_COUNTER",
        )

    def count(self, text: str) -> int:
        """Tokens in ``text`` by the server's counter."""
        if self._inner is None:
            self._inner = self._load()
        return int(self._inner.count(text))


class _Requests:
    """The requests of every facade method (shared by the async and the blocking client)."""

    def __init__(self, collection: str) -> None:
        self.collection = validate_collection_name(collection)

    @staticmethod
    def _item(item: object) -> dict[str, Any]:
        if isinstance(item, RememberDrafts):
            return {"drafts": converter.unstructure(item)}
        if isinstance(item, RememberInput):
            data: dict[str, Any] = converter.unstructure(item)
            return data
        raise DraftValidationError(
            f"prepare takes a RememberInput or RememberDrafts, not {type(item).__name__}"
        )

    def prepare(self, item: object, options: PrepareOptions | None) -> _Call[RememberWritePlan]:
        body = self._item(item)
        _check(options, PrepareOptions, type(None))
        if options is not None:
            body["options"] = converter.unstructure(options)
        return _Call("prepare", body, lambda data: RememberWritePlan.from_json(json.dumps(data)))

    def validate_plan(self, plan: RememberWritePlan) -> _Call[list[CandidateValidation]]:
        _check(plan, RememberWritePlan)
        return _Call(
            "validate",
            converter.unstructure(plan),
            lambda data: converter.structure(data["validations"], list[CandidateValidation]),
        )

    def commit(self, plan: RememberWritePlan, options: CommitOptions | None) -> _Call[RememberOutcome]:
        _check(plan, RememberWritePlan)
        _check(options, CommitOptions, type(None))
        body: dict[str, Any] = {"plan": converter.unstructure(plan)}
        if options is not None:
            body["options"] = converter.unstructure(options)
        return _Call("commit", body, _outcome(RememberOutcome))

    def remember(self, item: object, options: RememberOptions | None) -> _Call[RememberOutcome]:
        _check(options, RememberOptions, type(None))
        body = self._item(item)
        if options is not None:
            body["options"] = converter.unstructure(options)
        return _Call("remember", body, _outcome(RememberOutcome))

    def retrieve(self, context: RetrievalContext | str) -> _Call[ContinuityContextPack]:
        _check(context, RetrievalContext, str)
        if isinstance(context, str):
            context = RetrievalContext(query=context)
        return _Call(
            "retrieve",
            converter.unstructure(context),
            lambda data: decode_pack(data, _TokenCounterByName(data.get("token_counter"))),
        )

    def correct(self, draft: CorrectMemoryDraft) -> _Call[LifecycleMutationOutcome]:
        _check(draft, CorrectMemoryDraft)
        return _Call("correct", converter.unstructure(draft), _outcome(LifecycleMutationOutcome))

    def forget(self, draft: ForgetMemoryDraft) -> _Call[LifecycleMutationOutcome]:
        _check(draft, ForgetMemoryDraft)
        return _Call("forget", converter.unstructure(draft), _outcome(LifecycleMutationOutcome))

    def link(self, draft: LinkDraft) -> _Call[LinkOutcome]:
        _check(draft, LinkDraft)
        return _Call("link", converter.unstructure(draft), _outcome(LinkOutcome))

    def check(self, repair: bool) -> _Call[dict[str, Any]]:
        return _Call("check", {"repair": bool(repair)}, lambda data: dict(data))

    def url(self, operation: str) -> str:
        return f"/v1/collections/{self.collection}/{operation}"

    def answer(self, call: _Call[T], response: httpx.Response) -> T:
        """Decode a response: the result, or the error it describes raised."""
        try:
            data = response.json()
        except ValueError:
            data = None
        if response.status_code >= 400 or not isinstance(data, dict):
            if isinstance(data, dict):
                raise error_from_problem(data, response.status_code)
            raise RemoteError(
                f"the server answered {response.status_code} without a charmem body "
                f"({response.text[:120]!r}); is CHARMEM_SERVER_URL a charmem server?",
                status=response.status_code,
            )
        return call.decode(data)


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def _unreachable(base_url: str, exc: httpx.HTTPError) -> BackendError:
    return BackendError(f"the charmem server at {base_url} did not answer: {type(exc).__name__}: {exc}")


def _env_url(url: str | None) -> str:
    chosen = url or os.environ.get(SERVER_URL_ENV)
    if not chosen:
        raise ConfigurationError(f"no server URL given and {SERVER_URL_ENV} is not set", key=SERVER_URL_ENV)
    return chosen


class RemoteCharacterMemory:
    """:class:`~charmem.CharacterMemory`'s methods on a collection of a running charmem server.

    Args:
        base_url: the server, e.g. ``"http://127.0.0.1:8765"``.
        collection: the collection name (created on the server by its first write).
        token: the bearer token (default: none; a server with a token file needs one).
        timeout_s: seconds to wait for one answer (default 120; the server has its own
            per-request timeout).
        transport: an httpx transport (tests, proxies); default: a new connection pool.

    Raises:
        ConfigurationError: the collection name is not allowed.
    """

    def __init__(
        self,
        base_url: str,
        collection: str,
        *,
        token: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._requests = _Requests(collection)
        self.collection = self._requests.collection
        self.base_url = base_url.rstrip("/")
        self._client = httpx.AsyncClient(
            base_url=self.base_url, headers=_headers(token), timeout=timeout_s, transport=transport
        )
        self._closed = False

    @classmethod
    def from_env(cls, collection: str, *, url: str | None = None) -> RemoteCharacterMemory:
        """A client of ``url`` or ``$CHARMEM_SERVER_URL``, with ``$CHARMEM_SERVER_TOKEN`` if set.

        Raises:
            ConfigurationError: no URL given and none in the environment.
        """
        return cls(_env_url(url), collection, token=os.environ.get(TOKEN_ENV) or None)

    async def _send(self, call: _Call[T]) -> T:
        if self._closed:
            raise CharmemError(f"memory {self.collection!r} is closed; open it again")
        try:
            response = await self._client.post(self._requests.url(call.operation), json=call.body)
        except httpx.HTTPError as exc:
            raise _unreachable(self.base_url, exc) from exc
        return self._requests.answer(call, response)

    async def prepare(
        self, item: RememberInput | RememberDrafts, options: PrepareOptions | None = None
    ) -> RememberWritePlan:
        """See :meth:`charmem.CharacterMemory.prepare` (built by the server; writes nothing)."""
        return await self._send(self._requests.prepare(item, options))

    async def validate_plan(self, plan: RememberWritePlan) -> list[CandidateValidation]:
        """See :meth:`charmem.CharacterMemory.validate_plan`."""
        return await self._send(self._requests.validate_plan(plan))

    async def commit(self, plan: RememberWritePlan, options: CommitOptions | None = None) -> RememberOutcome:
        """See :meth:`charmem.CharacterMemory.commit`."""
        return await self._send(self._requests.commit(plan, options))

    async def remember(
        self, item: RememberInput | RememberDrafts, options: RememberOptions | None = None
    ) -> RememberOutcome:
        """See :meth:`charmem.CharacterMemory.remember`."""
        return await self._send(self._requests.remember(item, options))

    async def retrieve(self, context: RetrievalContext | str) -> ContinuityContextPack:
        """See :meth:`charmem.CharacterMemory.retrieve`; the pack renders with its counter here."""
        return await self._send(self._requests.retrieve(context))

    async def correct(self, draft: CorrectMemoryDraft) -> LifecycleMutationOutcome:
        """See :meth:`charmem.CharacterMemory.correct`."""
        return await self._send(self._requests.correct(draft))

    async def forget(self, draft: ForgetMemoryDraft) -> LifecycleMutationOutcome:
        """See :meth:`charmem.CharacterMemory.forget`."""
        return await self._send(self._requests.forget(draft))

    async def link(self, draft: LinkDraft) -> LinkOutcome:
        """See :meth:`charmem.CharacterMemory.link`."""
        return await self._send(self._requests.link(draft))

    async def check(self, *, repair: bool = False) -> dict[str, Any]:
        """``charmem.admin.check`` on the server (admin scope): ``{"report": ..., "repaired": ...}``.

        ``report`` is ``CheckReport.to_dict()``; with ``repair=True`` and drift found, vectors
        and stats are rebuilt, ``before`` holds the first report and ``report`` the new one.

        Raises:
            RemoteError: 404 when the collection does not exist on the server, 403 without
                the admin scope.
        """
        return await self._send(self._requests.check(repair))

    async def close(self) -> None:
        """Close the connection pool (idempotent); the server keeps the collection open."""
        self._closed = True
        await self._client.aclose()

    async def __aenter__(self) -> RemoteCharacterMemory:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


class SyncRemoteCharacterMemory:
    """The blocking twin of :class:`RemoteCharacterMemory` (for scripts and WSGI apps).

    Same arguments (``transport`` is an ``httpx.BaseTransport``), same methods without ``await``.
    """

    def __init__(
        self,
        base_url: str,
        collection: str,
        *,
        token: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._requests = _Requests(collection)
        self.collection = self._requests.collection
        self.base_url = base_url.rstrip("/")
        self._client = httpx.Client(
            base_url=self.base_url, headers=_headers(token), timeout=timeout_s, transport=transport
        )
        self._closed = False

    @classmethod
    def from_env(cls, collection: str, *, url: str | None = None) -> SyncRemoteCharacterMemory:
        """See :meth:`RemoteCharacterMemory.from_env`."""
        return cls(_env_url(url), collection, token=os.environ.get(TOKEN_ENV) or None)

    def _send(self, call: _Call[T]) -> T:
        if self._closed:
            raise CharmemError(f"memory {self.collection!r} is closed; open it again")
        try:
            response = self._client.post(self._requests.url(call.operation), json=call.body)
        except httpx.HTTPError as exc:
            raise _unreachable(self.base_url, exc) from exc
        return self._requests.answer(call, response)

    def prepare(
        self, item: RememberInput | RememberDrafts, options: PrepareOptions | None = None
    ) -> RememberWritePlan:
        """See :meth:`charmem.CharacterMemory.prepare`."""
        return self._send(self._requests.prepare(item, options))

    def validate_plan(self, plan: RememberWritePlan) -> list[CandidateValidation]:
        """See :meth:`charmem.CharacterMemory.validate_plan`."""
        return self._send(self._requests.validate_plan(plan))

    def commit(self, plan: RememberWritePlan, options: CommitOptions | None = None) -> RememberOutcome:
        """See :meth:`charmem.CharacterMemory.commit`."""
        return self._send(self._requests.commit(plan, options))

    def remember(
        self, item: RememberInput | RememberDrafts, options: RememberOptions | None = None
    ) -> RememberOutcome:
        """See :meth:`charmem.CharacterMemory.remember`."""
        return self._send(self._requests.remember(item, options))

    def retrieve(self, context: RetrievalContext | str) -> ContinuityContextPack:
        """See :meth:`charmem.CharacterMemory.retrieve`."""
        return self._send(self._requests.retrieve(context))

    def correct(self, draft: CorrectMemoryDraft) -> LifecycleMutationOutcome:
        """See :meth:`charmem.CharacterMemory.correct`."""
        return self._send(self._requests.correct(draft))

    def forget(self, draft: ForgetMemoryDraft) -> LifecycleMutationOutcome:
        """See :meth:`charmem.CharacterMemory.forget`."""
        return self._send(self._requests.forget(draft))

    def link(self, draft: LinkDraft) -> LinkOutcome:
        """See :meth:`charmem.CharacterMemory.link`."""
        return self._send(self._requests.link(draft))

    def check(self, *, repair: bool = False) -> dict[str, Any]:
        """See :meth:`RemoteCharacterMemory.check`."""
        return self._send(self._requests.check(repair))

    def close(self) -> None:
        """Close the connection pool (idempotent)."""
        self._closed = True
        self._client.close()

    def __enter__(self) -> SyncRemoteCharacterMemory:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
