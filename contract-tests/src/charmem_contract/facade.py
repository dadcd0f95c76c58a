"""The whole-facade suite: :class:`CharacterMemoryContract`, run over any composition of adapters."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, ClassVar, cast

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from charmem import (
    BeliefAssertion,
    CandidateValidationStatus,
    CharacterMemory,
    CorrectionTarget,
    CorrectMemoryDraft,
    CurrencyStatus,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    EpisodeDraft,
    ForgetMemoryDraft,
    GraphLimits,
    IdConflictError,
    KnownAs,
    LifecycleErrorKind,
    LifecycleValidationError,
    LinkDraft,
    MemoryId,
    ObjectType,
    ObservationDraft,
    PackItem,
    PlanValidationError,
    PrepareOptions,
    Relation,
    RememberDrafts,
    RememberInput,
    RememberOptions,
    RememberWritePlan,
    RepairMarker,
    ReplacementDerivedMemoryDraft,
    RetrievalContext,
    ThreadDraft,
    VectorOperation,
)
from charmem.domain.retrieval import rank_key
from charmem.errors import BackendError, DraftValidationError
from charmem.ports import EmbeddingProvider, GraphStore, RetrievalStatsStore, VectorIndex, VectorPoint
from charmem.testing import FaultyGraphStore, FaultyStatsStore, FaultyVectorIndex, stores_of
from charmem_contract import data
from charmem_contract._base import ContractSuite, requires
from charmem_contract._state_machine import LoopRunner, MemoryComparison, pack_signature
from charmem_contract.data import T0
from charmem_contract.stacks import MemoryFactory

__all__ = ["CharacterMemoryBlackBoxContract", "CharacterMemoryContract"]

NOW = PrepareOptions(now=T0)
AT_T0 = RememberOptions(prepare=NOW)

Counts = tuple[int, int, int]


async def _counts(memory: CharacterMemory) -> Counts:
    """(graph statements, vector points, stats rows)."""
    return (
        await stores_of(memory).graph.statement_count(),
        await stores_of(memory).vectors.count(),
        await stores_of(memory).stats.row_count(),
    )


def _rank_key(item: PackItem) -> tuple[int, float, str, MemoryId]:
    return rank_key(item.score, item.occurred_at, item.object_type, item.id)


def _session(tag: str, texts: list[str]) -> tuple[RememberDrafts, dict[str, Any]]:
    """A whole session: two notions, a thread, an episode, its turns and an interpretation."""
    person, place, garden, visit, belief = data.ids(f"session-{tag}", 5)
    turns = data.ids(f"session-{tag}-turns", len(texts))
    drafts = RememberDrafts(
        entities=[EntityDraft(id=person, entity_type="person"), EntityDraft(id=place, entity_type="place")],
        threads=[ThreadDraft(title="the allotment", summary="growing vegetables", id=garden)],
        episodes=[
            EpisodeDraft(
                summary="an afternoon at the allotment",
                occurred_at=T0,
                id=visit,
                participant_entity_ids=[person],
                thread_ids=[garden],
            )
        ],
        observations=[
            ObservationDraft(
                text=text, episode_id=visit, id=turn, speaker_entity_id=person, mentioned_entity_ids=[place]
            )
            for text, turn in zip(texts, turns, strict=True)
        ],
        derived=[
            DerivedMemoryDraft(
                DerivedType.USER_PREFERENCE,
                "likes growing tomatoes",
                id=belief,
                observation_ids=turns[:1],
                entity_ids=[person],
                thread_ids=[garden],
            )
        ],
        links=[LinkDraft(turns[0], Relation.MENTIONS, person, recorded_at=T0)],
    )
    return drafts, {
        "person": person,
        "place": place,
        "thread": garden,
        "episode": visit,
        "belief": belief,
        "turns": turns,
    }


class CharacterMemoryBlackBoxContract(ContractSuite, suite=True):
    """The facade suite through the facade's methods only: any implementation of its API passes it.

    It never reaches a store: every check goes through ``prepare``, ``validate_plan``,
    ``commit``, ``remember``, ``retrieve``, ``correct``, ``forget``, ``link`` and ``close``, so a
    memory in another process (``charmem_server.RemoteCharacterMemory`` over a running server)
    runs it as well as an in-process stack. :class:`CharacterMemoryContract` adds the tests that
    look inside the stores (counts, points, repair markers of injected faults).

    Subclass it as ``TestMyMemory`` and override ``memory_factory`` (see
    :class:`CharacterMemoryContract`); a memory with no ``embedder`` attribute also overrides
    ``reference_embedder`` to return the embedder its server uses, for the differential state
    machine's reference stack.
    """

    capabilities: ClassVar[dict[str, str]] = {
        "supports_reopen": "reaches the same data when a closed collection is opened again",
        "supports_exhaustive": "recalls candidates exhaustively and reports the count scanned",
    }
    #: An approximate stack cannot be compared with the exact reference stack: only reopen is optional.
    optional_capabilities: ClassVar[frozenset[str]] = frozenset({"supports_reopen"})
    minimum_passing: ClassVar[int] = 13

    supports_reopen: ClassVar[bool] = True
    supports_exhaustive: ClassVar[bool] = True
    #: Whether the suite may look inside the stores (``charmem.testing.stores_of``).
    white_box: ClassVar[bool] = False

    #: Hypothesis budget of the state machine (examples x steps); keep CI fast.
    state_machine_examples: ClassVar[int] = 15
    state_machine_steps: ClassVar[int] = 12
    #: Shrink a failing sequence to a minimal one. Off by default: shrinking replays hundreds of
    #: sequences on real stores (minutes); switch it on locally to debug a failure.
    state_machine_shrink: ClassVar[bool] = False
    #: Run the same examples every time (hypothesis ``derandomize``), e.g. for a reproducible CI.
    state_machine_derandomize: ClassVar[bool] = False

    # -- what a stack provides -------------------------------------------------------------

    @pytest.fixture
    def memory_factory(self) -> MemoryFactory:
        """Override: yield a MemoryFactory over the test's own stores; close what it opened afterwards."""
        raise NotImplementedError(
            f"{type(self).__name__} must override the memory_factory fixture to yield a "
            "charmem_contract.MemoryFactory (see charmem_contract.memory_factory)"
        )

    @pytest.fixture
    async def memory(self, memory_factory: MemoryFactory) -> CharacterMemory:
        """The memory of collection ``contract`` (closed by the factory)."""
        return await memory_factory.open("contract")

    @pytest.fixture
    def reference_embedder(self) -> EmbeddingProvider | None:
        """The embedder of the state machine's reference stack (``None``: the memory's own)."""
        return None

    # -- the canary ------------------------------------------------------------------------

    async def test_fixture_starts_empty_through_recall(self, memory: CharacterMemory) -> None:
        """A fresh memory recalls nothing and omits nothing.

        If this fails: ``memory_factory`` must open every test's collection on fresh stores
        (a fresh temporary directory, or a fresh server).
        """
        pack = await memory.retrieve(RetrievalContext(query="anything at all about tomatoes"))
        assert pack.items == () and pack.omissions == (), "the memory_factory's memories are not empty"

    # -- write path, through the facade ----------------------------------------------------

    async def test_prepare_and_validate_leave_recall_unchanged(self, memory: CharacterMemory) -> None:
        """``prepare`` and ``validate_plan`` write nothing: recall answers the same pack after them.

        If this fails: prepare or validation wrote to a store (compare the packs' items).
        """
        await memory.remember(RememberInput("a seed memory about tomatoes", occurred_at=T0), AT_T0)
        context = RetrievalContext(query="we planted tomatoes")
        before = pack_signature(await memory.retrieve(context))
        drafts, _ = _session("bb-prepare", ["we planted tomatoes", "tomatoes again"])
        plan = await memory.prepare(drafts, NOW)
        validations = await memory.validate_plan(plan)
        assert [v.status for v in validations] == [CandidateValidationStatus.VALID] * len(validations), [
            v.reasons for v in validations
        ]
        assert pack_signature(await memory.retrieve(context)) == before, "prepare or validate_plan wrote"

    async def test_commit_replay_and_conflicts_through_the_facade(self, memory: CharacterMemory) -> None:
        """A commit reports every id; a replay warns and repairs nothing; a conflict changes nothing.

        If this fails: compare the outcome with the plan (object and link ids), check that
        equal content is accepted on replay, and that IdConflictError names the ids at fault.
        """
        drafts, named = _session("bb-commit", ["we planted tomatoes", "it started to rain"])
        plan = await memory.prepare(drafts, NOW)
        outcome = await memory.commit(plan)
        assert outcome.repair_markers == ()
        assert set(outcome.object_ids) == set(plan.object_ids)
        assert set(outcome.link_ids) == {lk.id for lk in (*plan.links, *plan.derived_links)}
        context = RetrievalContext(query="we planted tomatoes")
        before = pack_signature(await memory.retrieve(context))
        assert str(named["turns"][0]) in [item for item, _, _ in before["items"]]
        again = await memory.commit(RememberWritePlan.from_json(plan.to_json()))
        assert again.warnings and again.repair_markers == (), "a replay should warn and repair nothing"
        clash = RememberDrafts(
            episodes=[EpisodeDraft(summary="another afternoon", occurred_at=T0, id=named["episode"])]
        )
        with pytest.raises(IdConflictError) as caught:
            await memory.remember(clash, AT_T0)
        assert str(named["episode"]) in caught.value.ids
        assert pack_signature(await memory.retrieve(context)) == before, "a refused commit changed recall"

    async def test_refusals_raise_the_documented_errors_with_their_fields(
        self, memory: CharacterMemory
    ) -> None:
        """An ungrounded belief, a forget of an unknown id and a wrong argument raise their errors.

        ``PlanValidationError`` carries per-candidate ``reasons``, ``LifecycleValidationError``
        its ``kind``; nothing is written by any of them.

        If this fails: the implementation raised another class, or lost the error's fields.
        """
        [belief] = data.ids("bb-refuse", 1)
        ungrounded = RememberDrafts(
            derived=[DerivedMemoryDraft(DerivedType.CLAIM, "floating belief", id=belief)]
        )
        with pytest.raises(PlanValidationError) as plan_error:
            await memory.remember(ungrounded, AT_T0)
        assert str(belief) in plan_error.value.reasons
        [unknown] = data.ids("bb-refuse-unknown", 1)
        with pytest.raises(LifecycleValidationError) as lifecycle:
            await memory.forget(ForgetMemoryDraft.suppress(unknown, "never stored"))
        assert lifecycle.value.kind is LifecycleErrorKind.MISSING_FORGET_TARGET
        with pytest.raises(DraftValidationError):
            await memory.remember(cast(Any, "not a draft"))
        assert (await memory.retrieve(RetrievalContext(query="floating belief"))).items == ()

    async def test_correct_forget_and_link_through_the_facade(self, memory: CharacterMemory) -> None:
        """A correction supersedes its target in recall; a forget removes; a link is stored as drafted.

        If this fails: check the replacement id of the outcome, the omission reasons of the
        pack (``superseded``), and the link of the link outcome.
        """
        drafts, named = _session("bb-lifecycle", ["we planted tomatoes", "tomatoes need sun"])
        await memory.remember(drafts, AT_T0)
        replacement_draft = ReplacementDerivedMemoryDraft(
            DerivedType.USER_PREFERENCE, "likes growing peppers"
        )
        corrected = await memory.correct(
            CorrectMemoryDraft(
                CorrectionTarget.derived_memory(named["belief"]), "prefers peppers now"
            ).with_replacement(replacement_draft)
        )
        [replacement] = corrected.replacement_ids
        assert (
            named["belief"] in corrected.graph_mutated_object_ids
            or replacement in corrected.graph_mutated_object_ids
        )
        pack = await memory.retrieve(RetrievalContext(query="likes growing peppers"))
        assert (replacement, CurrencyStatus.CURRENT) in [(i.id, i.status) for i in pack.items]
        assert named["belief"] not in [i.id for i in pack.items], "a superseded belief was recalled"
        forgotten = await memory.forget(ForgetMemoryDraft.suppress(replacement, "not true either"))
        assert replacement in forgotten.graph_mutated_object_ids
        after = await memory.retrieve(RetrievalContext(query="likes growing peppers"))
        assert replacement not in [i.id for i in after.items], "a forgotten memory was recalled"
        [link_id] = data.ids("bb-link", 1)
        linked = await memory.link(
            LinkDraft(named["turns"][1], Relation.SUPPORTS, named["turns"][0], id=link_id)
        )
        assert (linked.link.id, linked.link.from_id, linked.link.relation, linked.link.to_id) == (
            link_id,
            named["turns"][1],
            Relation.SUPPORTS,
            named["turns"][0],
        )

    async def test_hostile_strings_are_recalled_verbatim(self, memory: CharacterMemory) -> None:
        """Hostile memory text comes back byte-identical from recall.

        If this fails: the text was mangled on its way (escaping, normalisation, NUL
        truncation, an encoding); the listed strings show which.
        """
        wrong = []
        for minute, text in enumerate(data.HOSTILE_STRINGS):
            await memory.remember(RememberInput(text, occurred_at=T0 + timedelta(minutes=minute)), AT_T0)
            pack = await memory.retrieve(RetrievalContext(query=text))
            if text not in [item.text for item in pack.items]:
                wrong.append(f"{text!r}: not recalled verbatim ({[i.text for i in pack.items][:3]!r})")
        assert not wrong, "hostile strings did not round-trip:\n" + "\n".join(wrong)

    async def test_collections_see_nothing_of_each_other(self, memory_factory: MemoryFactory) -> None:
        """What one collection remembers, another does not recall; reused ids do not conflict.

        If this fails: the implementation does not scope writes or reads to the collection.
        """
        left, right = await memory_factory.open("bb-left"), await memory_factory.open("bb-right")
        drafts, _ = _session("bb-isolated", ["we planted tomatoes"])
        await left.remember(drafts, AT_T0)
        assert (await right.retrieve(RetrievalContext(query="tomatoes"))).items == ()
        other, _ = _session("bb-isolated", ["we planted potatoes"])
        assert (await right.remember(other, AT_T0)).repair_markers == ()
        assert (await left.retrieve(RetrievalContext(query="tomatoes"))).items != ()

    @requires("supports_reopen")
    async def test_reopened_collection_recalls_the_same_pack(self, memory_factory: MemoryFactory) -> None:
        """A collection opened again recalls the same pack, and a replay is accepted.

        If this fails: a write was not durable on acknowledgement, or the factory does not reach
        the same data.
        """
        memory = await memory_factory.open("bb-reopen")
        drafts, _ = _session("bb-reopen", ["we planted tomatoes", "it started to rain"])
        plan = await memory.prepare(drafts, NOW)
        await memory.commit(plan)
        context = RetrievalContext(query="tomatoes in the rain")
        before = pack_signature(await memory.retrieve(context))
        await memory.close()
        reopened = await memory_factory.open("bb-reopen")
        assert pack_signature(await reopened.retrieve(context)) == before
        replay = await reopened.commit(plan)
        assert replay.repair_markers == () and replay.warnings

    # -- retrieval -------------------------------------------------------------------------

    async def test_validate_plan_reports_conflicts_and_replays(self, memory: CharacterMemory) -> None:
        """``validate_plan`` marks a conflicting candidate invalid and warns about equal replays.

        If this fails: ``get_objects`` / ``get_links`` of the graph store do not return what was
        stored under those ids.
        """
        drafts, named = _session("validate", ["we planted tomatoes"])
        plan = await memory.prepare(drafts, NOW)
        await memory.commit(plan)
        replay = await memory.validate_plan(plan)
        assert all(v.status is CandidateValidationStatus.VALID for v in replay)
        assert all(v.warnings for v in replay), "an equal replay should carry a warning"
        clash = await memory.prepare(
            RememberDrafts(threads=[ThreadDraft(title="clash", id=named["episode"])]), NOW
        )
        [verdict] = await memory.validate_plan(clash)
        assert verdict.status is CandidateValidationStatus.INVALID
        assert any("conflict" in reason for reason in verdict.reasons), verdict.reasons

    async def test_items_are_in_canonical_order(self, memory: CharacterMemory) -> None:
        """Pack items are ranked by (score desc, newer first, object type, id), without duplicates.

        If this fails: the vector index's scores are not similarities (higher is closer) or its
        hits carry the wrong object type.
        """
        texts = [
            "we planted tomatoes",
            "tomatoes need rain",
            "the violin lesson",
            "rain in the garden",
            "tea",
        ]
        for minute, text in enumerate(texts):
            await memory.remember(RememberInput(text, occurred_at=T0 + timedelta(minutes=minute)), AT_T0)
        pack = await memory.retrieve(RetrievalContext(query="tomatoes and rain in the garden"))
        assert len(pack.items) >= 3
        assert list(pack.items) == sorted(pack.items, key=_rank_key)
        assert len({item.id for item in pack.items}) == len(pack.items)

    async def test_ties_do_not_depend_on_insertion_order(self, memory_factory: MemoryFactory) -> None:
        """Identical memories inserted in two different orders give the same pack.

        Equal texts give equal vectors and equal scores; the canonical tie order is newer first,
        then object type, then id. The candidate limit (3 of 8 tied points) cuts through the tie,
        so which memories are recalled at all depends on the vector index's tie order.

        If this fails: the vector index orders ties by insertion; sort hits by (score desc, id)
        and cut the limit after sorting.
        """
        turn_ids = data.ids("facade-ties", 8)
        times = [T0 + timedelta(minutes=n % 3) for n in range(len(turn_ids))]
        episode_ids = data.ids("facade-tie-episodes", len(turn_ids))
        items = [
            RememberInput("the same words again", occurred_at=t, created_at=t, observation_id=o, episode_id=e)
            for o, e, t in zip(turn_ids, episode_ids, times, strict=True)
        ]
        packs = []
        for collection, order in (("ties-a", items), ("ties-b", list(reversed(items)))):
            memory = await memory_factory.open(collection)
            for item in order:
                await memory.remember(item, AT_T0)
            context = RetrievalContext(query="the same words again", candidate_limit=3, max_items=6)
            packs.append(await memory.retrieve(context))
        first, second = (pack_signature(p) for p in packs)
        assert first["items"] == second["items"] and first["scores"] == second["scores"], (
            f"insertion order changed the pack:\n{first['items']}\n{second['items']}"
        )
        observations = [i for i in packs[0].items if i.object_type is ObjectType.OBSERVATION]
        assert [i.id for i in observations] == [i.id for i in sorted(observations, key=_rank_key)]

    async def test_vector_scope_by_object_type(self, memory: CharacterMemory) -> None:
        """``object_type_defaults`` scopes candidate recall: every vector-admitted item is of those types.

        If this fails: the vector index ignores ``VectorQuery.object_types`` or stores the wrong
        type with a point.
        """
        drafts, _ = _session("scope", ["we planted tomatoes", "tomatoes again"])
        await memory.remember(drafts, AT_T0)
        for scope in ((ObjectType.DERIVED,), (ObjectType.OBSERVATION, ObjectType.THREAD)):
            pack = await memory.retrieve(RetrievalContext(query="tomatoes", object_type_defaults=scope))
            roots = [item for item in pack.items if "vector" in item.signals]
            assert roots, f"nothing recalled in scope {scope}"
            assert all(item.object_type in scope for item in roots), [
                (i.object_type, i.signals) for i in roots
            ]

    @requires("supports_exhaustive")
    async def test_exhaustive_completeness_in_the_pack(self, memory: CharacterMemory) -> None:
        """The pack reports exhaustive recall with the number of points in scope scanned.

        If this fails: the vector index reports ``scanned`` for the whole collection rather than
        the points of the requested types, or reports approximate recall for an exact scan.
        """
        drafts, _ = _session("completeness", ["we planted tomatoes", "tomatoes again", "rain"])
        plan = await memory.prepare(drafts, NOW)
        await memory.commit(plan)
        scope = (ObjectType.OBSERVATION,)
        pack = await memory.retrieve(
            RetrievalContext(query="tomatoes", object_type_defaults=scope, candidate_limit=2)
        )
        in_scope = sum(1 for e in plan.index_entries if e.object_type in scope)
        completeness = pack.completeness
        assert (completeness.kind.value, completeness.scanned, completeness.fetched) == (
            "exhaustive",
            in_scope,
            2,
        )

    async def test_bounded_expansion_respects_graph_limits(self, memory: CharacterMemory) -> None:
        """Depth 0, node budget, per-node fanout, allowed relations and object types bound expansion.

        If this fails: ``links_of`` ignores its ``relations`` filter or returns links of other
        ids, so expansion follows more than the limits allow.
        """
        drafts, _ = _session("expansion", ["we planted tomatoes", "tomatoes grow fast", "tomatoes need sun"])
        await memory.remember(drafts, AT_T0)

        async def pack(**limits: Any) -> list[PackItem]:
            context = RetrievalContext(query="likes growing tomatoes", graph_limits=GraphLimits(**limits))
            return list((await memory.retrieve(context)).items)

        def expanded(items: list[PackItem]) -> list[PackItem]:
            """Items admitted by expansion (other admission paths, e.g. ``vector``, excluded)."""
            return [
                i
                for i in items
                if any(s.startswith("expansion:") for s in i.signals)
                and all(s.startswith(("expansion:", "context:")) for s in i.signals)
            ]

        def signals(items: list[PackItem]) -> set[str]:
            return {s for i in items for s in i.signals if s.startswith("expansion:")}

        assert expanded(await pack()), "the session should expand around its roots"
        assert signals(await pack(depth=0)) == set(), "depth 0 expanded"
        assert len(expanded(await pack(node_budget=1))) <= 1, "the node budget was exceeded"
        only = signals(await pack(allowed_relation_types=[Relation.DERIVED_FROM]))
        assert only <= {"expansion:derived_from"}, f"expansion followed other relations: {only}"
        typed = expanded(await pack(allowed_object_types=[ObjectType.DERIVED, ObjectType.ENTITY]))
        assert all(i.object_type is ObjectType.DERIVED for i in typed), [i.object_type for i in typed]

    async def test_random_sequences_match_the_reference_stack(
        self, memory_factory: MemoryFactory, reference_embedder: EmbeddingProvider | None
    ) -> None:
        """Random remember / replay / retrieve (/ reopen) sequences give what the reference stack gives.

        Each example opens a new collection on this test's stores and an empty reference stack
        (core's reference adapters with the same embedder); after every step both must raise the
        same error class or agree, and every retrieval must give the same item ids, order,
        statuses, rounded scores, omissions and entities.

        If this fails: hypothesis prints the sequence of steps that differs (set
        ``state_machine_shrink = True`` on the test class to shrink it to a minimal one first);
        replay it by hand on both stacks and compare each store (``graph.currency``,
        ``vectors.search``).
        """
        machine = MemoryComparison.bind(
            LoopRunner(asyncio.get_running_loop()),
            memory_factory,
            can_reopen=self.supports_reopen,
            white_box=self.white_box,
            embedder=reference_embedder,
        )
        phases = [Phase.explicit, Phase.reuse, Phase.generate]
        options = settings(
            max_examples=self.state_machine_examples,
            stateful_step_count=self.state_machine_steps,
            deadline=None,
            database=None,
            phases=[*phases, Phase.shrink] if self.state_machine_shrink else phases,
            report_multiple_bugs=False,
            derandomize=self.state_machine_derandomize,
            suppress_health_check=list(HealthCheck),
        )
        await asyncio.to_thread(run_state_machine_as_test, machine, settings=options)


