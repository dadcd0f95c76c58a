"""locomo.py's ``--ranked-out`` file re-scores to the run's own metrics, finding each question by
its file and place (never by its text), and its relative question forms read as they should."""

from __future__ import annotations

import importlib.util
import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from charmem.domain.timecues import time_cues

SCRIPT = Path(__file__).resolve().parents[1] / "locomo.py"

#: The same question in two files with different evidence: matching by text would mix them up.
QUESTION = "What did Ana bake?"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("locomo_benchmark", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def conversation(baked: str, evidence: str) -> dict[str, Any]:
    """A two-session LoCoMo-shaped conversation (written here: the real data stays out)."""
    turns = [
        ("Ana", f"I baked {baked} this morning."),
        ("Ben", "Did it rise well?"),
        ("Ana", "It did, I used a new oven."),
    ]
    return {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": s, "dia_id": f"D1:{i}", "text": t} for i, (s, t) in enumerate(turns, 1)],
        "session_2_date_time": "10:00 am on 25 May, 2023",
        "session_2": [
            {"speaker": "Ben", "dia_id": "D2:1", "text": "I went hiking in the hills."},
            {"speaker": "Ana", "dia_id": "D2:2", "text": f"Nice. I baked {baked} again yesterday."},
        ],
        "qa": [
            {"question": "Where did Ben go hiking?", "evidence": ["D2:1"], "category": 4},
            {"question": QUESTION, "evidence": [evidence], "category": 2},
            {"question": "What oven did Ana use?", "evidence": ["D1:3", "D1:2"], "category": 1},
        ],
    }


def test_ranked_out_rescores_by_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hashing")
    data = tmp_path / "data"
    data.mkdir()
    (data / "conv-a.json").write_text(json.dumps(conversation("bread", "D1:1")), encoding="utf-8")
    (data / "conv-b.json").write_text(json.dumps(conversation("a cake", "D2:2")), encoding="utf-8")
    ranked, report = tmp_path / "ranked.jsonl", tmp_path / "report.json"
    locomo = load()
    argv = ["--data", str(data), "--store", str(tmp_path / "store"), "--categories", "1,2,4"]
    assert locomo.main([*argv, "--ranked-out", str(ranked), "--json-out", str(report)]) == 0
    capsys.readouterr()

    lines = [json.loads(line) for line in ranked.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 2 * 2 * 3  # corpora x files x questions
    first = lines[0]
    assert set(first) == {
        "question", "asked", "conversation", "qa_index", "category", "corpus", "dia_ids", "session_ids",
    }  # fmt: skip
    assert first["conversation"] == "conv-a.json" and first["qa_index"] == 0
    assert all(set(line["session_ids"]) <= {1, 2} for line in lines)
    assert [line["qa_index"] for line in lines if line["question"] == QUESTION] == [1] * 4

    metrics = json.loads(report.read_text(encoding="utf-8"))
    rescored = locomo.rescore(lines, data)
    for corpus, groups in rescored.items():
        charmem = metrics[corpus]["charmem"]
        for group, values in groups.items():
            expected = charmem if group == "all" else charmem["by_category"][group]
            for key, value in values.items():
                if key.startswith(("turn_recall", "session_any")) or key == "questions":
                    assert value == pytest.approx(expected[key]), (corpus, group, key)


@pytest.mark.parametrize(
    ("days", "phrase"),
    [(0, "today"), (1, "yesterday"), (3, "three days ago"), (7, "a week ago"), (15, "two weeks ago"),
     (70, "two months ago"), (400, "a year ago"), (1000, "three years ago")],
)  # fmt: skip
def test_a_relative_phrase_names_the_day_it_was_made_from(days: int, phrase: str) -> None:
    locomo = load()
    asked = datetime(2023, 10, 20, 9, tzinfo=UTC)
    when = asked - timedelta(days=days, hours=5)
    assert locomo.relative_phrase(when, asked) == phrase
    ((start, end),) = time_cues(phrase, reference=asked)
    assert start <= when < end


def test_question_forms_keep_single_session_questions() -> None:
    locomo = load()
    talk = locomo.Conversation("conv-a", conversation("bread", "D1:1"))
    questions = locomo.select_questions(talk, (1, 2, 4), None, [])
    assert locomo.asked_at(talk) == datetime(2023, 5, 25, 10, tzinfo=UTC)
    assert [q.text for q in locomo.phrased(questions, talk, "asked")] == [q.text for q in questions]
    assert [q.text for q in locomo.phrased(questions, talk, "relative")] == [
        "Where did Ben go hiking today?",
        "What did Ana bake two weeks ago?",
        "What oven did Ana use two weeks ago?",
    ]
    assert locomo.phrased(questions, talk, "absolute")[1].text == "What did Ana bake on 8 May 2023?"
    assert [q.qa_index for q in locomo.phrased(questions, talk, "plain")] == [0, 1, 2]
