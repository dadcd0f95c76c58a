"""Measure load time and embedding throughput of the packaged model (run in a fresh process).

Usage: ``HF_HUB_OFFLINE=1 python scripts/measure.py [--texts 1000] [--batch-size 64]``
"""

from __future__ import annotations

import argparse
import time

from charmem_local_embed import LocalEmbeddingProvider

_SUBJECTS = ["My sister", "The old dog", "Our neighbour", "The assistant", "A friend from work"]
_VERBS = ["moved to", "talked about", "dreamed of", "complained about", "laughed at"]
_OBJECTS = [
    "Lisbon in May",
    "the broken bike",
    "her new job",
    "the rainy weekend",
    "a jazz concert",
]


def _sentences(count: int) -> list[str]:
    return [
        f"{_SUBJECTS[i % 5]} {_VERBS[(i // 5) % 5]} {_OBJECTS[(i // 25) % 5]} (note {i})."
        for i in range(count)
    ]


def main() -> None:
    """Print import, load and throughput figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--texts", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    started = time.perf_counter()
    import sentence_transformers  # noqa: F401 - timed on purpose

    imported = time.perf_counter()
    provider = LocalEmbeddingProvider(batch_size=args.batch_size, num_threads=args.threads)
    provider.load()
    loaded = time.perf_counter()
    print(f"import sentence-transformers+torch: {imported - started:.2f} s")
    print(f"load weights:                       {loaded - imported:.2f} s")

    texts = _sentences(args.texts)
    provider.embed_documents_sync(texts[:64])  # warm-up
    for _ in range(args.repeat):
        begin = time.perf_counter()
        rows = provider.embed_documents_sync(texts)
        seconds = time.perf_counter() - begin
        assert len(rows) == len(texts)
        print(
            f"{len(texts)} texts, batch {args.batch_size}: {seconds:.2f} s, "
            f"{len(texts) / seconds:.0f} texts/s"
        )
    begin = time.perf_counter()
    for text in texts[:200]:
        provider.embed_query_sync(text)
    per_query = (time.perf_counter() - begin) / 200
    print(f"embed_query_sync latency: {per_query * 1000:.1f} ms")


if __name__ == "__main__":
    main()
