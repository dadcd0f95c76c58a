"""charmem: remember conversations and recall them as continuity context packs.

Subcommands: ``ingest-locomo FILE...``, ``recall "question"``, ``remember "text"``, ``demo``,
``rebuild-vectors``, ``optimize``, ``check``, ``export DIR``, ``import DIR``, ``purge ID...``.
Backends and paths come from the environment with the library's defaults (embedded Oxigraph,
Qdrant Edge, SQLite stats); the CLI's embedding default is ``local`` (all-MiniLM-L6-v2, offline).
``--store DIR`` puts every store under one directory.

Output: stdout carries only the command's result (JSON with ``--json``); progress bars, the line
shown while the embedding model loads, errors and, with ``-v``, debug logs go to stderr.
``charmem --version`` prints the versions of charmem-cli and charmem-core.

The commands live in :mod:`charmem_cli._memory_commands` and :mod:`charmem_cli._admin_commands`,
what they share in :mod:`charmem_cli._common`; this module parses, dispatches and maps errors
to exit codes. The names below stay importable from here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence

from charmem import CharmemError, Settings
from charmem import __version__ as _core_version
from charmem_cli._admin_commands import (
    check_collection,
    confirm_purge,
    export_backup,
    import_backup,
    migrate_store,
    optimize_vectors,
    print_check,
    print_migration,
    print_purge,
    purge_memories,
    rebuild_vectors,
)
from charmem_cli._common import (
    DEFAULT_COLLECTION,
    TimedEmbedder,
    cli_settings,
    parse_occurred_at,
    require_collection,
    require_graph_store,
)
from charmem_cli._memory_commands import DEMO_QUESTIONS, demo, ingest_locomo, print_pack, recall, remember
from charmem_cli._parser import CLI_COMMANDS_GROUP, build_parser
from charmem_cli._scene_options import recall_context, remember_input
from charmem_cli._version import __version__

__all__ = [
    "CLI_COMMANDS_GROUP",
    "DEFAULT_COLLECTION",
    "DEMO_QUESTIONS",
    "TimedEmbedder",
    "check_collection",
    "cli_settings",
    "export_backup",
    "import_backup",
    "ingest_locomo",
    "main",
    "optimize_vectors",
    "parse_occurred_at",
    "print_pack",
    "purge_memories",
    "rebuild_vectors",
    "require_collection",
    "require_graph_store",
    "version_text",
]

#: A command: its parsed arguments and the settings in, the exit code out.
Command = Callable[[argparse.Namespace, Settings], int]


def version_text() -> str:
    """What ``charmem --version`` prints: ``charmem-cli X (charmem-core Y)``."""
    return f"charmem-cli {__version__} (charmem-core {_core_version})"


class _CharmemOnly(logging.Filter):
    """Debug records of charmem's own loggers, and only warnings from every other library."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name.startswith("charmem") or record.levelno >= logging.WARNING


@contextlib.contextmanager
def _verbose_logging(enabled: bool) -> Iterator[None]:
    """With ``-v``: charmem's debug logs (and other libraries' warnings) on stderr, for one run.

    Without it nothing is configured: as a library, charmem's warnings reach stderr through
    ``logging``'s last-resort handler and nothing else is shown.
    """
    if not enabled:
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    handler.addFilter(_CharmemOnly())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def _ingest(args: argparse.Namespace, settings: Settings) -> int:
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
    return 0


def _recall(args: argparse.Namespace, settings: Settings) -> int:
    asyncio.run(recall(settings, args.collection, recall_context(args), args.json))
    return 0


def _remember(args: argparse.Namespace, settings: Settings) -> int:
    asyncio.run(remember(settings, args.collection, remember_input(args)))
    return 0


def _demo(args: argparse.Namespace, settings: Settings) -> int:
    asyncio.run(demo(settings, args.questions or DEMO_QUESTIONS))
    return 0


def _rebuild_vectors(args: argparse.Namespace, settings: Settings) -> int:
    rebuilt = asyncio.run(
        rebuild_vectors(
            settings, args.collection, drop=args.drop, batch_size=args.batch_size, progress=not args.quiet
        )
    )
    print(
        f"rebuilt the vectors of {args.collection!r}: {rebuilt['indexed']} indexed from "
        f"{rebuilt['objects']} objects ({rebuilt['not_current']} superseded or suppressed left "
        f"out, {rebuilt['removed']} stale removed) in {rebuilt['seconds']:.1f} s"
    )
    return 0


def _check(args: argparse.Namespace, settings: Settings) -> int:
    result = asyncio.run(check_collection(settings, args.collection, repair_drift=args.repair))
    print_check(result, args.json)
    return 0 if result["report"].consistent else 1


