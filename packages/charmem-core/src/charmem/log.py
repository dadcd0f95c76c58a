"""Library logging: structlog bound loggers routed through the standard ``logging`` module.

A library must not print: charmem's events go to the stdlib logger ``charmem.<area>``, silent
unless the application configures logging. Events carry ids and counts, never memory text (texts,
names, rationales, queries), unless the user sets ``LOG_MEMORY_TEXT=true``
(:attr:`charmem.Settings.log_memory_text`, ``CharacterMemory(log_memory_text=True)``): the facade
then adds them to its debug events. Adapters never log memory text.
"""

from __future__ import annotations

import logging
from typing import Any

import structlog

__all__ = ["get_logger"]


def get_logger(name: str) -> Any:
    """A structlog logger named ``name`` (e.g. ``"charmem.commit"``).

    It renders key=value pairs into the stdlib logger of the same name.
    """
    return structlog.wrap_logger(
        logging.getLogger(name),
        processors=[
            structlog.stdlib.filter_by_level,
            structlog.processors.KeyValueRenderer(key_order=["event"], sort_keys=True),
        ],
        wrapper_class=structlog.stdlib.BoundLogger,
    )
