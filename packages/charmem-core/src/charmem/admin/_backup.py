"""Backup and restore of a whole collection: :func:`export_collection`, :func:`import_collection`.

A backup is a directory holding two files:

* the graph, as the graph adapter dumps it (:meth:`~charmem.ports.GraphStore.export_graph`):
  ``graph.nq``, N-Quads of the collection's named graph, for the Oxigraph stores (embedded and
  SPARQL service, so a backup of one restores into the other); ``graph.jsonl`` for the
  reference graph. Tombstones of purged memories are part of it.
* ``manifest.json``, written last (a directory without it is not a complete backup): the format
  version, the collection, when it was made, the charmem version, the graph file's name, media
  type, size, SHA-256 and statement count, counts of objects per type, links, tombstones, vector
  points and stats rows, and the embedder's model id and vector size.

Vectors and statistics are not saved: they are derived from the graph, the authority, and the
restore rebuilds them (:func:`~charmem.usecases.maintenance.rebuild_vector_index`,
:func:`~charmem.usecases.commit.rebuild_stats`). A restore into empty stores of the same
collection name, with the same embedder, gives byte-identical context packs.

A backup holds every memory's text. Treat it as the memory itself: keep it as private, and know
that a later :func:`~charmem.admin.purge` does not reach into it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO, Final

import attrs
import cattrs

from charmem._version import __version__
from charmem.admin._check import CheckReport, check_stores
from charmem.domain.model import ObjectType
from charmem.domain.serde import converter
from charmem.errors import BackendError, BackupFormatError, CharmemError, CollectionNotEmptyError
from charmem.log import get_logger
from charmem.memory import CharacterMemory
from charmem.ports import GraphStore
from charmem.usecases.commit import rebuild_stats
from charmem.usecases.maintenance import ProgressCallback, VectorRebuildReport, rebuild_vector_index
from charmem.usecases.store_writes import finish_write

__all__ = [
    "BACKUP_FORMAT_VERSION",
    "MANIFEST_NAME",
    "BackupCounts",
    "BackupEmbedder",
    "BackupGraphFile",
    "BackupManifest",
    "ImportReport",
    "export_collection",
    "import_collection",
    "read_manifest",
]

log = get_logger("charmem.admin")

#: Version of the backup layout (:class:`BackupManifest`); a newer one is refused on import.
BACKUP_FORMAT_VERSION: Final = 1
#: The manifest's file name inside a backup directory.
MANIFEST_NAME: Final = "manifest.json"

_FILE_NAMES: Final = {
    "application/n-quads": "graph.nq",
    "application/vnd.charmem.reference+jsonl": "graph.jsonl",
}
_CHUNK: Final = 1 << 20


@attrs.frozen(kw_only=True)
class BackupGraphFile:
    """The graph file of a backup.

    Attributes:
        file: its name inside the backup directory.
        media_type: the dump format (:attr:`charmem.domain.graph.GraphExport.media_type`).
        sha256: hex SHA-256 of the file's bytes.
        size: the file's size (bytes).
        statements: statements it holds (count).
    """

    file: str
    media_type: str
    sha256: str
    size: int
    statements: int


@attrs.frozen(kw_only=True)
class BackupCounts:
    """What the collection held when it was exported (counts).

    Attributes:
        objects: stored objects per object type value (every type listed, zeros included).
        links: stored links.
        tombstones: purged objects' tombstones.
        vector_points: points of the vector index.
        stats_rows: rows of the retrieval statistics.
    """

    objects: dict[str, int]
    links: int
    tombstones: int
    vector_points: int
    stats_rows: int


@attrs.frozen(kw_only=True)
class BackupEmbedder:
    """The embedder fingerprint the collection's vectors were made with."""

    model_id: str
    vector_size: int


@attrs.frozen(kw_only=True)
class BackupManifest:
    """``manifest.json`` of a backup (serialised with cattrs; instants in ISO 8601).

    Attributes:
        format_version: :data:`BACKUP_FORMAT_VERSION` of the charmem that wrote it.
        collection: the collection exported (a backup restores into that collection only: derived
            link ids are namespaced by the collection name).
        created_at: when the export finished reading (the memory's clock, timezone-aware).
        charmem_version: the exporting charmem-core version.
        graph: the graph file.
        counts: what the collection held.
        embedder: the fingerprint of its vectors.
    """

    format_version: int
    collection: str
    created_at: datetime
    charmem_version: str
    graph: BackupGraphFile
    counts: BackupCounts
    embedder: BackupEmbedder

    def to_json(self) -> str:
        """The manifest as indented JSON with sorted keys."""
        return json.dumps(converter.unstructure(self), indent=2, sort_keys=True, ensure_ascii=False)


