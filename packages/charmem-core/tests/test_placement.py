"""``SPARQL_ENDPOINTS``: parsing, refusals that say what to fix, and the stable placement rule."""

from __future__ import annotations

import hashlib
import json

import pytest

from charmem import Settings
from charmem.errors import ConfigurationError
from charmem.settings import SparqlShard, shard_index

Q0, U0 = "http://graph-0:7878/query", "http://graph-0:7878/update"
Q1 = "http://graph-1:7878/query"


def _settings(endpoints: object, **more: str) -> Settings:
    raw = endpoints if isinstance(endpoints, str) else json.dumps(endpoints)
    return Settings.from_mapping({"GRAPH_STORE_MODE": "service", "SPARQL_ENDPOINTS": raw, **more})


def test_shards_parse_and_update_defaults_to_query() -> None:
    settings = _settings({"shards": [{"query": Q0, "update": U0}, {"query": Q1}], "pinned": {"vip": 1}})
    assert settings.sparql_endpoints is not None
    assert settings.sparql_endpoints.shards == (
        SparqlShard(query=Q0, update=U0),
        SparqlShard(query=Q1, update=Q1),
    )
    assert settings.sparql_shard("vip") == SparqlShard(query=Q1, update=Q1)
    assert settings.sparql_query_endpoint is None


def test_single_endpoint_settings_still_give_one_shard() -> None:
    settings = Settings.from_mapping({"GRAPH_STORE_MODE": "service", "SPARQL_QUERY_ENDPOINT": Q0})
    assert settings.sparql_shard("anyone") == SparqlShard(query=Q0, update=Q0)


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ('{"shards": [', "is not valid JSON"),
        ("[1, 2]", "must be a JSON object, not a JSON array"),
        (
            {"shards": [Q0]},
            'shards[0] is a JSON string, not an object: each shard is an object {"query": URL',
        ),
        ({"shards": [{"query": Q0}, None]}, "shards[1] is a JSON null, not an object"),
        (
            {"shards": [{"query": Q0}, {"query": f" {Q0}", "update": "http://other/u"}]},
            f"lists the query endpoint {Q0} twice (shards[0] and shards[1])",
        ),
        ({"shards": []}, "lists no shard"),
        ({"shards": [{"update": U0}]}, "required field missing @ SPARQL_ENDPOINTS.shards[0].query"),
        ({"shards": [{"query": Q0, "querry": Q0}]}, "querry"),
        ({"shards": [{"query": "graph-0:7878"}]}, "shards[0].query is not an http(s) URL"),
        ({"shards": [{"query": Q0, "update": "ftp://x/u"}]}, "shards[0].update is not an http(s) URL"),
        (
            {"shards": [{"query": Q0}], "pinned": {"vip": 1}},
            "pins collection 'vip' to shard 1, but there are 1 shards",
        ),
        ({"shards": [{"query": Q0}], "pinned": {"vip": -1}}, "to shard -1"),
        (
            {"shards": [{"query": Q0}], "pinned": {"vip": "0"}},
            "expected int @ SPARQL_ENDPOINTS.pinned['vip']",
        ),
        (
            {"shards": [{"query": Q0}], "pinned": {"VIP": 0}},
            "pins 'VIP', which is not a valid collection name",
        ),
    ],
)
def test_bad_values_are_refused_with_what_to_fix(raw: object, says: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        _settings(raw)
    assert caught.value.key == "SPARQL_ENDPOINTS"
    assert says in str(caught.value)
    assert '{"shards": [{"query":' in str(caught.value)  # the message shows the shape to write


@pytest.mark.parametrize("other", ["SPARQL_QUERY_ENDPOINT", "SPARQL_UPDATE_ENDPOINT"])
def test_both_forms_at_once_are_refused(other: str) -> None:
    with pytest.raises(ConfigurationError, match=f"SPARQL_ENDPOINTS and {other} are both set") as caught:
        _settings({"shards": [{"query": Q0}]}, **{other: Q1})
    assert caught.value.key == "SPARQL_ENDPOINTS"


def test_settings_repr_hides_shard_urls() -> None:
    settings = _settings({"shards": [{"query": "http://alice:s3cret@graph-0/query"}]})
    assert "s3cret" not in repr(settings)


def _reference_index(name: str, count: int) -> int:
    """The documented rule, written again independently: highest sha256 score, lowest index on ties."""
    scores = [
        int.from_bytes(hashlib.sha256(f"{i}:{name}".encode()).digest()[:8], "big") for i in range(count)
    ]
    return scores.index(max(scores))


def test_placement_is_the_documented_sha256_rule_and_pins_win() -> None:
    names = [f"user-{n}" for n in range(200)]
    for count in (1, 2, 3, 5):
        assert [shard_index(n, count, {}) for n in names] == [_reference_index(n, count) for n in names]
    # fixed answers: a change of the rule would move every deployed collection
    assert [shard_index(n, 2, {}) for n in ("alice", "bob", "carol", "dave")] == [
        _reference_index(n, 2) for n in ("alice", "bob", "carol", "dave")
    ]
    assert shard_index("alice", 2, {"alice": 1 - _reference_index("alice", 2)}) == 1 - _reference_index(
        "alice", 2
    )


def test_placement_spreads_and_appending_a_shard_moves_few() -> None:
    names = [f"user-{n}" for n in range(3000)]
    three = [shard_index(n, 3, {}) for n in names]
    assert all(900 < three.count(i) < 1100 for i in range(3))
    four = [shard_index(n, 4, {}) for n in names]
    moved = [a != b for a, b in zip(three, four, strict=True)]
    assert all(b == 3 for a, b in zip(three, four, strict=True) if a != b)  # only to the new shard
    assert 0.2 < sum(moved) / len(names) < 0.3  # about one in four
