"""What the files of an embedded Oxigraph (RocksDB) store say: complete, damaged, or out of space.

pyoxigraph creates a new database in any directory without a ``CURRENT`` file, even one full of
another database's data files; RocksDB then deletes those files as obsolete. A store whose
``CURRENT`` was lost therefore came back empty on the second open (the first one failed with a
raw ``RuntimeError``). :func:`check_store_directory` runs before every ``Store(path)``, so no
open ever creates a database over existing data; :func:`translate_error` turns pyoxigraph's
corruption and "no space left" errors into charmem's typed errors.
"""

from __future__ import annotations

import errno
import re
from pathlib import Path
from typing import Final

from charmem.errors import BackendError, InsufficientStorageError, StoreCorruptedError

__all__ = [
    "WAL_SLACK",
    "WAY_BACK",
    "check_store_directory",
    "holds_spent_logs",
    "is_corruption_error",
    "is_no_space_error",
    "translate_error",
]

#: What to do about a damaged graph store; every ``StoreCorruptedError`` of this package ends so.
WAY_BACK: Final = (
    "move the directory away and restore the collection from a backup with `charmem import DIR` "
    "(made by `charmem export`), or restore the directory from a copy"
)

# Files RocksDB writes while it creates a database, before any memory is stored in it.
_SCAFFOLDING = re.compile(r"LOCK|LOG|LOG\.old\.\d+|IDENTITY|CURRENT|(MANIFEST|OPTIONS)-\d+|\d+\.(dbtmp|log)")
_CURRENT = re.compile(r"MANIFEST-\d+\n")
_WAL = re.compile(r"\d+\.log")

#: Bytes of write-ahead log a closed store may keep: RocksDB's one live log after a flush is empty
#: (0 to a few dozen bytes); more means logs kept for reuse (see :func:`holds_spent_logs`).
WAL_SLACK: Final = 64 * 1024


def _is_complete(path: Path) -> bool:
    """``CURRENT`` names a non-empty manifest that exists: RocksDB will open, not create."""
    try:
        current = (path / "CURRENT").read_bytes().decode("ascii")
    except (OSError, UnicodeDecodeError):
        return False
    if _CURRENT.fullmatch(current) is None:
        return False
    manifest = path / current.strip()
    try:
        return manifest.is_file() and manifest.stat().st_size > 0
    except OSError:
        return False


def _holds_no_data(path: Path, names: list[str]) -> bool:
    """Only the files of a creation that stopped early: no table, no non-empty write-ahead log."""
    for name in names:
        if _SCAFFOLDING.fullmatch(name) is None:
            return False
        if name.endswith(".log") and name[0].isdigit():
            try:
                if (path / name).stat().st_size:
                    return False
            except OSError:
                return False
    return True


def check_store_directory(path: Path) -> None:
    """Refuse a non-empty directory that is not a complete store, before pyoxigraph opens it.

    The rule: an absent or empty directory is created as a new store; a directory whose
    ``CURRENT`` file names an existing, non-empty ``MANIFEST-*`` is opened; a directory holding
    only what an interrupted creation leaves (``LOCK``, ``LOG``, ``IDENTITY``, ``OPTIONS-*``, an
    empty write-ahead log, a manifest without tables) is created over, since it holds no memory
    (its empty write-ahead logs are deleted first: RocksDB will not create a database beside one).
    Anything else (tables or a non-empty log without a valid ``CURRENT``, or files that are not
    RocksDB's) is refused.

    Args:
        path: the store directory (``OXIGRAPH_PATH``).

    Raises:
        StoreCorruptedError: the directory holds data but no complete store; nothing was changed.
    """
    try:
        names = sorted(entry.name for entry in path.iterdir())
    except FileNotFoundError:
        return
    except OSError as exc:
        raise BackendError(f"cannot read the Oxigraph store directory {path}: {exc}") from exc
    if not names or _is_complete(path):
        return
    if _holds_no_data(path, names):
        for name in names:  # RocksDB refuses to create a database beside a log, even an empty one
            if name.endswith(".log") and name[0].isdigit():
                (path / name).unlink()
        return
    shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
    raise StoreCorruptedError(
        f"the Oxigraph store at {path} is damaged or is not an Oxigraph store: it holds files "
        f"({shown}) but no valid CURRENT file naming its MANIFEST, so opening it would create an "
        f"empty store over them. Nothing was changed; {WAY_BACK}. If OXIGRAPH_PATH points at the "
        "wrong directory, correct it",
        path=str(path),
    )


def holds_spent_logs(path: Path) -> bool:
    """Whether a flushed, closed store at ``path`` still holds write-ahead logs beyond the minimum.

    pyoxigraph sets RocksDB's ``recycle_log_file_num`` to 10: a log whose memtables were flushed is
    kept (at its full size) for reuse instead of deleted, and the flush of a close may even make
    such a reused log the live one. RocksDB deletes them all when it next opens the store. The
    minimum is one live log of at most :data:`WAL_SLACK` bytes.

    Args:
        path: the store directory, closed after a successful ``Store.flush``.

    Returns:
        bool: more than one ``NNNNNN.log`` file, or one larger than :data:`WAL_SLACK`.
    """
    try:
        sizes = [entry.stat().st_size for entry in path.iterdir() if _WAL.fullmatch(entry.name)]
    except OSError:
        return False
    return len(sizes) > 1 or any(size > WAL_SLACK for size in sizes)


def is_no_space_error(exc: BaseException) -> bool:
    """Whether ``exc`` is the file system running out of space (``ENOSPC``)."""
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return True
    return isinstance(exc, OSError | RuntimeError) and "No space left on device" in str(exc)


def is_corruption_error(exc: BaseException) -> bool:
    """Whether ``exc`` is RocksDB reporting damaged files (``Corruption:``, a table gone)."""
    if isinstance(exc, FileNotFoundError):
        return True
    return isinstance(exc, OSError | RuntimeError) and "Corruption" in str(exc)


def translate_error(path: Path, action: str, exc: BaseException) -> BackendError:
    """The typed error for a pyoxigraph failure on the store at ``path`` (chain it with ``from``).

    Returns:
        BackendError: an :class:`InsufficientStorageError` for "no space left on device", a
        :class:`StoreCorruptedError` (naming the way back) for damaged files, else a plain
        ``BackendError``.
    """
    if is_no_space_error(exc):
        return InsufficientStorageError(
            f"the disk holding the Oxigraph store at {path} is full ({action}: {exc}); nothing was "
            "written. Free some space and call again (the store reopens itself)",
            path=str(path),
        )
    if is_corruption_error(exc):
        return StoreCorruptedError(
            f"the Oxigraph store at {path} is damaged ({action}: {exc}); {WAY_BACK}",
            path=str(path),
        )
    return BackendError(f"Oxigraph failed to {action} at {path}: {exc}")
