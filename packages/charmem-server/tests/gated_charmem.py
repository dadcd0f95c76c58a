"""``python gated_charmem.py ARGS``: the charmem CLI with a gated embedder, for the process tests.

Every collection embeds with :class:`conftest.GatedEmbeddingProvider` at the gate directory
``$TEST_GATE_DIR``, so a test can hold an operation in flight (e.g. across a SIGTERM) and let it
finish when it chooses. Not collected by pytest; run by ``conftest.gated_command``.
"""

from __future__ import annotations

import os
from pathlib import Path

from conftest import Gate, GatedEmbeddingProvider

import charmem_server._registry as registry
from charmem_cli.app import main

if __name__ == "__main__":
    gate = Gate(Path(os.environ["TEST_GATE_DIR"]))
    registry.load_embedder = lambda _settings: GatedEmbeddingProvider(gate)  # type: ignore[assignment]
    raise SystemExit(main())
