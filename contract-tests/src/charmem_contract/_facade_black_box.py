"""The facade suite through the facade's methods: writes, lifecycle calls and retrieval."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, cast

import pytest

from charmem import (
    CandidateValidationStatus,
    CharacterMemory,
    CorrectionTarget,
    CorrectMemoryDraft,
    CurrencyStatus,
    DerivedMemoryDraft,
    DerivedType,
    EpisodeDraft,
    ForgetMemoryDraft,
    GraphLimits,
    IdConflictError,
    LifecycleErrorKind,
    LifecycleValidationError,
    LinkDraft,
    ObjectType,
    PackItem,
    PlanValidationError,
    Relation,
    RememberDrafts,
    RememberInput,
    RememberWritePlan,
    ReplacementDerivedMemoryDraft,
    RetrievalContext,
    ThreadDraft,
)
from charmem.errors import DraftValidationError
from charmem_contract import data
from charmem_contract._base import requires
from charmem_contract._facade_steps import AT_T0, NOW, pack_rank_key, session_drafts
from charmem_contract._state_machine import pack_signature
from charmem_contract.data import T0
from charmem_contract.factories import MemoryFactory

__all__ = ["BlackBoxTests"]


class BlackBoxTests:
    """The facade suite's tests through the facade's methods only (mixed into the black-box suite)."""

    # -- write path, through the facade ----------------------------------------------------

    async def test_prepare_and_validate_leave_recall_unchanged(self, memory: CharacterMemory) -> None:
        """``prepare`` and ``validate_plan`` write nothing: recall answers the same pack after them.

        If this fails: prepare or validation wrote to a store (compare the packs' items).
        """
        await memory.remember(RememberInput("a seed memory about tomatoes", occurred_at=T0), AT_T0)
        context = RetrievalContext(query="we planted tomatoes")
        before = pack_signature(await memory.retrieve(context))
        drafts, _ = session_drafts("bb-prepare", ["we planted tomatoes", "tomatoes again"])
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
        drafts, named = session_drafts("bb-commit", ["we planted tomatoes", "it started to rain"])
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
        drafts, named = session_drafts("bb-lifecycle", ["we planted tomatoes", "tomatoes need sun"])
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
        drafts, _ = session_drafts("bb-isolated", ["we planted tomatoes"])
        await left.remember(drafts, AT_T0)
        assert (await right.retrieve(RetrievalContext(query="tomatoes"))).items == ()
        other, _ = session_drafts("bb-isolated", ["we planted potatoes"])
        assert (await right.remember(other, AT_T0)).repair_markers == ()
        assert (await left.retrieve(RetrievalContext(query="tomatoes"))).items != ()

    @requires("supports_reopen")
    async def test_reopened_collection_recalls_the_same_pack(self, memory_factory: MemoryFactory) -> None:
        """A collection opened again recalls the same pack, and a replay is accepted.

        If this fails: a write was not durable on acknowledgement, or the factory does not reach
        the same data.
        """
        memory = await memory_factory.open("bb-reopen")
        drafts, _ = session_drafts("bb-reopen", ["we planted tomatoes", "it started to rain"])
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
        drafts, named = session_drafts("validate", ["we planted tomatoes"])
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
        assert list(pack.items) == sorted(pack.items, key=pack_rank_key)
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
        assert [i.id for i in observations] == [i.id for i in sorted(observations, key=pack_rank_key)]

    async def test_vector_scope_by_object_type(self, memory: CharacterMemory) -> None:
        """``object_type_defaults`` scopes candidate recall: every vector-admitted item is of those types.

        If this fails: the vector index ignores ``VectorQuery.object_types`` or stores the wrong
        type with a point.
        """
        drafts, _ = session_drafts("scope", ["we planted tomatoes", "tomatoes again"])
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
        drafts, _ = session_drafts("completeness", ["we planted tomatoes", "tomatoes again", "rain"])
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
        drafts, _ = session_drafts(
            "expansion", ["we planted tomatoes", "tomatoes grow fast", "tomatoes need sun"]
        )
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
