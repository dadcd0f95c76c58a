"""LoCoMo recall benchmark: charmem ``retrieve`` against plain dense search and plain BM25.

Each LoCoMo conversation is ingested through the public API (``charmem_cli.locomo`` drafts, one
``prepare`` + ``commit`` per session) into its own collection of one embedded store (persistent
Oxigraph, Qdrant Edge, SQLite stats; local MiniLM embeddings). Then every question of the chosen
categories is asked three ways, over the same stored memories:

* ``charmem``: ``memory.retrieve(RetrievalContext(query=question))`` with library defaults (dense
  vector plus the BM25 lexical cue fused by RRF, graph authority, one-hop expansion, 32 items).
* ``vector``: plain dense search. The texts of the indexed memories, read back from the graph,
  are embedded once per collection by the same model; a question ranks them by cosine
  similarity (numpy, stable sort, ties in id order).
* ``lexical``: plain BM25. The same texts go into a scratch Qdrant Edge shard holding only a
  sparse vector (``qdrant_edge.Bm25().embed_document``, ``Modifier.Idf``, the same BM25 model and
  defaults as charmem's lexical cue), queried with ``Bm25().embed_query``; ties in id order.

Both baselines return at most as many memories as charmem's pack may hold (``max_items``, 32).

Each collection's clock is the time of its conversation's last session (:func:`asked_at`): the
questions are asked after the conversation, so a relative time in one is read from then.
``--question-form`` other than ``asked`` keeps the questions whose evidence lies in one session
and asks them as they are (``plain``), with a relative time naming that session's day from the
clock (``relative``: "... two weeks ago?") or with its date (``absolute``: "... on 8 May 2023?");
``--no-time-cues`` retrieves with ``time_cues=False``. ``relative`` against ``relative
--no-time-cues`` measures what reading the relative time adds, beyond its words.

The data is read from ``--data`` (CC BY-NC: never copy it into the repository). Gold labels
(``evidence``) are used for scoring only; ``conversation_drafts`` never reads them.

Counting rule. A method returns ranked memories. Each is mapped to LoCoMo turns and sessions:

* an observation (one turn) counts as its ``dia_id`` and its session;
* a derived fact (``session_N_observation``, ``turns+facts`` corpus) counts as the turns it cites,
  in citation order, and as session N;
* an episode (a session) counts as no turn but as its session;
* anything else (the speakers' name beliefs) counts as nothing.

Walking the ranked memories in order and skipping turns (or sessions) already seen gives the
ranked distinct turns and the ranked distinct sessions. A question's evidence is the set of its
``evidence`` labels that name a turn of the conversation (``"D8:6; D9:17"`` is split in two,
``"D:11:26"`` is read as ``D11:26``; labels naming no turn, such as ``"D"`` or a turn past the end
of its session, are dropped and listed on stderr). Questions left without evidence are skipped.

Columns (means over the questions of the row unless stated):

* ``questions``: questions scored.
* ``turn_recall@k`` (k = 5, 10, 20): |evidence ∩ first k distinct ranked turns| / |evidence|.
* ``session_any@k`` (k = 5, 10): 1 if any session holding an evidence turn is among the first k
  distinct ranked sessions, else 0.
* ``pack_tokens_p50``: median size of ``pack.render()`` counted by the pack's token counter
  (``TOKEN_COUNTER``: all-MiniLM-L6-v2 word pieces when charmem-local-embed is installed, about
  1.3 per whitespace word on LoCoMo); charmem only, ``-`` (``null`` in JSON) for the baselines.
* ``retrieve_ms_p50``, ``retrieve_ms_p95``: median and 95th percentile (linear interpolation)
  wall time of one query in milliseconds, including embedding the query: the ``retrieve`` call
  for charmem, the search for the baselines.

Rows: per method, one row per category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop,
5 adversarial) and ``all`` (every scored question, so categories weigh by their size).

The ingest summary gives, per corpus and conversation, the objects committed, the texts
embedded, the wall seconds of the commits, the seconds spent in ``embed_documents``, and
objects/s with and without the embedding time.

Run::

    python benchmarks/locomo.py --limit 10 --files conv-26.json      # quick
    python benchmarks/locomo.py --json-out locomo.json                # all files, both corpora
    nox -s bench-locomo -- --corpus turns

``VECTOR_LEXICAL_CUE`` (``true``/``false``) and ``LOCAL_EMBEDDING_MODEL`` are passed on from the
environment when set; otherwise the library defaults apply.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import qdrant_edge as qe

from charmem import (
    CharacterMemory,
    CharmemError,
    MemoryId,
    RememberDrafts,
    RetrievalContext,
    Settings,
)
from charmem.composition import load_adapter
from charmem.ports import EmbeddingProvider
from charmem.testing import stores_of
from charmem.usecases.names import embedding_texts
from charmem.usecases.planning import index_entries
from charmem_cli.app import TimedEmbedder
from charmem_cli.locomo import (
    Conversation,
    SessionDrafts,
    conversation_drafts,
    load_conversation,
    turn_recall,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "datasets" / "locomo"

#: Corpus name -> whether ``session_N_observation`` facts are ingested as derived memories.
CORPORA: Mapping[str, bool] = {"turns": False, "turns+facts": True}
METHODS = ("charmem", "vector", "lexical")
CATEGORY_NAMES: Mapping[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
TURN_KS = (5, 10, 20)
SESSION_KS = (5, 10)
#: Metric keys, in table and JSON order.
METRICS = (
    *(f"turn_recall@{k}" for k in TURN_KS),
    *(f"session_any@{k}" for k in SESSION_KS),
    "pack_tokens_p50",
    "retrieve_ms_p50",
    "retrieve_ms_p95",
    "questions",
)
#: Memories a baseline returns: as many as charmem's pack may hold.
BASELINE_LIMIT = RetrievalContext(query="-").max_items
LEXICAL_VECTOR = "bm25"

_LABEL = re.compile(r"D:?(\d+):(\d+)")


# ----------------------------------------------------------------------------- scoring helpers


def ranked_turns(ids: Iterable[MemoryId], dia_ids: Mapping[MemoryId, Sequence[str]]) -> list[str]:
    """Distinct turns (``dia_id``) of ranked memories, in rank order.

    Args:
        ids: memory ids, best first (for charmem: ``[item.id for item in pack.items]``).
        dia_ids: the turns each observation or fact counts as (``SessionDrafts.dia_ids``);
            ids absent from it (episodes, notions) count as no turn.

    Returns:
        list[str]: each turn once, at the rank of the first memory that counts as it.
    """
    return list(dict.fromkeys(turn for memory_id in ids for turn in dia_ids.get(memory_id, ())))


def ranked_sessions(ids: Iterable[MemoryId], session_of: Mapping[MemoryId, int]) -> list[int]:
    """Distinct session numbers of ranked memories, in rank order (ids without one are skipped)."""
    return list(dict.fromkeys(session_of[memory_id] for memory_id in ids if memory_id in session_of))


def session_any(sessions: Sequence[int], evidence_sessions: Iterable[int], k: int) -> float:
    """1.0 if any evidence session is among the first ``k`` distinct ``sessions``, else 0.0."""
    return 1.0 if set(sessions[:k]) & set(evidence_sessions) else 0.0


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100, linear interpolation), ``None`` for no values."""
    return float(np.percentile(values, q)) if values else None


