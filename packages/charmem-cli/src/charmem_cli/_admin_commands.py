"""The operator commands (``rebuild-vectors``, ``optimize``, ``check``, ``export``, ``import``, ...).

Also ``purge`` and ``migrate``.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from charmem import BackupFormatError, CharacterMemory, ConfigurationError, Settings, StoreCorruptedError
from charmem.admin import (
    CheckReport,
    PurgeReport,
    check,
    check_settings,
    export_collection,
    import_collection,
    migrate,
    purge,
    read_manifest,
    repair,
    unreadable_items,
)
from charmem.usecases.lost_graph import graph_location, lost_graph_ways_out
from charmem.usecases.maintenance import drop_vector_index
from charmem_cli._common import (
    announce_model_load,
    embedding_provider,
    require_collection,
    require_graph_store,
)

__all__ = [
    "check_collection",
    "confirm_purge",
    "export_backup",
    "import_backup",
    "migrate_store",
    "optimize_vectors",
    "print_check",
    "print_migration",
    "print_purge",
    "purge_memories",
    "rebuild_vectors",
]


def _vector_progress(enabled: bool) -> tuple[Any, Callable[[int, int], None]]:
    """A progress bar on stderr for a vector rebuild and the ``on_progress(done, total)`` feeding it."""
    bar = tqdm(desc="rebuild-vectors", unit="vector", disable=not enabled, file=sys.stderr)

    def on_progress(done: int, total: int) -> None:
        bar.total = total
        bar.n = done
        bar.refresh()

    return bar, on_progress


async def rebuild_vectors(
    settings: Settings, collection: str, *, drop: bool, batch_size: int | None, progress: bool = True
) -> dict[str, Any]:
    """Re-create a collection's vectors from its graph (``charmem rebuild-vectors``).

    Args:
        settings: the deployment settings (the embedder they select does the embedding).
        collection: the collection name.
        drop: drop the collection's vectors first (needed after changing the embedder, or to
            start from an empty index); otherwise re-upsert in place and remove stale points.
        batch_size: texts per embedding call (count; ``None``: the embedder's preferred size).
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
    provider = embedding_provider(settings)
    start = time.perf_counter()
    await announce_model_load(provider)  # before the progress bar shows
    bar, on_progress = _vector_progress(progress)
    try:
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
        StoreCorruptedError: ``repair_drift`` while the graph holds nothing beside vectors or
            statistics (:func:`refuse_repair_of_lost_graph`); nothing was changed.
        StoreLockedError: another process holds an embedded store.
        DimensionMismatchError, EmbedderMismatchError: the vectors were made by another embedder.
        BackendError: a store failed.
    """
    provider = embedding_provider(settings)
    report: CheckReport = await check_settings(settings, collection, embedding_provider=provider)
    if repair_drift and report.graph_looks_lost:
        refuse_repair_of_lost_graph(settings, report)
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
        "settled": [str(i) for i in outcome.settled_ids],
    }
    return {"report": after, "before": report, "repaired": repaired}


def refuse_repair_of_lost_graph(settings: Settings, report: CheckReport) -> None:
    """Refuse ``check --repair`` on a graph that holds nothing beside vectors or statistics.

    Raises:
        StoreCorruptedError: always; the message names the graph read (the SPARQL shard or
            ``OXIGRAPH_PATH``) and the ways out for that kind of graph.
    """
    raise StoreCorruptedError(
        f"collection {report.collection!r}: {graph_location(settings, report.collection)} holds "
        f"nothing while the vector index holds {report.vector_points or 0} points and the "
        f"statistics {report.stats_rows or 0} rows; repairing would delete them, so nothing was "
        "changed. " + lost_graph_ways_out(report.collection, service=settings.graph_store_mode == "service")
    )


def print_check(result: dict[str, Any], as_json: bool) -> None:
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

    The backup is written even when stored items do not decode (it keeps what can be kept), but
    ``charmem import`` refuses such a backup: ``unreadable`` lists them for a warning.

    Returns:
        dict: the manifest (plain JSON types), ``unreadable`` (``"<id>: <what is wrong>"`` per
        stored item that does not decode; empty: none) and ``seconds``.

    Raises:
        ConfigurationError: there is no graph store where the settings point (nothing is created).
        CharmemError: the collection is empty in these stores (a mistyped name or store path?),
            or :func:`charmem.admin.export_collection` failed.
    """
    await require_collection(settings, collection)
    start = time.perf_counter()
    provider = embedding_provider(settings)
    async with CharacterMemory.open(settings, collection, embedding_provider=provider) as memory:
        manifest = await export_collection(memory, directory, allow_empty=False)
        unreadable = [f"{p.id}: {p.detail}" for p in await unreadable_items(memory)]
    return {
        "manifest": json.loads(manifest.to_json()),
        "unreadable": unreadable,
        "seconds": time.perf_counter() - start,
    }


async def import_backup(
    settings: Settings,
    collection: str | None,
    directory: Path,
    *,
    batch_size: int | None,
    progress: bool = True,
) -> dict[str, Any]:
    """Restore the backup in ``directory`` into empty stores (``charmem import``).

    Args:
        settings: the deployment settings (their embedder rebuilds the vectors).
        collection: the collection to restore into; ``None``: the backup's own.
        directory: the backup directory.
        batch_size: texts per embedding call of the vector rebuild (``None``: the embedder's).
        progress: show a progress bar on stderr.

    Returns:
        dict: the :class:`~charmem.admin.ImportReport` as a dict, plus ``seconds``.

    Raises:
        BackupFormatError: a damaged, incomplete or foreign backup, or ``collection`` is not the
            backup's; nothing was written, and the embedded stores the command created are
            removed again (:func:`_remove_created_stores`).
        CollectionNotEmptyError: the target stores hold data.
    """
    manifest = read_manifest(directory)
    if collection is not None and collection != manifest.collection:
        # refused before the stores are opened (opening would create them)
        raise BackupFormatError(
            f"the backup in {directory} is of collection {manifest.collection!r}, not {collection!r}; "
            f"restore it into {manifest.collection!r} (derived ids depend on the name): drop --collection"
        )
    provider = embedding_provider(settings)
    start = time.perf_counter()
    await announce_model_load(provider)  # before the progress bar shows
    bar, on_progress = _vector_progress(progress)
    absent = [path for path in _embedded_store_paths(settings) if not path.exists()]
    try:
        name = collection or manifest.collection
        async with CharacterMemory.open(settings, name, embedding_provider=provider) as memory:
            report = await import_collection(
                memory, directory, batch_size=batch_size, on_progress=on_progress
            )
    except BackupFormatError:
        _remove_created_stores(absent)
        raise
    finally:
        bar.close()
    return {**report.to_dict(), "consistent": report.check.consistent, "seconds": time.perf_counter() - start}


def _embedded_store_paths(settings: Settings) -> list[Path]:
    """The files and directories the selected embedded stores live in (SQLite's side files too)."""
    paths = []
    if settings.graph_store_mode == "persistent":
        paths.append(Path(settings.oxigraph_path))
    if settings.vector_store_mode == "embedded":
        paths.append(Path(settings.vector_store_path))
    if settings.retrieval_stats_store_mode == "sqlite":
        stats = Path(settings.retrieval_stats_path)
        paths += [stats, *(stats.with_name(stats.name + end) for end in ("-wal", "-shm", "-journal"))]
    return paths


def _remove_created_stores(created: Sequence[Path]) -> None:
    """Remove the stores a refused import created (``created`` did not exist before it opened them).

    A refused import wrote nothing into them; left behind, they would make later commands take a
    mistyped ``--store`` for an empty collection instead of refusing it.
    """
    for path in created:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        elif path.exists():
            path.unlink(missing_ok=True)


async def purge_memories(settings: Settings, collection: str, ids: Sequence[str]) -> PurgeReport:
    """Erase memories for good (``charmem purge``): see :func:`charmem.admin.purge`.

    Raises:
        PurgeTargetError: an id is unknown or not a memory object; nothing was written.
        DraftValidationError: an id is not a UUID.
        ConfigurationError: there is no graph store where the settings point.
    """
    await require_collection(settings, collection)
    provider = embedding_provider(settings)
    async with CharacterMemory.open(settings, collection, embedding_provider=provider) as memory:
        return await purge(memory, ids)


def confirm_purge(collection: str, ids: Sequence[str]) -> bool:
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


def print_purge(report: PurgeReport, as_json: bool) -> None:
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


async def migrate_store(settings: Settings, collection: str) -> dict[str, Any] | None:
    """Upgrade the collection's graph store in place to the current layout (``charmem migrate``).

    The graph store is upgraded, then the vector index's points are moved when its adapter has
    several layouts (the Qdrant service's shared layout); statistics hold ids, which a layout
    keeps.

    Returns:
        dict | None: the :class:`~charmem.admin.LayoutMigration` as a dict, or ``None`` when the
        graph store's adapter has a single layout.

    Raises:
        ConfigurationError: there is no graph store where the settings point (nothing is created).
        StoreLayoutError: the store records a newer layout than this charmem knows.
        StoreLockedError: another process holds the store.
        BackendError: the store failed (run it again: it resumes).
    """
    require_graph_store(settings, collection)
    report = await migrate(settings, collection)
    return None if report is None else report.to_dict()


def print_migration(report: dict[str, Any] | None, collection: str, as_json: bool) -> None:
    """Print what ``charmem migrate`` did: JSON, or a line per store."""
    if as_json:
        print(json.dumps(report, indent=2))
        return
    _print_graph_migration(report, collection)
    vectors = None if report is None else report.get("vectors")
    if vectors is not None:
        print(_vector_migration_line(vectors))


def _vector_migration_line(vectors: dict[str, Any]) -> str:
    """One line saying what ``charmem migrate`` did to the vectors."""
    if vectors["source"] is None:
        return f"the vectors are in the {vectors['layout']} layout: nothing to move"
    return (
        f"moved {vectors['points']} vectors from {vectors['source']} to "
        f"{vectors['target'] or 'nowhere (it held none)'} ({vectors['layout']} layout) in "
        f"{vectors['seconds']:.1f} s; the old collection is deleted"
    )


def _print_graph_migration(report: dict[str, Any] | None, collection: str) -> None:
    """Print what ``charmem migrate`` did to the graph store, and its unreadable nodes."""
    if report is None:
        print(f"nothing to migrate for {collection!r}: its graph store has a single layout")
    elif report["objects"] == 0 and report["found"] == report["layout"]:
        print(f"{report['store']} is already in layout {report['layout']}: nothing to migrate")
    else:
        found = "1" if report["found"] is None else str(report["found"])
        print(
            f"migrated {report['store']} from layout {found} to {report['layout']}: "
            f"{report['objects']} objects, links and records rewritten in {report['seconds']:.1f} s"
        )
    unreadable = [] if report is None else report.get("unreadable") or []
    if unreadable:
        shown = ", ".join(unreadable[:5]) + (", ..." if len(unreadable) > 5 else "")
        print(
            f"charmem: {len(unreadable)} stored node(s) did not decode and were left as they were "
            f"({shown}); `charmem check` lists them as unreadable",
            file=sys.stderr,
        )
