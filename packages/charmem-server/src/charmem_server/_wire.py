"""The JSON of the HTTP API: requests, outcomes, packs and problems, in both directions.

One module, used by the server and by the remote client, so the two can never disagree. It
imports nothing but charmem core and the standard library (the client must stay light).

Bodies are the library's own cattrs form (``charmem.domain.serde.converter``): ids are canonical
UUID strings, instants ISO 8601 with their offset, enums their values, and any field a charmem
type gains flows through without a change here. Two additions: ``timedelta`` values (the
``recency`` of a retrieval) are seconds as a number, and every body the server answers carries
``"format_version"`` (:data:`WIRE_FORMAT_VERSION`); a request may carry it too.

Errors travel as ``application/problem+json`` (RFC 9457) carrying the
:class:`~charmem.errors.CharmemError` class name and its structured fields (``kind``,
``reasons``, ``ids``, ``key``...), so the client raises the same class with the same fields.
"""

from __future__ import annotations

import enum
import functools
import importlib
import typing
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Final, TypeVar

import attrs
import cattrs

from charmem import errors as charmem_errors
from charmem.domain.retrieval import PACK_FORMAT_VERSION, ContinuityContextPack
from charmem.domain.serde import configure_scenes, tag_predicates
from charmem.domain.serde import converter as _library_converter
from charmem.errors import CharmemError, DraftValidationError

__all__ = [
    "PROBLEM_CONTENT_TYPE",
    "WIRE_FORMAT_VERSION",
    "RemoteError",
    "decode_pack",
    "encode",
    "encode_pack",
    "error_from_problem",
    "problem_of",
    "status_of",
    "structure",
]

#: Version of the JSON bodies of the HTTP API (requests may omit it; answers always carry it).
WIRE_FORMAT_VERSION: Final = 1
PROBLEM_CONTENT_TYPE: Final = "application/problem+json"

T = TypeVar("T")

converter = _library_converter.copy()
tag_predicates(converter)  # a copy loses the library's tagged unions
converter.register_unstructure_hook(timedelta, lambda value: value.total_seconds())
converter.register_structure_hook(timedelta, lambda value, _type: _seconds(value))
converter.register_structure_hook(datetime, lambda value, _type: _instant(value))
configure_scenes(converter)  # its time is read by the hook above


def _strict(kind: type, accepted: tuple[type, ...]) -> None:
    """Take JSON values of the right type only (cattrs would turn 42 into "42" and "5" into 5)."""

    def structure_value(value: Any, _type: Any) -> Any:
        if (isinstance(value, bool) and kind is not bool) or not isinstance(value, accepted):
            raise DraftValidationError(f"expected a JSON {kind.__name__}, not {value!r}")
        return kind(value)

    converter.register_structure_hook(kind, structure_value)


_strict(str, (str,))
_strict(int, (int,))
_strict(float, (int, float))
_strict(bool, (bool,))


def _instant(value: Any) -> datetime:
    """An ISO 8601 string (a naive one is refused by the type that holds it, naming the field)."""
    try:
        return datetime.fromisoformat(value) if isinstance(value, str) else _no_instant(value)
    except ValueError:
        return _no_instant(value)


def _no_instant(value: Any) -> datetime:
    raise DraftValidationError(
        f"a time is an ISO 8601 string with its UTC offset (2025-06-01T18:30:00+02:00), not {value!r}"
    )


def _seconds(value: Any) -> timedelta:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DraftValidationError(f"a duration is a number of seconds, not {value!r}")
    return timedelta(seconds=value)


class RemoteError(CharmemError):
    """The server refused a request for a reason of its own, not a memory operation's error.

    Raised by the remote client for an unknown token (401), a token without the scope or
    collection (403), an oversized body (413), a request that took longer than the server's
    per-request timeout (504), a refused Host or Origin, and any answer that is not charmem's.

    Attributes:
        status: the HTTP status code.
        problem_type: the problem's ``type`` URI (``urn:charmem:problem:...``).
    """

    def __init__(self, message: str, *, status: int, problem_type: str = "about:blank") -> None:
        super().__init__(message)
        self.status = status
        self.problem_type = problem_type