# ----------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Question:
    """One scored question: its text, category, normalised evidence (gold labels) and its place.

    ``qa_index`` is its position in the file's ``qa`` list: with the file name it finds the
    question again without matching its text (the same text occurs in several files).
    """

    text: str
    category: int
    evidence: tuple[str, ...]
    qa_index: int = -1

    @property
    def sessions(self) -> frozenset[int]:
        """Sessions holding an evidence turn."""
        return frozenset(int(turn[1:].split(":")[0]) for turn in self.evidence)


@dataclass(frozen=True)
class Labels:
    """How memories of one conversation count: turns per memory id, session per memory id."""

    dia_ids: Mapping[MemoryId, tuple[str, ...]]
    session_of: Mapping[MemoryId, int]

    @classmethod
    def of(cls, sessions: Sequence[SessionDrafts]) -> Labels:
        """Labels of a conversation's session drafts (episodes, observations and facts)."""
        dia_ids: dict[MemoryId, tuple[str, ...]] = {}
        session_of: dict[MemoryId, int] = {}
        for session in sessions:
            dia_ids.update(session.dia_ids)
            drafts = session.drafts
            ids = [
                *(d.id for d in drafts.episodes),
                *(d.id for d in drafts.observations),
                *(d.id for d in drafts.derived),
            ]
            session_of.update((MemoryId(i), session.number) for i in ids if i is not None)
        return cls(dia_ids, session_of)


