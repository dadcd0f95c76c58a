"""Library logging: structlog bound loggers routed through the standard ``logging`` module.

A library must not print: charmem's events go to the stdlib logger ``charmem.<area>``, silent
unless the application configures logging. Events carry ids and counts, never memory text (texts,
names, rationales, queries), unless the user sets ``LOG_MEMORY_TEXT=true``
(:attr:`charmem.Settings.log_memory_text`, ``CharacterMemory(log_memory_text=True)``): the facade
then adds them to its debug events. Adapters never log memory text.

Secrets never reach a log line: every text field passes through
:func:`~charmem.errors.mask_secrets` (URL passwords; the whole value of a field named like a
secret, e.g. ``api_key``).
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import Any

import structlog

from charmem.errors import mask_secrets

__all__ = ["get_logger"]


def _mask_fields(_logger: object, _method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """The structlog processor masking secrets in every text field of an event."""
    for field, value in event.items():
        if isinstance(value, str):
            event[field] = mask_secrets(value, key=field)
    return event


def get_logger(name: str) -> Any:
    """A structlog logger named ``name`` (e.g. ``"charmem.commit"``).

    It renders key=value pairs into the stdlib logger of the same name.
    """
    return structlog.wrap_logger(
        logging.getLogger(name),
        processors=[
            structlog.stdlib.filter_by_level,
            _mask_fields,
            structlog.processors.KeyValueRenderer(key_order=["event"], sort_keys=True),
        ],
        wrapper_class=structlog.stdlib.BoundLogger,
    )
