"""``/openapi.json``: the OpenAPI 3.1 document of the HTTP API, built from charmem's own types.

The request and response schemas are derived from the attrs classes the cattrs converter
(de)serialises, so the document follows the library: a field added to an outcome or a draft
appears here without an edit.
"""

from __future__ import annotations

import enum
import functools
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Final

import attrs

from charmem import (
    CorrectMemoryDraft,
    ForgetMemoryDraft,
    LifecycleMutationOutcome,
    LinkDraft,
    LinkOutcome,
    MemoryId,
    RememberDrafts,
    RememberInput,
    RememberOptions,
    RememberOutcome,
    RememberWritePlan,
    RetrievalContext,
)
from charmem.domain.plan import CandidateValidation
from charmem.domain.retrieval import ContinuityContextPack
from charmem_server._version import __version__

__all__ = ["openapi_document"]


class _Schemas:
    """JSON Schemas of attrs classes, collected under ``components/schemas``."""

    def __init__(self) -> None:
        self.components: dict[str, Any] = {}

    def of(self, tp: Any) -> dict[str, Any]:
        """The JSON Schema of a type hint; attrs classes as ``$ref`` into the components."""
        if tp is type(None):
            return {"type": "null"}
        generic = self._of_generic(tp)
        if generic is not None:
            return generic
        if isinstance(tp, type):
            return self._of_class(tp)
        return {}

    def _of_generic(self, tp: Any) -> dict[str, Any] | None:
        """Unions, literals, sequences and mappings; ``None`` for any other hint."""
        origin = typing.get_origin(tp)
        if origin in (typing.Union, types.UnionType):
            return {"anyOf": [self.of(arg) for arg in typing.get_args(tp)]}
        if origin is typing.Literal:
            return {"enum": list(typing.get_args(tp))}
        if origin in (tuple, list, Sequence) or tp in (tuple, list):
            return self._of_array(tp, origin)
        if origin in (dict, Mapping) or tp in (dict, Mapping):
            pair = typing.get_args(tp)
            return {"type": "object", "additionalProperties": self.of(pair[1]) if pair else {}}
        return None

    def _of_array(self, tp: Any, origin: Any) -> dict[str, Any]:
        """A fixed tuple as ``prefixItems``; a sequence or ``tuple[X, ...]`` as ``items``."""
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        if origin is tuple and len(args) > 1 and Ellipsis not in typing.get_args(tp):
            return {"type": "array", "prefixItems": [self.of(a) for a in args]}
        return {"type": "array", "items": self.of(args[0]) if args else {}}

    def _of_class(self, tp: type) -> dict[str, Any]:
        simple = {str: "string", bool: "boolean", int: "integer", float: "number"}
        if tp in simple:
            return {"type": simple[tp]}
        if tp is datetime:
            return {"type": "string", "format": "date-time", "description": "ISO 8601 with a UTC offset"}
        if tp is timedelta:
            return {"type": "number", "description": "a duration in seconds"}
        if tp is MemoryId:
            return {"type": "string", "format": "uuid"}
        if issubclass(tp, enum.Enum):
            return {"type": "string", "enum": [member.value for member in tp]}
        if attrs.has(tp):
            name = tp.__qualname__.replace(".", "")
            if name not in self.components:
                self.components[name] = {}  # placeholder against recursion
                self.components[name] = self._object(tp)
            return {"$ref": f"#/components/schemas/{name}"}
        return {}

    def _object(self, tp: type) -> dict[str, Any]:
        try:
            hints = typing.get_type_hints(tp, localns=_port_names())
        except Exception:  # noqa: BLE001 - a forward reference to an optional type
            hints = {}
        properties: dict[str, Any] = {}
        required: list[str] = []
        for field in attrs.fields(tp):
            if field.name == "token_counter":
                continue
            properties[field.name] = self.of(hints.get(field.name, field.type))
            if field.default is attrs.NOTHING:
                required.append(field.name)
        schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
        if required:
            schema["required"] = required
        if tp.__doc__:
            schema["description"] = tp.__doc__.strip().split("\n\n")[0]
        return schema


@functools.cache
def _port_names() -> dict[str, Any]:
    """The port protocols by name, for fields typed with one under ``TYPE_CHECKING`` (the pack's)."""
    import charmem.ports

    return {name: getattr(charmem.ports, name) for name in charmem.ports.__all__}