def _export(args: argparse.Namespace, settings: Settings) -> int:
    exported = asyncio.run(export_backup(settings, args.collection, args.directory))
    manifest, counts = exported["manifest"], exported["manifest"]["counts"]
    print(
        f"exported collection {manifest['collection']!r} to {args.directory}: "
        f"{manifest['graph']['statements']} statements ({manifest['graph']['file']}, "
        f"{manifest['graph']['size']} bytes), {sum(counts['objects'].values())} objects, "
        f"{counts['links']} links, {counts['tombstones']} tombstones in {exported['seconds']:.1f} s"
    )
    unreadable = exported["unreadable"]
    if unreadable:
        print(
            f"charmem: {len(unreadable)} stored item(s) do not decode, so this backup cannot be "
            "restored (`charmem import` refuses it); keep a copy of the store directory too. "
            "`charmem check` lists them:\n  " + "\n  ".join(unreadable),
            file=sys.stderr,
        )
        return 1
    return 0


def _import(args: argparse.Namespace, settings: Settings) -> int:
    imported = asyncio.run(
        import_backup(
            settings,
            args.requested_collection,
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


def _purge(args: argparse.Namespace, settings: Settings) -> int:
    if not args.yes and not confirm_purge(args.collection, args.ids):
        print("charmem: nothing was purged", file=sys.stderr)
        return 2
    purged = asyncio.run(purge_memories(settings, args.collection, args.ids))
    print_purge(purged, args.json)
    return 0 if purged.check.consistent else 1


def _migrate(args: argparse.Namespace, settings: Settings) -> int:
    print_migration(asyncio.run(migrate_store(settings, args.collection)), args.collection, args.json)
    return 0


def _optimize(args: argparse.Namespace, settings: Settings) -> int:
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
    return 0


#: The built-in commands that open the stores here (plugins bring their own ``handler``).
COMMANDS: dict[str, Command] = {
    "ingest-locomo": _ingest,
    "recall": _recall,
    "remember": _remember,
    "demo": _demo,
    "rebuild-vectors": _rebuild_vectors,
    "check": _check,
    "export": _export,
    "import": _import,
    "purge": _purge,
    "optimize": _optimize,
    "migrate": _migrate,
}


_INTERRUPTED_DEFAULT = (
    "charmem: interrupted; what was committed is kept; run the same command again to resume"
)
#: What Ctrl-C prints for a command that cannot resume by running it again (default above).
INTERRUPTED: dict[str, str] = {
    # the graph loads in one transaction; once loaded, a second import is refused as not empty
    "import": (
        "charmem: interrupted; if the graph was loaded already (`charmem check` finds the "
        "collection), finish the restore with `charmem check --repair` (same --store and "
        "--collection); otherwise nothing was written: run the same command again"
    ),
}


def _run(args: argparse.Namespace) -> int:
    """Run the parsed command: a plugin's handler, through a server, or on the stores here."""
    settings = cli_settings(os.environ, args.store)
    handler = getattr(args, "handler", None)
    if handler is not None:
        return int(handler(args, settings))
    server_url = args.server or os.environ.get("CHARMEM_SERVER_URL")
    if server_url:
        from charmem_cli._remote import run_remote

        return run_remote(args, server_url)
    return COMMANDS[args.command](args, settings)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code.

    0 on success, 1 when ``check`` (or the check run by ``import`` and ``purge``) finds the
    collection inconsistent, 2 for a charmem error (with its message on stderr) or a purge not
    confirmed, 130 on Ctrl-C, 141 when whoever reads the output stops reading (``charmem recall
    ... | head``: quietly, as a process killed by ``SIGPIPE``). ``--version`` and ``--help`` print
    and exit 0 (``SystemExit``).
    """
    args = build_parser(version_text()).parse_args(argv)
    requested = args.collection if args.collection is not None else os.environ.get("CHARMEM_COLLECTION")
    args.requested_collection = requested
    args.collection = DEFAULT_COLLECTION if requested is None else requested
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # keep stderr for our own progress
    try:
        with _verbose_logging(args.verbose):
            code = _run(args)
            sys.stdout.flush()  # a closed pipe shows here, not at the interpreter's exit
            return code
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 141
    except KeyboardInterrupt:
        print(INTERRUPTED.get(args.command, _INTERRUPTED_DEFAULT), file=sys.stderr)
        return 130
    except CharmemError as exc:
        print(f"charmem: {type(exc).__name__}: {exc}", file=sys.stderr)  # mismatches name the fix
        return 2
    except (OSError, ValueError) as exc:
        print(f"charmem: {exc}", file=sys.stderr)
        return 2
