"""The differential state machine of the facade suite: the stack under test against the reference.

Random sequences of operations run on the stack under test and on the reference stack (core's
reference adapters and the same embedder) side by side. After every operation both must agree:
the same error class or the same outcome; and every retrieval must give the same item ids, in the
same order, with the same statuses and scores (rounded to 1e-6), the same omissions and entities.

Hypothesis drives the machine from a worker thread; each operation is a coroutine run on the
test's event loop (:class:`LoopRunner`), where the stack under test was opened.

Operations: remember (convenience and explicit paths, given names, interpretations, caller links,
id reuse, plan replay), correct, forget, link, retrieve (also with superseded and suppressed
memories) and reopen. Adding an operation is one more ``@rule`` that builds its draft from the ids
in :class:`Model` and calls :meth:`MemoryComparison.both` with a coroutine function of one memory.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Coroutine
from datetime import timedelta
from typing import Any, ClassVar, TypeVar

import attrs
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from charmem import (
    BeliefAssertion,
    CharacterMemory,
    CharmemError,
    ContinuityContextPack,
    CorrectionTarget,
    CorrectMemoryDraft,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    ForgetMemoryDraft,
    GraphLimits,
    KnownAs,
    LinkDraft,
    MemoryId,
    ObjectType,
    PrepareOptions,
    Relation,
    RememberDrafts,
    RememberInput,
    RememberOptions,
    RememberOutcome,
    RememberWritePlan,
    ReplacementDerivedMemoryDraft,
    RetrievalContext,
    ThreadDraft,
)
from charmem.clock import SystemClock
from charmem.ports import EmbeddingProvider
from charmem.testing import stores_of
from charmem_contract.data import T0
from charmem_contract.stacks import MemoryFactory, reference_memory

__all__ = ["SCORE_TOLERANCE", "LoopRunner", "MemoryComparison", "pack_signature", "packs_agree"]

T = TypeVar("T")

WORDS = ("garden", "tomatoes", "violin", "lesson", "tea", "morning", "Mina", "rain", "the", "project")
NAMES = ("Mina", "Jun", "Dr. Park", "Oma")
#: Few instants so equal event times (ties) happen. None is after T0, the stacks' fixed clock:
#: lifecycle records are refused beyond the clock's now, and steps refused alike on both stacks
#: would compare nothing.
INSTANTS = tuple(T0 + timedelta(hours=h) for h in (-5, -5, -4, -3, 0))
CALLER_RELATIONS = (
    Relation.SUPPORTS,
    Relation.CONTRADICTS,
    Relation.ASSOCIATED_WITH,
    Relation.RESOLVES,
    Relation.SUPERSEDES,  # always refused: caller supersedes links are rejected by both stacks
)

#: Few phrases, so equal texts (equal vectors, tied scores) are frequent; plus free word lists.
PHRASES = ("we planted tomatoes", "tea in the morning", "the violin lesson", "rain", "Mina and the garden")
texts = st.sampled_from(PHRASES) | st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join)
#: Explicit ids (rarely equal by chance; conflicts come from :meth:`MemoryComparison.reuse_an_id`).
ids = st.integers(min_value=0, max_value=10**9).map(
    lambda n: MemoryId.deterministic("charmem-contract-state-machine", n)
)
instants = st.sampled_from(INSTANTS)


#: Largest score difference two stacks may show (float32 stores against float64 references).
SCORE_TOLERANCE = 1e-6


def pack_signature(pack: ContinuityContextPack) -> dict[str, Any]:
    """What must be equal between two stacks: ids, order, statuses, omissions, entities.

    Scores are listed separately: compare them with :func:`packs_agree` (to
    :data:`SCORE_TOLERANCE`), since rounding two nearly equal floats can land on either side of a
    rounding boundary.
    """
    return {
        "items": [(str(item.id), item.object_type.value, item.status.value) for item in pack.items],
        "scores": [item.score for item in pack.items],
        "omissions": [(str(o.id), o.reason) for o in pack.omissions],
        "entities": [(str(e.id), e.names) for e in pack.entities],
        "completeness": (pack.completeness.kind.value, pack.completeness.scanned),
    }


def packs_agree(expected: dict[str, Any], got: dict[str, Any]) -> bool:
    """Whether two :func:`pack_signature` values are equal, scores to :data:`SCORE_TOLERANCE`."""
    if {k: v for k, v in expected.items() if k != "scores"} != {
        k: v for k, v in got.items() if k != "scores"
    }:
        return False
    return all(abs(a - b) <= SCORE_TOLERANCE for a, b in zip(expected["scores"], got["scores"], strict=True))


def _rounded(signature: dict[str, Any]) -> dict[str, Any]:
    """A signature for messages: scores rounded to 1e-6 next to their items."""
    items = [
        (*item, round(score, 6)) for item, score in zip(signature["items"], signature["scores"], strict=True)
    ]
    return {**{k: v for k, v in signature.items() if k != "scores"}, "items": items}


def _outcome_signature(outcome: RememberOutcome) -> tuple[list[str], list[str]]:
    return [str(i) for i in outcome.object_ids], sorted(str(i) for i in outcome.link_ids)


class LoopRunner:
    """Runs coroutines on an event loop from another thread (the one hypothesis runs in)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float = 120.0) -> None:
        self.loop = loop
        self.timeout = timeout

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and wait for its result (or exception)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(self.timeout)


