"""The ``charmem`` command line: ingest conversations, remember, recall (embedded stores)."""

from charmem_cli._version import __version__

__all__ = ["__version__"]
