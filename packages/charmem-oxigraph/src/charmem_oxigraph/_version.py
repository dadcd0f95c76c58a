"""The version of charmem-oxigraph (the one place it is set)."""

__version__ = "0.1.0"