def known_turns(conversation: Conversation) -> set[str]:
    """Every turn (``dia_id``) of the conversation's sessions."""
    return {str(turn["dia_id"]) for _n, _t, turns in conversation.sessions() for turn in turns}


def question_of(
    conversation: Conversation, qa_index: int, known: set[str], notes: list[str] | None = None
) -> Question:
    """The ``qa_index``-th question of the file, its evidence normalised to known turns.

    Args:
        conversation: the loaded conversation (its ``qa`` holds the gold labels).
        qa_index: the question's position in ``qa``.
        known: :func:`known_turns` of the conversation.
        notes: receives one line per evidence label repaired or dropped (``None``: not kept).
    """
    qa = conversation.data["qa"][qa_index]
    evidence: list[str] = []
    for label in qa.get("evidence") or []:
        found = [f"D{s}:{t}" for s, t in _LABEL.findall(str(label))]
        kept = [turn for turn in found if turn in known]
        if kept != [str(label)] and notes is not None:
            notes.append(
                f"{conversation.conversation_id}: evidence {label!r} -> {kept} ({qa['question'][:60]!r})"
            )
        evidence.extend(kept)
    return Question(str(qa["question"]), int(qa["category"]), tuple(dict.fromkeys(evidence)), qa_index)


def select_questions(
    conversation: Conversation, categories: Iterable[int], limit: int | None, notes: list[str]
) -> list[Question]:
    """The questions to score, in file order, with evidence normalised to known turns.

    Args:
        conversation: the loaded conversation (its ``qa`` holds the gold labels).
        categories: categories to keep.
        limit: most questions kept (``None``: all).
        notes: receives one line per evidence label repaired or dropped.

    Returns:
        list[Question]: questions of ``categories`` left with at least one evidence turn.
    """
    wanted = set(categories)
    known = known_turns(conversation)
    selected: list[Question] = []
    for index, qa in enumerate(conversation.data.get("qa", [])):
        if qa.get("category") not in wanted:
            continue
        question = question_of(conversation, index, known, notes)
        if question.evidence:
            selected.append(question)
        if limit is not None and len(selected) >= limit:
            break
    return selected


#: How questions are asked (``--question-form``): as in the file, or, for the questions whose
#: evidence lies in one session, as in the file, with a relative time, or with the date.
QUESTION_FORMS = ("asked", "plain", "relative", "absolute")
_NUMBER_WORDS = (
    *("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"),
    *("eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen"),
    *("nineteen", "twenty"),
)
#: Units of :func:`relative_phrase`: (unit, its length in days, the day count it is used below).
_PHRASE_UNITS = (("day", 1.0, 7), ("week", 7.0, 56), ("month", 365.25 / 12, 365), ("year", 365.25, None))


class AskedAt:
    """The benchmark's clock: every collection lives at the time its questions are asked."""

    def __init__(self, instant: datetime) -> None:
        self.instant = instant

    def now(self) -> datetime:
        return self.instant


def asked_at(conversation: Conversation) -> datetime:
    """When the questions are asked: at the last session (LoCoMo asks after the conversation)."""
    return max(when for _n, when, _turns in conversation.sessions())


def relative_phrase(when: datetime, reference: datetime) -> str:
    """How someone at ``reference`` says when ``when`` was, rounded to the unit that fits.

    ``today``, ``yesterday``, then days (under a week), weeks (under eight), months (under a
    year), years: ``three days ago``, ``a week ago``, ``five months ago``.
    """
    days = (reference.date() - when.date()).days
    if days <= 1:
        return ("today", "yesterday")[max(days, 0)]
    unit, length = next((u, n) for u, n, below in _PHRASE_UNITS if below is None or days < below)
    count = max(1, round(days / length))
    if count == 1:
        return f"a {unit} ago"
    word = _NUMBER_WORDS[count] if count < len(_NUMBER_WORDS) else str(count)
    return f"{word} {unit}s ago"


def phrased(questions: Sequence[Question], conversation: Conversation, form: str) -> list[Question]:
    """The questions asked in ``form`` (:data:`QUESTION_FORMS`).

    ``asked`` keeps them all as they are. The other forms keep the questions whose evidence lies
    in one session: ``plain`` as they are, ``relative`` with :func:`relative_phrase` of the
    session's time from :func:`asked_at` before the final ``?``, ``absolute`` with ``on`` and the
    session's date (``on 8 May 2023``).
    """
    if form == "asked":
        return list(questions)
    times = {number: when for number, when, _turns in conversation.sessions()}
    reference = asked_at(conversation)
    kept: list[Question] = []
    for question in questions:
        if len(question.sessions) != 1:
            continue
        when = times[next(iter(question.sessions))]
        phrase = {
            "plain": "",
            "relative": relative_phrase(when, reference),
            "absolute": f"on {when.day} {when:%B %Y}",
        }[form]
        text = f"{question.text.rstrip().rstrip('?')} {phrase}?" if phrase else question.text
        kept.append(replace(question, text=text))
    return kept


