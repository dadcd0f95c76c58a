"""The pack on the wire (format 2): the answer holds ``pack.to_dict()`` unchanged, and the client
rebuilds the pack exactly, obligations, support ages and scene answers included."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from charmem import MemoryId, ObjectType
from charmem.domain.model import DerivedType
from charmem.domain.pack import (
    AdmissionRoad,
    LastInteraction,
    ObligationDirection,
    PackItem,
    SceneResolution,
    SceneResolutionStatus,
)
from charmem.domain.retrieval import PACK_FORMAT_VERSION, ContinuityContextPack
from charmem_server._openapi import openapi_document
from charmem_server._wire import decode_pack, encode_pack

WHEN = datetime(2024, 6, 1, 18, 30, tzinfo=UTC)
BOOK, RETURNED, ANA = MemoryId.new(), MemoryId.new(), MemoryId.new()


def _pack() -> ContinuityContextPack:
    item = PackItem(
        id=BOOK,
        object_type=ObjectType.DERIVED,
        text="Return Ana's book on Saturday.",
        occurred_at=WHEN,
        score=0.5,
        derived_type=DerivedType.COMMITMENT,
        admitted_by=(AdmissionRoad.PARTICIPANT, AdmissionRoad.TOPIC),
        seconds_since_support=3600,
        direction=ObligationDirection.OWED_BY_CHARACTER,
        resolved_by=(RETURNED,),
    )
    return ContinuityContextPack(
        query="Ana",
        items=(item,),
        sections={"derived_memories": (BOOK,)},
        last_interactions=(
            LastInteraction(entity_id=ANA, last_met_at=WHEN, elapsed=timedelta(days=2, seconds=5)),
            LastInteraction(entity_id=RETURNED),
        ),
        scene_resolutions=(
            SceneResolution(participant_index=0, status=SceneResolutionStatus.RESOLVED, entity_ids=(ANA,)),
            SceneResolution(participant_index=1, status=SceneResolutionStatus.UNKNOWN),
        ),
    )


def test_the_answer_holds_to_dict_and_rebuilds_the_pack() -> None:
    pack = _pack()
    body = json.loads(json.dumps(encode_pack(pack)))
    expected = json.loads(json.dumps(pack.to_dict()))
    assert {key: body[key] for key in expected} == expected
    assert body["format_version"] == PACK_FORMAT_VERSION == 2
    [item] = body["items"]
    assert item["admitted_by"] == ["participant", "topic"]
    assert (item["seconds_since_support"], item["direction"], item["resolved_by"]) == (
        3600,
        "owed_by_character",
        [str(RETURNED)],
    )
    assert body["last_interactions"] == [
        {"entity_id": str(ANA), "last_met_at": WHEN.isoformat(), "elapsed": 172_805.0},
        {"entity_id": str(RETURNED), "last_met_at": None, "elapsed": None},
    ]
    assert body["scene_resolutions"][1] == {"participant_index": 1, "status": "unknown", "entity_ids": []}
    assert decode_pack(body) == pack


def test_the_openapi_document_describes_the_new_fields() -> None:
    schemas = openapi_document()["components"]["schemas"]
    item = schemas["PackItem"]["properties"]
    assert set(item) >= {"admitted_by", "seconds_since_support", "direction", "resolved_by"}
    pack = schemas["ContinuityContextPack"]["properties"]
    assert set(pack) >= {"last_interactions", "scene_resolutions"}
    assert schemas["LastInteraction"]["properties"]["elapsed"]["anyOf"][0]["type"] == "number"
