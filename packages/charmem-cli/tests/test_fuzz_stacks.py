"""Fuzzing whole memories: the reference stack and the embedded stores, side by side.

Each example is a short sequence of operations (remember drafts or text, forget, correct, link,
retrieve, and switching the embedding provider's faults on or off) built from hostile input:
text of every Unicode plane, NUL, lone surrogates, SPARQL/JSON metacharacters, 1 MiB texts,
naive and out-of-range datetimes, ids shared by objects of different types (an entity and an
episode with the same id...), and an embedding provider answering NaN, infinite, wrong-length or
missing rows, non-numbers, or raising. The same sequence runs on the reference stack (core's
pure-Python adapters) and on the embedded stores as a user opens them (persistent Oxigraph,
Qdrant Edge, SQLite stats, through ``CharacterMemory.open``).

Properties, after every operation, on each stack:

* only :class:`~charmem.CharmemError` is raised (``DraftValidationError`` is also a ``ValueError``);
* after an error nothing changed: graph statements, vector points and stats rows are as before;
* every object written reads back equal, its text byte-identical, and every stored object of the
  collection decodes;
* every vector point belongs to a current stored object, and retrieved items carry the stored
  text exactly (also through the pack's JSON form);
* both stacks agree on which operations succeed and which error class the others raise.

At the end, with the provider healed: when no repair marker was ever reported, the incrementally
maintained vectors and stats equal what ``rebuild_vector_index`` / ``rebuild_stats`` derive from the
graph.

``CHARMEM_FUZZ_EXAMPLES=N`` turns this into a long random run (``benchmarks/fuzz.py``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import traceback
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import event, example, given
from hypothesis import strategies as st

from charmem import (
    BeliefAssertion,
    CharacterMemory,
    CharmemError,
    CorrectionTarget,
    CorrectMemoryDraft,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    EpisodeDraft,
    ForgetMemoryDraft,
    KnownAs,
    LinkDraft,
    MemoryId,
    ObservationDraft,
    Relation,
    RememberDrafts,
    RememberInput,
    ReplacementDerivedMemoryDraft,
    RetrievalContext,
    Settings,
    ThreadDraft,
)
from charmem.domain.model import DerivedMemory, MemoryObject, Observation
from charmem.domain.retrieval import CurrencyStatus
from charmem.domain.rules import content_equal
from charmem.testing import EmbeddingFault, FaultyEmbeddingProvider, HashingEmbeddingProvider, stores_of
from charmem_contract import FixedClock, reference_memory
from charmem_contract.strategies import (
    METACHARACTERS,
    MiB,
    fuzz_settings,
    instants,
    memory_texts,
    raw_texts,
    valid_instants,
)
from charmem_oxigraph import OxigraphGraphStore

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)
POOL = 10
_collections = itertools.count()


def pool_id(n: int) -> MemoryId:
    """The n-th id of the shared pool: drafts of different types draw from it, so ids collide."""
    return MemoryId.deterministic("charmem-fuzz-pool", n % POOL)


# ------------------------------------------------------------------------------------------ ops


@attrs.frozen
class Result:
    """What an operation wrote (objects to read back) and how many repair markers it reported."""

    objects: list[MemoryObject]
    markers: int


@attrs.frozen
class RememberDraftsOp:
    """Remember explicit drafts; each draft is ``(kind, kwargs)``, built inside the operation."""

    drafts: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]

    async def run(self, memory: CharacterMemory) -> Result:
        groups: dict[str, list[Any]] = {
            key: [] for key in ("episodes", "observations", "entities", "threads", "derived", "links")
        }
        for kind, kwargs in self.drafts:
            cls, group = _DRAFT_KINDS[kind]
            groups[group].append(cls(**dict(kwargs)))
        plan = await memory.prepare(RememberDrafts(**groups))
        outcome = await memory.commit(plan)
        return Result(list(plan.objects), len(outcome.repair_markers))


@attrs.frozen
class RememberTextOp:
    """The convenience path, optionally with a derived memory; ``slots`` are the pool ids of its
    episode, observation and derived memory (so later operations can target them), or ``None``.
    """

    text: str
    occurred_at: datetime | None
    summary: str | None
    derived_text: str | None
    slots: tuple[int, int, int] | None = None

    async def run(self, memory: CharacterMemory) -> Result:
        episode, observation, derived = (None, None, None) if self.slots is None else self.slots
        item = RememberInput(
            self.text,
            occurred_at=self.occurred_at,
            summary=self.summary,
            episode_id=None if episode is None else pool_id(episode),
            observation_id=None if observation is None else pool_id(observation),
        )
        if self.derived_text is not None:
            item = item.with_derived_memory(
                DerivedMemoryDraft(
                    DerivedType.REFLECTION,
                    self.derived_text,
                    id=None if derived is None else pool_id(derived),
                )
            )
        plan = await memory.prepare(item)
        outcome = await memory.commit(plan)
        return Result(list(plan.objects), len(outcome.repair_markers))


@attrs.frozen
class ForgetOp:
    target: int
    rationale: str
    recorded_at: datetime | None

    async def run(self, memory: CharacterMemory) -> Result:
        draft = ForgetMemoryDraft.suppress(pool_id(self.target), self.rationale, recorded_at=self.recorded_at)
        outcome = await memory.forget(draft)
        return Result([], len(outcome.repair_markers))


@attrs.frozen
class CorrectOp:
    target: int
    source: bool
    rationale: str
    replacement: str | None

    async def run(self, memory: CharacterMemory) -> Result:
        target = (CorrectionTarget.source_object if self.source else CorrectionTarget.derived_memory)(
            pool_id(self.target)
        )
        draft = CorrectMemoryDraft(target, self.rationale)
        if self.replacement is not None:
            draft = draft.with_replacement(
                ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, self.replacement)
            )
        outcome = await memory.correct(draft)
        stored = await stores_of(memory).graph.get_objects(list(outcome.replacement_ids))
        return Result(list(stored.values()), len(outcome.repair_markers))


@attrs.frozen
class LinkOp:
    from_index: int
    relation: Relation
    to_index: int
    rationale: str | None

    async def run(self, memory: CharacterMemory) -> Result:
        draft = LinkDraft(
            pool_id(self.from_index), self.relation, pool_id(self.to_index), rationale=self.rationale
        )
        outcome = await memory.link(draft)
        return Result([], len(outcome.repair_markers))


@attrs.frozen
class RetrieveOp:
    query: str
    as_of: datetime | None
    include_superseded: bool
    include_suppressed: bool
    focus: tuple[int, ...]

    async def run(self, memory: CharacterMemory) -> Result:
        context = RetrievalContext(
            query=self.query,
            as_of=self.as_of,
            include_superseded=self.include_superseded,
            include_suppressed=self.include_suppressed,
            focus_entity_ids=[pool_id(n) for n in self.focus],
        )
        pack = await memory.retrieve(context)
        stored = await stores_of(memory).graph.get_objects([item.id for item in pack.items])
        as_json = json.loads(json.dumps(pack.to_dict()))
        for item, item_json in zip(pack.items, as_json["items"], strict=True):
            obj = stored.get(item.id)
            assert obj is not None, f"a retrieved item {item.id} is not a stored object"
            if isinstance(obj, Observation | DerivedMemory):
                assert item.text == obj.text, f"retrieved text of {item.id} differs from the stored text"
            assert item_json["text"] == item.text, "the pack's JSON form changed an item's text"
        assert isinstance(pack.render(), str)
        return Result([], 0)


@attrs.frozen
class FaultOp:
    """Break (or heal, with ``None``) the embedding provider for the following operations."""

    fault: EmbeddingFault | None

    async def run(self, memory: CharacterMemory) -> Result:
        embedder = memory.embedder
        assert isinstance(embedder, FaultyEmbeddingProvider)
        if self.fault is None:
            embedder.heal()
        else:
            embedder.fail(self.fault)
        return Result([], 0)


Op = RememberDraftsOp | RememberTextOp | ForgetOp | CorrectOp | LinkOp | RetrieveOp | FaultOp

_DRAFT_KINDS: dict[str, tuple[type, str]] = {
    "episode": (EpisodeDraft, "episodes"),
    "observation": (ObservationDraft, "observations"),
    "entity": (EntityDraft, "entities"),
    "thread": (ThreadDraft, "threads"),
    "derived": (DerivedMemoryDraft, "derived"),
    "link": (LinkDraft, "links"),
}

# ----------------------------------------------------------------------------------- strategies


def mostly(
    valid: st.SearchStrategy[Any], invalid: st.SearchStrategy[Any], odds: int
) -> st.SearchStrategy[Any]:
    """``valid``, and ``invalid`` about once in ``odds + 1`` draws (``one_of`` is not uniform)."""
    return st.sampled_from([False] * odds + [True]).flatmap(lambda bad: invalid if bad else valid)


# mostly valid input (so the stores are exercised), sometimes invalid (so refusals are too)
texts = mostly(memory_texts(), raw_texts(huge=True), 6)
short_texts = mostly(memory_texts(huge=False), raw_texts(), 6)
ids = st.integers(min_value=0, max_value=POOL - 1)
id_lists = st.lists(ids, max_size=2).map(lambda ns: tuple(pool_id(n) for n in ns))
maybe_instants = st.none() | mostly(valid_instants(), instants(), 6)
# a batch has many fields: each is invalid more rarely, or most batches would be refused whole
batch_texts = mostly(memory_texts(), raw_texts(huge=True), 20)
batch_short_texts = mostly(memory_texts(huge=False), raw_texts(), 20)
batch_instants = st.none() | mostly(valid_instants(), instants(), 20)
#: lifecycle targets: mostly the seed world's ids (0, 1, 2: see SEED_WORLD), else any pool id
targets = mostly(st.integers(0, 2), ids, 2)
#: caller relations join any two memory objects; the others are refused for most endpoint types
_ANY_TO_ANY = (Relation.SUPPORTS, Relation.CONTRADICTS, Relation.ASSOCIATED_WITH, Relation.RESOLVES)


@st.composite
def link_ends(draw: st.DrawFn) -> tuple[int, Relation, int]:
    """Two ends, distinct but now and then, and a relation (mostly one any two objects allow)."""
    start = draw(targets)
    others = mostly(st.sampled_from([n for n in range(3) if n != start]), ids, 2)
    end = draw(mostly(others, st.just(start), 10))
    return start, draw(mostly(st.sampled_from(_ANY_TO_ANY), st.sampled_from(list(Relation)), 2)), end


slots = st.none() | st.permutations(range(POOL)).map(lambda order: (order[0], order[1], order[2]))


_ORDER = ("entity", "thread", "episode", "observation", "derived", "link")


@st.composite
def draft_batches(draw: st.DrawFn) -> tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]:
    """Drafts of one ``RememberDrafts``, mostly coherent, sometimes not.

    Each draft takes a pool id (distinct within the batch, except now and then: a collision in
    the batch; across batches ids collide often, and across types). References mostly point at
    drafts of the right kind in the same batch, else at any pool id (stored or not, any type).
    """
    kinds = sorted(draw(st.lists(st.sampled_from(_ORDER), min_size=1, max_size=6)), key=_ORDER.index)
    free = draw(st.permutations(range(3, POOL)))  # 0, 1, 2: the seed world's ids
    made: dict[str, list[MemoryId]] = {kind: [] for kind in _ORDER}

    def new_id(index: int) -> MemoryId:
        used = [i for ids_ in made.values() for i in ids_]
        choice = draw(st.sampled_from(["free"] * 8 + ["batch", "seed"]))
        if choice == "batch" and used:
            return draw(st.sampled_from(used))  # a collision inside the batch
        if choice == "seed":
            return pool_id(draw(st.integers(0, 2)))  # maybe a collision with the seed world
        return pool_id(free[index % len(free)])

    def ref(kind: str) -> MemoryId:
        if made[kind] and draw(st.integers(0, 5)):
            return draw(st.sampled_from(made[kind]))
        return pool_id(draw(ids))

    def refs(kind: str) -> tuple[MemoryId, ...]:
        return tuple(sorted({ref(kind) for _ in range(draw(st.integers(0, 2)))}))

    batch = []
    for index, kind in enumerate(kinds):
        kwargs: dict[str, Any] = {"id": new_id(index)}
        if kind == "episode":
            kwargs.update(summary=draw(st.just("") | batch_texts), occurred_at=draw(batch_instants))
            kwargs.update(participant_entity_ids=refs("entity"), thread_ids=refs("thread"))
        elif kind == "observation":
            kwargs.update(text=draw(batch_texts), episode_id=ref("episode"), observed_at=draw(batch_instants))
            kwargs.update(mentioned_entity_ids=refs("entity"), raw_ref=draw(st.none() | batch_short_texts))
        elif kind == "entity":
            kwargs.update(entity_type=draw(batch_short_texts), created_at=draw(batch_instants))
        elif kind == "thread":
            kwargs.update(title=draw(batch_short_texts), summary=draw(st.just("") | batch_texts))
        elif kind == "derived":
            subjects = refs("entity")
            kwargs.update(derived_type=draw(st.sampled_from(list(DerivedType))), text=draw(batch_texts))
            kwargs["entity_ids"] = subjects
            kwargs["assertions"] = tuple(
                BeliefAssertion(subject, KnownAs(draw(memory_texts(huge=False)))) for subject in subjects
            )
            if subjects and draw(st.booleans()):
                kwargs["given_by_application"] = True
            else:
                kwargs.update(episode_ids=refs("episode"), observation_ids=refs("observation"))
            kwargs["supersedes"] = draw(st.just(()) | st.just(refs("derived")))
        else:
            ends = [i for ids_ in made.values() for i in ids_] or [pool_id(0)]
            kwargs.update(
                from_id=draw(st.sampled_from(ends)),
                relation=draw(st.sampled_from(list(Relation))),
                to_id=draw(st.sampled_from(ends) | ids.map(pool_id)),
                rationale=draw(st.none() | batch_short_texts),
            )
        made[kind].append(kwargs["id"])
        batch.append((kind, tuple(sorted(kwargs.items()))))
    return tuple(batch)


remember_texts = st.builds(
    RememberTextOp, texts, maybe_instants, st.none() | short_texts, st.none() | short_texts, slots
)
operations: st.SearchStrategy[Op] = st.one_of(
    st.builds(RememberDraftsOp, draft_batches()),
    st.builds(RememberDraftsOp, draft_batches()),
    remember_texts,
    remember_texts,
    st.builds(ForgetOp, targets, short_texts, maybe_instants),
    st.builds(CorrectOp, targets, st.booleans(), short_texts, st.none() | short_texts),
    st.tuples(link_ends(), st.none() | short_texts).map(lambda args: LinkOp(*args[0], args[1])),
    st.builds(
        RetrieveOp,
        texts,
        maybe_instants,
        st.booleans(),
        st.booleans(),
        st.lists(ids, max_size=2).map(tuple),
    ),
    st.builds(FaultOp, st.none() | st.sampled_from(list(EmbeddingFault))),
)

# --------------------------------------------------------------------------------------- stacks


@pytest.fixture(scope="module")
def embedded_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One store root for the module; each example opens its own collection in it.

    A graph store is kept open on the Oxigraph path for the whole module, so the process's shared
    handle is not reopened by every example (collections are named graphs of that one store).
    """
    root = tmp_path_factory.mktemp("fuzz-stores")
    keeper = OxigraphGraphStore.open("keeper", path=embedded_settings(root).oxigraph_path)
    try:
        yield root
    finally:
        asyncio.run(keeper.close())