# ----------------------------------------------------------------------------- embedding


DocumentTimer = TimedEmbedder  # ingest embedding time: documents only


# ----------------------------------------------------------------------------- ingest


@dataclass(frozen=True)
class IngestReport:
    """One conversation's ingest: counts and seconds (wall, and inside ``embed_documents``)."""

    conversation: str
    sessions: int
    objects: int
    texts: int
    seconds: float
    embedding_seconds: float

    @property
    def objects_per_second(self) -> float:
        return self.objects / self.seconds if self.seconds else 0.0

    @property
    def objects_per_second_without_embedding(self) -> float:
        rest = self.seconds - self.embedding_seconds
        return self.objects / rest if rest > 0 else 0.0


async def ingest(
    memory: CharacterMemory,
    conversation: Conversation,
    notions: RememberDrafts,
    sessions: Sequence[SessionDrafts],
    timer: DocumentTimer,
) -> tuple[IngestReport, list[MemoryId]]:
    """Commit the notions, then each session's drafts (``prepare`` + ``commit``).

    Returns:
        (report, indexed ids): the ingest report and the ids of every memory given a vector.

    Raises:
        CharmemError: a commit failed or left repair markers.
    """
    seconds, texts = timer.seconds, timer.texts
    objects = 0
    indexed: list[MemoryId] = []
    start = time.perf_counter()
    for drafts in (notions, *(session.drafts for session in sessions)):
        plan = await memory.prepare(drafts)
        outcome = await memory.commit(plan)
        if outcome.repair_markers:
            raise CharmemError(
                f"ingest of {conversation.conversation_id} left repair markers {outcome.repair_markers}"
            )
        objects += len(outcome.object_ids)
        indexed.extend(entry.id for entry in plan.index_entries)
    report = IngestReport(
        conversation=conversation.conversation_id,
        sessions=len(sessions),
        objects=objects,
        texts=timer.texts - texts,
        seconds=time.perf_counter() - start,
        embedding_seconds=timer.seconds - seconds,
    )
    return report, indexed


async def stored_texts(memory: CharacterMemory, ids: Sequence[MemoryId]) -> tuple[list[MemoryId], list[str]]:
    """The indexed memories read back from the graph: ids in id order, and the text of each.

    The text is exactly what charmem's candidate recall embeds and gives the lexical cue
    (:func:`charmem.usecases.names.embedding_texts`: an observation voiced with its speaker's
    name, derived text, episode summary, thread title and summary), so the baselines differ from
    charmem only in how they recall, not in what they read.
    """
    objects = await stores_of(memory).graph.get_objects(sorted(set(ids)))
    entries = [entry for entry in index_entries(objects.values()) if entry.text.strip()]
    entries.sort(key=lambda entry: entry.id)
    texts = await embedding_texts(entries, stores_of(memory).graph)
    return [entry.id for entry in entries], texts


# ----------------------------------------------------------------------------- baselines


class DenseBaseline:
    """Plain dense search: cosine similarity over the texts, embedded once, stable ranking."""

    def __init__(self, provider: EmbeddingProvider, ids: Sequence[MemoryId], matrix: np.ndarray) -> None:
        self.provider = provider
        self.ids = list(ids)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        self.matrix = matrix / np.where(norms == 0, 1.0, norms)

    @classmethod
    async def build(
        cls, provider: EmbeddingProvider, ids: Sequence[MemoryId], texts: Sequence[str]
    ) -> DenseBaseline:
        """Embed ``texts`` (one row per id) with ``provider``."""
        rows = await provider.embed_documents(list(texts)) if texts else []
        return cls(provider, ids, np.asarray(rows, dtype=np.float64).reshape(len(ids), -1))

    async def search(self, query: str, limit: int) -> list[MemoryId]:
        """The ``limit`` closest memories, best first (ties in id order)."""
        if not self.ids:
            return []
        vector = np.asarray(await self.provider.embed_query(query), dtype=np.float64)
        vector /= np.linalg.norm(vector) or 1.0
        order = np.argsort(-(self.matrix @ vector), kind="stable")[:limit]
        return [self.ids[index] for index in order]


