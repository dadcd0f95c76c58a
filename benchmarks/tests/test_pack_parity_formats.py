"""pack_parity.py compares a baseline of an older pack format on that format's keys: every format
after 1 says what it added, and a pack written down to format 1 has exactly format 1's keys."""

from __future__ import annotations

import importlib.util
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest

from charmem import MemoryId, ObjectType
from charmem.domain.pack import PackItem
from charmem.domain.retrieval import PACK_FORMAT_VERSION, ContinuityContextPack

SCRIPT = Path(__file__).resolve().parents[1] / "pack_parity.py"

#: The keys of a format-1 pack and of its items.
FORMAT_1_PACK = {
    "format_version", "query", "items", "sections", "entities", "links", "omissions",
    "completeness", "telemetry", "token_counter",
}  # fmt: skip
FORMAT_1_ITEM = {
    "id", "object_type", "text", "occurred_at", "score", "signals", "status", "provenance_ids",
    "derived_type", "entity_ids",
}  # fmt: skip


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pack_parity_benchmark", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_every_format_says_what_it_added() -> None:
    parity = load()
    assert set(parity.ADDED_IN_FORMAT) == set(range(2, PACK_FORMAT_VERSION + 1))


def test_a_pack_written_as_format_1_has_format_1_keys() -> None:
    parity = load()
    item = PackItem(
        id=MemoryId.new(), object_type=ObjectType.EPISODE, text="x", occurred_at=datetime.now(UTC), score=1.0
    )
    pack = ContinuityContextPack(query="x", items=(item,)).to_dict()
    older = parity.in_format(pack, 1)
    assert set(older) == FORMAT_1_PACK
    assert older["format_version"] == 1
    assert set(older["items"][0]) == FORMAT_1_ITEM
    assert {k: v for k, v in pack.items() if k in FORMAT_1_PACK - {"items", "format_version"}} == {
        k: v for k, v in older.items() if k not in {"items", "format_version"}
    }
    with pytest.raises(SystemExit):
        parity.in_format(older, 2)  # a newer baseline than the packs