def embedded_settings(root: Path) -> Settings:
    """The embedded defaults (persistent Oxigraph, Qdrant Edge, SQLite stats) under ``root``."""
    return Settings.from_mapping({}).with_store_root(root)


async def snapshot(memory: CharacterMemory) -> tuple[int, frozenset[MemoryId], int]:
    """What must not change when an operation fails: statements, vector points, stats rows."""
    return (
        await stores_of(memory).graph.statement_count(),
        frozenset(await stores_of(memory).vectors.point_ids()),
        await stores_of(memory).stats.row_count(),
    )


async def check_consistency(memory: CharacterMemory, written: dict[MemoryId, MemoryObject]) -> None:
    """Everything written reads back exactly; every stored object decodes; vectors are current."""
    stored = await stores_of(memory).graph.get_objects(sorted(written))
    for memory_id, obj in written.items():
        back = stored.get(memory_id)
        assert back is not None, f"{memory_id} was written but cannot be read back"
        assert type(back) is type(obj) and content_equal(back, obj), f"{memory_id} reads back different"
        for name in ("text", "summary", "title", "entity_type", "raw_ref"):
            if hasattr(obj, name):
                assert getattr(back, name) == getattr(obj, name), f"{name} of {memory_id} changed"
    every = await stores_of(memory).graph.object_ids()
    assert set(every) >= set(written)
    assert len(await stores_of(memory).graph.get_objects(every)) == len(every), (
        "a stored object does not decode"
    )
    points = sorted(await stores_of(memory).vectors.point_ids())
    currency = await stores_of(memory).graph.currency(points)
    stale = [p for p in points if currency.get(p) is not CurrencyStatus.CURRENT]
    assert not stale, f"vector points of objects that are not current (or not stored): {stale}"


