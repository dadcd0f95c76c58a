"""LoCoMo -> drafts mapping, on the bundled sample and on a hand-made tricky conversation."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from charmem import ObjectType
from charmem_cli.locomo import (
    cited_dia_ids,
    conversation_drafts,
    load_conversation,
    parse_session_time,
    turn_recall,
)


def sample() -> Path:
    return Path(str(resources.files("charmem_cli") / "data" / "sample-conversation.json"))


def test_session_time_is_utc() -> None:
    when = parse_session_time("1:56 pm on 8 May, 2023")
    assert (when.year, when.month, when.day, when.hour, when.minute) == (2023, 5, 8, 13, 56)
    assert when.utcoffset() is not None and when.utcoffset().total_seconds() == 0  # type: ignore[union-attr]


def test_citations_can_be_lists_or_comma_strings() -> None:
    assert cited_dia_ids("D26:14, D26:34, D26:42") == ["D26:14", "D26:34", "D26:42"]
    assert cited_dia_ids(["D27:7", "D27:9"]) == ["D27:7", "D27:9"]
    assert cited_dia_ids([["D3:9", "D3:11"]]) == ["D3:9", "D3:11"]
    assert cited_dia_ids(None) == []


def test_sample_maps_to_notions_sessions_turns_and_facts() -> None:
    notions, sessions = conversation_drafts(load_conversation(sample()))
    assert len(notions.entities) == 2
    assert {a.predicate.name for d in notions.derived for a in d.assertions} == {"Ines", "Tomas"}
    assert all(d.given_by_application and not d.has_sources for d in notions.derived)
    assert [s.number for s in sessions] == [1, 2, 3]
    turns = [o for s in sessions for o in s.drafts.observations]
    assert len(turns) == 22
    assert any("[image: a yellow tram on a steep street]" in o.text for o in turns)
    facts = [d for s in sessions for d in s.drafts.derived]
    assert len(facts) == 12
    assert all(f.observation_ids for f in facts)
    # deterministic: mapping twice gives the same ids and timestamps
    again = conversation_drafts(load_conversation(sample()))[1]
    assert [o.id for s in again for o in s.drafts.observations] == [o.id for o in turns]


def test_facts_ground_on_every_cited_turn_and_fall_back_to_the_episode(tmp_path: Path) -> None:
    data = {
        "speaker_a": "A",
        "speaker_b": "B",
        "session_1_date_time": "10:00 am on 1 January, 2024",
        "session_1": [
            {"speaker": "A", "dia_id": "D1:1", "text": "one"},
            {"speaker": "B", "dia_id": "D1:2", "text": "two"},
        ],
        "session_2_date_time": "10:00 am on 2 January, 2024",
        "session_1_observation": {
            "A": [["cites both", "D1:1, D1:2"], ["cites nothing real", "D9:9"]],
        },
        "qa": [{"question": "never ingested", "answer": "x", "evidence": ["D1:1"], "category": 4}],
    }
    path = tmp_path / "tricky.json"
    path.write_text(json.dumps(data))
    _notions, sessions = conversation_drafts(load_conversation(path))
    assert len(sessions) == 1  # a session with a date but no turns is skipped
    both, nothing = sessions[0].drafts.derived
    assert len(both.observation_ids) == 2 and not both.episode_ids
    assert not nothing.observation_ids and nothing.episode_ids == (sessions[0].drafts.episodes[0].id,)
    texts = [o.text for o in sessions[0].drafts.observations] + [d.text for d in sessions[0].drafts.derived]
    assert "never ingested" not in texts


def test_turn_recall_counts_distinct_turns_in_rank_order() -> None:
    ranked = ["D1:1", "D1:1", "D1:2", "D1:3"]
    assert turn_recall(ranked, ["D1:2"], k=2) == 1.0
    assert turn_recall(ranked, ["D1:3"], k=2) == 0.0
    assert turn_recall(ranked, ["D1:2", "D1:9"], k=10) == 0.5


def test_object_types_of_the_mapping() -> None:
    _notions, sessions = conversation_drafts(load_conversation(sample()), include_facts=False)
    assert all(not s.drafts.derived for s in sessions)
    assert ObjectType.OBSERVATION.value == "observation"