class CharacterMemoryContract(CharacterMemoryBlackBoxContract, suite=True):
    """Contract suite of the whole :class:`~charmem.CharacterMemory` over one composition of adapters.

    Subclass it as ``TestMyStack`` and override the fixture ``memory_factory`` to yield a
    :class:`~charmem_contract.stacks.MemoryFactory` over stores of the test's own (a temporary
    directory), closing what it opened in ``finally`` (:func:`charmem_contract.memory_factory`
    does both). Build the stack with the lexical cue off: the suite compares exact orders with the
    reference stack.

    The suite covers the write path (prepare and validate write nothing, commit, idempotent
    replay, id conflicts, admission of given beliefs, refused caller ``supersedes`` links,
    supersession leaving the vector index, repair markers and their repair by replay) and
    retrieval (graph authority, canonical order and ties, scope, completeness, bounded
    expansion), plus a differential state machine against the reference stack. It holds every
    test of :class:`CharacterMemoryBlackBoxContract` and adds those that look inside the stores
    (``charmem.testing.stores_of``).
    """

    minimum_passing: ClassVar[int] = 29
    white_box: ClassVar[bool] = True

    # -- the canary ------------------------------------------------------------------------

    async def test_fixture_starts_empty(self, memory: CharacterMemory) -> None:
        """The factory opens empty memories whose vector index matches the embedder.

        If this fails: ``memory_factory`` must open every test's stores under a fresh temporary
        directory (or fresh in-memory stores), and the vector index must be opened with the
        embedder's ``model_id`` and ``vector_size``.
        """
        assert await stores_of(memory).graph.object_ids() == [], "the memory_factory's stores are not empty"
        assert await stores_of(memory).graph.link_ids() == []
        assert await stores_of(memory).vectors.count() == 0
        assert await stores_of(memory).stats.row_count() == 0
        assert (stores_of(memory).vectors.model_id, stores_of(memory).vectors.vector_size) == (
            memory.embedder.model_id,
            memory.embedder.vector_size,
        )

    # -- write path ------------------------------------------------------------------------

    async def test_prepare_and_validate_write_nothing(self, memory: CharacterMemory) -> None:
        """``prepare`` and ``validate_plan`` touch no store; a valid plan validates as valid.

        If this fails: an adapter wrote during a read (``get_objects``, ``get_links``) or the
        stack wires a store that writes on open.
        """
        await memory.remember(RememberInput("a seed memory", occurred_at=T0), AT_T0)
        before = await _counts(memory)
        drafts, _ = _session("prepare", ["we planted tomatoes", "it started to rain"])
        for item in (drafts, RememberInput("a new memory", occurred_at=T0, summary="new")):
            plan = await memory.prepare(item, NOW)
            validations = await memory.validate_plan(plan)
            assert [v.status for v in validations] == [CandidateValidationStatus.VALID] * len(validations), [
                v.reasons for v in validations
            ]
        assert await _counts(memory) == before, "prepare or validate_plan wrote to a store"

    async def test_commit_stores_objects_links_vectors_and_stats(self, memory: CharacterMemory) -> None:
        """A commit stores every object and link, indexes exactly the plan's entries, and counts them.

        If this fails: compare the listed store with the plan. Graph: ``write_batch`` of objects,
        caller and derived links. Vectors: one point per index entry. Stats: one row per object
        and link.
        """
        drafts, _ = _session("commit", ["we planted tomatoes", "it started to rain"])
        plan = await memory.prepare(drafts, NOW)
        outcome = await memory.commit(plan)
        assert outcome.repair_markers == ()
        assert await stores_of(memory).graph.object_ids() == sorted(plan.object_ids)
        assert await stores_of(memory).graph.link_ids() == sorted(outcome.link_ids)
        assert set(outcome.link_ids) == {lk.id for lk in (*plan.links, *plan.derived_links)}
        assert await stores_of(memory).vectors.point_ids() == {e.id for e in plan.index_entries}
        summary = await stores_of(memory).stats.summary()
        per_type: dict[str, int] = {}
        for obj in plan.objects:
            per_type[obj.object_type.value] = per_type.get(obj.object_type.value, 0) + 1
        assert dict(summary.objects) == per_type
        assert sum(summary.links.values()) == len(outcome.link_ids)

    async def test_the_outcome_names_ids_by_role(self, memory: CharacterMemory) -> None:
        """``RememberOutcome`` names the stored ids by role beside ``object_ids``: the episode and
        utterance of a ``RememberInput``, and every kind of a whole session, each in plan order.

        If this fails: nothing adapter-specific; the outcome is built by core's commit.
        """
        outcome = await memory.remember(
            RememberInput("We adopted a dog called Biscuit.", occurred_at=T0).with_derived_memory(
                DerivedMemoryDraft(DerivedType.CLAIM, "They have a dog called Biscuit.")
            ),
            AT_T0,
        )
        assert outcome.object_ids == (*outcome.episode_ids, *outcome.observation_ids, *outcome.derived_ids)
        assert (len(outcome.episode_ids), len(outcome.observation_ids), len(outcome.derived_ids)) == (1, 1, 1)
        assert outcome.entity_ids == outcome.thread_ids == ()
        drafts, ids = _session("roles", ["we planted tomatoes", "it started to rain"])
        plan = await memory.prepare(drafts, NOW)
        session = await memory.commit(plan)
        assert session.episode_ids == (ids["episode"],)
        assert session.observation_ids == tuple(ids["turns"])
        assert session.derived_ids == (ids["belief"],)
        assert session.entity_ids == (ids["person"], ids["place"])
        assert session.thread_ids == (ids["thread"],)
        assert set(session.link_ids) == {lk.id for lk in (*plan.links, *plan.derived_links)}
        roles = (
            *session.episode_ids,
            *session.observation_ids,
            *session.derived_ids,
            *session.entity_ids,
            *session.thread_ids,
        )
        assert sorted(roles) == sorted(session.object_ids)

    async def test_replay_is_idempotent(self, memory: CharacterMemory) -> None:
        """Committing a plan again (also from its JSON) changes no store and counts nothing twice.

        If this fails: the listed store grew on replay. The graph must skip equal content, the
        vector index must upsert by id, and the stats store must key rows by id.
        """
        drafts, _ = _session("replay", ["we planted tomatoes", "it started to rain"])
        plan = await memory.prepare(drafts, NOW)
        await memory.commit(plan)
        before, summary = await _counts(memory), await stores_of(memory).stats.summary()
        again = await memory.commit(plan)
        from_json = await memory.commit(RememberWritePlan.from_json(plan.to_json()))
        assert again.warnings and from_json.warnings, "a replay should warn that items were already stored"
        assert again.repair_markers == () and from_json.repair_markers == ()
        assert await _counts(memory) == before, (
            "a replay changed (graph statements, vector points, stats rows)"
        )
        assert await stores_of(memory).stats.summary() == summary, "a replay counted twice"

    async def test_id_conflicts_change_nothing(self, memory: CharacterMemory) -> None:
        """An id stored with other content (of any type) raises IdConflictError; nothing changes.

        If this fails: the graph store accepted or partly wrote a conflicting batch, or vectors
        and stats were written before the graph refused it.
        """
        drafts, named = _session("conflict", ["we planted tomatoes"])
        await memory.remember(drafts, AT_T0)
        before, points = await _counts(memory), await stores_of(memory).vectors.point_ids()
        attempts = {
            "same type": RememberDrafts(
                episodes=[EpisodeDraft(summary="another afternoon", occurred_at=T0, id=named["episode"])]
            ),
            "another type": RememberDrafts(threads=[ThreadDraft(title="a thread", id=named["person"])]),
            "a fresh object with a conflicting one": RememberDrafts(
                entities=[EntityDraft(entity_type="pet")],
                derived=[
                    DerivedMemoryDraft(
                        DerivedType.CLAIM, "changed", id=named["belief"], observation_ids=named["turns"]
                    )
                ],
            ),
        }
        for label, item in attempts.items():
            with pytest.raises(IdConflictError) as caught:
                await memory.remember(item, AT_T0)
            assert caught.value.ids, f"{label}: IdConflictError names no id"
            assert await _counts(memory) == before, f"{label}: a refused commit changed a store"
        assert await stores_of(memory).vectors.point_ids() == points

    async def test_given_belief_admission(self, memory: CharacterMemory) -> None:
        """A given belief needs a notion subject and no sources; an ungrounded, ungiven one is refused.

        Refused plans raise PlanValidationError and write nothing.

        If this fails: the stack's graph store does not resolve references (subjects, sources) or
        wrote part of a refused plan.
        """
        notion, named_turn = MemoryId.new(), MemoryId.new()
        await memory.remember(
            RememberInput("Mina waved", occurred_at=T0, observation_id=named_turn).with_derived_memory(
                DerivedMemoryDraft(DerivedType.REFLECTION, "Mina is friendly")
            ),
            AT_T0,
        )
        await memory.remember(RememberDrafts(entities=[EntityDraft(id=notion, entity_type="person")]), AT_T0)
        name = [BeliefAssertion(notion, KnownAs("Mina"))]
        given = DerivedMemoryDraft(
            DerivedType.CLAIM,
            "they are called Mina",
            entity_ids=[notion],
            assertions=name,
            given_by_application=True,
        )
        refused = {
            "given with sources": DerivedMemoryDraft(
                DerivedType.CLAIM,
                "called Mina",
                entity_ids=[notion],
                assertions=name,
                given_by_application=True,
                observation_ids=[named_turn],
            ),
            "given without a subject": DerivedMemoryDraft(
                DerivedType.CLAIM, "someone", given_by_application=True
            ),
            "neither grounded nor given": DerivedMemoryDraft(
                DerivedType.CLAIM, "floating", entity_ids=[notion]
            ),
            "assertion about a non-subject": DerivedMemoryDraft(
                DerivedType.CLAIM, "called Mina", assertions=name, observation_ids=[named_turn]
            ),
        }
        before = await _counts(memory)
        for label, draft in refused.items():
            with pytest.raises(PlanValidationError):
                await memory.remember(RememberDrafts(derived=[draft]), AT_T0)
            assert await _counts(memory) == before, f"{label}: a refused plan changed a store"
        outcome = await memory.remember(RememberDrafts(derived=[given]), AT_T0)
        [belief_id] = outcome.object_ids
        assert (await stores_of(memory).graph.currency([belief_id]))[belief_id] is CurrencyStatus.CURRENT
        pack = await memory.retrieve(RetrievalContext(query="they are called Mina"))
        names = {e.id: e.names for e in pack.entities}
        assert names.get(notion) == ("Mina",), f"the given name is not the notion's current name: {names}"

    async def test_caller_supersedes_links_are_refused(self, memory: CharacterMemory) -> None:
        """A caller-authored ``supersedes`` link is refused with PlanValidationError; nothing changes.

        If this fails: the stack accepted a caller ``supersedes``; only commit (from a derived
        memory's ``supersedes`` list) and ``correct`` may write one.
        """
        first = await memory.remember(
            RememberInput("we met at the market", occurred_at=T0).with_derived_memory(
                DerivedMemoryDraft(DerivedType.REFLECTION, "likes markets")
            ),
            AT_T0,
        )
        second = await memory.remember(
            RememberInput("we met at the park", occurred_at=T0).with_derived_memory(
                DerivedMemoryDraft(DerivedType.REFLECTION, "likes parks")
            ),
            AT_T0,
        )
        old, new = first.object_ids[-1], second.object_ids[-1]
        before = await _counts(memory)
        with pytest.raises(PlanValidationError):
            await memory.remember(RememberDrafts(links=[LinkDraft(new, Relation.SUPERSEDES, old)]), AT_T0)
        assert await _counts(memory) == before
        assert (await stores_of(memory).graph.currency([old]))[old] is CurrencyStatus.CURRENT

    async def test_derived_supersedes_removes_the_old_vector(self, memory: CharacterMemory) -> None:
        """A derived memory that supersedes another takes the old one out of candidate recall.

        The old memory becomes superseded in the graph, leaves the vector index, stops counting as
        current in the stats, is not recalled, and a replay of its own plan does not bring it back.

        If this fails: check the vector index's ``delete`` and that the graph's ``currency``
        counts incoming ``supersedes`` links.
        """
        first_plan = await memory.prepare(
            RememberInput("I switched to oat milk", occurred_at=T0).with_derived_memory(
                DerivedMemoryDraft(DerivedType.USER_PREFERENCE, "prefers oat milk in coffee")
            ),
            NOW,
        )
        await memory.commit(first_plan)
        old = first_plan.object_ids[-1]
        turn = first_plan.object_ids[1]
        new_outcome = await memory.remember(
            RememberDrafts(
                derived=[
                    DerivedMemoryDraft(
                        DerivedType.USER_PREFERENCE,
                        "prefers soy milk in coffee",
                        observation_ids=[turn],
                        supersedes=[old],
                    )
                ]
            ),
            AT_T0,
        )
        new = new_outcome.object_ids[0]
        assert new_outcome.repair_markers == ()
        assert (await stores_of(memory).graph.currency([old, new])) == {
            old: CurrencyStatus.SUPERSEDED,
            new: CurrencyStatus.CURRENT,
        }
        points = await stores_of(memory).vectors.point_ids()
        assert old not in points, "the superseded memory is still in the vector index"
        assert new in points
        summary = await stores_of(memory).stats.summary()
        assert summary.current_objects.get("derived") == 1 and summary.objects.get("derived") == 2
        await memory.commit(first_plan)
        assert old not in await stores_of(memory).vectors.point_ids(), "a replay put a superseded memory back"
        pack = await memory.retrieve(RetrievalContext(query="prefers oat milk in coffee"))
        assert old not in [item.id for item in pack.items]

    # -- retrieval -------------------------------------------------------------------------

    async def test_graph_authority_omits_points_the_graph_does_not_hold(
        self, memory: CharacterMemory
    ) -> None:
        """A vector point with no object in the graph is omitted (``not_in_graph``), never an item.

        If this fails: ``get_objects`` of the graph store returned something for an id it does
        not hold, or the vector index returned the wrong id for a point.
        """
        await memory.remember(RememberInput("we planted tomatoes", occurred_at=T0), AT_T0)
        stray = MemoryId.new()
        vector = await memory.embedder.embed_query("a stray point about tomatoes")
        await stores_of(memory).vectors.upsert(
            [VectorPoint(id=stray, object_type=ObjectType.OBSERVATION, vector=vector)]
        )
        pack = await memory.retrieve(RetrievalContext(query="a stray point about tomatoes"))
        assert stray not in [item.id for item in pack.items]
        assert (stray, "not_in_graph") in [(o.id, o.reason) for o in pack.omissions]
        assert pack.items, "the real memory should still be recalled"

    async def test_graph_authority_omits_stale_points_of_superseded_memories(
        self, memory: CharacterMemory
    ) -> None:
        """A point left in the index for a superseded memory is omitted with reason ``superseded``.

        If this fails: the graph store's ``currency`` does not see the ``supersedes`` link.
        """
        plan = await memory.prepare(
            RememberInput("tea in the morning", occurred_at=T0).with_derived_memory(
                DerivedMemoryDraft(DerivedType.USER_PREFERENCE, "drinks green tea")
            ),
            NOW,
        )
        await memory.commit(plan)
        old, turn = plan.object_ids[-1], plan.object_ids[1]
        await memory.remember(
            RememberDrafts(
                derived=[
                    DerivedMemoryDraft(
                        DerivedType.USER_PREFERENCE,
                        "drinks black tea",
                        observation_ids=[turn],
                        supersedes=[old],
                    )
                ]
            ),
            AT_T0,
        )
        vector = (await memory.embedder.embed_documents(["drinks green tea"]))[0]
        await stores_of(memory).vectors.upsert(
            [VectorPoint(id=old, object_type=ObjectType.DERIVED, vector=vector, text="drinks green tea")]
        )
        pack = await memory.retrieve(RetrievalContext(query="drinks green tea"))
        assert old not in [item.id for item in pack.items]
        assert (old, "superseded") in [(o.id, o.reason) for o in pack.omissions]

    async def test_hostile_strings_round_trip_through_the_facade(self, memory: CharacterMemory) -> None:
        """Hostile memory text is stored and recalled byte-identical through every store.

        If this fails: an adapter mangles text (escaping, normalisation, NUL truncation); the
        listed strings show which.
        """
        wrong = []
        for minute, text in enumerate(data.HOSTILE_STRINGS):
            outcome = await memory.remember(
                RememberInput(text, occurred_at=T0 + timedelta(minutes=minute)).with_derived_memory(
                    DerivedMemoryDraft(DerivedType.REFLECTION, text)
                ),
                AT_T0,
            )
            stored = await stores_of(memory).graph.get_objects(list(outcome.object_ids))
            texts = [getattr(obj, "text", None) for obj in stored.values()]
            if texts.count(text) != 2:
                wrong.append(f"{text!r}: stored as {texts!r}")
            pack = await memory.retrieve(RetrievalContext(query=text))
            if text not in [item.text for item in pack.items]:
                wrong.append(f"{text!r}: not recalled verbatim ({[i.text for i in pack.items][:3]!r})")
        assert not wrong, "hostile strings did not round-trip:\n" + "\n".join(wrong)

    async def test_collections_are_isolated(self, memory_factory: MemoryFactory) -> None:
        """Two collections on the same stores see nothing of each other; reused ids do not conflict.

        If this fails: an adapter does not scope reads, writes or counts to its collection.
        """
        left, right = await memory_factory.open("left"), await memory_factory.open("right")
        drafts, _ = _session("isolated", ["we planted tomatoes"])
        await left.remember(drafts, AT_T0)
        assert await _counts(right) == (0, 0, 0)
        assert (await right.retrieve(RetrievalContext(query="tomatoes"))).items == ()
        other, _ = _session("isolated", ["we planted potatoes"])
        outcome = await right.remember(other, AT_T0)
        assert outcome.repair_markers == ()

    @requires("supports_reopen")
    async def test_reopen_keeps_memories_and_recall(self, memory_factory: MemoryFactory) -> None:
        """A collection opened again recalls the same pack, and replays stay idempotent.

        If this fails: one of the stores is not durable on acknowledgement or the factory does not
        reopen the same paths.
        """
        memory = await memory_factory.open("reopen")
        drafts, _ = _session(
            "reopen", ["we planted tomatoes", "it started to rain", "\n".join(data.HOSTILE_STRINGS)]
        )
        plan = await memory.prepare(drafts, NOW)
        await memory.commit(plan)
        context = RetrievalContext(query="tomatoes in the rain")
        before, counts = pack_signature(await memory.retrieve(context)), await _counts(memory)
        await memory.close()
        reopened = await memory_factory.open("reopen")
        assert pack_signature(await reopened.retrieve(context)) == before
        await reopened.commit(plan)
        assert await _counts(reopened) == counts

    async def test_episode_vector_only_when_its_summary_differs(self, memory: CharacterMemory) -> None:
        """The convenience path indexes the observation, and the episode only for a distinct summary.

        If this fails: the vector index's ``count`` or ``point_ids`` is wrong after upserts.
        """
        await memory.remember(RememberInput("rain all day", occurred_at=T0), AT_T0)
        await memory.remember(
            RememberInput("rain all night", occurred_at=T0, summary="rain all night"), AT_T0
        )
        assert await stores_of(memory).vectors.count() == 2
        await memory.remember(
            RememberInput("sun at last", occurred_at=T0, summary="the weather turned"), AT_T0
        )
        assert await stores_of(memory).vectors.count() == 4

    # -- repairable writes -----------------------------------------------------------------

    def _wrapped(
        self,
        memory: CharacterMemory,
        *,
        graph: FaultyGraphStore | None = None,
        vectors: FaultyVectorIndex | None = None,
        stats: FaultyStatsStore | None = None,
    ) -> CharacterMemory:
        """The same stores, some behind fault-injecting wrappers (not closed separately)."""
        return CharacterMemory(
            graph=cast(GraphStore, graph or stores_of(memory).graph),
            vectors=cast(VectorIndex, vectors or stores_of(memory).vectors),
            embedder=memory.embedder,
            stats=cast(RetrievalStatsStore, stats or stores_of(memory).stats),
            collection=memory.collection,
        )

    async def test_failed_vector_upsert_gives_a_marker_and_replay_repairs_it(
        self, memory: CharacterMemory
    ) -> None:
        """A failing vector upsert after the graph write comes back as a repair marker; replay repairs.

        If this fails: the vector index raised something other than an exception the commit can
        report, or an upsert after a failed one does not store the points.
        """
        faulty = FaultyVectorIndex(stores_of(memory).vectors)
        wrapped = self._wrapped(memory, vectors=faulty)
        plan = await wrapped.prepare(
            RememberInput("the kettle broke", occurred_at=T0, summary="kitchen trouble"), NOW
        )
        faulty.fail("upsert", always=True)
        outcome = await wrapped.commit(plan)
        [marker] = outcome.repair_markers
        assert (
            isinstance(marker, RepairMarker.VectorMaintenance) and marker.operation is VectorOperation.UPSERT
        )
        assert set(marker.ids) == {e.id for e in plan.index_entries}
        assert await stores_of(memory).graph.object_ids() == sorted(plan.object_ids), (
            "the graph write must stand"
        )
        assert await stores_of(memory).vectors.count() == 0
        faulty.heal()
        repaired = await wrapped.commit(plan)
        assert repaired.repair_markers == ()
        assert await stores_of(memory).vectors.point_ids() == {e.id for e in plan.index_entries}

    async def test_failed_stats_update_gives_a_marker_and_replay_repairs_it(
        self, memory: CharacterMemory
    ) -> None:
        """A failing stats write comes back as a repair marker; replay repairs it and counts once.

        If this fails: the stats store half-applied a failed ``record`` or counted a replay twice.
        """
        faulty = FaultyStatsStore(stores_of(memory).stats)
        wrapped = self._wrapped(memory, stats=faulty)
        drafts, _ = _session("stats-fault", ["we planted tomatoes"])
        plan = await wrapped.prepare(drafts, NOW)
        faulty.fail("record", always=True)
        outcome = await wrapped.commit(plan)
        assert [type(m) for m in outcome.repair_markers] == [RepairMarker.StatsMaintenance]
        assert await stores_of(memory).stats.row_count() == 0
        faulty.heal()
        assert (await wrapped.commit(plan)).repair_markers == ()
        rows = await stores_of(memory).stats.row_count()
        assert rows == len(plan.objects) + len(plan.links) + len(plan.derived_links)
        await wrapped.commit(plan)
        assert await stores_of(memory).stats.row_count() == rows

    async def test_failed_vector_delete_of_a_superseded_memory_is_repaired_by_replay(
        self, memory: CharacterMemory
    ) -> None:
        """If removing a superseded memory's vector fails, recall still omits it and replay removes it.

        If this fails: check the vector index's ``delete`` after a failed one, and that the
        graph's ``currency`` makes recall omit the stale point meanwhile.
        """
        first = await memory.prepare(
            RememberInput("I moved to Busan", occurred_at=T0).with_derived_memory(
                DerivedMemoryDraft(DerivedType.CLAIM, "lives in Busan")
            ),
            NOW,
        )
        await memory.commit(first)
        old, turn = first.object_ids[-1], first.object_ids[1]
        faulty = FaultyVectorIndex(stores_of(memory).vectors)
        wrapped = self._wrapped(memory, vectors=faulty)
        plan = await wrapped.prepare(
            RememberDrafts(
                derived=[
                    DerivedMemoryDraft(
                        DerivedType.CLAIM, "lives in Seoul", observation_ids=[turn], supersedes=[old]
                    )
                ]
            ),
            NOW,
        )
        faulty.fail("delete", always=True)
        outcome = await wrapped.commit(plan)
        [marker] = outcome.repair_markers
        assert (
            isinstance(marker, RepairMarker.VectorMaintenance) and marker.operation is VectorOperation.DELETE
        )
        assert old in marker.ids and old in await stores_of(memory).vectors.point_ids()
        pack = await memory.retrieve(RetrievalContext(query="lives in Busan"))
        assert old not in [i.id for i in pack.items]
        faulty.heal()
        assert (await wrapped.commit(plan)).repair_markers == ()
        assert old not in await stores_of(memory).vectors.point_ids()

    async def test_failed_graph_write_writes_nothing_anywhere(self, memory: CharacterMemory) -> None:
        """When the graph batch fails, commit raises BackendError and no store changes.

        If this fails: vectors or stats were written before the graph batch succeeded.
        """
        faulty = FaultyGraphStore(stores_of(memory).graph)
        wrapped = self._wrapped(memory, graph=faulty)
        faulty.fail("write_batch", always=True)
        with pytest.raises(BackendError):
            await wrapped.remember(RememberInput("this never lands", occurred_at=T0), AT_T0)
        assert await _counts(memory) == (0, 0, 0)

    # -- the differential state machine ----------------------------------------------------

    # ---------------------------------------------------------------------------------------
    # Lifecycle contract tests: correct, forget, link (DESIGN §4, §5). This section is reserved.
    #
    # The lifecycle operations landed while this suite was written; their behaviour is covered
    # for now by charmem_contract.lifecycle.LifecycleContract (its own fixture shape, no guard).
    # Tests to move or add here, so every stack gets them under this suite's rules:
    #   * correct a derived memory: the replacement supersedes it, inherits entity_ids and
    #     thread_ids (never assertions or the given marker), the old vector leaves the index,
    #     replaying the correction is idempotent (deterministic replacement ids);
    #   * correct a given belief: needs declared assertions and grounding;
    #     MISSING_GIVEN_REPLACEMENT for a rationale-only one;
    #   * correct an episode or observation: kept as provenance, superseded, leaves the index;
    #   * entity, thread or link targets: UNSUPPORTED_LIFECYCLE_TARGET; blank rationale,
    #     blank replacement text, unknown target, empty correction origin: their kinds;
    #   * forget: suppresses the target and (by default) derived memories grounded on it, never
    #     episodes or observations by cascade; a thread keeps its status and vector unless
    #     apply_to_thread_members; suppressed beats superseded in omissions and statuses;
    #   * forgetting a correction never restores the old belief;
    #   * link: caller relations only, endpoint rules, supersedes refused, replay idempotent;
    #   * recorded_at back-fills lifecycle records so as_of views stay right;
    #   * include_superseded / include_suppressed list such memories as items with that status;
    #   * repair markers of lifecycle operations, repaired by replaying the operation;
    #   * and the state machine gains correct / forget / link rules (see _state_machine.py).
    # ---------------------------------------------------------------------------------------
