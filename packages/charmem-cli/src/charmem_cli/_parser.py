"""The ``charmem`` argument parser: global options, one subparser per command, plugin commands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Final

from charmem_cli._scene_options import add_scene_options

__all__ = ["CLI_COMMANDS_GROUP", "DESCRIPTION", "build_parser"]

DESCRIPTION: Final = "charmem: remember conversations and recall them as continuity context packs."

#: Distributions add commands here (charmem-server: ``serve``, ``mcp``): ``register(subparsers)``
#: adds parsers whose ``handler(args, settings)`` default returns the exit code.
CLI_COMMANDS_GROUP = "charmem.cli_commands"

_COLLECTION_HELP: Final = "collection name (default: $CHARMEM_COLLECTION or 'charmem')"
_VERBOSE_HELP: Final = "debug logs on stderr (stdout stays the command's output)"


def build_parser(version: str) -> argparse.ArgumentParser:
    """The parser of every built-in command, then the commands of installed plugins.

    Args:
        version: what ``charmem --version`` prints.

    Returns:
        argparse.ArgumentParser: ``parse_args`` gives ``command`` and the command's options.
    """
    parser = argparse.ArgumentParser(prog="charmem", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=version)
    parser.add_argument("-v", "--verbose", action="store_true", help=_VERBOSE_HELP)
    parser.add_argument("--store", help="directory holding every embedded store (default: ./data)")
    parser.add_argument("--collection", default=None, help=_COLLECTION_HELP)
    parser.add_argument(
        "--server",
        default=None,
        help="URL of a running `charmem serve` to send recall, remember and check to "
        "(default: $CHARMEM_SERVER_URL; none: open the stores here)",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    _add_memory_commands(commands)
    _add_vector_commands(commands)
    _add_admin_commands(commands)
    _add_plugin_commands(commands)
    return parser


def _command(commands: Any, name: str, **kwargs: Any) -> argparse.ArgumentParser:
    """A subparser that also takes ``-v`` after the command (``charmem recall -v ...``)."""
    sub: argparse.ArgumentParser = commands.add_parser(name, **kwargs)
    sub.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=_VERBOSE_HELP)
    return sub


def _add_memory_commands(commands: Any) -> None:
    ingest = _command(commands, "ingest-locomo", help="ingest LoCoMo conversation files")
    ingest.add_argument("files", nargs="+", type=Path)
    ingest.add_argument("--no-facts", action="store_true", help="sessions and turns only")
    ingest.add_argument(
        "--collection-per-file", action="store_true", help="one collection per conversation, named after it"
    )
    ingest.add_argument("--quiet", action="store_true", help="no progress bar")
    recall = _command(commands, "recall", help="recall memories for a question, a scene, or both")
    recall.add_argument("query", nargs="?", help="the question (may be omitted when a scene is given)")
    recall.add_argument("--json", action="store_true", help="print pack.to_dict() as JSON")
    recall.add_argument("--limit", type=int, default=20, help="most items (default 20)")
    add_scene_options(recall)
    remember = _command(commands, "remember", help="remember a text as an episode, in a scene if given")
    remember.add_argument("text")
    remember.add_argument("--occurred-at", help="ISO 8601 time with offset (default: --at, else now)")
    add_scene_options(remember)
    demo = _command(commands, "demo", help="ingest the bundled sample conversation and recall")
    demo.add_argument("questions", nargs="*", help="questions to ask (default: three samples)")


def _add_vector_commands(commands: Any) -> None:
    rebuild = _command(
        commands,
        "rebuild-vectors",
        help="re-create the collection's vectors from its graph (e.g. after changing the embedder)",
    )
    rebuild.add_argument(
        "--drop",
        action="store_true",
        help="drop the vectors first (needed when the embedder model or size changed)",
    )
    rebuild.add_argument(
        "--batch-size", type=int, help="texts per embedding call (default: the embedder's preferred size)"
    )
    rebuild.add_argument("--quiet", action="store_true", help="no progress bar")
    check_cmd = _command(
        commands,
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


def _add_admin_commands(commands: Any) -> None:
    export = _command(
        commands,
        "export",
        help="back the collection up into a new or empty directory (graph N-Quads + manifest)",
    )
    export.add_argument("directory", type=Path)
    import_cmd = _command(
        commands,
        "import",
        help="restore a backup into empty stores, rebuilding vectors and stats "
        "(collection: the backup's, unless --collection)",
    )
    import_cmd.add_argument("directory", type=Path)
    import_cmd.add_argument(
        "--batch-size", type=int, help="texts per embedding call (default: the embedder's preferred size)"
    )
    import_cmd.add_argument("--json", action="store_true", help="print the import report as JSON")
    import_cmd.add_argument("--quiet", action="store_true", help="no progress bar")
    purge_cmd = _command(
        commands,
        "purge",
        help="erase memory objects for good, for personal-data erasure requests (not forgetting: "
        "destructive, outside the memory-permanence rule; backups keep the data)",
    )
    purge_cmd.add_argument("ids", nargs="+", metavar="ID", help="ids of episodes, observations, notions...")
    purge_cmd.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    purge_cmd.add_argument("--json", action="store_true", help="print the purge report as JSON")
    migrate_cmd = _command(
        commands,
        "migrate",
        help="upgrade the collection's graph store in place to the layout this charmem writes, and "
        "move its Qdrant service vectors to the shared layout (when opening it says "
        "StoreLayoutError); resumable, a no-op on current stores",
    )
    migrate_cmd.add_argument("--json", action="store_true", help="print the migration report as JSON")
    # the fix StoreLayoutError prints: `charmem migrate --store DIR --collection NAME`
    migrate_cmd.add_argument(
        "--store", default=argparse.SUPPRESS, help="directory holding every embedded store"
    )
    for sub in (export, import_cmd, purge_cmd, migrate_cmd):
        # also accepted after the command (`charmem purge ID --collection NAME`)
        sub.add_argument("--collection", default=argparse.SUPPRESS, help=_COLLECTION_HELP)
    _command(
        commands,
        "optimize",
        help="build the HNSW index of the collection's embedded vectors (set VECTOR_HNSW_THRESHOLD)",
    )


def _add_plugin_commands(commands: Any) -> None:
    from importlib.metadata import entry_points

    for entry in sorted(entry_points(group=CLI_COMMANDS_GROUP), key=lambda e: e.name):
        try:
            entry.load()(commands)
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the built-in commands
            print(f"charmem: the commands of {entry.value} are unavailable: {exc}", file=sys.stderr)
