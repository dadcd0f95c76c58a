"""``charmem serve -v``: charmem's debug events on stderr, other libraries' from the usual level."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from charmem.log import get_logger
from charmem_server._cli import _log_to_stderr


@pytest.fixture
def root_restored() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


@pytest.mark.parametrize("verbose", [False, True])
def test_verbose_adds_charmem_debug_events_only(
    root_restored: None, capsys: pytest.CaptureFixture[str], verbose: bool
) -> None:
    _log_to_stderr(logging.INFO, verbose=verbose)
    get_logger("charmem_server.test").debug("debug_event", n=1)
    get_logger("charmem_server.test").info("info_event", n=2)
    logging.getLogger("some.library").debug("library debug")
    logging.getLogger("some.library").info("library info")
    err = capsys.readouterr().err
    assert ("event='debug_event' n=1" in err) is verbose
    assert "event='info_event' n=2" in err and "library info" in err
    assert "library debug" not in err
