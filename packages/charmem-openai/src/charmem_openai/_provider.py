"""The OpenAI embedding provider: :class:`OpenAIEmbeddingProvider` on the official async SDK."""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, cast
from urllib.parse import urlsplit

import httpx
import openai

from charmem.errors import BackendError, ConfigurationError, DimensionMismatchError, excerpt
from charmem.log import get_logger
from charmem.settings import Settings

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "KNOWN_DIMENSIONS",
    "MAX_INPUTS_PER_REQUEST",
    "MAX_RETRIES_KEY",
    "MAX_TOKENS_PER_REQUEST",
    "TIMEOUT_KEY",
    "OpenAIEmbeddingProvider",
]

#: Native output sizes of OpenAI's embedding models (dimensions), used when
#: ``EMBEDDING_DIMENSIONS`` is not set.
KNOWN_DIMENSIONS: Final[Mapping[str, int]] = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
#: The API's limit on inputs in one embeddings request (count).
MAX_INPUTS_PER_REQUEST: Final = 2048
#: The API's limit on tokens summed over the inputs of one request (count).
MAX_TOKENS_PER_REQUEST: Final = 300_000
#: Retries of a failed request (connection errors, 408, 409, 429, 5xx), done by the SDK with
#: exponential back-off; the SDK's own default.
DEFAULT_MAX_RETRIES: Final = 2
#: Seconds one request attempt may take.
DEFAULT_TIMEOUT: Final = 30.0
#: Settings keys (read from ``Settings.extra``) overriding the two defaults above.
MAX_RETRIES_KEY: Final = "OPENAI_MAX_RETRIES"
TIMEOUT_KEY: Final = "OPENAI_TIMEOUT"

_PROBE_TEXT: Final = "dimension probe"
_KEY_LIKE = re.compile(r"\b(sk|sess|org)-[A-Za-z0-9_\-*]{6,}")

_log = get_logger("charmem_openai")


def _estimated_tokens(text: str) -> int:
    """An upper bound of the tokens of ``text``: its UTF-8 length in bytes.

    Every token of OpenAI's byte-level BPE tokenizers covers at least one byte, so the byte count
    never underestimates, without shipping a tokenizer.
    """
    return len(text.encode("utf-8"))


def _positive_int(value: object, name: str, key: str | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{name} must be a positive integer, not {value!r}", key=key)
    return value


def _check_model_and_limits(
    model: object,
    dimensions: int | None,
    max_retries: object,
    timeout: object,
    max_batch_inputs: int,
    max_batch_tokens: int,
) -> None:
    """The constructor's checks of the model name, the vector size asked for and the limits.

    Raises:
        ConfigurationError: a blank model, or a size, retry count, timeout or batch limit out of
            range.
    """
    if not isinstance(model, str) or not model.strip():
        raise ConfigurationError("EMBEDDING_MODEL must name an embedding model", key="EMBEDDING_MODEL")
    if dimensions is not None:
        _positive_int(dimensions, "EMBEDDING_DIMENSIONS", "EMBEDDING_DIMENSIONS")
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ConfigurationError(f"max_retries must be an integer >= 0, not {max_retries!r}")
    if not (isinstance(timeout, int | float) and math.isfinite(timeout) and timeout > 0):
        raise ConfigurationError(f"timeout must be a positive number of seconds, not {timeout!r}")
    if _positive_int(max_batch_inputs, "max_batch_inputs") > MAX_INPUTS_PER_REQUEST:
        raise ConfigurationError(
            f"max_batch_inputs must be at most {MAX_INPUTS_PER_REQUEST} (the API's limit)"
        )
    _positive_int(max_batch_tokens, "max_batch_tokens")


def _check_endpoint(api_key: str | None, base_url: object, *, has_client: bool) -> None:
    """The constructor's checks of the key and the endpoint URL.

    Raises:
        ConfigurationError: no key and no client, or a base URL that is not a string or carries
            credentials (the value is not echoed).
    """
    if not has_client and not api_key:
        raise ConfigurationError(
            "OPENAI_API_KEY is required for the OpenAI embedding provider", key="OPENAI_API_KEY"
        )
    if base_url is not None and (not isinstance(base_url, str) or "@" in urlsplit(base_url).netloc):
        # user-info would be shown by every repr, error and httpx request log line (and httpx
        # would send it as basic auth in place of the API key); the value is not echoed
        raise ConfigurationError(
            "OPENAI_BASE_URL must be an http(s) URL without credentials (no user:password@); "
            "the API key belongs in OPENAI_API_KEY",
            key="OPENAI_BASE_URL",
        )


def _extra_number(extra: Mapping[str, str], key: str, *, integer: bool) -> float | None:
    raw = extra.get(key)
    if raw is None or not raw.strip():
        return None
    try:
        value = float(int(raw)) if integer else float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < (0 if integer else 1e-9):
        kind = "a non-negative integer" if integer else "a positive number of seconds"
        raise ConfigurationError(f"{key}={raw!r} must be {kind}", key=key)
    return value


def _run_blocking(factory: Any) -> Any:
    """Run ``factory()`` to completion on a private event loop in a helper thread."""
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="charmem-openai") as pool:
        return pool.submit(lambda: asyncio.run(factory())).result()


