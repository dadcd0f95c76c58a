"""The long-running commands freeze what start-up allocated, never its garbage."""

from __future__ import annotations

import gc
import weakref

from charmem_server._cli import _freeze_start_up


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the collector frees it


def test_freeze_keeps_survivors_out_of_collections_and_frees_garbage() -> None:
    kept = _Node()
    garbage = weakref.ref(_Node())
    try:
        _freeze_start_up()
        assert garbage() is None  # collected, not frozen for good
        assert gc.get_freeze_count() > 0
        assert not any(obj is kept for obj in gc.get_objects())  # full collections skip it
    finally:
        gc.unfreeze()
