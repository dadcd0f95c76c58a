"""Domain types and pure rules of charmem (no I/O)."""
