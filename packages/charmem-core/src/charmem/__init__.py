"""charmem: episodic memory for persistent LLM assistants and companions."""

from charmem._version import __version__

__all__ = ["__version__"]