def structure(data: Any, cls: type[T], *, field: str = "body") -> T:
    """Build a charmem type from its JSON form; a bad body is a :class:`DraftValidationError`.

    A ``format_version`` key, when present, must be :data:`WIRE_FORMAT_VERSION` and is removed.

    Args:
        data: the decoded JSON.
        cls: the attrs type (``RememberInput``, ``RetrievalContext``, ``CorrectMemoryDraft``...).
        field: what the data is, for the message (``"body"``, ``"drafts"``, ``"options"``).

    Returns:
        The structured value.

    Raises:
        DraftValidationError: not an object, an unknown or missing key, a value of the wrong
            type, or a value the type's own validators refuse (that error itself, unwrapped).
    """
    if not isinstance(data, Mapping):
        raise DraftValidationError(
            f"the {field} must be a JSON object describing a {cls.__name__}, not {type(data).__name__}",
            field=field,
        )
    body = dict(data)
    version = body.pop("format_version", WIRE_FORMAT_VERSION)
    if version != WIRE_FORMAT_VERSION:
        raise DraftValidationError(
            f"format_version {version!r} is not supported (this server speaks {WIRE_FORMAT_VERSION})",
            field="format_version",
        )
    try:
        return converter.structure(body, cls)
    except Exception as exc:  # noqa: BLE001 - cattrs wraps everything; find the charmem error
        found = _first_charmem_error(exc)
        if found is not None:
            raise _located(found, exc) from None
        raise DraftValidationError(
            f"the {field} does not describe a {cls.__name__}: {_describe(exc)}", field=field
        ) from None


def _first_charmem_error(exc: BaseException) -> CharmemError | None:
    if isinstance(exc, CharmemError):
        return exc
    for inner in getattr(exc, "exceptions", ()):
        found = _first_charmem_error(inner)
        if found is not None:
            return found
    return None


def _located(found: CharmemError, raised: BaseException) -> CharmemError:
    """``found`` with the JSON path it was raised at (``scene.participants[0]: ...``) when nested.

    A type's own validators name only their field (``at``); inside a body the caller needs the
    whole path. Only a :class:`DraftValidationError` is re-made; any other error stays as it is.
    """
    path = _path_to(found, raised, "")
    if not path or type(found) is not DraftValidationError:
        return found
    where = path.lstrip(".")
    return DraftValidationError(f"{where}: {found}", field=where)


def _path_to(target: BaseException, error: BaseException, path: str) -> str | None:
    """The cattrs path (``.scene.participants[0].name``) from ``error`` down to ``target``."""
    here = f"{path}{_own_path(error)}"
    if error is target:
        return here
    for child in getattr(error, "exceptions", None) or ():
        found = _path_to(target, child, here)
        if found is not None:
            return found
    return None


def _own_path(error: BaseException) -> str:
    """The step cattrs noted on ``error`` itself (``.name``, ``[1]``), or ``""``."""
    return "".join(_note_path(note) for note in getattr(error, "__notes__", None) or ())


def _describe(exc: BaseException) -> str:
    """One line naming every leaf problem of a cattrs error (extra keys, missing keys, types)."""
    leaves: list[str] = []

    def walk(error: BaseException, path: str) -> None:
        path = f"{path}{_own_path(error)}"
        inner = getattr(error, "exceptions", None)
        if inner:
            for child in inner:
                walk(child, path)
            return
        where = path.lstrip(".")
        if isinstance(error, cattrs.ForbiddenExtraKeysError):
            leaves.append(f"{where or 'it'} has unknown keys {sorted(error.extra_fields)}")
        elif isinstance(error, KeyError):
            leaves.append(f"the required key {where!r} is missing" if where else "a required key is missing")
        else:
            leaves.append(f"{where or 'a value'}: {error}")

    walk(exc, "")
    return "; ".join(leaves[:5]) or str(exc)


def _note_path(note: object) -> str:
    text = str(note)
    for prefix in ("Structuring class ", "Structuring "):
        text = text.removeprefix(prefix)
    if "@ attribute " in text:
        return "." + text.split("@ attribute ", 1)[1].split()[0]
    if "@ index " in text:
        return "[" + text.split("@ index ", 1)[1].split()[0] + "]"
    return ""