class LexicalBaseline:
    """Plain BM25: a scratch Qdrant Edge shard with one sparse vector (``Modifier.Idf``)."""

    def __init__(self, directory: Path, ids: Sequence[MemoryId], texts: Sequence[str]) -> None:
        self.bm25 = qe.Bm25()
        config = qe.EdgeConfig(
            vectors={},
            sparse_vectors={LEXICAL_VECTOR: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        )
        self.shard = qe.EdgeShard.create(str(directory), config)
        points = []
        for memory_id, text in zip(ids, texts, strict=True):
            sparse = self.bm25.embed_document(text)
            if sparse.indices:
                points.append(qe.Point(str(memory_id), {LEXICAL_VECTOR: sparse}, {}))
        if points:
            self.shard.update(qe.UpdateOperation.upsert_points(points))
        self.size = len(points)

    def search(self, query: str, limit: int) -> list[MemoryId]:
        """The ``limit`` best BM25 matches, best first (ties in id order); none without terms.

        Every matching point is fetched, so ties at the cut are ordered by id, not by Qdrant.
        """
        sparse = self.bm25.embed_query(query)
        if not sparse.indices or not self.size:
            return []
        request = qe.QueryRequest(
            limit=self.size,
            query=qe.Query.Nearest(sparse, using=LEXICAL_VECTOR),
            with_payload=False,
        )
        hits = sorted(self.shard.query(request), key=lambda p: (-p.score, str(p.id)))
        return [MemoryId(str(point.id)) for point in hits[:limit]]

    def close(self) -> None:
        """Release the shard."""
        self.shard.close()


# ----------------------------------------------------------------------------- evaluation


@dataclass
class Score:
    """One question answered by one method."""

    category: int
    turn_recall: dict[int, float]
    session_any: dict[int, float]
    milliseconds: float
    pack_tokens: int | None = None


@dataclass
class Results:
    """Scores per corpus and method, ingest reports per corpus, and the label notes."""

    scores: dict[str, dict[str, list[Score]]] = field(default_factory=dict)
    ingests: dict[str, list[IngestReport]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def score(method_ids: Sequence[MemoryId], labels: Labels, question: Question, milliseconds: float) -> Score:
    """Score one ranked list of memories against a question's evidence (the counting rule)."""
    turns = ranked_turns(method_ids, labels.dia_ids)
    sessions = ranked_sessions(method_ids, labels.session_of)
    return Score(
        category=question.category,
        turn_recall={k: turn_recall(turns, question.evidence, k) for k in TURN_KS},
        session_any={k: session_any(sessions, question.sessions, k) for k in SESSION_KS},
        milliseconds=milliseconds,
    )


def summarise(scores: Sequence[Score]) -> dict[str, float | int | None]:
    """The metrics of some scores (keys: :data:`METRICS`)."""
    metrics: dict[str, float | int | None] = {}
    for k in TURN_KS:
        metrics[f"turn_recall@{k}"] = float(np.mean([s.turn_recall[k] for s in scores])) if scores else None
    for k in SESSION_KS:
        metrics[f"session_any@{k}"] = float(np.mean([s.session_any[k] for s in scores])) if scores else None
    tokens = [float(s.pack_tokens) for s in scores if s.pack_tokens is not None]
    metrics["pack_tokens_p50"] = percentile(tokens, 50)
    times = [s.milliseconds for s in scores]
    metrics["retrieve_ms_p50"] = percentile(times, 50)
    metrics["retrieve_ms_p95"] = percentile(times, 95)
    metrics["questions"] = len(scores)
    return metrics


def by_category(scores: Sequence[Score]) -> dict[int, list[Score]]:
    """Scores grouped by category, categories ascending."""
    groups: dict[int, list[Score]] = {}
    for s in sorted(scores, key=lambda s: s.category):
        groups.setdefault(s.category, []).append(s)
    return groups


def settings_for(store: Path) -> Settings:
    """Embedded stores under ``store``, local embeddings; lexical cue, model, provider from the env."""
    mapping = {
        "VECTOR_STORE_MODE": "embedded",
        "VECTOR_STORE_PATH": str(store / "vectors"),
        "GRAPH_STORE_MODE": "persistent",
        "OXIGRAPH_PATH": str(store / "oxigraph"),
        "RETRIEVAL_STATS_STORE_MODE": "sqlite",
        "RETRIEVAL_STATS_PATH": str(store / "retrieval-stats.sqlite3"),
        "EMBEDDING_PROVIDER": "local",
    }
    for key in ("VECTOR_LEXICAL_CUE", "LOCAL_EMBEDDING_MODEL", "EMBEDDING_PROVIDER"):
        if os.environ.get(key):
            mapping[key] = os.environ[key]
    return Settings.from_mapping(mapping)


def collection_name(corpus: str, conversation_id: str) -> str:
    """``turns-conv-26``, ``turns-facts-conv-26``: a valid collection name per pair."""
    raw = f"{corpus}-{conversation_id}".lower()
    return re.sub(r"[^a-z0-9_-]+", "-", raw).strip("-_")[:128]


def log(message: str) -> None:
    """Progress on stderr (the tables go to stdout)."""
    print(message, file=sys.stderr, flush=True)


async def ask(
    memory: CharacterMemory,
    dense: DenseBaseline,
    lexical: LexicalBaseline,
    labels: Labels,
    question: Question,
    *,
    time_cues: bool = True,
) -> tuple[dict[str, Score], list[MemoryId]]:
    """Ask one question of the three methods (charmem with or without time cues).

    Returns:
        (scores, ranked ids): each method's score, and the memories charmem ranked.
    """
    start = time.perf_counter()
    pack = await memory.retrieve(RetrievalContext(query=question.text, time_cues=time_cues))
    elapsed = (time.perf_counter() - start) * 1000
    ranked = [item.id for item in pack.items]
    charmem = score(ranked, labels, question, elapsed)
    rendered = pack.render()
    counter = pack.token_counter
    charmem.pack_tokens = counter.count(rendered) if counter else len(rendered.split())

    start = time.perf_counter()
    dense_ranked = await dense.search(question.text, BASELINE_LIMIT)
    vector = score(dense_ranked, labels, question, (time.perf_counter() - start) * 1000)

    start = time.perf_counter()
    lexical_ranked = lexical.search(question.text, BASELINE_LIMIT)
    bm25 = score(lexical_ranked, labels, question, (time.perf_counter() - start) * 1000)
    return {"charmem": charmem, "vector": vector, "lexical": bm25}, ranked


def ranked_line(
    question: Question,
    original: str,
    corpus: str,
    file_name: str,
    ranked: Sequence[MemoryId],
    labels: Labels,
) -> dict[str, Any]:
    """One ``--ranked-out`` line: enough to re-score the question without matching its text.

    Keys: ``question`` (as in the file), ``asked`` (the text retrieval was given),
    ``conversation`` (the file name), ``qa_index`` (its position in the file's ``qa``),
    ``category``, ``corpus``, ``dia_ids`` and ``session_ids`` (charmem's distinct turns and
    sessions, best first: :func:`ranked_turns`, :func:`ranked_sessions`).
    """
    return {
        "question": original,
        "asked": question.text,
        "conversation": file_name,
        "qa_index": question.qa_index,
        "category": question.category,
        "corpus": corpus,
        "dia_ids": ranked_turns(ranked, labels.dia_ids),
        "session_ids": ranked_sessions(ranked, labels.session_of),
    }


async def evaluate(
    args: argparse.Namespace, files: Sequence[Path], store: Path, ranked_out: TextIO | None
) -> Results:
    """Ingest every (corpus, conversation) and score every selected question three ways.

    Each collection's clock is :func:`asked_at` its conversation, so relative times in a question
    ("two weeks ago") are read from when the questions are asked, not from today.
    """
    settings = settings_for(store)
    settings.require_embedding_keys()
    provider: EmbeddingProvider = load_adapter("embedder", settings.embedding_provider).from_settings(
        settings
    )
    await provider.embed_documents(["warm-up: load the model before anything is timed"])
    timer = DocumentTimer(provider)
    results = Results()
    conversations = {path.name: load_conversation(path) for path in files}
    questions = {
        name: phrased(select_questions(c, args.categories, args.limit, results.notes), c, args.question_form)
        for name, c in conversations.items()
    }
    for corpus in args.corpora:
        scores: dict[str, list[Score]] = {method: [] for method in METHODS}
        results.scores[corpus] = scores
        results.ingests[corpus] = []
        for file_name, conversation in conversations.items():
            notions, sessions = conversation_drafts(conversation, include_facts=CORPORA[corpus])
            labels = Labels.of(sessions)
            asked = questions[file_name]
            name = collection_name(corpus, conversation.conversation_id)
            clock = AskedAt(asked_at(conversation))
            async with CharacterMemory.open(settings, name, embedding_provider=timer, clock=clock) as memory:
                report, indexed = await ingest(memory, conversation, notions, sessions, timer)
                results.ingests[corpus].append(report)
                ids, texts = await stored_texts(memory, indexed)
                dense = await DenseBaseline.build(provider, ids, texts)
                with tempfile.TemporaryDirectory(prefix="charmem-bm25-") as scratch:
                    lexical = LexicalBaseline(Path(scratch) / "shard", ids, texts)
                    try:
                        for question in asked:
                            by_method, ranked = await ask(
                                memory, dense, lexical, labels, question, time_cues=args.time_cues
                            )
                            for method, result in by_method.items():
                                scores[method].append(result)
                            if ranked_out is not None:
                                original = conversation.data["qa"][question.qa_index]["question"]
                                line = ranked_line(question, original, corpus, file_name, ranked, labels)
                                ranked_out.write(json.dumps(line, ensure_ascii=False) + "\n")
                    finally:
                        lexical.close()
            log(
                f"[{corpus}] {conversation.conversation_id}: {report.objects} objects in "
                f"{report.seconds:.1f} s ({report.embedding_seconds:.1f} s embedding), "
                f"{len(texts)} texts, {len(asked)} questions"
            )
    return results


def rescore(
    lines: Iterable[Mapping[str, Any]], data: Path
) -> dict[str, dict[str, dict[str, float | int | None]]]:
    """Re-score ``--ranked-out`` lines against the gold labels, finding each question by place.

    Each line's question is the ``qa_index``-th of ``data / conversation``, its evidence
    normalised as the run normalised it; nothing is matched by text.

    Returns:
        ``{corpus: {"all" | category: {metric: value}}}``, the turn and session metrics of
        :func:`summarise` (timing and token columns ``None``).
    """
    conversations: dict[str, tuple[Conversation, set[str]]] = {}
    scores: dict[str, list[Score]] = {}
    for line in lines:
        name = str(line["conversation"])
        if name not in conversations:
            conversation = load_conversation(data / name)
            conversations[name] = (conversation, known_turns(conversation))
        conversation, known = conversations[name]
        question = question_of(conversation, int(line["qa_index"]), known)
        turns, sessions = list(line["dia_ids"]), list(line["session_ids"])
        scores.setdefault(str(line["corpus"]), []).append(
            Score(
                category=question.category,
                turn_recall={k: turn_recall(turns, question.evidence, k) for k in TURN_KS},
                session_any={k: session_any(sessions, question.sessions, k) for k in SESSION_KS},
                milliseconds=0.0,
            )
        )
    return {
        corpus: {
            "all": summarise(group),
            **{str(category): summarise(part) for category, part in by_category(group).items()},
        }
        for corpus, group in scores.items()
    }


# ----------------------------------------------------------------------------- output


def _cell(key: str, value: float | int | None) -> str:
    if value is None:
        return "-"
    if key == "questions":
        return str(value)
    if key.startswith(("turn_recall", "session_any")):
        return f"{value:.3f}"
    if key == "pack_tokens_p50":
        return f"{value:.0f}"
    return f"{value:.1f}"


def _aligned(header: Sequence[str], rows: Sequence[Sequence[str]], left: int) -> list[str]:
    """Columns padded to width; the first ``left`` columns left-aligned, the rest right."""
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        cells = [
            c.ljust(w) if i < left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    return [line(header), "  ".join("-" * w for w in widths), *(line(row) for row in rows)]


def metrics_table(scores: Mapping[str, Sequence[Score]]) -> list[str]:
    """Rows method x (categories + all), columns the metrics."""
    rows: list[list[str]] = []
    for method in METHODS:
        groups = by_category(scores[method])
        labelled = [(f"{c} {CATEGORY_NAMES.get(c, '?')}", g) for c, g in groups.items()]
        for label, group in [*labelled, ("all", list(scores[method]))]:
            metrics = summarise(group)
            rows.append([method, label, *(_cell(key, metrics[key]) for key in METRICS)])
    return _aligned(["method", "category", *METRICS], rows, left=2)


def ingest_table(reports: Sequence[IngestReport]) -> list[str]:
    """One row per conversation and a total row."""
    total = IngestReport(
        conversation="total",
        sessions=sum(r.sessions for r in reports),
        objects=sum(r.objects for r in reports),
        texts=sum(r.texts for r in reports),
        seconds=sum(r.seconds for r in reports),
        embedding_seconds=sum(r.embedding_seconds for r in reports),
    )
    rows = [
        [
            r.conversation,
            str(r.sessions),
            str(r.objects),
            str(r.texts),
            f"{r.seconds:.1f}",
            f"{r.embedding_seconds:.1f}",
            f"{r.objects_per_second:.1f}",
            f"{r.objects_per_second_without_embedding:.1f}",
        ]
        for r in (*reports, total)
    ]
    header = ["conversation", "sessions", "objects", "texts", "seconds", "embed_s", "obj/s", "obj/s_no_embed"]
    return _aligned(header, rows, left=1)


def json_report(results: Results) -> dict[str, Any]:
    """``{corpus: {method: {metric: value, ..., "by_category": {category: {...}}}}}``."""
    out: dict[str, Any] = {}
    for corpus, scores in results.scores.items():
        out[corpus] = {}
        for method in METHODS:
            metrics: dict[str, Any] = summarise(scores[method])
            metrics["by_category"] = {str(c): summarise(g) for c, g in by_category(scores[method]).items()}
            out[corpus][method] = metrics
    return out


# ----------------------------------------------------------------------------- command line


def _categories(text: str) -> tuple[int, ...]:
    try:
        values = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"categories are comma-separated integers, not {text!r}") from exc
    if not values:
        raise argparse.ArgumentTypeError("at least one category")
    return values


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help=f"LoCoMo folder (default {DEFAULT_DATA})"
    )
    parser.add_argument(
        "--files", nargs="+", help="conversation files in --data (default: every conv-*.json)"
    )
    parser.add_argument("--corpus", choices=("turns", "turns+facts", "both"), default="both")
    parser.add_argument(
        "--store",
        type=Path,
        help="store directory (default: a temporary one, removed at the end unless --keep)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary store and print its path")
    parser.add_argument("--json-out", type=Path, help="write the metrics as JSON here")
    parser.add_argument(
        "--ranked-out", type=Path, help="write charmem's ranked turns and sessions here (JSON lines)"
    )
    parser.add_argument(
        "--question-form",
        choices=QUESTION_FORMS,
        default="asked",
        help="asked (default); plain, relative, absolute: single-session questions, as asked, "
        "with a relative time (two weeks ago), with the date",
    )
    parser.add_argument(
        "--no-time-cues", dest="time_cues", action="store_false", help="retrieve with time_cues=False"
    )
    parser.add_argument("--categories", type=_categories, default=(1, 2, 3, 4), help="default 1,2,3,4")
    parser.add_argument("--limit", type=int, help="most questions per file (default: all)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; returns the exit code."""
    args = _parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    args.corpora = list(CORPORA) if args.corpus == "both" else [args.corpus]
    names = args.files or sorted(p.name for p in args.data.glob("conv-*.json"))
    files = [Path(name) if Path(name).is_file() else args.data / name for name in names]
    missing = [str(path) for path in files if not path.is_file()]
    if not files or missing:
        print(f"locomo: no conversation files ({', '.join(missing) or args.data})", file=sys.stderr)
        return 2
    temporary = args.store is None
    store = Path(tempfile.mkdtemp(prefix="charmem-locomo-")) if temporary else args.store
    started = time.perf_counter()
    ranked_out = args.ranked_out.open("w", encoding="utf-8") if args.ranked_out else None
    try:
        results = asyncio.run(evaluate(args, files, store, ranked_out))
    finally:
        if ranked_out is not None:
            ranked_out.close()
        if temporary and not args.keep:
            shutil.rmtree(store, ignore_errors=True)
    runtime = time.perf_counter() - started

    cats = ",".join(map(str, args.categories))
    print(f"LoCoMo recall: {len(files)} conversation(s), categories {cats}, store {store}")
    for corpus in args.corpora:
        print(f"\n== corpus: {corpus} ==\n")
        print("\n".join(metrics_table(results.scores[corpus])))
        print(f"\ningest ({corpus}):")
        print("\n".join(ingest_table(results.ingests[corpus])))
    if results.notes:
        log("\nevidence labels repaired or dropped:\n  " + "\n  ".join(results.notes))
    print(f"\nruntime: {runtime:.1f} s")
    if args.json_out:
        args.json_out.write_text(json.dumps(json_report(results), indent=2) + "\n", encoding="utf-8")
    if temporary and args.keep:
        print(f"store kept at {store}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