def _operation(
    summary: str, request: dict[str, Any] | None, response: dict[str, Any], scope: str
) -> dict[str, Any]:
    problem = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    responses: dict[str, Any] = {
        "200": {"description": "done", "content": {"application/json": {"schema": response}}}
    }
    for status, why in (
        ("401", "no or unknown bearer token"),
        ("403", f"the token lacks the {scope} scope or the collection"),
        (
            "409",
            "IdConflictError: an id is stored with other content, nothing was written; or "
            "CharacterIdentityMismatchError: the collection records another character than the "
            "server's --character-id for it",
        ),
        ("413", "the body is larger than the server's limit"),
        ("422", "a validation error (DraftValidationError, PlanValidationError, LifecycleValidationError)"),
        ("503", "BackendError: a store or the embedder failed"),
        ("504", "the operation took longer than the server's per-request timeout"),
    ):
        responses[status] = {"description": why, "content": problem}
    operation: dict[str, Any] = {
        "summary": summary,
        "responses": responses,
        "security": [{"bearer": []}],
        "x-charmem-scope": scope,
    }
    if request is not None:
        operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": request}}}
    return operation


#: An operation: its name, summary, request and response schemas, and the scope it needs.
_Row = tuple[str, str, dict[str, Any], dict[str, Any], str]

_PROBLEM_SCHEMA: Final = {
    "type": "object",
    "description": "RFC 9457 problem details with the charmem error class and its fields",
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "error": {"type": "string"},
        "error_bases": {"type": "array", "items": {"type": "string"}},
        "fields": {"type": "object"},
        "field_types": {"type": "object"},
    },
}

_COLLECTION_PARAMETER: Final = {
    "name": "collection",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,127}$"},
}


@functools.cache
def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document (built once per process)."""
    schemas = _Schemas()
    paths: dict[str, Any] = {}
    base = "/v1/collections/{collection}"
    for name, summary, request, response, scope in _operation_table(schemas.of):
        operation = _operation(summary, request, response, scope)
        operation["parameters"] = [_COLLECTION_PARAMETER]
        operation["operationId"] = name
        paths[f"{base}/{name}"] = {"post": operation}
    paths["/v1/health"] = {
        "get": {
            "summary": "liveness",
            "operationId": "health",
            "security": [],
            "responses": {"200": {"description": "the server runs"}},
        }
    }
    schemas.components["Problem"] = _PROBLEM_SCHEMA
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "charmem",
            "version": __version__,
            "description": "Episodic memory over HTTP: every facade operation of charmem.",
        },
        "paths": paths,
        "components": {
            "schemas": schemas.components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


def _operation_table(ref: Callable[[Any], dict[str, Any]]) -> list[_Row]:
    """One row per operation: name, summary, request schema, response schema, scope.

    ``ref`` adds each attrs class to the components the first time it is named, so the order of
    the calls here is the order of ``components/schemas``.
    """
    remember_body = {
        "oneOf": [
            {"allOf": [ref(RememberInput)], "description": "the convenience path (RememberInput fields)"},
            {
                "type": "object",
                "properties": {"drafts": ref(RememberDrafts), "options": ref(RememberOptions)},
                "required": ["drafts"],
                "description": "the explicit path (RememberDrafts)",
            },
        ]
    }
    plan_body = {
        "oneOf": [ref(RememberWritePlan), {"type": "object", "properties": {"plan": ref(RememberWritePlan)}}]
    }
    retrieve_body = {
        "allOf": [ref(RetrievalContext)],
        "anyOf": [{"required": [cue]} for cue in ("query", "scene", "activity", "time_range")],
        "description": "at least one of query, scene, activity and time_range (else 422); with a "
        "scene, its at is the reference time and nothing after it is recalled",
        "properties": {
            "render_max_tokens": {
                "type": "integer",
                "minimum": 1,
                "description": "also answer the pack rendered within this many tokens",
            }
        },
    }
    pack = {
        "allOf": [ref(ContinuityContextPack)],
        "properties": {
            "format_version": {"type": "integer", "description": "the pack's format (PACK_FORMAT_VERSION)"},
            "token_counter": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "rendered": {"type": "string"},
        },
    }
    validations = {
        "type": "object",
        "properties": {"validations": {"type": "array", "items": ref(CandidateValidation)}},
    }
    return [
        ("remember", "prepare + validate + commit", remember_body, ref(RememberOutcome), "write"),
        ("prepare", "build a write plan; writes nothing", remember_body, ref(RememberWritePlan), "read"),
        ("validate", "check a plan against the graph", plan_body, validations, "read"),
        ("commit", "persist a plan", plan_body, ref(RememberOutcome), "write"),
        (
            "retrieve",
            "recall a continuity context pack (pack.to_dict() and more)",
            retrieve_body,
            pack,
            "read",
        ),
        ("correct", "correct a memory", ref(CorrectMemoryDraft), ref(LifecycleMutationOutcome), "write"),
        ("forget", "forget by suppression", ref(ForgetMemoryDraft), ref(LifecycleMutationOutcome), "write"),
        ("link", "link two stored memories", ref(LinkDraft), ref(LinkOutcome), "write"),
        (
            "check",
            "vectors and stats in step with the graph (admin)",
            {"type": "object", "properties": {"repair": {"type": "boolean"}}},
            {"type": "object"},
            "admin",
        ),
    ]