@attrs.frozen(kw_only=True)
class ImportReport:
    """What :func:`import_collection` restored.

    Attributes:
        manifest: the backup's manifest.
        statements: graph statements loaded (count; equals ``manifest.graph.statements``).
        vectors: the vector rebuild's report.
        stats_rows: rows written by the statistics rebuild (count).
        embedder_changed: the vectors were rebuilt with another embedder than the backup's
            (recall then differs from the original's).
        check: the consistency check made afterwards.
    """

    manifest: BackupManifest
    statements: int
    vectors: VectorRebuildReport
    stats_rows: int
    embedder_changed: bool
    check: CheckReport

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types."""
        return {
            "collection": self.manifest.collection,
            "statements": self.statements,
            "vectors": attrs.asdict(self.vectors),
            "stats_rows": self.stats_rows,
            "embedder_changed": self.embedder_changed,
            "manifest": converter.unstructure(self.manifest),
            "check": self.check.to_dict(),
        }


def _sha256(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _empty_directory(target: Path) -> None:
    """Create ``target`` (or accept it empty).

    Raises:
        BackupFormatError: it is a file or a directory that is not empty.
    """
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise BackupFormatError(
            f"{target} is not an empty directory; export into a new or empty one (a backup never "
            "overwrites another)"
        )
    target.mkdir(parents=True, exist_ok=True)


def _open_binary(path: Path, mode: str) -> BinaryIO:
    handle: BinaryIO = path.open(mode)  # type: ignore[assignment]  # "rb" / "wb" give binary files
    return handle


def _seal(handle: BinaryIO, partial: Path, final: Path) -> tuple[str, int]:
    """Flush, sync and close the graph file, move it to its name; its SHA-256 and size."""
    try:
        handle.flush()
        os.fsync(handle.fileno())
    finally:
        handle.close()
    partial.replace(final)
    return _sha256(final)


def _write_text_atomically(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    with partial.open("w", encoding="utf-8") as handle:
        handle.write(text + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    partial.replace(path)


async def export_collection(
    memory: CharacterMemory, directory: str | os.PathLike[str], *, allow_empty: bool = True
) -> BackupManifest:
    """Write a backup of the memory's collection into ``directory`` (see the module notes).

    Holds the memory's writer lock while reading (:meth:`CharacterMemory.exclusive`), so the
    graph file, the counts and the manifest describe one state. The graph file is written first,
    synced and checksummed; ``manifest.json`` last, atomically.

    Args:
        memory: an open memory of the collection.
        directory: where to write; created if missing, and must be empty (a backup never
            overwrites another).
        allow_empty: ``False`` refuses a collection whose graph holds nothing (a mistyped name
            or store path), before anything is written.

    Returns:
        BackupManifest: the manifest written.

    Raises:
        CharmemError: ``allow_empty=False`` and the collection holds nothing; nothing was written.
        BackupFormatError: ``directory`` is a file or not empty; nothing was written.
        BackendError: a store failed, or the files could not be written (a directory without
            ``manifest.json`` is then left behind: remove it and export again).
    """
    target = Path(directory)
    graph = memory._stores.graph
    if not allow_empty and not await graph.statement_count():
        raise CharmemError(
            f"collection {memory.collection!r} holds nothing in these stores; check its name and "
            "the store paths (nothing was written)"
        )
    try:
        await asyncio.to_thread(_empty_directory, target)
        async with memory.exclusive():
            graph_file = await _write_graph_file(graph, target)
            counts = await _backup_counts(memory)
            created_at = memory.clock.now()
        manifest = BackupManifest(
            format_version=BACKUP_FORMAT_VERSION,
            collection=memory.collection,
            created_at=created_at,
            charmem_version=__version__,
            graph=graph_file,
            counts=counts,
            embedder=BackupEmbedder(
                model_id=memory.embedder.model_id, vector_size=memory.embedder.vector_size
            ),
        )
        await asyncio.to_thread(_write_text_atomically, target / MANIFEST_NAME, manifest.to_json())
    except OSError as exc:
        raise BackendError(f"could not write the backup into {target}: {exc}") from exc
    log.info(
        "collection_exported",
        collection=memory.collection,
        statements=graph_file.statements,
        objects=sum(counts.objects.values()),
        bytes=graph_file.size,
    )
    return manifest


async def _write_graph_file(graph: GraphStore, target: Path) -> BackupGraphFile:
    """Dump the graph into ``target`` (as ``graph.partial``, then synced and renamed to its name)."""
    partial = target / "graph.partial"
    handle = await asyncio.to_thread(_open_binary, partial, "wb")
    try:
        exported = await graph.export_graph(handle)
    except BaseException:
        handle.close()
        raise
    name = _FILE_NAMES.get(exported.media_type, "graph.dump")
    sha256, size = await asyncio.to_thread(_seal, handle, partial, target / name)
    return BackupGraphFile(
        file=name,
        media_type=exported.media_type,
        sha256=sha256,
        size=size,
        statements=exported.statements,
    )


async def _backup_counts(memory: CharacterMemory) -> BackupCounts:
    """What the collection's stores hold now (objects per type, links, tombstones, points, rows)."""
    stores = memory._stores
    graph = stores.graph
    objects = {t.value: len(await graph.object_ids([t])) for t in ObjectType}
    return BackupCounts(
        objects=objects,
        links=len(await graph.link_ids()),
        tombstones=len(await graph.tombstones()),
        vector_points=await stores.vectors.count(),
        stats_rows=await stores.stats.row_count(),
    )


