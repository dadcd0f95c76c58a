"""Graph sharding by collection: ``SPARQL_ENDPOINTS`` and the rule placing a collection on a shard.

Collections never query each other, so each one lives wholly on one SPARQL server (a *shard*).
``SPARQL_ENDPOINTS`` lists the shards and may pin collections to one; every other collection is
placed by :func:`shard_index`, a pure function of its name and the number of shards.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit

import attrs
import cattrs

from charmem.errors import ConfigurationError, mask_secrets

__all__ = ["SPARQL_ENDPOINTS_KEY", "SparqlEndpoints", "SparqlShard", "parse_sparql_endpoints", "shard_index"]

#: The settings key holding the shards (a JSON object).
SPARQL_ENDPOINTS_KEY: Final = "SPARQL_ENDPOINTS"

_EXAMPLE: Final = (
    '{"shards": [{"query": "http://graph-0:7878/query", "update": "http://graph-0:7878/update"}, '
    '{"query": "http://graph-1:7878/query"}], "pinned": {"vip-user": 0}}'
)


@attrs.frozen(kw_only=True)
class SparqlShard:
    """One graph server: its SPARQL query and update endpoint URLs.

    Attributes:
        query: the query endpoint URL (``http(s)://...``).
        update: the update endpoint URL; defaults to ``query``, as ``SPARQL_UPDATE_ENDPOINT`` does.
    """

    query: str
    update: str = attrs.field(default=attrs.Factory(lambda self: self.query, takes_self=True))


@attrs.frozen(kw_only=True)
class SparqlEndpoints:
    """The shards of ``SPARQL_ENDPOINTS`` and the collections pinned to one of them.

    Attributes:
        shards: the graph servers, in the order written (at least one). A shard's place in this
            list is its identity: append new shards, never reorder or remove them (see
            :func:`shard_index`).
        pinned: collection name -> index into ``shards``; a pinned collection ignores the hash.
    """

    shards: tuple[SparqlShard, ...]
    pinned: Mapping[str, int] = attrs.field(factory=dict)

    def shard_for(self, collection: str) -> SparqlShard:
        """The shard holding ``collection`` (:func:`shard_index`)."""
        return self.shards[shard_index(collection, len(self.shards), self.pinned)]


def shard_index(collection: str, shard_count: int, pinned: Mapping[str, int]) -> int:
    """The shard (index into ``SPARQL_ENDPOINTS``' ``shards``) that holds ``collection``.

    A pinned collection is on its pinned shard. Any other is placed by rendezvous hashing on
    SHA-256: each shard ``i`` scores ``sha256(f"{i}:{collection}")`` (the first 8 bytes of the
    digest of the UTF-8 text, big-endian) and the highest score wins (ties: the lower index).
    The answer depends only on the name and the number of shards, in every process and Python
    version (``hash()`` is salted per process and is never used). Appending a shard moves only
    the collections the new shard wins, about one in ``shard_count``; pin every existing
    collection to the shard this function gives it today (or move it with ``charmem export`` /
    ``charmem import``) before the new list is deployed. A collection opened on the wrong shard
    while its vectors hold points is refused (``StoreCorruptedError``), never read as empty.

    Args:
        collection: a valid collection name.
        shard_count: number of shards, >= 1.
        pinned: collection name -> shard index (already checked against ``shard_count``).

    Returns:
        int: an index in ``range(shard_count)``.

    Raises:
        ValueError: ``shard_count`` < 1.
    """
    if shard_count < 1:
        raise ValueError(f"shard_count must be >= 1, not {shard_count}")
    if collection in pinned:
        return pinned[collection]
    scores = [
        int.from_bytes(hashlib.sha256(f"{i}:{collection}".encode()).digest()[:8], "big")
        for i in range(shard_count)
    ]
    return max(range(shard_count), key=lambda i: (scores[i], -i))


@attrs.frozen(kw_only=True)
class _ShardDoc:
    query: str
    update: str | None = None


@attrs.frozen(kw_only=True)
class _EndpointsDoc:
    shards: list[_ShardDoc]
    pinned: dict[str, int] = attrs.field(factory=dict)


def _strict_int(value: object, _: type) -> int:
    """A JSON integer only: cattrs would turn ``"1"``, ``1.5`` and ``true`` into ints."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected a shard index (a JSON integer), not {value!r}")
    return value


_CONVERTER: Final = cattrs.Converter(forbid_extra_keys=True)
_CONVERTER.register_structure_hook(int, _strict_int)


_JSON_KINDS: Final = {str: "string", int: "number", float: "number", bool: "boolean", list: "array"}


def _json_kind(value: object) -> str:
    """What JSON calls the value's type (``null`` for ``None``)."""
    return "null" if value is None else _JSON_KINDS.get(type(value), "object")


def _refuse(problem: str) -> ConfigurationError:
    return ConfigurationError(
        f"{SPARQL_ENDPOINTS_KEY} {problem}; write a JSON object such as {_EXAMPLE}",
        key=SPARQL_ENDPOINTS_KEY,
    )


def _structure(raw: str) -> _EndpointsDoc:
    """The JSON document as typed values, or the refusal naming what is wrong and where."""
    try:
        document: Any = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise _refuse(f"is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from exc
    if not isinstance(document, dict):
        raise _refuse(f"must be a JSON object, not a JSON {_json_kind(document)}")
    _refuse_shards_not_objects(document.get("shards"))
    try:
        return _CONVERTER.structure(document, _EndpointsDoc)
    except cattrs.BaseValidationError as exc:
        where = "; ".join(cattrs.transform_error(exc, path="SPARQL_ENDPOINTS"))
        raise _refuse(f"does not have the expected shape ({where})") from exc


def _refuse_shards_not_objects(shards: object) -> None:
    """Refuse a shard given as anything but an object (cattrs would fail on it untyped)."""
    if not isinstance(shards, list):
        return  # the converter names what is wrong with the list itself
    for i, shard in enumerate(shards):
        if not isinstance(shard, dict):
            raise _refuse(
                f"shards[{i}] is a JSON {_json_kind(shard)}, not an object: each shard is an "
                'object {"query": URL, "update": URL} ("update" optional)'
            )


def _refuse_repeated_servers(shards: tuple[SparqlShard, ...]) -> None:
    """Refuse one query endpoint listed as two shards (its collections would move between them)."""
    seen: dict[str, int] = {}
    for i, shard in enumerate(shards):
        if shard.query in seen:
            raise _refuse(
                f"lists the query endpoint {mask_secrets(shard.query)} twice (shards[{seen[shard.query]}] "
                f"and shards[{i}]); each shard is a different graph server: remove the repeat"
            )
        seen[shard.query] = i


def _checked_url(url: str, where: str) -> str:
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise _refuse(f"{where} is not an http(s) URL (e.g. http://127.0.0.1:7878/query)")
    return url


def parse_sparql_endpoints(raw: str) -> SparqlEndpoints:
    """Read ``SPARQL_ENDPOINTS``: ``{"shards": [{"query": URL, "update": URL}, ...], "pinned": {...}}``.

    ``update`` defaults to the shard's ``query``; ``pinned`` (collection name -> shard index) is
    optional. Unknown keys are refused, so a misspelt ``"querry"`` is not silently ignored.

    Args:
        raw: the setting's text.

    Returns:
        SparqlEndpoints: the shards and pins, checked.

    Raises:
        ConfigurationError: (``key="SPARQL_ENDPOINTS"``) the text is not JSON, not an object of that
            shape (a shard that is not an object or has no ``query``, an unknown key, a pin that is
            not an integer), there is no shard, a URL is not http(s), one query URL is listed as two
            shards, a pinned name is not a valid collection name, or a pin
            names a shard that does not exist. The message says which and how to fix it.
    """
    from charmem.settings import validate_collection_name  # settings imports this module

    document = _structure(raw)
    if not document.shards:
        raise _refuse('lists no shard: give at least one {"query": URL} in "shards"')
    shards = tuple(
        SparqlShard(
            query=_checked_url(shard.query, f"shards[{i}].query"),
            update=_checked_url(shard.update or shard.query, f"shards[{i}].update"),
        )
        for i, shard in enumerate(document.shards)
    )
    _refuse_repeated_servers(shards)
    for name, index in document.pinned.items():
        try:
            validate_collection_name(name)
        except ConfigurationError as exc:
            raise _refuse(f"pins {name!r}, which is not a valid collection name") from exc
        if not 0 <= index < len(shards):
            raise _refuse(
                f"pins collection {name!r} to shard {index}, but there are {len(shards)} shards "
                f"(indexes 0-{len(shards) - 1}); pin it to an existing shard or add one"
            )
    return SparqlEndpoints(shards=shards, pinned=dict(document.pinned))