@attrs.define
class Model:
    """What the stacks hold (only what both accepted), to build valid and colliding drafts."""

    observations: list[MemoryId] = attrs.field(factory=list)
    episodes: list[MemoryId] = attrs.field(factory=list)
    derived: list[MemoryId] = attrs.field(factory=list)
    entities: list[MemoryId] = attrs.field(factory=list)
    last_plan: str | None = None


class MemoryComparison(RuleBasedStateMachine):
    """Remember, correct, forget, link and retrieve on both stacks; they agree after every step.

    Configure with :meth:`bind` before running (it returns a subclass bound to one test).
    """

    runner: ClassVar[LoopRunner]
    factory: ClassVar[MemoryFactory]
    can_reopen: ClassVar[bool] = False
    #: Compare the vector indexes too (needs the subject's stores; off for a remote memory).
    white_box: ClassVar[bool] = True
    #: The embedder of the reference stack (default: the subject's own ``embedder``).
    embedder: ClassVar[EmbeddingProvider | None] = None
    _collections: ClassVar[itertools.count[int]] = itertools.count()

    @classmethod
    def bind(
        cls,
        runner: LoopRunner,
        factory: MemoryFactory,
        *,
        can_reopen: bool,
        white_box: bool = True,
        embedder: EmbeddingProvider | None = None,
    ) -> type[MemoryComparison]:
        """A subclass that opens its stacks with ``factory`` and runs coroutines with ``runner``.

        ``white_box=False`` compares through the facade only (a remote memory has no stores
        here); ``embedder`` is then the one the subject's server uses.
        """
        return type(
            "MemoryComparison",
            (cls,),
            {
                "runner": runner,
                "factory": factory,
                "can_reopen": can_reopen,
                "white_box": white_box,
                "embedder": embedder,
            },
        )

    def __init__(self) -> None:
        super().__init__()
        self.collection = f"sm-{next(self._collections)}"
        self.subject: CharacterMemory = self.runner.run(self.factory.open(self.collection))
        # The same clock: lifecycle records are refused beyond the clock's now (and its skew). A
        # memory in another process (a remote client) shows no clock: it runs on the wall clock.
        clock = getattr(self.subject, "clock", None) or SystemClock()
        self.reference = reference_memory(
            self.collection, self.embedder or self.subject.embedder, clock=clock
        )
        self.model = Model()
        self.steps: list[str] = []
        self.reopened = False

    def teardown(self) -> None:
        """Close both stacks (the factory closes the subject again harmlessly)."""
        self.runner.run(self.subject.close())
        self.runner.run(self.reference.close())

    # -- the comparison --------------------------------------------------------------------

    def both(
        self, label: str, operation: Callable[[CharacterMemory], Awaitable[T]]
    ) -> tuple[T | None, T | None]:
        """Run ``operation`` on the reference and on the subject; both must fail alike or succeed.

        Returns:
            (reference result, subject result); both ``None`` when both raised the same class.
        """
        if not label.startswith("prepare "):
            self.steps.append(label)

        async def attempt(memory: CharacterMemory) -> tuple[T | None, CharmemError | None]:
            try:
                return await operation(memory), None
            except CharmemError as exc:
                return None, exc

        expected, expected_error = self.runner.run(attempt(self.reference))
        got, got_error = self.runner.run(attempt(self.subject))
        assert type(got_error) is type(expected_error), (
            f"{label}: the reference stack {_describe(expected_error)} but the stack under test "
            f"{_describe(got_error)}"
        )
        return expected, got

    def compare(self, label: str, reference: ContinuityContextPack, subject: ContinuityContextPack) -> None:
        """The two packs agree (:func:`packs_agree`); the message lists the steps so far."""
        expected, got = pack_signature(reference), pack_signature(subject)
        assert packs_agree(expected, got), (
            f"{label} differs from the reference stack after: {'; '.join(self.steps)}\n"
            f"reference: {_rounded(expected)}\nunder test: {_rounded(got)}"
        )

    def remember(self, label: str, item: RememberInput | RememberDrafts, when: Any) -> bool:
        """Prepare on both (plans must be equal), commit on both; True when both committed."""
        options = RememberOptions(prepare=PrepareOptions(now=when))
        plans = self.both(f"prepare {label}", lambda m: m.prepare(item, options.prepare))
        plan_json = None if plans[0] is None else plans[0].to_json()
        if plans[0] is not None and plans[1] is not None:
            assert plan_json == plans[1].to_json(), f"prepare {label}: the plans differ"
        outcomes = self.both(label, lambda m: m.remember(item, options))
        if outcomes[0] is None or outcomes[1] is None:
            return False
        assert _outcome_signature(outcomes[0]) == _outcome_signature(outcomes[1]), f"{label}: outcomes differ"
        assert outcomes[1].repair_markers == (), f"{label}: repair markers {outcomes[1].repair_markers}"
        self.model.last_plan = plan_json
        return True

    # -- rules: remember -------------------------------------------------------------------

    @rule(
        text=texts,
        summary=st.none() | texts,
        when=instants,
        episode_id=ids,
        observation_id=ids,
        derived_id=st.none() | ids,
        derived_type=st.sampled_from(DerivedType),
    )
    def remember_input(
        self,
        text: str,
        summary: str | None,
        when: Any,
        episode_id: MemoryId,
        observation_id: MemoryId,
        derived_id: MemoryId | None,
        derived_type: DerivedType,
    ) -> None:
        """The convenience path, with explicit ids, optionally with an interpretation attached."""
        item = RememberInput(
            text,
            summary=summary,
            occurred_at=when,
            created_at=when,
            episode_id=episode_id,
            observation_id=observation_id,
        )
        if derived_id is not None:
            item = item.with_derived_memory(
                DerivedMemoryDraft(derived_type, f"{text} noted", id=derived_id, created_at=when)
            )
        if self.remember(f"remember_input({text!r})", item, when):
            self.model.episodes.append(episode_id)
            self.model.observations.append(observation_id)
            if derived_id is not None:
                self.model.derived.append(derived_id)

    @rule(
        data=st.data(),
        belief_id=ids,
        name=st.sampled_from(NAMES),
        kind=st.sampled_from(["person", "place"]),
    )
    def give_a_name(self, data: st.DataObject, belief_id: MemoryId, name: str, kind: str) -> None:
        """The explicit path: a notion (new or stored) and a given KnownAs belief, no episode at all.

        A stored notion is written again with the same content (accepted) or, as the other kind,
        with different content (refused by both stacks).
        """
        known = st.sampled_from(self.model.entities) if self.model.entities else ids
        entity_id = data.draw(known | ids)
        item = RememberDrafts(
            entities=[EntityDraft(id=entity_id, entity_type=kind, created_at=T0)],
            derived=[
                DerivedMemoryDraft(
                    DerivedType.CLAIM,
                    f"they are called {name}",
                    id=belief_id,
                    entity_ids=[entity_id],
                    assertions=[BeliefAssertion(entity_id, KnownAs(name))],
                    given_by_application=True,
                    created_at=T0,
                )
            ],
        )
        if self.remember(f"give_a_name({name!r})", item, T0) and entity_id not in self.model.entities:
            self.model.entities.append(entity_id)
            self.model.derived.append(belief_id)

    @precondition(lambda self: bool(self.model.observations))
    @rule(data=st.data(), derived_id=ids, text=texts, when=instants)
    def interpret(self, data: st.DataObject, derived_id: MemoryId, text: str, when: Any) -> None:
        """A derived memory grounded on stored observations, possibly superseding stored ones."""
        sources = data.draw(st.lists(st.sampled_from(self.model.observations), min_size=1, max_size=3))
        supersedes = (
            data.draw(st.lists(st.sampled_from(self.model.derived), max_size=2)) if self.model.derived else []
        )
        subjects = (
            data.draw(st.lists(st.sampled_from(self.model.entities), max_size=2))
            if self.model.entities
            else []
        )
        item = RememberDrafts(
            derived=[
                DerivedMemoryDraft(
                    DerivedType.REFLECTION,
                    text,
                    id=derived_id,
                    observation_ids=sources,
                    supersedes=supersedes,
                    entity_ids=subjects,
                    created_at=when,
                )
            ]
        )
        if self.remember(f"interpret({text!r}, supersedes={len(supersedes)})", item, when):
            self.model.derived.append(derived_id)

    @precondition(lambda self: len(self.model.observations) + len(self.model.derived) >= 2)
    @rule(data=st.data(), link_id=ids, relation=st.sampled_from(CALLER_RELATIONS), when=instants)
    def remember_a_link(self, data: st.DataObject, link_id: MemoryId, relation: Relation, when: Any) -> None:
        """A caller link inside RememberDrafts (supersedes ones must be refused by both)."""
        pool = [*self.model.observations, *self.model.derived]
        from_id = data.draw(st.sampled_from(pool))
        to_id = data.draw(st.sampled_from(pool))
        item = RememberDrafts(links=[LinkDraft(from_id, relation, to_id, id=link_id, recorded_at=when)])
        self.remember(f"remember_a_link({relation.value})", item, when)

    @precondition(lambda self: bool(self.model.observations or self.model.derived))
    @rule(data=st.data(), title=texts)
    def reuse_an_id(self, data: st.DataObject, title: str) -> None:
        """A thread under the id of a stored memory: both stacks refuse it with IdConflictError."""
        taken = data.draw(
            st.sampled_from([*self.model.observations, *self.model.derived, *self.model.episodes])
        )
        item = RememberDrafts(threads=[ThreadDraft(title=title, id=taken, created_at=T0)])
        assert not self.remember(f"reuse_an_id({title!r})", item, T0), "a reused id was accepted"

    @precondition(lambda self: self.model.last_plan is not None)
    @rule()
    def replay_the_last_plan(self) -> None:
        """Commit the last plan again from its JSON: idempotent on both stacks."""
        plan_json = self.model.last_plan
        assert plan_json is not None
        outcomes = self.both("replay", lambda m: m.commit(RememberWritePlan.from_json(plan_json)))
        if outcomes[0] is not None and outcomes[1] is not None:
            assert _outcome_signature(outcomes[0]) == _outcome_signature(outcomes[1])
            assert outcomes[1].repair_markers == ()

    # -- rules: retrieve and reopen --------------------------------------------------------

    @rule(
        query=texts | st.sampled_from(NAMES),
        scope=st.sampled_from(
            [(), (ObjectType.OBSERVATION,), (ObjectType.DERIVED,), (ObjectType.EPISODE, ObjectType.DERIVED)]
        ),
        candidates=st.sampled_from([1, 2, 40]),
        max_items=st.sampled_from([3, 40]),
        fanout=st.sampled_from([1, 8]),
    )
    def retrieve(
        self, query: str, scope: tuple[ObjectType, ...], candidates: int, max_items: int, fanout: int
    ) -> None:
        """Recall on both stacks: same ids, order, statuses, rounded scores, omissions, entities.

        A small ``candidate_limit`` cuts through ties of candidate recall, a small ``max_items``
        through ties of the ranking.
        """
        extra: dict[str, Any] = {"object_type_defaults": scope} if scope else {}
        context = RetrievalContext(
            query=query,
            candidate_limit=candidates,
            max_items=max_items,
            graph_limits=GraphLimits(per_node_fanout=fanout),
            **extra,
        )
        packs = self.both(f"retrieve({query!r})", lambda m: m.retrieve(context))
        if packs[0] is None or packs[1] is None:
            return
        label = f"retrieve({query!r}, scope={scope}, candidates={candidates}, max_items={max_items})"
        self.compare(label, packs[0], packs[1])

    @precondition(lambda self: self.can_reopen and not self.reopened and self.model.last_plan is not None)
    @rule()
    def reopen(self) -> None:
        """Close the stack under test and open its collection again (once per example: it is slow)."""
        self.reopened = True
        self.steps.append("reopen")
        self.runner.run(self.subject.close())
        self.subject = self.runner.run(self.factory.open(self.collection))

    # -- rules: lifecycle ---------------------------------------------------------------------

    @precondition(lambda self: bool(self.model.derived or self.model.observations))
    @rule(
        data=st.data(),
        text=texts,
        when=instants,
        with_replacement=st.booleans(),
        rationale=st.sampled_from(["it changed", " ", "a typo"]),
    )
    def correct(
        self, data: st.DataObject, text: str, when: Any, with_replacement: bool, rationale: str
    ) -> None:
        """Correct a stored derived memory or observation (sometimes an unknown id or a blank
        rationale, which both stacks must refuse alike).
        """
        target_id = data.draw(st.sampled_from([*self.model.derived, *self.model.observations]) | ids)
        target = (
            CorrectionTarget.derived_memory(target_id)
            if target_id in self.model.derived or target_id not in self.model.observations
            else CorrectionTarget.source_object(target_id)
        )
        draft = CorrectMemoryDraft(target, rationale, recorded_at=when + timedelta(minutes=1))
        if with_replacement:
            draft = draft.with_replacement(ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, text))
        outcomes = self.both(f"correct({text!r})", lambda m: m.correct(draft))
        if outcomes[0] is not None and outcomes[1] is not None:
            assert outcomes[0].replacement_ids == outcomes[1].replacement_ids, "correct: replacements differ"
            assert outcomes[1].repair_markers == ()
            self.model.derived.extend(i for i in outcomes[1].replacement_ids if i not in self.model.derived)

    @precondition(lambda self: bool(self.model.derived or self.model.observations or self.model.episodes))
    @rule(data=st.data(), when=instants, cascade=st.booleans(), members=st.booleans())
    def forget(self, data: st.DataObject, when: Any, cascade: bool, members: bool) -> None:
        """Forget a stored memory (or an unknown id) with or without cascades."""
        pool = [*self.model.derived, *self.model.observations, *self.model.episodes]
        target_id = data.draw(st.sampled_from(pool) | ids)
        draft = ForgetMemoryDraft.suppress(
            target_id,
            "the user asked",
            apply_to_derived_from_target=cascade,
            apply_to_thread_members=members,
            recorded_at=when + timedelta(minutes=2),
        )
        outcomes = self.both("forget", lambda m: m.forget(draft))
        if outcomes[0] is not None and outcomes[1] is not None:
            assert outcomes[0].graph_mutated_object_ids == outcomes[1].graph_mutated_object_ids
            assert outcomes[1].repair_markers == ()

    @precondition(lambda self: len(self.model.observations) + len(self.model.derived) >= 2)
    @rule(data=st.data(), relation=st.sampled_from(CALLER_RELATIONS), when=instants)
    def link(self, data: st.DataObject, relation: Relation, when: Any) -> None:
        """Link two stored memories through ``link`` (supersedes must be refused by both)."""
        pool = [*self.model.observations, *self.model.derived]
        draft = LinkDraft(
            data.draw(st.sampled_from(pool)), relation, data.draw(st.sampled_from(pool)), recorded_at=when
        )
        outcomes = self.both(f"link({relation.value})", lambda m: m.link(draft))
        if outcomes[0] is not None and outcomes[1] is not None:
            assert outcomes[0].link == outcomes[1].link

    @rule(query=texts, superseded=st.booleans(), suppressed=st.booleans())
    def retrieve_with_history(self, query: str, superseded: bool, suppressed: bool) -> None:
        """Recall including superseded and/or suppressed memories: same items and statuses."""
        context = RetrievalContext(query=query, include_superseded=superseded, include_suppressed=suppressed)
        packs = self.both(f"retrieve_with_history({query!r})", lambda m: m.retrieve(context))
        if packs[0] is not None and packs[1] is not None:
            self.compare(f"retrieve_with_history({query!r}, {superseded}, {suppressed})", packs[0], packs[1])

    @invariant()
    def recall_agrees(self) -> None:
        """After every step, one of the phrases is recalled alike (small candidate limits cut ties)."""
        step = len(self.steps)
        query = PHRASES[step % len(PHRASES)]
        context = RetrievalContext(query=query, candidate_limit=1 + step % 3, max_items=6)
        self.compare(
            f"recall of {query!r} (candidate_limit={context.candidate_limit})",
            self.runner.run(self.reference.retrieve(context)),
            self.runner.run(self.subject.retrieve(context)),
        )

    @invariant()
    def vector_points_agree(self) -> None:
        """Both stacks index the same memories (candidate recall follows graph currency)."""
        if not self.white_box:
            return
        expected = self.runner.run(stores_of(self.reference).vectors.point_ids())
        got = self.runner.run(stores_of(self.subject).vectors.point_ids())
        assert got == expected, (
            f"the vector index holds {sorted(map(str, got - expected))} extra and misses "
            f"{sorted(map(str, expected - got))} after: {'; '.join(self.steps)}"
        )


def _describe(error: CharmemError | None) -> str:
    return "succeeded" if error is None else f"raised {type(error).__name__}: {error}"