def read_manifest(directory: str | os.PathLike[str]) -> BackupManifest:
    """Read and check a backup's ``manifest.json`` (not yet its graph file's checksum).

    Args:
        directory: the backup directory.

    Returns:
        BackupManifest: the manifest.

    Raises:
        BackupFormatError: no manifest (an incomplete backup), unreadable JSON, missing or
            malformed fields, or a format version newer than this charmem reads.
    """
    path = Path(directory) / MANIFEST_NAME
    try:
        raw: Any = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise BackupFormatError(
            f"{path} is missing: {directory} is not a complete charmem backup (export it again)"
        ) from exc
    except (OSError, ValueError) as exc:
        raise BackupFormatError(f"{path} cannot be read as JSON: {exc}") from exc
    version = raw.get("format_version") if isinstance(raw, Mapping) else None
    if isinstance(version, int) and version > BACKUP_FORMAT_VERSION:
        raise BackupFormatError(
            f"the backup has format version {version}; this charmem reads up to "
            f"{BACKUP_FORMAT_VERSION}: upgrade charmem-core to restore it"
        )
    try:
        manifest = converter.structure(raw, BackupManifest)
    except (cattrs.BaseValidationError, ValueError, TypeError, KeyError) as exc:
        raise BackupFormatError(f"{path} is not a valid backup manifest: {exc}") from exc
    if manifest.created_at.utcoffset() is None:
        raise BackupFormatError(f"{path}: created_at has no UTC offset")
    return manifest


def _verified_graph_file(source: Path, manifest: BackupManifest) -> Path:
    """The backup's graph file, after checking its size and SHA-256 against the manifest.

    Raises:
        BackupFormatError: the file is missing, outside the backup, or does not match.
    """
    graph_file = source / manifest.graph.file
    if graph_file.parent != source or not graph_file.is_file():
        raise BackupFormatError(f"the backup's graph file {manifest.graph.file!r} is missing from {source}")
    sha256, size = _sha256(graph_file)
    if (sha256, size) != (manifest.graph.sha256, manifest.graph.size):
        raise BackupFormatError(
            f"{graph_file} does not match its manifest (size {size} vs {manifest.graph.size}, SHA-256 "
            "differs): the backup is damaged; restore another copy"
        )
    return graph_file