def encode(value: Any) -> dict[str, Any]:
    """The JSON object of an outcome, plan or validation list, with ``format_version``.

    Args:
        value: an attrs instance (``RememberOutcome``, ``LifecycleMutationOutcome``...) or a
            list of them (``validations``).
    """
    if isinstance(value, list):
        return {"format_version": WIRE_FORMAT_VERSION, "validations": converter.unstructure(value)}
    data: dict[str, Any] = converter.unstructure(value)
    data.setdefault("format_version", WIRE_FORMAT_VERSION)
    return data


# -- the context pack ----------------------------------------------------------------------------


def encode_pack(pack: ContinuityContextPack) -> dict[str, Any]:
    """``pack.to_dict()`` and everything else the pack holds, so the client rebuilds it exactly.

    Every key of ``to_dict()``, at every level, keeps its value; the cattrs form of a field
    replaces the hand-written one only where it says more (a link's ``created_at``, an item's
    fields ``to_dict()`` leaves out), and fields it lacks (``max_tokens``) are added. The pack's
    ``format_version`` is ``to_dict()``'s.
    """
    data = pack.to_dict()
    for field in attrs.fields(type(pack)):
        if field.name != "token_counter":
            value = converter.unstructure(getattr(pack, field.name))
            if data.get(field.name) != value:
                data[field.name] = value
    data["format_version"] = PACK_FORMAT_VERSION
    return data


def decode_pack(data: Mapping[str, Any], token_counter: Any = None) -> ContinuityContextPack:
    """Inverse of :func:`encode_pack` (extra keys such as ``"rendered"`` are ignored).

    Args:
        data: the body the server answered for ``/retrieve``.
        token_counter: the :class:`~charmem.ports.TokenCounter` the pack renders with.

    Raises:
        RemoteError: the body is not a pack of a version this client reads.
    """
    if data.get("format_version") != PACK_FORMAT_VERSION:
        raise RemoteError(
            f"the server answered a pack of format_version {data.get('format_version')!r}; this "
            f"client reads {PACK_FORMAT_VERSION}: install the server's charmem version",
            status=200,
        )
    hints = _pack_fields()
    try:
        fields = {key: converter.structure(value, hints[key]) for key, value in data.items() if key in hints}
        return ContinuityContextPack(**fields, token_counter=token_counter)
    except Exception as exc:  # noqa: BLE001 - a server of another version
        raise RemoteError(f"the server's pack could not be read: {_describe(exc)}", status=200) from None


@functools.cache
def _pack_fields() -> dict[str, Any]:
    """Field name -> type of the pack's data fields (its token counter is built by the client)."""
    from charmem.ports import TokenCounter

    hints = typing.get_type_hints(ContinuityContextPack, localns={"TokenCounter": TokenCounter})
    return {name: hint for name, hint in hints.items() if name != "token_counter"}


# -- problems (RFC 9457) ---------------------------------------------------------------------------

_STATUS: Final[tuple[tuple[type[CharmemError], int], ...]] = (
    (charmem_errors.IdConflictError, 409),
    (charmem_errors.CharacterIdentityMismatchError, 409),
    (charmem_errors.DraftValidationError, 422),
    (charmem_errors.PlanValidationError, 422),
    (charmem_errors.LifecycleValidationError, 422),
    (charmem_errors.ConfigurationError, 400),
    (charmem_errors.BackendError, 503),
    (charmem_errors.StoreLockedError, 503),
)


def status_of(exc: CharmemError) -> int:
    """The HTTP status of a charmem error: 409 id conflict or another character, 422 validation.

    ``RemoteError`` keeps its own status; a configuration error (a bad collection name) is 400;
    store trouble and any other charmem error (a closed memory during shutdown, a mismatched
    embedder) is 503.
    """
    if isinstance(exc, RemoteError):
        return exc.status
    for cls, status in _STATUS:
        if isinstance(exc, cls):
            return status
    return 503


def _field_value(value: Any) -> tuple[Any, str | None]:
    """(JSON value, type name to rebuild it with or None) of one error field."""
    if isinstance(value, enum.Enum):
        return value.value, f"{type(value).__module__}:{type(value).__qualname__}"
    if isinstance(value, Mapping):
        return {str(k): _field_value(v)[0] for k, v in value.items()}, None
    if isinstance(value, list | tuple | set | frozenset):
        return [_field_value(v)[0] for v in value], None
    if value is None or isinstance(value, str | int | float | bool):
        return value, None
    return str(value), None