Outcome = tuple[str, ...]


async def run_sequence(memory: CharacterMemory, ops: list[Op]) -> list[str]:
    """Run ``ops`` on ``memory`` checking the properties; the outcome of each op, in order."""
    written: dict[MemoryId, MemoryObject] = {}
    outcomes: list[str] = []
    markers_seen = False
    for op in ops:
        before = await snapshot(memory)
        try:
            result = await op.run(memory)
        except CharmemError as exc:
            outcomes.append(type(exc).__name__)
            failure: CharmemError | None = exc
        except AssertionError:
            raise
        except Exception as exc:  # noqa: BLE001 - the property under test
            pytest.fail(f"untyped {type(exc).__name__} escaped {op!r}: {exc!r}\n{traceback.format_exc()}")
        else:
            failure = None
            outcomes.append("ok")
            written.update((obj.id, obj) for obj in result.objects)
            markers_seen = markers_seen or result.markers > 0
        if failure is not None:
            after = await snapshot(memory)
            assert after == before, f"{type(failure).__name__} left a partial write: {failure}"
        await check_consistency(memory, written)
    # with no fault and no repair marker, the incremental writes kept exactly the points and rows
    # a rebuild from the graph derives
    embedder = memory.embedder
    assert isinstance(embedder, FaultyEmbeddingProvider)
    faulted = any(isinstance(op, FaultOp) and op.fault is not None for op in ops)
    embedder.heal()
    points = await stores_of(memory).vectors.point_ids()
    summary = await stores_of(memory).stats.summary()
    await memory.rebuild_vector_index(batch_size=7)
    await memory.rebuild_stats()
    if not faulted and not markers_seen:
        assert await stores_of(memory).vectors.point_ids() == points, (
            "incremental vectors differ from a rebuild"
        )
    if not markers_seen:
        assert await stores_of(memory).stats.summary() == summary, "incremental stats differ from a rebuild"
    await check_consistency(memory, written)
    return outcomes


