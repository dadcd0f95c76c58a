"""SQLite retrieval statistics (``RETRIEVAL_STATS_STORE_MODE=sqlite``, the default).

One file (``RETRIEVAL_STATS_PATH``) holds the rows of every collection, keyed by
``(collection, id)``: writing a row again replaces it, so replays never count twice.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from charmem.domain.ids import MemoryId
from charmem.domain.model import Relation
from charmem.errors import BackendError, ConfigurationError
from charmem.log import get_logger
from charmem.ports import StatsEntry, StatsSummary
from charmem.settings import Settings, validate_collection_name
from charmem.stats.memory import summarise

__all__ = ["SQLiteRetrievalStatsStore", "degrees_sql"]

_log = get_logger("charmem.stats")

#: Rows keyed by ``(collection, id)`` in the primary key itself (no rowid copy), ids as their 16
#: UUID bytes, and the endpoint indexes only over links (the only rows with endpoints).
_SCHEMA = """
CREATE TABLE IF NOT EXISTS retrieval_stats (
    collection TEXT NOT NULL,
    id BLOB NOT NULL,
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    current INTEGER NOT NULL,
    from_id BLOB,
    to_id BLOB,
    PRIMARY KEY (collection, id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS retrieval_stats_from ON retrieval_stats (collection, from_id)
    WHERE kind = 'link';
CREATE INDEX IF NOT EXISTS retrieval_stats_to ON retrieval_stats (collection, to_id)
    WHERE kind = 'link';
"""

#: The table of earlier releases (ids as text, a rowid table and full indexes: about twice the
#: bytes). Opening the file moves its rows into the current table and drops it.
_OLD_TABLE = "stats_rows"


#: Connection settings of the write path (no schema change). A commit's rows land on random
#: pages of the UUID-keyed indexes, so once the file outgrows SQLite's default 2 MiB page cache a
#: plan of 500 memories dirties about as many pages as it has rows, and the default checkpoint
#: (every 1,000 WAL pages) copied and synced them back after nearly every commit. A 16 MiB page
#: cache, and checkpoints every 16,384 WAL pages (64 MiB, removed when the last connection
#: closes), so pages that consecutive commits rewrite are copied once. 300,000 rows in plans of
#: 1,500, interleaved runs: 5.5-5.8 s instead of 8.6-9.5 s, the last plans 33-35 ms instead of
#: 51-59 ms (ids as UUID bytes, ``WITHOUT ROWID``); with ids as text 8.7 s instead of 15.6-22.2 s.
#: Rows are derived data (rebuilt from the graph); a commit is as durable as before.
_PRAGMAS: Final = ("PRAGMA cache_size=-16384", "PRAGMA wal_autocheckpoint=16384")


def _connect(path: Path) -> sqlite3.Connection:
    """Open the file and create the schema (reading its header and schema page).

    No full integrity check: ``PRAGMA quick_check`` reads the whole file (0.6 s for a million
    rows), too slow for every open; a damaged header or schema fails here.
    """
    db = sqlite3.connect(path, check_same_thread=False, timeout=30.0, isolation_level=None)
    try:
        for pragma in _PRAGMAS:
            db.execute(pragma)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(_SCHEMA)
        _upgrade_old_table(db)
    except BaseException:
        db.close()
        raise
    return db


def _id_bytes(text: object) -> bytes | None:
    """The 16 bytes of an id stored as text by an earlier release (``None``: not an id)."""
    try:
        return uuid.UUID(str(text)).bytes
    except ValueError:
        return None


def _upgrade_old_table(db: sqlite3.Connection) -> None:
    """Move the rows of an earlier release's table into the current one, then drop it.

    Rows whose ids do not parse are left out (``charmem check`` then reports the collection's
    counts and ``--repair`` rebuilds them from the graph); the move and the drop are one
    transaction, so an interrupted upgrade leaves the old table whole.
    """
    found = db.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (_OLD_TABLE,)
    ).fetchone()
    if found is None:
        return
    rows = db.execute("SELECT collection, id, kind, key, current, from_id, to_id FROM stats_rows").fetchall()
    moved = []
    for collection, row_id, kind, key, current, from_id, to_id in rows:
        ids = (_id_bytes(row_id), *(None if i is None else _id_bytes(i) for i in (from_id, to_id)))
        if (
            ids[0] is None
            or (from_id is not None and ids[1] is None)
            or (to_id is not None and ids[2] is None)
        ):
            continue
        moved.append((collection, ids[0], kind, key, current, ids[1], ids[2]))
    db.execute("BEGIN")
    try:
        db.executemany("INSERT OR REPLACE INTO retrieval_stats VALUES (?, ?, ?, ?, ?, ?, ?)", moved)
        db.execute("DROP TABLE stats_rows")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
    db.execute("VACUUM")
    _log.info(
        "retrieval_stats_table_upgraded",
        table=_OLD_TABLE,
        rows_moved=len(moved),
        rows_left_out=len(rows) - len(moved),
    )


def _is_corrupt(exc: sqlite3.DatabaseError) -> bool:
    """A damaged or foreign file (not a busy or read-only one, which are ``OperationalError``)."""
    if isinstance(exc, sqlite3.OperationalError):
        return False
    return getattr(exc, "sqlite_errorname", None) in {"SQLITE_NOTADB", "SQLITE_CORRUPT", None}


def _discard_corrupt(path: Path, exc: BaseException) -> None:
    """Move a damaged stats file (and its WAL files) aside as ``<name>.corrupt-<time>``.

    The statistics are derived data: ``CharacterMemory.open`` and ``charmem check --repair``
    rebuild a collection's rows from the graph once the file is empty.
    """
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    for suffix in ("", "-wal", "-shm"):
        source = path.with_name(path.name + suffix)
        if source.exists():
            source.rename(path.with_name(f"{path.name}.corrupt-{stamp}{suffix}"))
    _log.warning(
        "retrieval_stats_file_discarded",
        path=str(path),
        moved_to=f"{path.name}.corrupt-{stamp}",
        error=str(exc),
        action="rebuilt from the graph when each collection opens",
    )


def degrees_sql(count: int, *, by_relation: bool) -> str:
    """The query counting links at each of ``count`` ids (bound as ``?``), in both indexes.

    ``INDEXED BY`` is not a hint here but the plan: on a ``WITHOUT ROWID`` table SQLite prefers the
    primary key's ``collection`` prefix, which reads every row of the collection per call.
    """
    marks = ",".join("?" * count)
    rel_sql = " AND key = ?" if by_relation else ""
    return (
        "SELECT node, COUNT(*) FROM ("  # noqa: S608 - only placeholders are interpolated
        " SELECT from_id AS node FROM retrieval_stats INDEXED BY retrieval_stats_from"
        f" WHERE collection = ? AND kind = 'link' AND from_id IN ({marks}){rel_sql}"
        " UNION ALL SELECT to_id AS node FROM retrieval_stats INDEXED BY retrieval_stats_to"
        f" WHERE collection = ? AND kind = 'link' AND to_id IN ({marks}){rel_sql} AND to_id != from_id"
        ") GROUP BY node"
    )


class SQLiteRetrievalStatsStore:
    """Retrieval statistics in a SQLite file (stdlib ``sqlite3``, WAL journal).

    Calls run in a worker thread behind a lock; the connection is opened once per instance.
    A file that is damaged or not a SQLite database is moved aside (``<name>.corrupt-<time>``,
    logged as a warning) and a new one is created: the statistics are derived data, and
    ``CharacterMemory.open`` rebuilds a collection's rows from its graph when it finds them
    empty beside a non-empty graph (``charmem check --repair`` does too).
    """

    def __init__(self, path: Path | str, collection: str) -> None:
        """Open (and create) the stats file.

        Args:
            path: the SQLite file; parent directories are created.
            collection: the collection name (validated before the file is touched).

        Raises:
            ConfigurationError: the collection name is not allowed, or the path holds a NUL.
            BackendError: the file cannot be opened (a damaged one is replaced, see the class).
        """
        self.collection = validate_collection_name(collection)
        self.path = Path(path)
        if "\x00" in str(self.path):
            raise ConfigurationError(
                "the retrieval stats path holds a NUL character, which no file system accepts",
                key="RETRIEVAL_STATS_PATH",
            )
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                self._db: sqlite3.Connection | None = _connect(self.path)
            except sqlite3.DatabaseError as exc:
                if not _is_corrupt(exc):
                    raise
                _discard_corrupt(self.path, exc)
                self._db = _connect(self.path)
        except (OSError, sqlite3.Error) as exc:
            raise BackendError(f"cannot open retrieval stats file {self.path}: {exc}") from exc

    @classmethod
    def from_settings(cls, settings: Settings, collection: str) -> SQLiteRetrievalStatsStore:
        """Build from ``RETRIEVAL_STATS_PATH``."""
        return cls(settings.retrieval_stats_path, collection)

    @classmethod
    def exists_from_settings(cls, settings: Settings, collection: str) -> bool:
        """Whether the stats file ``RETRIEVAL_STATS_PATH`` exists (opening would create it).

        Raises:
            ConfigurationError: the collection name is not allowed.
        """
        validate_collection_name(collection)
        return Path(settings.retrieval_stats_path).is_file()

    def _run(self, sql: str, params: Sequence[Any] = (), *, many: bool = False) -> list[Any]:
        with self._lock:
            if self._db is None:
                raise BackendError("the retrieval stats store is closed")
            try:
                if many:
                    self._db.execute("BEGIN")
                    try:
                        self._db.executemany(sql, params)
                    except BaseException:
                        self._db.execute("ROLLBACK")
                        raise
                    self._db.execute("COMMIT")
                    return []
                return self._db.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise BackendError(f"retrieval stats store {self.path} failed: {exc}") from exc

    async def record(self, entries: Sequence[StatsEntry]) -> None:
        """Insert or replace rows keyed by ``(collection, id)`` in one transaction."""
        rows = [
            (
                self.collection,
                e.id.value.bytes,
                e.kind,
                e.key,
                int(e.current),
                None if e.from_id is None else e.from_id.value.bytes,
                None if e.to_id is None else e.to_id.value.bytes,
            )
            for e in entries
        ]
        if rows:
            await asyncio.to_thread(
                self._run,
                "INSERT OR REPLACE INTO retrieval_stats VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
                many=True,
            )

    async def degrees(
        self, ids: Sequence[MemoryId], *, relation: Relation | None = None
    ) -> dict[MemoryId, int]:
        """Links touching each id (optionally of one relation)."""
        counts = dict.fromkeys(ids, 0)
        if not ids:
            return counts
        keys = [i.value.bytes for i in ids]
        rel_param: list[object] = [] if relation is None else [relation.value]
        sql = degrees_sql(len(keys), by_relation=relation is not None)
        params = [self.collection, *keys, *rel_param, self.collection, *keys, *rel_param]
        for node, count in await asyncio.to_thread(self._run, sql, params):
            counts[MemoryId(uuid.UUID(bytes=node))] = int(count)
        return counts

    async def summary(self) -> StatsSummary:
        """Counters of the collection."""
        rows = await asyncio.to_thread(
            self._run,
            "SELECT id, kind, key, current FROM retrieval_stats WHERE collection = ?",
            (self.collection,),
        )
        return summarise(
            [
                StatsEntry(id=MemoryId(uuid.UUID(bytes=r[0])), kind=r[1], key=r[2], current=bool(r[3]))
                for r in rows
            ]
        )

    async def row_count(self) -> int:
        """Number of rows of the collection."""
        rows = await asyncio.to_thread(
            self._run, "SELECT COUNT(*) FROM retrieval_stats WHERE collection = ?", (self.collection,)
        )
        return int(rows[0][0])

    async def clear(self) -> None:
        """Remove every row of the collection."""
        await asyncio.to_thread(
            self._run, "DELETE FROM retrieval_stats WHERE collection = ?", (self.collection,)
        )

    async def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
