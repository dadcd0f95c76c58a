"""Measure the WordPiece token counter: word-piece per word ratio and cost per count.

Usage: ``HF_HUB_OFFLINE=1 python scripts/measure_tokens.py [--data DIR]``

``--data`` is a folder of LoCoMo ``conv-*.json`` files (default: ``../shared/datasets/locomo``
beside the repository); every turn's text is one sample. Without it, generated sentences are used.
Costs are CPU time (``time.process_time``), so a busy machine inflates them less than wall time.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

from tokenizers import Tokenizer

from charmem.tokens import WhitespaceTokenCounter
from charmem_local_embed import LocalTokenCounter

_DEFAULT_DATA = Path(__file__).resolve().parents[3].parent / "shared" / "datasets" / "locomo"


def _turns(folder: Path) -> list[str]:
    texts: list[str] = []
    for path in sorted(folder.glob("conv-*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        conversation = document.get("conversation", document)
        for value in conversation.values():
            if isinstance(value, list):
                texts.extend(t["text"] for t in value if isinstance(t, dict) and "text" in t)
    return texts


def _generated(count: int) -> list[str]:
    return [
        f"My sister {verb} Lisbon in May, and note {i} says she liked the museums there."
        for i, verb in zip(range(count), ["visited", "left", "loved", "missed"] * count, strict=False)
    ]


def _cpu_micros_per_call(count: Callable[[str], int], texts: list[str]) -> float:
    started = time.process_time()
    for text in texts:
        count(text)
    return (time.process_time() - started) / len(texts) * 1e6


def main() -> None:
    """Print the ratio and the costs."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=_DEFAULT_DATA)
    args = parser.parse_args()
    texts = _turns(args.data) if args.data.is_dir() else []
    source = f"{len(texts)} LoCoMo turns" if texts else "2,000 generated sentences"
    texts = texts or _generated(2000)

    counter = LocalTokenCounter()
    started = time.perf_counter()
    counter.load()
    print(f"load tokenizer.json: {(time.perf_counter() - started) * 1000:.0f} ms")

    words = sum(len(text.split()) for text in texts)
    counted = [counter.count(text) for text in texts]
    raw = Tokenizer.from_file(str(counter.tokenizer_file))
    raw.no_truncation()
    raw.no_padding()
    pieces = [len(raw.encode(text, add_special_tokens=False)) for text in texts]
    ratio = sum(pieces) / words
    print(f"{source}: {words} whitespace words, {sum(pieces)} word pieces, {ratio:.3f} per word")
    floored = sum(1 for c, p in zip(counted, pieces, strict=True) if c != p)
    print(f"counted with the 4-characters floor: {sum(counted)} ({floored} texts floored)")
    spaced = sum(WhitespaceTokenCounter().count(text) for text in texts)
    print(f"whitespace counter (words, floored): {spaced}")

    lines = [f"- [2023-05-08] observation: {text}" for text in texts]
    print(f"render lines: {sum(len(line.split()) for line in lines) / len(lines):.1f} words on average")
    whole = LocalTokenCounter(cache_size=0)
    tokenizer = Tokenizer.from_file(str(whole.tokenizer_file))  # the library call, for comparison
    tokenizer.no_truncation()
    library = _cpu_micros_per_call(lambda t: len(tokenizer.encode(t, add_special_tokens=False)), lines)
    print(f"tokenizers encode of a whole line: {library:.1f} us CPU per line")
    print(f"counter, no cache:                 {_cpu_micros_per_call(whole.count, lines):.1f} us")
    cold = LocalTokenCounter()
    print(f"counter, cache cold:               {_cpu_micros_per_call(cold.count, lines):.1f} us")
    print(f"counter, cache warm:               {_cpu_micros_per_call(cold.count, lines):.1f} us")
    words_only = _cpu_micros_per_call(WhitespaceTokenCounter().count, lines)
    print(f"whitespace counter:                {words_only:.1f} us")


if __name__ == "__main__":
    main()