class _RedactedAPIError(Exception):
    """Stands in as the cause of a ``BackendError`` when the SDK's error text held the key.

    Attributes:
        status_code: the HTTP status, if the API answered.
        code: the API's error code (e.g. ``invalid_api_key``), if any.
    """

    def __init__(self, message: str, *, status_code: int | None, code: str | None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.code = code


class OpenAIEmbeddingProvider:
    """An :class:`charmem.ports.EmbeddingProvider` on OpenAI's embeddings API (async SDK).

    ``model_id`` is the model name (e.g. ``text-embedding-3-small``); ``vector_size`` is, in this
    order: ``vector_size`` when given, else ``dimensions`` (sent to the API, which shortens the
    text-embedding-3 vectors), else the model's native size from :data:`KNOWN_DIMENSIONS`. For any
    other model (a compatible server behind ``base_url``) it is asked: :meth:`create` and
    :meth:`from_settings` embed one probe text and take its length.

    Batching: ``embed_documents`` sends the texts in as few requests as the API allows, in order:
    at most ``max_batch_inputs`` (2048) texts and at most ``max_batch_tokens`` (300,000) estimated
    tokens per request, a token estimated as one UTF-8 byte (an upper bound, so no request exceeds
    the limit without a tokenizer). A single text over the per-input limit (8192 tokens) is sent
    alone and the API's refusal becomes a ``BackendError``. Empty texts, which the API refuses, are
    sent as a single space. Rows come back in input order whatever order the API lists them in.

    Retries and timeouts are the SDK's: ``max_retries`` (default 2, with exponential back-off,
    for connection errors, 408, 409, 429 and 5xx) and ``timeout`` (seconds per attempt, default
    30). Every SDK error becomes :class:`~charmem.errors.BackendError` naming the endpoint and the
    HTTP status, quoting at most 200 characters of the API's answer
    (:func:`charmem.errors.excerpt`); the API key never appears in a repr, a log line or an error
    (the SDK's message is scrubbed, and when it held the key the chained cause is a scrubbed
    stand-in).

    Args:
        model: the embedding model name.
        api_key: the API key (``OPENAI_API_KEY``); not needed when ``client`` is given.
        base_url: an OpenAI-compatible endpoint (``OPENAI_BASE_URL``), or ``None`` for OpenAI's;
            it must not carry credentials (``user:password@``).
        dimensions: ask the API for vectors of this size (text-embedding-3 models).
        vector_size: the size the vectors have, when already known (skips the probe).
        max_retries: SDK retries per request (count, >= 0).
        timeout: seconds per request attempt.
        max_batch_inputs: most texts per request (count, 1..2048).
        max_batch_tokens: most estimated tokens per request (count, >= 1).
        client: an ``openai.AsyncOpenAI`` to use instead of building one (not closed by
            :meth:`close`).
        http_client: an ``httpx.AsyncClient`` for the SDK (for proxies, or a mock transport in
            tests).

    Raises:
        ConfigurationError: a bad argument, a missing key or model, or a size that cannot be
            known without asking (use :meth:`create` or set ``dimensions``).
    """

    def __init__(
        self,
        *,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        dimensions: int | None = None,
        vector_size: int | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        timeout: float = DEFAULT_TIMEOUT,
        max_batch_inputs: int = MAX_INPUTS_PER_REQUEST,
        max_batch_tokens: int = MAX_TOKENS_PER_REQUEST,
        client: openai.AsyncOpenAI | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        _check_model_and_limits(model, dimensions, max_retries, timeout, max_batch_inputs, max_batch_tokens)
        _check_endpoint(api_key, base_url, has_client=client is not None)
        self._model = model.strip()
        self._dimensions = dimensions
        self._base_url = base_url
        self._max_retries = max_retries
        self._timeout = float(timeout)
        self._max_inputs = max_batch_inputs
        self._max_tokens = max_batch_tokens
        self._secret = api_key
        self._owns_client = client is None
        self._client = client or openai.AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            max_retries=max_retries,
            timeout=self._timeout,
            # the SDK takes an httpx (or httpx2) AsyncClient; its annotation names httpx2's only
            http_client=cast(Any, http_client),
        )
        self._endpoint = str(self._client.base_url).rstrip("/")
        size = vector_size if vector_size is not None else dimensions or KNOWN_DIMENSIONS.get(self._model)
        if size is None:
            raise ConfigurationError(
                f"the vector size of embedding model {self._model!r} is not known; set "
                "EMBEDDING_DIMENSIONS, or build the provider with OpenAIEmbeddingProvider.create() "
                "(or from_settings), which asks the API",
                key="EMBEDDING_DIMENSIONS",
            )
        self._vector_size = _positive_int(size, "vector_size")

    # ------------------------------------------------------------------ construction

    @classmethod
    async def create(cls, **kwargs: Any) -> OpenAIEmbeddingProvider:
        """Build a provider, asking the API for the vector size when it is not known.

        Takes the constructor's keyword arguments. Without ``vector_size``, ``dimensions`` or a
        model of :data:`KNOWN_DIMENSIONS`, one probe text is embedded and its length is the size.

        Raises:
            ConfigurationError: a bad argument.
            BackendError: the probe failed.
        """
        if (
            kwargs.get("vector_size") is None
            and kwargs.get("dimensions") is None
            and str(kwargs.get("model", "")).strip() not in KNOWN_DIMENSIONS
        ):
            probe = cls(**{**kwargs, "vector_size": 1})
            try:
                rows = await probe._request([_PROBE_TEXT])
            finally:
                if kwargs.get("client") is None and kwargs.get("http_client") is None:
                    await probe.close()
            kwargs["vector_size"] = len(rows[0])
            _log.info("embedding_size_probed", model=probe.model_id, vector_size=kwargs["vector_size"])
        return cls(**kwargs)

    @staticmethod
    def _settings_kwargs(settings: Settings) -> dict[str, Any]:
        if not settings.openai_api_key:
            raise ConfigurationError(
                "OPENAI_API_KEY is required when EMBEDDING_PROVIDER=openai", key="OPENAI_API_KEY"
            )
        if not settings.embedding_model:
            raise ConfigurationError(
                "EMBEDDING_MODEL is required when EMBEDDING_PROVIDER=openai (e.g. text-embedding-3-small)",
                key="EMBEDDING_MODEL",
            )
        kwargs: dict[str, Any] = {
            "model": settings.embedding_model,
            "api_key": settings.openai_api_key,
            "base_url": settings.openai_base_url,
            "dimensions": settings.embedding_dimensions,
        }
        retries = _extra_number(settings.extra, MAX_RETRIES_KEY, integer=True)
        if retries is not None:
            kwargs["max_retries"] = int(retries)
        timeout = _extra_number(settings.extra, TIMEOUT_KEY, integer=False)
        if timeout is not None:
            kwargs["timeout"] = timeout
        return kwargs

    @classmethod
    async def from_settings_async(
        cls, settings: Settings, *, http_client: httpx.AsyncClient | None = None
    ) -> OpenAIEmbeddingProvider:
        """Build from ``EMBEDDING_PROVIDER=openai`` settings (asks the size if unknown).

        Reads ``OPENAI_API_KEY``, ``EMBEDDING_MODEL``, ``EMBEDDING_DIMENSIONS`` and
        ``OPENAI_BASE_URL``, and from ``settings.extra`` ``OPENAI_MAX_RETRIES`` (count, default 2)
        and ``OPENAI_TIMEOUT`` (seconds per attempt, default 30).

        Raises:
            ConfigurationError: a required key is missing or a value is malformed.
            BackendError: the size probe failed.
        """
        return await cls.create(**cls._settings_kwargs(settings), http_client=http_client)

    @classmethod
    def from_settings(
        cls, settings: Settings, *, http_client: httpx.AsyncClient | None = None
    ) -> OpenAIEmbeddingProvider:
        """Blocking :meth:`from_settings_async` (the entry point ``openai`` of ``charmem.embedders``).

        A size probe, when needed, runs on a private event loop with a short-lived client; the
        returned provider's client connects on first use in the caller's loop.

        Raises:
            ConfigurationError: a required key is missing or a value is malformed.
            BackendError: the size probe failed.
        """
        kwargs = cls._settings_kwargs(settings)
        if kwargs["dimensions"] is None and kwargs["model"].strip() not in KNOWN_DIMENSIONS:

            async def probe() -> int:
                provider = await cls.create(**kwargs, http_client=http_client)
                size = provider.vector_size
                if http_client is None:
                    await provider.close()
                return size

            kwargs["vector_size"] = _run_blocking(probe)
        return cls(**kwargs, http_client=http_client)

    # ------------------------------------------------------------------ properties

    @property
    def model_id(self) -> str:
        """The model name (recorded in each collection's vector marker)."""
        return self._model

    @property
    def vector_size(self) -> int:
        """Dimensions of every vector returned."""
        return self._vector_size

    @property
    def dimensions(self) -> int | None:
        """The ``dimensions`` sent to the API, if any."""
        return self._dimensions

    @property
    def endpoint(self) -> str:
        """The API base URL requests go to."""
        return self._endpoint

    @property
    def max_retries(self) -> int:
        """SDK retries per request."""
        return self._max_retries

    @property
    def timeout(self) -> float:
        """Seconds per request attempt."""
        return self._timeout

    def __repr__(self) -> str:
        return (
            f"OpenAIEmbeddingProvider(model={self._model!r}, vector_size={self._vector_size}, "
            f"dimensions={self._dimensions!r}, endpoint={self._endpoint!r}, "
            f"max_retries={self._max_retries}, timeout={self._timeout:g})"
        )

    # ------------------------------------------------------------------ embedding

    def batches(self, texts: Sequence[str]) -> list[list[str]]:
        """Split ``texts`` (in order) into requests within the input and token limits.

        Returns:
            list[list[str]]: consecutive runs of the texts; each has at most ``max_batch_inputs``
            texts and at most ``max_batch_tokens`` estimated tokens, or is one text alone.
        """
        batches: list[list[str]] = []
        current: list[str] = []
        tokens = 0
        for text in texts:
            cost = _estimated_tokens(text)
            if current and (len(current) >= self._max_inputs or tokens + cost > self._max_tokens):
                batches.append(current)
                current, tokens = [], 0
            current.append(text)
            tokens += cost
        if current:
            batches.append(current)
        return batches

    def _scrub(self, text: str) -> str:
        if self._secret:
            text = text.replace(self._secret, "***")
        return _KEY_LIKE.sub(lambda m: f"{m.group(1)}-***", text)

    def _translate(self, exc: openai.OpenAIError, count: int) -> BackendError:
        where = f"OpenAI embeddings at {self._endpoint} (model {self._model!r}, {count} text(s))"
        status = getattr(exc, "status_code", None)
        code = getattr(exc, "code", None)
        body = getattr(exc, "body", None)
        message = body.get("message") if isinstance(body, dict) else None
        detail = self._scrub(str(message or getattr(exc, "message", None) or exc))
        if code:
            detail = f"{detail} [{self._scrub(str(code))}]"
        detail = excerpt(detail)  # an HTML error page of a proxy stays out of errors and markers
        if isinstance(exc, openai.APITimeoutError):
            message = (
                f"{where} did not answer within {self._timeout:g} s (after {self._max_retries} "
                "retries); try again later or raise OPENAI_TIMEOUT"
            )
        elif isinstance(exc, openai.APIConnectionError):
            message = f"could not reach {where}: {detail}; check OPENAI_BASE_URL and the network"
        elif isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
            message = f"{where} refused the API key (HTTP {status}: {detail}); check OPENAI_API_KEY"
        elif isinstance(exc, openai.RateLimitError):
            message = (
                f"{where} is rate limited (HTTP 429, after {self._max_retries} retries: {detail}); "
                "slow down or raise OPENAI_MAX_RETRIES"
            )
        elif isinstance(exc, openai.APIStatusError):
            message = f"{where} failed with HTTP {status}: {detail}"
        else:
            message = f"{where} failed: {type(exc).__name__}: {detail}"
        return BackendError(message)

    def _cause(self, exc: openai.OpenAIError) -> BaseException:
        """The exception to chain: the SDK's own, or a scrubbed stand-in if it holds the key."""
        texts = [str(exc), repr(getattr(exc, "body", None))]
        if self._secret and any(self._secret in text for text in texts):
            return _RedactedAPIError(
                self._scrub(str(exc)),
                status_code=getattr(exc, "status_code", None),
                code=getattr(exc, "code", None),
            )
        return exc

    async def _request(self, batch: list[str]) -> list[list[float]]:
        """One embeddings request; rows in input order.

        Raises:
            BackendError: the SDK failed, or the answer does not hold one row per text.
        """
        inputs = [text if text else " " for text in batch]
        extra: dict[str, Any] = {} if self._dimensions is None else {"dimensions": self._dimensions}
        try:
            response = await self._client.embeddings.create(
                model=self._model, input=inputs, encoding_format="float", **extra
            )
        except openai.OpenAIError as exc:
            error = self._translate(exc, len(batch))
            _log.warning(
                "embedding_request_failed",
                model=self._model,
                texts=len(batch),
                error=type(exc).__name__,
                status=getattr(exc, "status_code", None),
            )
            raise error from self._cause(exc)
        rows = sorted(response.data, key=lambda item: item.index)
        if [item.index for item in rows] != list(range(len(batch))):
            raise BackendError(
                f"OpenAI embeddings at {self._endpoint} answered {len(rows)} rows with indexes "
                f"{[item.index for item in rows][:10]} for {len(batch)} texts"
            )
        return [[float(x) for x in item.embedding] for item in rows]

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed memory texts: ``list[list[float]]``, one row per text, ``vector_size`` columns.

        Args:
            texts: the texts, any number (split into requests by :meth:`batches`).

        Returns:
            list[list[float]]: one row per text in input order.

        Raises:
            DimensionMismatchError: the API returned vectors of another size than ``vector_size``
                (a wrong ``EMBEDDING_DIMENSIONS``, or another model behind ``base_url``).
            BackendError: a request failed (after the SDK's retries) or returned non-finite values.
        """
        rows: list[list[float]] = []
        for batch in self.batches(list(texts)):
            got = await self._request(batch)
            for row in got:
                if len(row) != self._vector_size:
                    raise DimensionMismatchError(
                        f"OpenAI embeddings at {self._endpoint} returned {len(row)}-dimensional "
                        f"vectors for model {self._model!r}, but the provider declares "
                        f"{self._vector_size}; fix EMBEDDING_DIMENSIONS",
                        expected=self._vector_size,
                        actual=len(row),
                    )
                if not all(math.isfinite(x) for x in row):
                    raise BackendError(f"OpenAI embeddings at {self._endpoint} returned non-finite values")
            rows += got
        _log.debug("texts_embedded", model=self._model, texts=len(rows))
        return rows

    async def embed_query(self, text: str) -> list[float]:
        """Embed a recall cue: one row of ``vector_size`` floats.

        Raises:
            DimensionMismatchError, BackendError: as :meth:`embed_documents`.
        """
        return (await self.embed_documents([text]))[0]

    async def close(self) -> None:
        """Close the SDK client if the provider built it (idempotent)."""
        if self._owns_client:
            await self._client.close()
