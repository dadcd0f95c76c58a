"""Library logging: structlog bound loggers routed through the standard ``logging`` module.

A library must not print: charmem's events go to the stdlib logger ``charmem.<area>``, silent
unless the application configures logging. Events carry ids and counts, never memory text (texts,
names, rationales, queries), unless the user sets ``LOG_MEMORY_TEXT=true``
(:attr:`charmem.Settings.log_memory_text`, ``CharacterMemory(log_memory_text=True)``): the facade
then adds them to its debug events. Adapters never log memory text.

Each event reaches the stdlib handlers twice over: as the record's message, rendered as sorted
``key=value`` pairs after the event name (``event='collection_checked' collection='c' ...``),
and as fields: the event name is ``record.event`` and every key is an attribute of the
``logging.LogRecord`` (``record.collection``), as ``logging``'s ``extra`` sets them, so a JSON
formatter or a filter reads them without parsing the message. A key that names one of the
record's own attributes (``created``, ``name``, ``module``...) is set with a trailing underscore
(``record.created_``). ``exc_info`` and ``stack_info`` are passed to ``logging`` as such, so
``log.exception(...)`` records the traceback.

Secrets never reach a log line: every text field passes through
:func:`~charmem.errors.mask_secrets` (URL passwords; the whole value of a field named like a
secret, e.g. ``api_key``), in the message and in the fields alike.
"""

from __future__ import annotations

import logging
from collections.abc import MutableMapping
from typing import Any, Final

import structlog

from charmem.errors import mask_secrets

__all__ = ["EVENT_FIELD", "get_logger", "record_field_name"]

#: The ``LogRecord`` attribute holding the event name.
EVENT_FIELD: Final = "event"

#: Keyword arguments ``logging`` takes itself rather than as fields of the event.
_LOGGING_KWARGS: Final = ("exc_info", "stack_info")

#: Attributes every ``LogRecord`` has (``extra`` may not overwrite them), and the two
#: ``Formatter`` adds.
_RECORD_ATTRIBUTES: Final = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
}

_RENDER: Final = structlog.processors.KeyValueRenderer(key_order=["event"], sort_keys=True)


def record_field_name(key: str) -> str:
    """The ``LogRecord`` attribute an event key is set as: the key, or ``key + "_"`` on a clash.

    Args:
        key: a key of the event (``"collection"``, ``"created"``).

    Returns:
        str: ``key`` itself unless a ``LogRecord`` has an attribute of that name.
    """
    return f"{key}_" if key in _RECORD_ATTRIBUTES else key


def _mask_fields(_logger: object, _method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """The structlog processor masking secrets in every text field of an event."""
    for field, value in event.items():
        if isinstance(value, str):
            event[field] = mask_secrets(value, key=field)
    return event


def _to_stdlib(
    logger: object, method: str, event: MutableMapping[str, Any]
) -> tuple[tuple[str], dict[str, Any]]:
    """The last processor: the rendered message, and the event's keys as ``extra`` fields.

    structlog calls the stdlib logger's method with these ``(args, kwargs)``.
    """
    passed = {key: event.pop(key) for key in _LOGGING_KWARGS if key in event}
    fields = {record_field_name(key): value for key, value in event.items()}
    message = _RENDER(logger, method, event)
    return (message,), {**passed, "extra": fields}


def get_logger(name: str) -> Any:
    """A structlog logger named ``name`` (e.g. ``"charmem.commit"``).

    It logs into the stdlib logger of the same name: the message renders the event as key=value
    pairs, and the record carries the event name and each key as fields (see the module).
    """
    return structlog.wrap_logger(
        logging.getLogger(name),
        processors=[structlog.stdlib.filter_by_level, _mask_fields, _to_stdlib],
        wrapper_class=structlog.stdlib.BoundLogger,
    )
