"""Client mode: commands as calls to a running ``charmem serve``.

With ``CHARMEM_SERVER_URL`` (or ``--server URL``) the CLI does not open the stores itself.
No store is opened and no embedding model is loaded here, so ``charmem recall`` answers in the
time of one HTTP request. Needs the ``charmem_server.client`` module (charmem-server, which in
client mode loads only httpx and charmem core). Commands that work on the stores themselves
(``ingest-locomo``, ``demo``, ``rebuild-vectors``, ``optimize``, ``export``, ``import``, ``purge``)
are refused: stop the server and run them on the store.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any, Final

from charmem.errors import ConfigurationError

__all__ = ["REMOTE_COMMANDS", "SERVER_URL_ENV", "run_remote"]

SERVER_URL_ENV: Final = "CHARMEM_SERVER_URL"
#: The commands a server answers.
REMOTE_COMMANDS: Final = frozenset({"recall", "remember", "check"})


def _client(url: str, collection: str) -> Any:
    try:
        from charmem_server.client import TOKEN_ENV, SyncRemoteCharacterMemory
    except ImportError as exc:
        raise ConfigurationError(
            f"{SERVER_URL_ENV} (or --server) is set, but the remote client is not installed: "
            "pip install charmem-server, or unset it to open the stores here",
            key=SERVER_URL_ENV,
        ) from exc
    return SyncRemoteCharacterMemory(url, collection, token=os.environ.get(TOKEN_ENV) or None)


def run_remote(args: argparse.Namespace, url: str) -> int:
    """Run ``args.command`` against the server at ``url``; returns the exit code.

    Raises:
        ConfigurationError: the command needs the stores themselves, or the client is missing.
        CharmemError: the server's error, raised as its own class.
    """
    from charmem_cli._memory_commands import print_pack
    from charmem_cli._scene_options import recall_context, remember_input, remembered

    if args.command not in REMOTE_COMMANDS:
        raise ConfigurationError(
            f"`charmem {args.command}` works on the stores themselves and is not available through "
            f"a server ({SERVER_URL_ENV}={url}): stop the server and run it on its --store, or "
            f"unset {SERVER_URL_ENV}",
            key=SERVER_URL_ENV,
        )
    with _client(url, args.collection) as memory:
        if args.command == "recall":
            pack = memory.retrieve(recall_context(args))
            if args.json:
                print(json.dumps(pack.to_dict(), ensure_ascii=False, indent=2))
            else:
                print_pack(pack)
            return 0
        if args.command == "remember":
            print(json.dumps(remembered(memory.remember(remember_input(args)))))
            return 0
        result = memory.check(repair=args.repair)
        report = result["report"]
        if args.json:
            print(json.dumps(result, ensure_ascii=False, indent=2))
        else:
            print("consistent" if report["consistent"] else json.dumps(report, ensure_ascii=False, indent=2))
        return 0 if report["consistent"] else 1
