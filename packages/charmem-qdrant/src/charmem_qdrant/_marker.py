"""The shard marker: which collection and embedder a vector shard belongs to.

The marker is a small JSON file, ``charmem-shard.json``, at the top of every shard directory::

    {
      "collection": "my-assistant-memory",
      "dense_vector": "dense",
      "distance": "cosine",
      "format": "charmem-shard",
      "lexical_vector": "lexical",
      "model_id": "all-MiniLM-L6-v2",
      "schema_version": 2,
      "vector_size": 384
    }

It is written once, atomically (temporary file, fsync, rename, fsync of the directory), right
after the shard is created, and only read afterwards.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import attrs

from charmem.errors import (
    ConfigurationError,
    DimensionMismatchError,
    EmbedderMismatchError,
    StoreCorruptedError,
)

__all__ = ["MARKER_FILE_NAME", "SCHEMA_VERSION", "ShardMarker", "write_atomic"]

#: File name of the marker inside each shard directory.
MARKER_FILE_NAME = "charmem-shard.json"

#: Version of the shard layout (vector names, payload keys, marker fields) this package writes:
#: 2 adds the points of an episode's scene surfaces (a ``surface`` payload, indexed). An Edge
#: shard of version 1 holding points is rebuilt from the graph on open; a service collection
#: of version 1 is read as it is (its points are content points).
SCHEMA_VERSION = 2

_FORMAT = "charmem-shard"

# What to do when the collection's vectors were made by another embedder. A refused open leaves
# no memory to call ``rebuild_vector_index()`` on, so the hint names the calls that work then.
_REEMBED_HINT = (
    "re-embed the collection with the new one: CharacterMemory.open(settings, collection, "
    "embedding_provider=..., rebuild_vectors=True), or `charmem rebuild-vectors --drop`"
)


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so a crash leaves either the old file (or none) or the whole one.

    A temporary file beside it is written and fsynced, renamed over ``path``, and the directory
    is fsynced.

    Args:
        path: the file; its directory must exist.
        text: the UTF-8 content.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


@attrs.frozen(kw_only=True)
class ShardMarker:
    """The identity of one shard: its collection and the embedder fingerprint of its vectors.

    Attributes:
        collection: the collection name the shard belongs to.
        model_id: the embedding model that produced the stored vectors.
        vector_size: the number of dimensions of every dense vector.
        schema_version: the shard layout version (:data:`SCHEMA_VERSION` when written).
        dense_vector: the name of the dense (cosine) vector in the shard.
        lexical_vector: the name of the sparse BM25 vector in the shard.
    """

    collection: str
    model_id: str
    vector_size: int
    schema_version: int = SCHEMA_VERSION
    dense_vector: str = "dense"
    lexical_vector: str = "lexical"

    def to_document(self) -> dict[str, Any]:
        """The marker as a JSON-compatible dict (also the service collection's metadata)."""
        return {
            "collection": self.collection,
            "dense_vector": self.dense_vector,
            "distance": "cosine",
            "format": _FORMAT,
            "lexical_vector": self.lexical_vector,
            "model_id": self.model_id,
            "schema_version": self.schema_version,
            "vector_size": self.vector_size,
        }

    def to_json(self) -> str:
        """Serialise to the marker's JSON text (sorted keys, one trailing newline)."""
        return json.dumps(self.to_document(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_document(cls, document: Any, *, where: str, key: str) -> ShardMarker:
        """Rebuild a marker from :meth:`to_document` output.

        Args:
            document: the parsed JSON document.
            where: what held it (a file path, a service collection), for messages.
            key: the settings key a ``ConfigurationError`` names.

        Raises:
            ConfigurationError: not a charmem marker, or written by a newer schema version.
        """
        try:
            if not isinstance(document, dict) or document.get("format") != _FORMAT:
                raise ValueError("not a charmem shard marker")
            schema_version = document["schema_version"]
            vector_size = document["vector_size"]
            for name, value in (("schema_version", schema_version), ("vector_size", vector_size)):
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ValueError(f"{name} must be a positive integer, not {value!r}")
            marker = cls(
                collection=str(document["collection"]),
                model_id=str(document["model_id"]),
                vector_size=vector_size,
                schema_version=schema_version,
                dense_vector=str(document.get("dense_vector", "dense")),
                lexical_vector=str(document.get("lexical_vector", "lexical")),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigurationError(
                f"the vector shard marker {where} is unreadable ({exc}); the shard was not written "
                "by charmem-qdrant or the marker was edited. Replace it with "
                "vectors rebuilt from the graph: `charmem rebuild-vectors --drop` or "
                "CharacterMemory.open(..., rebuild_vectors=True)",
                key=key,
            ) from exc
        if marker.schema_version > SCHEMA_VERSION:
            raise ConfigurationError(
                f"the vector shard {where} has schema version {marker.schema_version}, newer "
                f"than this charmem-qdrant understands ({SCHEMA_VERSION}); upgrade charmem-qdrant",
                key=key,
            )
        return marker

    @classmethod
    def read(cls, path: Path) -> ShardMarker | None:
        """Read the marker at ``path``.

        Args:
            path: the marker file (``<shard>/charmem-shard.json``).

        Returns:
            The marker, or ``None`` when the file does not exist.

        Raises:
            StoreCorruptedError: the file is not UTF-8 JSON (damaged, or not a charmem marker).
            ConfigurationError: the file is not a charmem shard marker this version understands.
        """
        try:
            document: Any = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except ValueError as exc:  # not UTF-8 (UnicodeDecodeError) or not JSON
            raise StoreCorruptedError(
                f"the vector shard marker {path} is unreadable ({exc}); the file is damaged, or "
                "the shard was not written by charmem-qdrant. The vectors are derived data: "
                "rebuild them from the graph with `charmem rebuild-vectors --drop` or "
                "CharacterMemory.open(..., rebuild_vectors=True)",
                path=str(path),
            ) from exc
        return cls.from_document(document, where=str(path), key="VECTOR_STORE_PATH")

    def write(self, path: Path) -> None:
        """Write the marker atomically, so a crash leaves either no marker or the whole one.

        A temporary file is written and fsynced, renamed over ``path``, and the directory is
        fsynced.

        Args:
            path: the marker file (``<shard>/charmem-shard.json``); its directory must exist.
        """
        write_atomic(path, self.to_json())

    def check(self, *, collection: str, model_id: str, vector_size: int, path: Path | str) -> None:
        """Check that the shard may be opened for ``collection`` with this embedder.

        Args:
            collection: the collection being opened.
            model_id: the embedding model of the caller's provider.
            vector_size: the caller provider's number of dimensions.
            path: the shard directory (for messages).

        Raises:
            ConfigurationError: the marker names another collection.
            DimensionMismatchError: the shard holds vectors of another size
                (``expected`` = stored size, ``actual`` = offered size).
            EmbedderMismatchError: the shard was indexed by another model of the same size.
        """
        if self.collection != collection:
            raise ConfigurationError(
                f"the vector shard {path} belongs to collection {self.collection!r}, not "
                f"{collection!r}; the directory was copied or renamed. Move it back, or remove it "
                "and rebuild with rebuild_vector_index()",
                key="VECTOR_STORE_PATH",
            )
        if self.vector_size != vector_size:
            raise DimensionMismatchError(
                f"collection {collection!r} stores {self.vector_size}-dimensional vectors of "
                f"model {self.model_id!r}, but the embedding provider {model_id!r} produces "
                f"{vector_size} dimensions; open it with the old model, or {_REEMBED_HINT}",
                expected=self.vector_size,
                actual=vector_size,
            )
        if self.model_id != model_id:
            raise EmbedderMismatchError(
                f"collection {collection!r} was indexed with embedding model {self.model_id!r}, "
                f"not {model_id!r} (both {vector_size}-dimensional, but their vectors are not "
                f"comparable); open it with the old model, or {_REEMBED_HINT}"
            )
