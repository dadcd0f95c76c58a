"""The facade suite's write path, checked inside the stores (``charmem.testing.stores_of``)."""

from __future__ import annotations

import pytest

from charmem import (
    BeliefAssertion,
    CandidateValidationStatus,
    CharacterMemory,
    CurrencyStatus,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    EpisodeDraft,
    IdConflictError,
    KnownAs,
    LinkDraft,
    MemoryId,
    PlanValidationError,
    Relation,
    RememberDrafts,
    RememberInput,
    RememberWritePlan,
    RetrievalContext,
    ThreadDraft,
)
from charmem.testing import stores_of
from charmem_contract._facade_steps import AT_T0, NOW, session_drafts, store_counts
from charmem_contract.data import T0

__all__ = ["WhiteBoxWriteTests"]


class WhiteBoxWriteTests:
    """The write path checked inside the stores (mixed into ``CharacterMemoryContract``)."""

    # -- write path ------------------------------------------------------------------------

    async def test_prepare_and_validate_write_nothing(self, memory: CharacterMemory) -> None:
        """``prepare`` and ``validate_plan`` touch no store; a valid plan validates as valid.

        If this fails: an adapter wrote during a read (``get_objects``, ``get_links``) or the
        stack wires a store that writes on open.
        """
        await memory.remember(RememberInput("a seed memory", occurred_at=T0), AT_T0)
        before = await store_counts(memory)
        drafts, _ = session_drafts("prepare", ["we planted tomatoes", "it started to rain"])
        for item in (drafts, RememberInput("a new memory", occurred_at=T0, summary="new")):
            plan = await memory.prepare(item, NOW)
            validations = await memory.validate_plan(plan)
            assert [v.status for v in validations] == [CandidateValidationStatus.VALID] * len(validations), [
                v.reasons for v in validations
            ]
        assert await store_counts(memory) == before, "prepare or validate_plan wrote to a store"

    async def test_commit_stores_objects_links_vectors_and_stats(self, memory: CharacterMemory) -> None:
        """A commit stores every object and link, indexes exactly the plan's entries, and counts them.

        If this fails: compare the listed store with the plan. Graph: ``write_batch`` of objects,
        caller and derived links. Vectors: one point per index entry. Stats: one row per object
        and link.
        """
        drafts, _ = session_drafts("commit", ["we planted tomatoes", "it started to rain"])
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
        drafts, ids = session_drafts("roles", ["we planted tomatoes", "it started to rain"])
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
        drafts, _ = session_drafts("replay", ["we planted tomatoes", "it started to rain"])
        plan = await memory.prepare(drafts, NOW)
        await memory.commit(plan)
        before, summary = await store_counts(memory), await stores_of(memory).stats.summary()
        again = await memory.commit(plan)
        from_json = await memory.commit(RememberWritePlan.from_json(plan.to_json()))
        assert again.warnings and from_json.warnings, "a replay should warn that items were already stored"
        assert again.repair_markers == () and from_json.repair_markers == ()
        assert await store_counts(memory) == before, (
            "a replay changed (graph statements, vector points, stats rows)"
        )
        assert await stores_of(memory).stats.summary() == summary, "a replay counted twice"

    async def test_id_conflicts_change_nothing(self, memory: CharacterMemory) -> None:
        """An id stored with other content (of any type) raises IdConflictError; nothing changes.

        If this fails: the graph store accepted or partly wrote a conflicting batch, or vectors
        and stats were written before the graph refused it.
        """
        drafts, named = session_drafts("conflict", ["we planted tomatoes"])
        await memory.remember(drafts, AT_T0)
        before, points = await store_counts(memory), await stores_of(memory).vectors.point_ids()
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
            assert await store_counts(memory) == before, f"{label}: a refused commit changed a store"
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
        before = await store_counts(memory)
        for label, draft in refused.items():
            with pytest.raises(PlanValidationError):
                await memory.remember(RememberDrafts(derived=[draft]), AT_T0)
            assert await store_counts(memory) == before, f"{label}: a refused plan changed a store"
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
        before = await store_counts(memory)
        with pytest.raises(PlanValidationError):
            await memory.remember(RememberDrafts(links=[LinkDraft(new, Relation.SUPERSEDES, old)]), AT_T0)
        assert await store_counts(memory) == before
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