class PrefixHashingEmbedder(HashingEmbeddingProvider):
    """The hashing embedder over the first 4096 characters of a text (as real models truncate).

    Keeps 1 MiB texts cheap to embed; the stores still receive and keep the whole text.
    """

    def embed(self, text: str) -> list[float]:
        return super().embed(text[:4096])


def run_both(root: Path, ops: list[Op]) -> None:
    embedder = PrefixHashingEmbedder(vector_size=16)

    async def reference() -> list[str]:
        memory = reference_memory("fuzz", FaultyEmbeddingProvider(embedder), clock=FixedClock(T0))
        try:
            return await run_sequence(memory, ops)
        finally:
            await memory.close()

    async def embedded() -> list[str]:
        name = f"fuzz-{next(_collections)}"
        memory = await CharacterMemory.open(
            embedded_settings(root),
            name,
            embedding_provider=FaultyEmbeddingProvider(embedder),
            clock=FixedClock(T0),
        )
        try:
            return await run_sequence(memory, ops)
        finally:
            await memory.close()

    expected = asyncio.run(reference())
    got = asyncio.run(embedded())
    assert got == expected, f"the embedded stores and the reference stack disagree: {got} != {expected}"
    for op, outcome in zip(ops, got, strict=True):
        event(f"{type(op).__name__}: {outcome}")


