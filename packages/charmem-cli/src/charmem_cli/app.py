"""charmem: remember conversations and recall them as continuity context packs.

Subcommands: ``ingest-locomo FILE...``, ``recall "question"``, ``remember "text"``, ``demo``,
``rebuild-vectors``, ``optimize``, ``check``, ``export DIR``, ``import DIR``, ``purge ID...``.
Backends and paths come from the environment with the DESIGN defaults (embedded Oxigraph, Qdrant
Edge, SQLite stats); the CLI's embedding default is ``local`` (all-MiniLM-L6-v2, offline).
``--store DIR`` puts every store under one directory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

from tqdm import tqdm

from charmem import (
    BackupFormatError,
    CharacterMemory,
    CharmemError,
    ConfigurationError,
    ContinuityContextPack,
    RememberInput,
    RetrievalContext,
    Settings,
)
from charmem.admin import (
    CheckReport,
    PurgeReport,
    check,
    check_settings,
    export_collection,
    import_collection,
    purge,
    read_manifest,
    repair,
)
from charmem.ports import EmbeddingProvider
from charmem.usecases.maintenance import drop_vector_index
from charmem_cli.locomo import conversation_drafts, load_conversation

__all__ = ["cli_settings", "main", "print_pack"]

DEFAULT_COLLECTION = "charmem"
DEMO_QUESTIONS = (
    "What instrument is Ines learning?",
    "Where did Tomas travel for work?",
    "What does Ines want to name the dog?",
)


def cli_settings(environ: Mapping[str, str], store: str | None) -> Settings:
    """Settings for the CLI: the environment, with ``EMBEDDING_PROVIDER`` defaulting to ``local``.

    Args:
        environ: usually ``os.environ``.
        store: a directory holding every embedded store (``--store``), or ``None``.

    Raises:
        ConfigurationError: a setting is missing or malformed.
    """
    mapping = dict(environ)
    mapping.setdefault("EMBEDDING_PROVIDER", "local")
    settings = Settings.from_mapping(mapping)
    return settings.with_store_root(Path(store)) if store else settings


class TimedEmbedder:
    """Wraps a provider and adds up the seconds and texts of ``embed_documents``.

    Ingest can then be reported with and without embedding. Queries are not counted.
    """

    def __init__(self, inner: EmbeddingProvider) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.texts = 0

    @property
    def model_id(self) -> str:
        """The wrapped provider's model id."""
        return self.inner.model_id

    @property
    def vector_size(self) -> int:
        """The wrapped provider's size."""
        return self.inner.vector_size

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed and time."""
        start = time.perf_counter()
        try:
            return await self.inner.embed_documents(texts)
        finally:
            self.seconds += time.perf_counter() - start
            self.texts += len(texts)

    async def embed_query(self, text: str) -> list[float]:
        """Embed a query (not timed)."""
        return await self.inner.embed_query(text)


def _provider(settings: Settings) -> EmbeddingProvider:
    from charmem.composition import load_adapter

    settings.require_embedding_keys()
    provider: EmbeddingProvider = load_adapter("embedder", settings.embedding_provider).from_settings(
        settings
    )
    return provider


def require_graph_store(settings: Settings, collection: str) -> None:
    """Refuse a command that reads a collection when its graph store does not exist.

    Opening a memory creates its stores, so ``recall``, ``export``, ``purge`` and
    ``rebuild-vectors`` on a mistyped ``--store`` would otherwise leave new, empty stores behind
    and answer as if the collection were empty. Stores whose adapter factory cannot tell
    (``exists`` answers ``None``: servers, in-memory stores) are not checked.

    Args:
        settings: the deployment settings.
        collection: the collection name.

    Raises:
        ConfigurationError: the persistent graph store is missing (``key="OXIGRAPH_PATH"``), or
            the collection name is not allowed.
    """
    from charmem.composition import load_factory

    if load_factory("graph", settings.graph_store_mode).exists(settings, collection) is False:
        raise ConfigurationError(
            f"there is no graph store for GRAPH_STORE_MODE={settings.graph_store_mode!r} at "
            f"{settings.oxigraph_path}; nothing was created (point OXIGRAPH_PATH or --store at an "
            "existing store)",
            key="OXIGRAPH_PATH",
        )


async def require_collection(settings: Settings, collection: str) -> None:
    """Refuse a command on a collection these stores do not hold (a mistyped name or path).

    The graph store must exist; a collection without a vector shard is refused only when its
    graph is empty too: a lost shard beside a graph that holds memories is rebuilt by the open
    (``VECTOR_REBUILD_ON_OPEN``), as the library does.

    Raises:
        ConfigurationError: no graph store there, or no shard and nothing in the collection's
            graph; nothing was created.
    """
    require_graph_store(settings, collection)
    await _require_graph_collection(settings, collection)


async def _require_graph_collection(settings: Settings, collection: str) -> None:
    """Refuse to rebuild the vectors of a collection that has no shard and nothing in the graph.

    ``rebuild-vectors`` re-creates a lost shard, so it cannot rely on the shard check of
    :func:`require_graph_store`; a collection whose graph is empty too is a mistyped name, and
    rebuilding it would create an empty shard that later commands take for a real collection.

    Raises:
        ConfigurationError: no shard and no statement in the collection's graph
            (``key="collection"``).
    """
    from charmem.composition import load_factory

    if load_factory("vectors", settings.vector_store_mode).exists(settings, collection) is not False:
        return
    graph = await load_factory("graph", settings.graph_store_mode).open(settings, collection)
    try:
        statements = await graph.statement_count()
    finally:
        await graph.close()
    if not statements:
        raise ConfigurationError(
            f"collection {collection!r} holds nothing in these stores (an empty graph and no "
            f"vector index at {settings.vector_store_path}); nothing was created (check "
            "--collection or CHARMEM_COLLECTION, and --store)",
            key="collection",
        )


def parse_occurred_at(value: str) -> datetime:
    """``remember --occurred-at``: an ISO 8601 instant with a UTC offset.

    Raises:
        ConfigurationError: not ISO 8601, or no offset (``key="--occurred-at"``).
    """
    example = "e.g. 2024-06-01T18:30:00+00:00 or 2024-06-01T18:30:00Z"
    try:
        when = datetime.fromisoformat(value)
    except ValueError as exc:
        raise ConfigurationError(
            f"--occurred-at {value!r} is not an ISO 8601 time ({example})", key="--occurred-at"
        ) from exc
    if when.tzinfo is None or when.utcoffset() is None:
        raise ConfigurationError(
            f"--occurred-at {value!r} has no UTC offset; add one ({example})", key="--occurred-at"
        )
    return when


def _collection_for(conversation_id: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "-_" else "-" for c in conversation_id.lower())
    return cleaned.strip("-_")[:128] or DEFAULT_COLLECTION


async def ingest_locomo(
    files: Sequence[Path],
    settings: Settings,
    *,
    collection: str,
    per_file: bool,
    include_facts: bool,
    progress: bool = True,
) -> dict[str, Any]:
    """Ingest LoCoMo conversation files through ``RememberDrafts`` (one commit per session).

    Returns:
        dict: counts and timings (``objects``, ``seconds``, ``embedding_seconds``, ``texts``).
    """
    embedder = TimedEmbedder(_provider(settings))
    conversations = [load_conversation(path) for path in files]
    plans = [(c, *conversation_drafts(c, include_facts=include_facts)) for c in conversations]
    total = sum(1 + len(sessions) for _c, _n, sessions in plans)
    objects = 0
    start = time.perf_counter()
    bar = tqdm(total=total, desc="ingest", unit="batch", disable=not progress, file=sys.stderr)
    memory: CharacterMemory | None = None
    try:
        for conversation, notions, sessions in plans:
            name = _collection_for(conversation.conversation_id) if per_file else collection
            if memory is None or memory.collection != name:
                if memory is not None:
                    await memory.close()
                memory = await CharacterMemory.open(settings, name, embedding_provider=embedder)
            for drafts in (notions, *(s.drafts for s in sessions)):
                outcome = await memory.commit(await memory.prepare(drafts))
                if outcome.repair_markers:
                    raise CharmemError(
                        f"ingest of {conversation.conversation_id} left repair markers "
                        f"{outcome.repair_markers}; run the same command again to repair"
                    )
                objects += len(outcome.object_ids)
                bar.update(1)
    finally:
        bar.close()
        if memory is not None:
            await memory.close()
    seconds = time.perf_counter() - start
    return {
        "conversations": len(conversations),
        "objects": objects,
        "seconds": seconds,
        "embedding_seconds": embedder.seconds,
        "texts": embedder.texts,
    }


def print_pack(pack: ContinuityContextPack, out: Any = None) -> None:
    """Print a pack readably: rank, id, type, time, score, text; then entities and omissions."""
    out = out or sys.stdout
    print(f"Recall for: {pack.query}", file=out)
    if not pack.items:
        print("  (nothing recalled)", file=out)
    for rank, item in enumerate(pack.items, 1):
        kind = item.derived_type.value if item.derived_type else item.object_type.value
        status = "" if item.status.value == "current" else f" [{item.status.value}]"
        text = " ".join(item.text.split())
        if len(text) > 160:
            text = text[:157] + "..."
        print(
            f"{rank:>3}. {item.score:6.3f}  {kind:<12} {item.occurred_at:%Y-%m-%d}  "
            f"{str(item.id)[:8]}{status}  {text}",
            file=out,
        )
    named = sorted(
        (e for e in pack.entities if e.names), key=lambda e: (e.names, e.id)
    )  # as render lists them
    names = [", ".join(e.names) for e in named]
    if names:
        print(f"  entities: {'; '.join(names)}", file=out)
    if pack.omissions:
        reasons = ", ".join(f"{str(o.id)[:8]}:{o.reason}" for o in pack.omissions[:8])
        print(f"  omitted: {reasons}", file=out)


async def _recall(settings: Settings, collection: str, query: str, limit: int, as_json: bool) -> None:
    await require_collection(settings, collection)
    async with CharacterMemory.open(settings, collection, embedding_provider=_provider(settings)) as memory:
        pack = await memory.retrieve(RetrievalContext(query=query, max_items=limit))
    if as_json:
        print(json.dumps(pack.to_dict(), ensure_ascii=False, indent=2))
    else:
        print_pack(pack)


async def _remember(settings: Settings, collection: str, text: str, occurred_at: str | None) -> None:
    when = parse_occurred_at(occurred_at) if occurred_at else None
    async with CharacterMemory.open(settings, collection, embedding_provider=_provider(settings)) as memory:
        outcome = await memory.remember(RememberInput(text, occurred_at=when))
    print(
        json.dumps(
            {
                "object_ids": [str(i) for i in outcome.object_ids],
                "episode_ids": [str(i) for i in outcome.episode_ids],
                "observation_ids": [str(i) for i in outcome.observation_ids],
                "repair_markers": len(outcome.repair_markers),
            }
        )
    )


async def _demo(settings: Settings, questions: Sequence[str]) -> None:
    sample = resources.files("charmem_cli") / "data" / "sample-conversation.json"
    with resources.as_file(sample) as path:
        report = await ingest_locomo([path], settings, collection="demo", per_file=False, include_facts=True)
    print(
        f"ingested {report['objects']} objects in {report['seconds']:.1f} s "
        f"({report['embedding_seconds']:.1f} s embedding) into collection 'demo'\n"
    )
    async with CharacterMemory.open(settings, "demo", embedding_provider=_provider(settings)) as memory:
        for question in questions:
            pack = await memory.retrieve(RetrievalContext(query=question, max_items=6))
            print_pack(pack)
            counter = pack.token_counter.name if pack.token_counter else "whitespace"
            print(f"\n  rendered for the prompt (at most 120 tokens, counted by {counter}):")
            for line in pack.render(max_tokens=120).splitlines():
                print(f"    {line}")
            print()


def _vector_progress(enabled: bool) -> tuple[Any, Callable[[int, int], None]]:
    """A progress bar on stderr for a vector rebuild and the ``on_progress(done, total)`` feeding it."""
    bar = tqdm(desc="rebuild-vectors", unit="vector", disable=not enabled, file=sys.stderr)

    def on_progress(done: int, total: int) -> None:
        bar.total = total
        bar.n = done
        bar.refresh()

    return bar, on_progress


async def rebuild_vectors(
    settings: Settings, collection: str, *, drop: bool, batch_size: int, progress: bool = True
) -> dict[str, Any]:
    """Re-create a collection's vectors from its graph (``charmem rebuild-vectors``).

    Args:
        settings: the deployment settings (the embedder they select does the embedding).
        collection: the collection name.
        drop: drop the collection's vectors first (needed after changing the embedder, or to
            start from an empty index); otherwise re-upsert in place and remove stale points.
        batch_size: texts per embedding call (count).
        progress: show a progress bar on stderr.

    Returns:
        dict: ``objects``, ``indexed``, ``not_current``, ``removed`` (counts) and ``seconds``.

    Raises:
        ConfigurationError: there is no graph store where the settings point, or the collection
            has neither vectors nor anything in the graph (a mistyped name); nothing is created.
        DimensionMismatchError, EmbedderMismatchError: the vectors were made by another embedder
            and ``drop`` is false.
    """
    await require_collection(settings, collection)
    bar, on_progress = _vector_progress(progress)
    start = time.perf_counter()
    try:
        provider = _provider(settings)
        if drop:
            await drop_vector_index(settings, collection)
        async with CharacterMemory.open(settings, collection, embedding_provider=provider) as memory:
            report = await memory.rebuild_vector_index(batch_size=batch_size, on_progress=on_progress)
    finally:
        bar.close()
    return {
        "objects": report.objects,
        "indexed": report.indexed,
        "not_current": report.not_current,
        "removed": report.removed,
        "seconds": time.perf_counter() - start,
    }


async def check_collection(settings: Settings, collection: str, *, repair_drift: bool) -> dict[str, Any]:
    """Check a collection's stores against its graph (``charmem check``), optionally repairing.

    Never creates a store: a missing graph store is an error, a missing vector shard or stats
    file is reported (see :func:`charmem.admin.check_settings`). With ``repair_drift`` and
    vectors or stats out of step, the collection is opened (creating a lost shard or stats file)
    and both are rebuilt from the graph as needed, then checked again; forgotten episodes whose
    observations are still current (forgotten before forgetting reached an episode's parts) get
    the missing suppressions first. Not while the graph shows another problem (rebuilds read it:
    replay the plan that wrote the partial batch first).

    Args:
        settings: the deployment settings (their embedder opens the vector index).
        collection: the collection name.
        repair_drift: rebuild what drifted.

    Returns:
        dict: ``report`` (the final :class:`~charmem.admin.CheckReport`), ``before`` (the first
        report when a repair ran, else ``None``) and ``repaired`` (what was rebuilt, or ``None``).

    Raises:
        ConfigurationError: no graph store there, or the collection holds nothing.
        StoreLockedError: another process holds an embedded store.
        DimensionMismatchError, EmbedderMismatchError: the vectors were made by another embedder.
        BackendError: a store failed.
    """
    provider = _provider(settings)
    report: CheckReport = await check_settings(settings, collection, embedding_provider=provider)
    if not repair_drift or report.consistent or not report.repairable:
        return {"report": report, "before": None, "repaired": None}
    async with CharacterMemory.open(settings, collection, embedding_provider=provider) as memory:
        outcome = await repair(memory, report)
        after = await check(memory)
    repaired = {
        "vectors_indexed": None if outcome.vectors is None else outcome.vectors.indexed,
        "vectors_removed": None if outcome.vectors is None else outcome.vectors.removed,
        "stats_rows": outcome.stats_rows,
        "suppressed": [str(i) for i in outcome.suppressed_ids],
    }
    return {"report": after, "before": report, "repaired": repaired}


def _print_check(result: dict[str, Any], as_json: bool) -> None:
    report: CheckReport = result["report"]
    before: CheckReport | None = result["before"]
    if as_json:
        data = report.to_dict()
        if before is not None:
            data["repair"] = {**result["repaired"], "before": before.to_dict()}
        print(json.dumps(data, ensure_ascii=False, indent=2))
        return
    if before is not None:
        print("before repair:")
        for line in before.describe():
            print(f"  {line}")
        repaired = result["repaired"]
        done = []
        if repaired["suppressed"]:
            done.append(f"{len(repaired['suppressed'])} suppression(s) old forgets lacked appended")
        if repaired["vectors_indexed"] is not None:
            done.append(
                f"vectors rebuilt ({repaired['vectors_indexed']} indexed, "
                f"{repaired['vectors_removed']} stale removed)"
            )
        if repaired["stats_rows"] is not None:
            done.append(f"stats rebuilt ({repaired['stats_rows']} rows)")
        print(f"repaired: {'; '.join(done)}\nafter repair:")
    for line in report.describe():
        print(line)


async def export_backup(settings: Settings, collection: str, directory: Path) -> dict[str, Any]:
    """Write a backup of ``collection`` into ``directory`` (``charmem export``).

    Returns:
        dict: the manifest (plain JSON types) and ``seconds``.

    Raises:
        ConfigurationError: there is no graph store where the settings point (nothing is created).
        CharmemError: the collection is empty in these stores (a mistyped name or store path?),
            or :func:`charmem.admin.export_collection` failed.
    """
    await require_collection(settings, collection)
    start = time.perf_counter()
    async with CharacterMemory.open(settings, collection, embedding_provider=_provider(settings)) as memory:
        manifest = await export_collection(memory, directory, allow_empty=False)
    return {"manifest": json.loads(manifest.to_json()), "seconds": time.perf_counter() - start}


async def import_backup(
    settings: Settings, collection: str | None, directory: Path, *, batch_size: int, progress: bool = True
) -> dict[str, Any]:
    """Restore the backup in ``directory`` into empty stores (``charmem import``).

    Args:
        settings: the deployment settings (their embedder rebuilds the vectors).
        collection: the collection to restore into; ``None``: the backup's own.
        directory: the backup directory.
        batch_size: texts per embedding call of the vector rebuild.
        progress: show a progress bar on stderr.

    Returns:
        dict: the :class:`~charmem.admin.ImportReport` as a dict, plus ``seconds``.

    Raises:
        BackupFormatError: a damaged or incomplete backup, or ``collection`` is not the backup's.
        CollectionNotEmptyError: the target stores hold data.
    """
    manifest = read_manifest(directory)
    if collection is not None and collection != manifest.collection:
        # refused before the stores are opened (opening would create them)
        raise BackupFormatError(
            f"the backup in {directory} is of collection {manifest.collection!r}, not {collection!r}; "
            f"restore it into {manifest.collection!r} (derived ids depend on the name): drop --collection"
        )
    bar, on_progress = _vector_progress(progress)
    start = time.perf_counter()
    try:
        provider = _provider(settings)
        name = collection or manifest.collection
        async with CharacterMemory.open(settings, name, embedding_provider=provider) as memory:
            report = await import_collection(
                memory, directory, batch_size=batch_size, on_progress=on_progress
            )
    finally:
        bar.close()
    return {**report.to_dict(), "consistent": report.check.consistent, "seconds": time.perf_counter() - start}


async def purge_memories(settings: Settings, collection: str, ids: Sequence[str]) -> PurgeReport:
    """Erase memories for good (``charmem purge``): see :func:`charmem.admin.purge`.

    Raises:
        PurgeTargetError: an id is unknown or not a memory object; nothing was written.
        DraftValidationError: an id is not a UUID.
        ConfigurationError: there is no graph store where the settings point.
    """
    await require_collection(settings, collection)
    async with CharacterMemory.open(settings, collection, embedding_provider=_provider(settings)) as memory:
        return await purge(memory, ids)


def _confirm_purge(collection: str, ids: Sequence[str]) -> bool:
    """Ask on the terminal; ``False`` when stdin is not a terminal or the answer is not the name."""
    if not sys.stdin.isatty():
        print(
            "charmem: purge erases memories for good; pass --yes to confirm when not at a terminal",
            file=sys.stderr,
        )
        return False
    print(
        f"This erases {len(ids)} memory object(s) from collection {collection!r} for good: their text, "
        "links, lifecycle records and vectors (tombstones with the ids stay). Backups made before "
        "keep them. This is not forgetting; it cannot be undone.",
        file=sys.stderr,
    )
    answer = input(f"Type the collection name ({collection}) to confirm: ")
    return answer.strip() == collection


def _print_purge(report: PurgeReport, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report.to_dict(), ensure_ascii=False, indent=2))
        return
    print(
        f"purged {len(report.purged_ids)} memory object(s) from {report.collection!r} at "
        f"{report.purged_at.isoformat()}"
        + (f" ({len(report.already_purged_ids)} were purged already)" if report.already_purged_ids else "")
    )
    print(
        f"  removed {len(report.removed_link_ids)} link(s) and {len(report.removed_record_ids)} "
        f"lifecycle record(s); kept {len(report.kept_link_ids)} supersedes link(s) into survivors"
    )
    if report.linked_ids:
        shown = ", ".join(str(i) for i in report.linked_ids[:10])
        more = f" and {len(report.linked_ids) - 10} more" if len(report.linked_ids) > 10 else ""
        print(
            f"  {len(report.linked_ids)} surviving memory object(s) were linked to them (review them for "
            f"copies of the same personal data): {shown}{more}"
        )
    for line in report.check.describe():
        print(line)


def optimize_vectors(settings: Settings, collection: str) -> dict[str, Any]:
    """Build the HNSW index of a collection's embedded vectors (``charmem optimize``).

    Needs ``VECTOR_HNSW_THRESHOLD`` (see the charmem-qdrant README); the build runs in a child
    process on a copy of the shard, which then replaces it.

    Args:
        settings: the deployment settings (``VECTOR_STORE_MODE`` must be ``embedded``).
        collection: the collection name.

    Returns:
        dict: ``built`` (bool), ``points``, ``indexed`` (counts), ``seconds`` (total) and
        ``build_seconds``.

    Raises:
        ConfigurationError: not the embedded vector store, HNSW off, or no shard.
        StoreLockedError: another process holds the collection's vectors.
        BackendError: the build failed (the shard is unchanged).
    """
    from charmem_qdrant import EdgeVectorIndex

    if settings.vector_store_mode != "embedded":
        raise ConfigurationError(
            f"`charmem optimize` builds the HNSW index of the embedded vector store; "
            f"VECTOR_STORE_MODE={settings.vector_store_mode} "
            + (
                "indexes on the server by itself"
                if settings.vector_store_mode == "service"
                else "always scans exactly"
            ),
            key="VECTOR_STORE_MODE",
        )
    start = time.perf_counter()
    report = EdgeVectorIndex.optimize_from_settings(settings, collection)
    return {
        "built": report.built,
        "points": report.points,
        "indexed": report.indexed,
        "seconds": time.perf_counter() - start,
        "build_seconds": report.build_seconds,
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="charmem", description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", help="directory holding every embedded store (default: ./data)")
    collection_help = "collection name (default: $CHARMEM_COLLECTION or 'charmem')"
    parser.add_argument("--collection", default=None, help=collection_help)
    parser.add_argument(
        "--server",
        default=None,
        help="URL of a running `charmem serve` to send recall, remember and check to "
        "(default: $CHARMEM_SERVER_URL; none: open the stores here)",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    ingest = commands.add_parser("ingest-locomo", help="ingest LoCoMo conversation files")
    ingest.add_argument("files", nargs="+", type=Path)
    ingest.add_argument("--no-facts", action="store_true", help="sessions and turns only")
    ingest.add_argument(
        "--collection-per-file", action="store_true", help="one collection per conversation, named after it"
    )
    ingest.add_argument("--quiet", action="store_true", help="no progress bar")
    recall = commands.add_parser("recall", help="recall memories for a question")
    recall.add_argument("query")
    recall.add_argument("--json", action="store_true", help="print pack.to_dict() as JSON")
    recall.add_argument("--limit", type=int, default=20, help="most items (default 20)")
    remember = commands.add_parser("remember", help="remember a text as an episode")
    remember.add_argument("text")
    remember.add_argument("--occurred-at", help="ISO 8601 time with offset (default: now)")
    demo = commands.add_parser("demo", help="ingest the bundled sample conversation and recall")
    demo.add_argument("questions", nargs="*", help="questions to ask (default: three samples)")
    rebuild = commands.add_parser(
        "rebuild-vectors",
        help="re-create the collection's vectors from its graph (e.g. after changing the embedder)",
    )
    rebuild.add_argument(
        "--drop",
        action="store_true",
        help="drop the vectors first (needed when the embedder model or size changed)",
    )
    rebuild.add_argument("--batch-size", type=int, default=64, help="texts per embedding call (default 64)")
    rebuild.add_argument("--quiet", action="store_true", help="no progress bar")
    check_cmd = commands.add_parser(
        "check",
        help="check that vectors and stats agree with the graph and no graph batch is partial "
        "(exit 1 when inconsistent); never creates a store",
    )
    check_cmd.add_argument("--json", action="store_true", help="print the report as JSON")
    check_cmd.add_argument(
        "--repair",
        action="store_true",
        help="rebuild vectors and stats from the graph when they drifted; complete old episode forgets",
    )
    export = commands.add_parser(
        "export", help="back the collection up into a new or empty directory (graph N-Quads + manifest)"
    )
    export.add_argument("directory", type=Path)
    import_cmd = commands.add_parser(
        "import",
        help="restore a backup into empty stores, rebuilding vectors and stats "
        "(collection: the backup's, unless --collection)",
    )
    import_cmd.add_argument("directory", type=Path)
    import_cmd.add_argument(
        "--batch-size", type=int, default=64, help="texts per embedding call (default 64)"
    )
    import_cmd.add_argument("--json", action="store_true", help="print the import report as JSON")
    import_cmd.add_argument("--quiet", action="store_true", help="no progress bar")
    purge_cmd = commands.add_parser(
        "purge",
        help="erase memory objects for good, for personal-data erasure requests (not forgetting: "
        "destructive, outside the memory-permanence rule; backups keep the data)",
    )
    purge_cmd.add_argument("ids", nargs="+", metavar="ID", help="ids of episodes, observations, notions...")
    purge_cmd.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    purge_cmd.add_argument("--json", action="store_true", help="print the purge report as JSON")
    for sub in (export, import_cmd, purge_cmd):
        # also accepted after the command (`charmem purge ID --collection NAME`)
        sub.add_argument("--collection", default=argparse.SUPPRESS, help=collection_help)

    commands.add_parser(
        "optimize",
        help="build the HNSW index of the collection's embedded vectors (set VECTOR_HNSW_THRESHOLD)",
    )
    _add_plugin_commands(commands)
    return parser


#: Distributions add commands here (charmem-server: ``serve``, ``mcp``): ``register(subparsers)``
#: adds parsers whose ``handler(args, settings)`` default returns the exit code.
CLI_COMMANDS_GROUP = "charmem.cli_commands"


def _add_plugin_commands(commands: Any) -> None:
    from importlib.metadata import entry_points

    for entry in sorted(entry_points(group=CLI_COMMANDS_GROUP), key=lambda e: e.name):
        try:
            entry.load()(commands)
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the built-in commands
            print(f"charmem: the commands of {entry.value} are unavailable: {exc}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code.

    0 on success, 1 when ``check`` (or the check run by ``import`` and ``purge``) finds the
    collection inconsistent, 2 for a charmem error (with its message on stderr) or a purge not
    confirmed, 130 on Ctrl-C.
    """
    args = _parser().parse_args(argv)
    requested = args.collection if args.collection is not None else os.environ.get("CHARMEM_COLLECTION")
    args.collection = DEFAULT_COLLECTION if requested is None else requested
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # keep stderr for our own progress
    try:
        settings = cli_settings(os.environ, args.store)
        handler = getattr(args, "handler", None)
        if handler is not None:
            return int(handler(args, settings))
        server_url = args.server or os.environ.get("CHARMEM_SERVER_URL")
        if server_url:
            from charmem_cli._remote import run_remote

            return run_remote(args, server_url)
        if args.command == "ingest-locomo":
            report = asyncio.run(
                ingest_locomo(
                    args.files,
                    settings,
                    collection=args.collection,
                    per_file=args.collection_per_file,
                    include_facts=not args.no_facts,
                    progress=not args.quiet,
                )
            )
            seconds = report["seconds"]
            without = max(seconds - report["embedding_seconds"], 1e-9)
            print(
                f"ingested {report['conversations']} conversation(s): {report['objects']} objects in "
                f"{seconds:.1f} s ({report['objects'] / seconds:.0f} objects/s; "
                f"{report['objects'] / without:.0f} objects/s without the "
                f"{report['embedding_seconds']:.1f} s of embedding {report['texts']} texts)"
            )
        elif args.command == "recall":
            asyncio.run(_recall(settings, args.collection, args.query, args.limit, args.json))
        elif args.command == "remember":
            asyncio.run(_remember(settings, args.collection, args.text, args.occurred_at))
        elif args.command == "demo":
            asyncio.run(_demo(settings, args.questions or DEMO_QUESTIONS))
        elif args.command == "rebuild-vectors":
            rebuilt = asyncio.run(
                rebuild_vectors(
                    settings,
                    args.collection,
                    drop=args.drop,
                    batch_size=args.batch_size,
                    progress=not args.quiet,
                )
            )
            print(
                f"rebuilt the vectors of {args.collection!r}: {rebuilt['indexed']} indexed from "
                f"{rebuilt['objects']} objects ({rebuilt['not_current']} superseded or suppressed left "
                f"out, {rebuilt['removed']} stale removed) in {rebuilt['seconds']:.1f} s"
            )
        elif args.command == "check":
            result = asyncio.run(check_collection(settings, args.collection, repair_drift=args.repair))
            _print_check(result, args.json)
            return 0 if result["report"].consistent else 1
        elif args.command == "export":
            exported = asyncio.run(export_backup(settings, args.collection, args.directory))
            manifest, counts = exported["manifest"], exported["manifest"]["counts"]
            print(
                f"exported collection {manifest['collection']!r} to {args.directory}: "
                f"{manifest['graph']['statements']} statements ({manifest['graph']['file']}, "
                f"{manifest['graph']['size']} bytes), {sum(counts['objects'].values())} objects, "
                f"{counts['links']} links, {counts['tombstones']} tombstones in {exported['seconds']:.1f} s"
            )
        elif args.command == "import":
            imported = asyncio.run(
                import_backup(
                    settings,
                    requested,
                    args.directory,
                    batch_size=args.batch_size,
                    progress=not args.quiet,
                )
            )
            if args.json:
                print(json.dumps(imported, ensure_ascii=False, indent=2))
            else:
                print(
                    f"restored collection {imported['collection']!r} from {args.directory}: "
                    f"{imported['statements']} statements, {imported['vectors']['indexed']} vectors "
                    f"rebuilt, {imported['stats_rows']} stats rows in {imported['seconds']:.1f} s"
                    + (" (with another embedder than the backup's)" if imported["embedder_changed"] else "")
                )
                print(f"check: {'consistent' if imported['consistent'] else 'INCONSISTENT'}")
            return 0 if imported["consistent"] else 1
        elif args.command == "purge":
            if not args.yes and not _confirm_purge(args.collection, args.ids):
                print("charmem: nothing was purged", file=sys.stderr)
                return 2
            purged = asyncio.run(purge_memories(settings, args.collection, args.ids))
            _print_purge(purged, args.json)
            return 0 if purged.check.consistent else 1

        elif args.command == "optimize":
            built = optimize_vectors(settings, args.collection)
            if built["built"]:
                print(
                    f"built the HNSW index of {args.collection!r}: {built['indexed']} of "
                    f"{built['points']} points in a graph ({built['build_seconds']:.1f} s to build, "
                    f"{built['seconds']:.1f} s in all)"
                )
            else:
                print(
                    f"nothing to build for {args.collection!r}: {built['indexed']} of "
                    f"{built['points']} points already in a graph, the rest below "
                    "VECTOR_HNSW_THRESHOLD"
                )
    except KeyboardInterrupt:
        print(
            "charmem: interrupted; what was committed is kept; run the same command again to resume",
            file=sys.stderr,
        )
        return 130
    except CharmemError as exc:
        print(f"charmem: {type(exc).__name__}: {exc}", file=sys.stderr)  # mismatches name the fix
        return 2
    except (OSError, ValueError) as exc:
        print(f"charmem: {exc}", file=sys.stderr)
        return 2
    return 0
