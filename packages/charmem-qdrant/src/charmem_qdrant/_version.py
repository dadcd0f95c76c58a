"""The version of charmem-qdrant (the single place it is set)."""

__version__ = "0.1.0"