async def import_collection(
    memory: CharacterMemory,
    directory: str | os.PathLike[str],
    *,
    batch_size: int | None = None,
    on_progress: ProgressCallback | None = None,
) -> ImportReport:
    """Restore a backup into the memory's collection, which must be empty in every store.

    Checks the manifest, the collection name and the graph file's size and SHA-256 first, then
    that the graph, the vector index and the statistics are empty; loads the graph in one
    transaction (:meth:`~charmem.ports.GraphStore.import_graph`); rebuilds the vectors with the
    memory's embedder and the statistics from the restored graph; finally runs
    :func:`charmem.admin.check`. Holds the memory's writer lock throughout.

    Args:
        memory: an open memory of the backup's collection, on empty stores.
        directory: the backup directory (:func:`export_collection`).
        batch_size: texts per embedding call of the vector rebuild (>= 1; None: the embedder's).
        on_progress: ``on_progress(done, total)`` of the vector rebuild (index entries).

    Returns:
        ImportReport: what was restored, and the check.

    Raises:
        BackupFormatError: incomplete or damaged backup, unknown format, another collection (open
            a memory of the manifest's collection), or a dump the graph adapter cannot read or
            holding items that would not decode (the message names them);
            nothing was written.
        CollectionNotEmptyError: a store of the collection holds data (``counts`` says which);
            nothing was written. A restore never merges into or overwrites a collection: point the
            settings at new stores (``--store``) instead.
        ValueError: ``batch_size`` is below 1.
        BackendError: a store or the embedder failed. If the graph load failed, nothing was
            written; if the rebuilds failed, the graph is restored: run
            ``rebuild_vector_index`` / ``rebuild_stats`` (or ``charmem check --repair``).
    """
    if batch_size is not None and batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    source = Path(directory)
    manifest = await asyncio.to_thread(read_manifest, source)
    if manifest.collection != memory.collection:
        raise BackupFormatError(
            f"the backup in {source} is of collection {manifest.collection!r}, not {memory.collection!r}; "
            f"restore it into a memory of {manifest.collection!r} (derived ids depend on the name)"
        )
    graph_file = await asyncio.to_thread(_verified_graph_file, source, manifest)
    stores = memory._stores
    graph = stores.graph
    async with memory.exclusive():
        await _refuse_a_collection_with_data(memory)
        handle = await asyncio.to_thread(_open_binary, graph_file, "rb")
        try:
            statements = await finish_write(graph.import_graph(handle, manifest.graph.media_type))
        finally:
            handle.close()
        log.info("collection_graph_imported", collection=memory.collection, statements=statements)
        vectors = await rebuild_vector_index(
            graph=graph,
            vectors=stores.vectors,
            embedder=memory.embedder,
            batch_size=batch_size,
            on_progress=on_progress,
        )
        rows = await rebuild_stats(graph, stores.stats)
        report = await check_stores(graph, stores.vectors, stores.stats)
    if statements != manifest.graph.statements:
        log.warning(
            "collection_import_count_differs",
            collection=memory.collection,
            loaded=statements,
            manifest=manifest.graph.statements,
        )
    return ImportReport(
        manifest=manifest,
        statements=statements,
        vectors=vectors,
        stats_rows=rows,
        embedder_changed=_embedder_changed(memory, manifest),
        check=report,
    )


async def _refuse_a_collection_with_data(memory: CharacterMemory) -> None:
    """Refuse to restore into stores that hold anything of the collection.

    Raises:
        CollectionNotEmptyError: a store holds data (``counts`` says which).
    """
    stores = memory._stores
    counts = {
        "graph statements": await stores.graph.statement_count(),
        "vectors": await stores.vectors.count(),
        "stats rows": await stores.stats.row_count(),
    }
    held = {store: count for store, count in counts.items() if count}
    if held:
        listed = ", ".join(f"{count} {store}" for store, count in held.items())
        interrupted = (
            "; if an interrupted import left them, finish it with `charmem check --repair` "
            "(charmem.admin.repair) instead"
            if counts["graph statements"]
            else ""
        )
        raise CollectionNotEmptyError(
            f"collection {memory.collection!r} is not empty ({listed}); a restore never merges or "
            f"overwrites: restore into new, empty stores (e.g. another --store directory){interrupted}",
            collection=memory.collection,
            counts=counts,
        )


def _embedder_changed(memory: CharacterMemory, manifest: BackupManifest) -> bool:
    """Whether the memory's embedder is not the one the backup's vectors were made with."""
    return (memory.embedder.model_id, memory.embedder.vector_size) != (
        manifest.embedder.model_id,
        manifest.embedder.vector_size,
    )
