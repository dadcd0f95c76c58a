"""MemoryId interning: one live id per UUID, so equality and hashing are identity (done in C)."""

from __future__ import annotations

import copy
import gc
import multiprocessing
import os
import pickle
import signal
import threading
import uuid
import weakref
from concurrent.futures import ProcessPoolExecutor

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from charmem import DraftValidationError, MemoryId


def _every_way_to(raw: uuid.UUID) -> list[MemoryId]:
    made = MemoryId(raw)
    text = str(raw)
    return [
        made,
        MemoryId(text),
        MemoryId(text.upper()),
        MemoryId("{" + text + "}"),
        MemoryId(raw.hex),
        MemoryId(uuid.UUID(int=raw.int)),  # an equal but distinct UUID object
        MemoryId(made),
        MemoryId(value=raw),
        *(pickle.loads(pickle.dumps(made, protocol)) for protocol in range(pickle.HIGHEST_PROTOCOL + 1)),
        copy.copy(made),
        copy.deepcopy(made),
        copy.deepcopy({"k": [made]})["k"][0],
        attrs.evolve(made),
        attrs.evolve(MemoryId.new(), value=raw),
    ]


@given(st.uuids())
def test_an_id_made_any_way_is_the_one_live_id_of_its_uuid(raw: uuid.UUID) -> None:
    made = _every_way_to(raw)
    assert all(other is made[0] for other in made)
    assert all(other == made[0] and hash(other) == hash(made[0]) for other in made)
    assert len(set(made)) == 1
    assert all(other.value == raw and str(other) == str(raw) for other in made)


def test_deterministic_ids_are_the_live_id_of_their_uuid() -> None:
    a = MemoryId.deterministic("conv-26", "D1:3")
    assert MemoryId.deterministic("conv-26", "D1:3") is a
    assert MemoryId(str(a)) is a
    assert {a: 1}[MemoryId(a.value)] == 1


@given(st.uuids())
def test_an_id_never_equals_its_bare_uuid_or_string(raw: uuid.UUID) -> None:
    made = MemoryId(raw)
    assert made != raw and raw != made
    assert made != str(raw) and str(raw) != made
    keys = {made: "id", raw: "uuid", str(raw): "text"}
    assert len(keys) == 3 and keys[MemoryId(str(raw))] == "id"


def test_distinct_uuids_give_distinct_ids() -> None:
    a, b = MemoryId.new(), MemoryId.new()
    assert a != b and a is not b
    assert a == MemoryId(a.value) and b == MemoryId(b.value)


def test_an_id_is_frozen() -> None:
    made = MemoryId.new()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        made.value = uuid.uuid4()  # type: ignore[misc]


def test_bad_input_is_refused_and_leaves_no_id() -> None:
    for bad in ("not-a-uuid", "", 3, None, b"\x00" * 16):
        with pytest.raises(DraftValidationError):
            MemoryId(bad)


def test_an_id_no_one_holds_is_dropped_and_remade_equal() -> None:
    raw = uuid.uuid4()
    made = MemoryId(raw)
    watch = weakref.ref(made)
    del made
    gc.collect()
    assert watch() is None  # the intern table does not keep ids alive
    again = MemoryId(str(raw))
    assert again == MemoryId(raw) and again.value == raw


def test_threads_making_the_same_ids_get_the_same_objects() -> None:
    raws = [uuid.uuid4() for _ in range(300)]
    results: list[list[MemoryId]] = []
    start = threading.Barrier(6)

    def make(as_text: bool) -> None:
        start.wait()
        results.append([MemoryId(str(raw) if as_text else raw) for raw in raws])

    threads = [threading.Thread(target=make, args=(n % 2 == 0,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 6
    assert all(a is b for row in results[1:] for a, b in zip(results[0], row, strict=True))


def _deterministic_in_child(part: str) -> MemoryId:
    return MemoryId.deterministic("conv", part)


def test_an_id_from_another_process_is_the_live_id_here() -> None:
    here = MemoryId.deterministic("conv", "D1:1")
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        there = pool.submit(_deterministic_in_child, "D1:1").result()
    assert there is here
    assert hash(there) == hash(here)


@given(
    st.one_of(
        st.text(alphabet="0123456789abcdefABCDEF-{}:urnid+_ x", max_size=45),
        st.uuids().map(str),
        st.uuids().map(lambda raw: raw.hex),
    )
)
def test_an_id_reads_a_string_exactly_as_uuid_does(text: str) -> None:
    try:
        expected = uuid.UUID(text)
    except ValueError:
        with pytest.raises(DraftValidationError):
            MemoryId(text)
        return
    assert MemoryId(text).value == expected
    assert MemoryId(text) is MemoryId(expected)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_an_id_is_being_made_can_make_ids() -> None:
    from charmem.domain import ids

    held, release = threading.Event(), threading.Event()

    def make_an_id_slowly() -> None:
        with ids._MAKING:  # another thread in the middle of making an id at the fork
            held.set()
            release.wait()

    other = threading.Thread(target=make_an_id_slowly)
    other.start()
    held.wait()
    pid = os.fork()
    if pid == 0:  # the child: a new id needs the lock, which no thread of the child holds
        signal.alarm(10)  # a deadlock ends the child (exit by SIGALRM) instead of the test
        made = MemoryId.new()
        os._exit(0 if MemoryId(str(made)) is made else 1)
    release.set()
    other.join()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_an_id_without_a_value_says_what_to_pass() -> None:
    with pytest.raises(
        DraftValidationError, match=r"pass a uuid\.UUID or its string, or use MemoryId\.new\(\)"
    ):
        MemoryId()
    with pytest.raises(DraftValidationError) as info:
        MemoryId.__new__(MemoryId)
    assert info.value.field == "id"


# MemoryId(UUID(int=1)) as the release before ids were interned pickled it: protocol 4, and
# protocol 0 (which used to load as an id equal to none).
_OLD_PICKLES = (
    b"\x80\x04\x95Q\x00\x00\x00\x00\x00\x00\x00\x8c\x12charmem.domain.ids\x94\x8c\x08MemoryId"
    b"\x94\x93\x94)\x81\x94}\x94\x8c\x05value\x94\x8c\x04uuid\x94\x8c\x04UUID\x94\x93\x94)"
    b"\x81\x94}\x94\x8c\x03int\x94K\x01sbsb.",
    b"ccopy_reg\n_reconstructor\np0\n(ccharmem.domain.ids\nMemoryId\np1\nc__builtin__\nobject\n"
    b"p2\nNtp3\nRp4\n(dp5\nVvalue\np6\ng0\n(cuuid\nUUID\np7\ng2\nNtp8\nRp9\n(dp10\nVint\np11\n"
    b"I1\nsbsb.",
)


@pytest.mark.parametrize("old", _OLD_PICKLES, ids=["protocol 4", "protocol 0"])
def test_a_pickle_of_an_id_from_before_interning_says_how_to_rebuild_it(old: bytes) -> None:
    with pytest.raises(TypeError, match="rebuild them with MemoryId"):
        pickle.loads(old)
