"""The factory the ``charmem.embedders`` entry point ``openai`` names."""

from __future__ import annotations

from typing import Any

from charmem.composition import ClassFactory
from charmem.settings import Settings
from charmem_openai._provider import OpenAIEmbeddingProvider

__all__ = ["openai"]


class _OpenAIFactory(ClassFactory[OpenAIEmbeddingProvider]):
    """``EMBEDDING_PROVIDER=openai``: a size probe, when needed, runs in the caller's loop."""

    async def open(
        self, settings: Settings, collection: str | None = None, /, **options: Any
    ) -> OpenAIEmbeddingProvider:
        """:meth:`OpenAIEmbeddingProvider.from_settings_async`; ``collection`` is not read."""
        del collection
        return await OpenAIEmbeddingProvider.from_settings_async(settings, **options)


#: ``EMBEDDING_PROVIDER=openai`` (the library default).
openai = _OpenAIFactory(OpenAIEmbeddingProvider)
