"""Operational tools: not memory operations, for operators and scripts.

* :func:`check` / :func:`check_settings`: compare a collection's vectors and statistics with its
  graph authority and look for partial graph batches; :func:`repair` rebuilds what drifted.
* :func:`export_collection` / :func:`import_collection`: back a whole collection up into a
  directory (the graph as N-Quads plus a manifest) and restore it into empty stores, rebuilding
  vectors and statistics.
* :func:`migrate`: upgrade a collection's graph store in place to the layout this charmem writes,
  and move its vectors to the Qdrant service's shared layout (after
  :class:`~charmem.errors.StoreLayoutError`).
* :func:`purge`: erase memories from every store for personal-data obligations, leaving
  tombstones so nothing brings them back. Destructive, outside the memory-permanence rule, and
  deliberately not on the memory facade.
"""

from charmem.admin._backup import (
    BACKUP_FORMAT_VERSION,
    MANIFEST_NAME,
    BackupCounts,
    BackupEmbedder,
    BackupGraphFile,
    BackupManifest,
    ImportReport,
    export_collection,
    import_collection,
    read_manifest,
)
from charmem.admin._check import (
    CHECK_FORMAT_VERSION,
    CheckReport,
    GraphProblem,
    GraphProblemKind,
    RepairOutcome,
    StatsDrift,
    SurfaceVectors,
    check,
    check_settings,
    unreadable_items,
)
from charmem.admin._migrate import LayoutMigration, VectorLayoutMigration, migrate
from charmem.admin._purge import PurgeReport, purge
from charmem.admin._repair import repair

__all__ = [
    "BACKUP_FORMAT_VERSION",
    "CHECK_FORMAT_VERSION",
    "MANIFEST_NAME",
    "BackupCounts",
    "BackupEmbedder",
    "BackupGraphFile",
    "BackupManifest",
    "CheckReport",
    "GraphProblem",
    "GraphProblemKind",
    "ImportReport",
    "LayoutMigration",
    "PurgeReport",
    "RepairOutcome",
    "StatsDrift",
    "SurfaceVectors",
    "VectorLayoutMigration",
    "check",
    "check_settings",
    "export_collection",
    "import_collection",
    "migrate",
    "purge",
    "read_manifest",
    "repair",
    "unreadable_items",
]