HUGE = ('"""} ; DROP ALL ; #\x00\u2028 ' * (MiB // 20 + 1))[:MiB]
#: Fuzz findings and hand-picked hostile sequences, replayed on every run.
REGRESSIONS: list[list[Op]] = [
    # an entity and an episode sharing an id; a 1 MiB text of metacharacters; NUL and U+2028
    [
        RememberDraftsOp(
            (
                ("entity", (("entity_type", "person"), ("id", pool_id(0)))),
                ("episode", (("id", pool_id(0)), ("summary", "\x00\u2028"))),
            )
        ),
        RememberDraftsOp(
            (
                ("entity", (("entity_type", "<urn:x>"), ("id", pool_id(1)))),
                ("episode", (("id", pool_id(2)), ("summary", HUGE))),
                ("observation", (("episode_id", pool_id(2)), ("id", pool_id(3)), ("text", HUGE))),
            )
        ),
        RetrieveOp("DROP ALL", None, True, True, (1,)),
    ],
    # an instant that leaves the calendar once normalised to UTC, and a sub-minute offset
    [
        RememberTextOp(
            "late", datetime(9999, 12, 31, 23, 59, tzinfo=timezone(timedelta(hours=-1))), None, None
        ),
        RememberTextOp("odd", datetime(2024, 1, 1, tzinfo=timezone(timedelta(seconds=30))), None, None),
        RetrieveOp("late", datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=2))), False, False, ()),
    ],
    # every provider fault, on a write and on a query
    [
        op
        for fault in EmbeddingFault
        for op in (
            FaultOp(fault),
            RememberTextOp("the violin lesson", T0, None, "she likes tea"),
            RetrieveOp("violin", None, False, False, ()),
        )
    ],
    # names and rationales that try to end the SPARQL string, the graph group or the query
    [
        RememberDraftsOp(
            (
                ("entity", (("entity_type", "person"), ("id", pool_id(4)))),
                (
                    "derived",
                    (
                        ("assertions", (BeliefAssertion(pool_id(4), KnownAs(METACHARACTERS[31])),)),
                        ("derived_type", DerivedType.CLAIM),
                        ("entity_ids", (pool_id(4),)),
                        ("given_by_application", True),
                        ("id", pool_id(5)),
                        ("text", '" } ; DROP ALL ; #'),
                    ),
                ),
            )
        ),
        CorrectOp(5, False, '"""\\"', None),
        ForgetOp(5, "} } ; CLEAR ALL", None),
        RetrieveOp("CLEAR ALL", None, True, True, (4,)),
    ],
]


#: Most sequences start from a small stored world (an episode, its observation and a derived memory
#: at pool ids 0, 1, 2), so forget, correct and link often meet real targets.
SEED_WORLD = RememberTextOp("we planted tomatoes", T0, "a garden day", "she likes gardening", (0, 1, 2))
sequences = st.lists(operations, min_size=1, max_size=6)


@fuzz_settings(10)
@given(ops=st.one_of(sequences, sequences.map(lambda ops: [SEED_WORLD, *ops])))
def test_fuzzed_operations_keep_every_stack_consistent(embedded_root: Path, ops: list[Op]) -> None:
    run_both(embedded_root, ops)


for _regression in REGRESSIONS:
    test_fuzzed_operations_keep_every_stack_consistent = example(ops=_regression)(
        test_fuzzed_operations_keep_every_stack_consistent
    )
