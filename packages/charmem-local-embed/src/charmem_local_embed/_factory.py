"""The factories the entry points ``local`` of ``charmem.embedders`` and ``charmem.token_counters`` name.

Both build with the class's ``from_settings`` (nothing is loaded until first use), so the
default :class:`~charmem.composition.ClassFactory` is all they need.
"""

from __future__ import annotations

from charmem.composition import ClassFactory
from charmem_local_embed._provider import LocalEmbeddingProvider
from charmem_local_embed._tokens import LocalTokenCounter

__all__ = ["embedder", "token_counter"]

#: ``EMBEDDING_PROVIDER=local``.
embedder = ClassFactory(LocalEmbeddingProvider)
#: ``TOKEN_COUNTER=local``.
token_counter = ClassFactory(LocalTokenCounter)