def problem_of(exc: CharmemError, *, instance: str | None = None) -> dict[str, Any]:
    """The problem+json object of a charmem error: its class, message and fields.

    Keys: ``type`` (``urn:charmem:error:<Class>``), ``title`` (the class name), ``status``,
    ``detail`` (the message, secrets masked as every charmem message is), ``error`` (the class
    name), ``error_bases`` (its charmem base classes, nearest first, so an older client still
    raises something it knows), ``fields`` (the error's attributes as JSON) and ``field_types``
    (enum fields: ``module:Class`` to rebuild them).
    """
    fields: dict[str, Any] = {}
    types: dict[str, str] = {}
    for name, value in vars(exc).items():
        if name.startswith("_"):
            continue
        fields[name], type_name = _field_value(value)
        if type_name is not None:
            types[name] = type_name
    bases = [
        cls.__name__
        for cls in type(exc).__mro__[1:]
        if isinstance(cls, type) and issubclass(cls, CharmemError) and not cls.__name__.startswith("_")
    ]
    problem: dict[str, Any] = {
        "type": f"urn:charmem:error:{type(exc).__name__}",
        "title": type(exc).__name__,
        "status": status_of(exc),
        "detail": str(exc),
        "error": type(exc).__name__,
        "error_bases": bases,
        "fields": fields,
    }
    if types:
        problem["field_types"] = types
    if instance is not None:
        problem["instance"] = instance
    return problem


def _error_classes() -> dict[str, type[CharmemError]]:
    found: dict[str, type[CharmemError]] = {}
    pending: list[type[CharmemError]] = [CharmemError]
    while pending:
        cls = pending.pop()
        if cls.__module__.split(".")[0].startswith("charmem"):
            found.setdefault(cls.__name__, cls)
        pending.extend(cls.__subclasses__())
    return found


def _rebuild_field(value: Any, type_name: str | None) -> Any:
    if type_name is None:
        return tuple(value) if isinstance(value, list) else value
    module_name, _, qualname = type_name.partition(":")
    if not module_name.split(".")[0].startswith("charmem"):
        return value
    try:
        target: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            target = getattr(target, part)
        return target(value)
    except Exception:  # noqa: BLE001 - an enum this client does not know: keep the value
        return value


def error_from_problem(problem: Mapping[str, Any], status: int) -> CharmemError:
    """The charmem error a problem+json answer describes (the inverse of :func:`problem_of`).

    The class is looked up by name among charmem's error classes (then its ``error_bases``);
    its fields are set as the server had them (enums rebuilt, lists as tuples, mappings of
    lists as mappings of tuples). An answer that is not charmem's becomes a
    :class:`RemoteError` with the status.
    """
    detail = str(problem.get("detail") or problem.get("title") or f"the server answered {status}")
    cls = _error_class(problem)
    if cls is None or cls is RemoteError:
        return RemoteError(detail, status=status, problem_type=str(problem.get("type", "about:blank")))
    error = cls.__new__(cls)
    Exception.__init__(error, detail)
    _set_fields(error, problem)
    return error


def _error_class(problem: Mapping[str, Any]) -> type[CharmemError] | None:
    """The charmem error class named by ``error``, else by the nearest known ``error_bases``."""
    classes = _error_classes()
    names = [problem.get("error"), *(problem.get("error_bases") or ())]
    return next((classes[name] for name in names if isinstance(name, str) and name in classes), None)


def _set_fields(error: CharmemError, problem: Mapping[str, Any]) -> None:
    """Set the problem's ``fields`` on ``error``: enums rebuilt, lists as tuples (one level deep)."""
    fields = problem.get("fields") if isinstance(problem.get("fields"), Mapping) else {}
    types = problem.get("field_types") if isinstance(problem.get("field_types"), Mapping) else {}
    for name, value in (fields or {}).items():
        if isinstance(value, Mapping):
            value = {k: tuple(v) if isinstance(v, list) else v for k, v in value.items()}
        setattr(error, name, _rebuild_field(value, (types or {}).get(name)))
