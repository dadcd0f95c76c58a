"""The main job on a real conversation: ``charmem ingest-locomo`` of LoCoMo conv-26, killed
part-way and run again, then recall over its category-4 (single-hop) questions.

Reads ``../shared/datasets/locomo/conv-26.json`` beside the repository (or ``$CHARMEM_LOCOMO_DIR``);
the test skips only when that folder is absent. Uses the real local MiniLM embeddings.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from charmem import CharacterMemory, MemoryId, ObjectType, RetrievalContext, Settings
from charmem.testing import stores_of
from charmem_cli.locomo import conversation_drafts, load_conversation, turn_recall

pytestmark = [pytest.mark.locomo, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[3]
DATA = Path(os.environ.get("CHARMEM_LOCOMO_DIR", REPO_ROOT.parent / "shared" / "datasets" / "locomo"))
CONV = DATA / "conv-26.json"
COLLECTION = "conv26"


def _ingest(root: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "charmem_cli",
            "--store",
            str(root),
            "--collection",
            COLLECTION,
            "ingest-locomo",
            str(CONV),
            "--quiet",
        ],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stats_rows(root: Path) -> int:
    path = root / "retrieval-stats.sqlite3"
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as db:
            return int(db.execute("SELECT COUNT(*) FROM retrieval_stats").fetchone()[0])
    except sqlite3.Error:
        return 0


@pytest.mark.skipif(not CONV.exists(), reason=f"LoCoMo data folder absent: {DATA}")
async def test_ingest_killed_then_rerun_is_complete_idempotent_and_recalls(
    tmp_path: Path, env_for: Callable[..., dict[str, str]]
) -> None:
    root = tmp_path / "store"
    env = env_for(root, embedder="local")
    conversation = load_conversation(CONV)
    notions, sessions = conversation_drafts(conversation)

    # 1. killed part-way: wait until some sessions are committed, then SIGKILL
    child = _ingest(root, env)
    deadline = time.monotonic() + 300
    while _stats_rows(root) < 150 and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert child.poll() is None, "ingest finished before it could be killed: " + child.stderr.read()
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    partial = _stats_rows(root)
    assert partial > 0

    # 2. run again: completes
    rerun = _ingest(root, env)
    _out, err = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, err

    settings = Settings.from_mapping(env)
    expected_ids = [o.id for s in sessions for o in s.drafts.observations] + [
        d.id for s in sessions for d in s.drafts.derived
    ]
    async with CharacterMemory.open(settings, COLLECTION) as memory:
        stored = await stores_of(memory).graph.get_objects(expected_ids)
        assert set(stored) == set(expected_ids), "a turn or fact is missing after the rerun"
        assert set(expected_ids) <= await stores_of(memory).vectors.point_ids()
        names = await stores_of(memory).graph.get_objects([d.id for d in notions.derived])
        assert len(names) == 2
        counts = (
            await stores_of(memory).graph.statement_count(),
            await stores_of(memory).vectors.count(),
            await stores_of(memory).stats.row_count(),
        )

    # 3. a further run changes no triple, no vector point, no stats row
    third = _ingest(root, env)
    _out, err = third.communicate(timeout=600)
    assert third.returncode == 0, err
    async with CharacterMemory.open(settings, COLLECTION) as memory:
        assert counts == (
            await stores_of(memory).graph.statement_count(),
            await stores_of(memory).vectors.count(),
            await stores_of(memory).stats.row_count(),
        )

        # 4. recall@10 on category-4 questions: charmem retrieve vs plain dense search
        dia_of: dict[MemoryId, tuple[str, ...]] = {}
        for session in sessions:
            dia_of.update(session.dia_ids)
        questions = [q for q in conversation.data["qa"] if q.get("category") == 4 and q.get("evidence")]
        texts = await stores_of(memory).graph.get_objects(sorted(dia_of))
        ids = sorted(texts)
        matrix = np.array(
            await memory.embedder.embed_documents([texts[i].text for i in ids])  # type: ignore[union-attr]
        )
        charmem_recall, dense_recall = [], []
        for question in questions:
            evidence = [e for e in question["evidence"] if isinstance(e, str)]
            pack = await memory.retrieve(RetrievalContext(query=question["question"]))
            ranked = [d for item in pack.items for d in dia_of.get(item.id, ())]
            charmem_recall.append(turn_recall(ranked, evidence, k=10))
            query = np.array(await memory.embedder.embed_query(question["question"]))
            order = np.argsort(-(matrix @ query), kind="stable")
            dense_ranked = [d for index in order for d in dia_of[ids[index]]]
            dense_recall.append(turn_recall(dense_ranked, evidence, k=10))
    ours, dense = float(np.mean(charmem_recall)), float(np.mean(dense_recall))
    print(json.dumps({"questions": len(questions), "charmem_recall@10": ours, "dense_recall@10": dense}))
    assert ours >= 0.63, f"charmem turn recall@10 {ours:.3f} < 0.63 (dense {dense:.3f})"
    assert ours >= dense, f"charmem turn recall@10 {ours:.3f} < plain dense {dense:.3f}"
    assert ObjectType.OBSERVATION in {item.object_type for item in pack.items}
