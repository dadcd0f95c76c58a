"""The lifecycle suite's forgetting: suppression, its cascades, what stays reachable."""

from __future__ import annotations

from typing import Any, cast

import pytest

from charmem import (
    CurrencyStatus,
    DerivedMemoryDraft,
    DerivedType,
    EpisodeDraft,
    ForgetMemoryDraft,
    LifecycleErrorKind,
    LifecycleValidationError,
    MemoryId,
    ObservationDraft,
    Relation,
    RememberDrafts,
    RememberInput,
    RetrievalContext,
    ThreadDraft,
    ThreadStatus,
)
from charmem.domain.model import MemoryThread
from charmem.testing import stores_of
from charmem_contract._lifecycle_steps import T0, LifecycleSteps

__all__ = ["LifecycleForgetTests"]


class LifecycleForgetTests(LifecycleSteps):
    """Forgetting: suppression, its cascades, and what stays reachable (mixed into ``LifecycleContract``)."""

    # -- forget ----------------------------------------------------------------------------

    async def test_forget_suppresses_the_target_and_what_was_derived_from_it(self, memory: Any) -> None:
        """Forgetting an observation suppresses it and, by default, the derived memories grounded on
        it; the episode stays current; vectors of the suppressed leave the index.

        If this fails: ``links_of`` with DERIVED_FROM must find incoming links.
        """
        episode, observation, claim = await self._grounded_belief(memory, "My PIN is 1234.", "PIN is 1234.")
        outcome = await memory.forget(ForgetMemoryDraft.suppress(observation, "Sensitive."))
        assert set(outcome.graph_mutated_object_ids) == {observation, claim}
        assert await self._status(memory, observation) is CurrencyStatus.SUPPRESSED
        assert await self._status(memory, claim) is CurrencyStatus.SUPPRESSED
        assert await self._status(memory, episode) is CurrencyStatus.CURRENT
        points = await stores_of(memory).vectors.point_ids()
        assert observation not in points
        assert claim not in points
        pack = await memory.retrieve("What is my PIN?")
        assert {observation, claim}.isdisjoint({item.id for item in pack.items})

    async def test_forget_without_cascade_keeps_derived_memories(self, memory: Any) -> None:
        """``apply_to_derived_from_target=False`` suppresses only the target.

        If this fails: nothing adapter-specific.
        """
        _e, observation, claim = await self._grounded_belief(memory, "I run on Sundays.", "Runs on Sundays.")
        await memory.forget(
            ForgetMemoryDraft.suppress(observation, "Only the wording.", apply_to_derived_from_target=False)
        )
        assert await self._status(memory, claim) is CurrencyStatus.CURRENT

    async def test_thread_forget_with_and_without_member_cascade(self, memory: Any) -> None:
        """Forgetting a thread leaves its status and vector; apply_to_thread_members suppresses its
        interpreted members and removes their vectors; source objects stay.

        If this fails: ``links_of`` with PART_OF_THREAD must find the members.
        """
        thread = MemoryId.new()
        episode = MemoryId.new()
        observation = MemoryId.new()
        member = MemoryId.new()
        await memory.remember(
            RememberDrafts(
                threads=[
                    ThreadDraft(id=thread, title="Garden project", summary="Raised beds", created_at=T0)
                ],
                episodes=[EpisodeDraft(id=episode, occurred_at=T0, thread_ids=[thread], created_at=T0)],
                observations=[
                    ObservationDraft(
                        id=observation, text="We built the beds.", episode_id=episode, created_at=T0
                    )
                ],
                derived=[
                    DerivedMemoryDraft(
                        DerivedType.PROJECT_NOTE,
                        "Beds are built.",
                        id=member,
                        observation_ids=[observation],
                        thread_ids=[thread],
                        created_at=T0,
                    )
                ],
            )
        )
        await memory.forget(ForgetMemoryDraft.suppress(thread, "Drop the topic."))
        assert await self._status(memory, thread) is CurrencyStatus.CURRENT
        assert await self._status(memory, member) is CurrencyStatus.CURRENT
        assert thread in await stores_of(memory).vectors.point_ids()
        stored = cast(MemoryThread, (await stores_of(memory).graph.get_objects([thread]))[thread])
        assert stored.status is ThreadStatus.ACTIVE
        await memory.forget(
            ForgetMemoryDraft.suppress(thread, "Drop its notes too.", apply_to_thread_members=True)
        )
        assert await self._status(memory, member) is CurrencyStatus.SUPPRESSED
        assert member not in await stores_of(memory).vectors.point_ids()
        assert await self._status(memory, episode) is CurrencyStatus.CURRENT
        assert await self._status(memory, observation) is CurrencyStatus.CURRENT
        assert thread in await stores_of(memory).vectors.point_ids()

    @pytest.mark.parametrize("case", ["blank", "unknown", "entity", "link"])
    async def test_forget_errors(self, memory: Any, case: str) -> None:
        """Forget refuses a blank rationale, an unknown target, a notion and a link.

        If this fails: check that nothing was written (the statement count is unchanged).
        """
        notion, belief = await self._notion_with_name(memory, "Ana")
        [about] = await stores_of(memory).graph.links_of([belief], relations=[Relation.ABOUT])
        drafts = {
            "blank": (ForgetMemoryDraft.suppress(belief, " "), LifecycleErrorKind.EMPTY_RATIONALE),
            "unknown": (
                ForgetMemoryDraft.suppress(MemoryId.new(), "x"),
                LifecycleErrorKind.MISSING_FORGET_TARGET,
            ),
            "entity": (
                ForgetMemoryDraft.suppress(notion, "x"),
                LifecycleErrorKind.UNSUPPORTED_LIFECYCLE_TARGET,
            ),
            "link": (
                ForgetMemoryDraft.suppress(about.id, "x"),
                LifecycleErrorKind.UNSUPPORTED_LIFECYCLE_TARGET,
            ),
        }
        draft, kind = drafts[case]
        before = await stores_of(memory).graph.statement_count()
        with pytest.raises(LifecycleValidationError) as info:
            await memory.forget(draft)
        assert info.value.kind is kind
        assert await stores_of(memory).graph.statement_count() == before

    async def test_replaying_a_forget_writes_nothing_new(self, memory: Any) -> None:
        """The same forget applied twice (at another time) adds no second record.

        If this fails: check that equal-content replays are accepted without new statements.
        """
        _e, _o, claim = await self._grounded_belief(memory, "a secret", "knows a secret")
        await memory.forget(ForgetMemoryDraft.suppress(claim, "Private."))
        count = await stores_of(memory).graph.statement_count()
        await memory.forget(ForgetMemoryDraft.suppress(claim, "Private."))
        assert await stores_of(memory).graph.statement_count() == count

    # -- forgetting what was said ----------------------------------------------------------

    async def test_forgetting_a_remembered_message_forgets_what_was_said(self, memory: Any) -> None:
        """Forgetting the episode ``remember(RememberInput(...))`` created suppresses its
        observation (its part) and the beliefs grounded on them: none is recalled, and their
        vectors left candidate recall (a stale point would come back as a ``suppressed`` omission).

        If this fails: ``links_of`` with HAS_OBSERVATION must find an episode's observations.
        """
        text = "My sister Ana is visiting from Porto next week."
        outcome = await memory.remember(
            RememberInput(text, occurred_at=T0).with_derived_memory(
                DerivedMemoryDraft(DerivedType.CLAIM, "Ana visits from Porto next week.")
            )
        )
        [episode], [observation], [claim] = outcome.episode_ids, outcome.observation_ids, outcome.derived_ids
        items, _ = await self._recalled(memory, text)
        assert observation in items
        forgotten = await memory.forget(ForgetMemoryDraft.suppress(episode, "Ana asked us to forget it."))
        assert set(forgotten.graph_mutated_object_ids) == {episode, observation, claim}
        for query in (text, "Ana visits from Porto next week."):
            items, omitted = await self._recalled(memory, query)
            assert {observation, claim}.isdisjoint(items), query
            assert {observation, claim}.isdisjoint(omitted), f"a vector stayed in candidate recall: {query}"

    async def test_forgetting_an_episode_reaches_beliefs_grounded_on_its_observations(
        self, memory: Any
    ) -> None:
        """``apply_to_derived_from_target`` covers what is grounded on the episode's observations
        (forgotten with it); switched off, those beliefs stay current while the utterance goes;
        ``apply_to_episode_observations=False`` keeps the utterance too.

        If this fails: ``links_of`` with DERIVED_FROM must find links into several ids at once.
        """
        worlds = []
        for n in range(3):
            episode, observation, belief = (MemoryId.new() for _ in range(3))
            text, note = f"We repainted the boat blue, round {n}.", f"The boat is blue, round {n}."
            await memory.remember(
                RememberDrafts(
                    episodes=[EpisodeDraft(id=episode, occurred_at=T0, created_at=T0)],
                    observations=[
                        ObservationDraft(id=observation, text=text, episode_id=episode, created_at=T0)
                    ],
                    derived=[
                        DerivedMemoryDraft(
                            DerivedType.PROJECT_NOTE,
                            note,
                            id=belief,
                            observation_ids=[observation],
                            created_at=T0,
                        )
                    ],
                )
            )
            worlds.append((episode, observation, belief, text, note))
        drafts = [
            ForgetMemoryDraft.suppress(worlds[0][0], "Forget the day."),
            ForgetMemoryDraft.suppress(
                worlds[1][0], "Forget the words only.", apply_to_derived_from_target=False
            ),
            ForgetMemoryDraft.suppress(
                worlds[2][0], "Forget the event.", apply_to_episode_observations=False
            ),
        ]
        for draft in drafts:
            await memory.forget(draft)
        expected = [(False, False), (False, True), (True, True)]  # (utterance, belief) recalled
        for (_episode, observation, belief, text, note), (said, believed) in zip(
            worlds, expected, strict=True
        ):
            items, _ = await self._recalled(memory, text)
            assert (observation in items) is said, text
            items, _ = await self._recalled(memory, note)
            assert (belief in items) is believed, note

    async def test_forgetting_a_thread_never_reaches_sources(self, memory: Any) -> None:
        """Thread forgetting (even with its members) suppresses derived members only: the
        episodes and observations in it stay recalled.

        If this fails: nothing adapter-specific.
        """
        thread, episode, observation = MemoryId.new(), MemoryId.new(), MemoryId.new()
        text = "We planted the raised beds with garlic."
        await memory.remember(
            RememberDrafts(
                threads=[ThreadDraft(id=thread, title="Garden", created_at=T0)],
                episodes=[
                    EpisodeDraft(
                        id=episode, occurred_at=T0, summary="garden day", thread_ids=[thread], created_at=T0
                    )
                ],
                observations=[ObservationDraft(id=observation, text=text, episode_id=episode, created_at=T0)],
            )
        )
        await memory.forget(
            ForgetMemoryDraft.suppress(thread, "Drop the topic.", apply_to_thread_members=True)
        )
        items, _ = await self._recalled(memory, text)
        assert observation in items
        items, _ = await self._recalled(memory, "garden day")
        assert episode in items

    # -- non-current beliefs of a notion ---------------------------------------------------

    @pytest.mark.parametrize("road", ["focus_entity", "named_notion"])
    async def test_forgotten_and_replaced_beliefs_about_a_notion_stay_reachable(
        self, memory: Any, road: str
    ) -> None:
        """After the current belief about a notion is forgotten, retrieval focused on the notion (or
        naming it) still meets every belief about it through the graph: omissions by default
        (suppressed beats superseded), items with ``include_suppressed`` / ``include_superseded``.

        If this fails: ``links_of`` with ABOUT must find every belief about a notion, current or
        not, and ``currency`` must classify them.
        """
        ana, first, second = await self._forgotten_replaced_belief(memory)
        where: dict[str, Any] = (
            {"query": "What music?", "focus_entity_ids": [ana]}
            if road == "focus_entity"
            else {"query": "What music does Ana like?"}
        )
        items, omitted = await self._recalled(memory, **where)
        assert {first, second}.isdisjoint(items)
        assert (omitted.get(first), omitted.get(second)) == ("superseded", "suppressed")
        items, omitted = await self._recalled(memory, **where, include_superseded=True)
        assert items.get(first) is CurrencyStatus.SUPERSEDED
        assert omitted.get(second) == "suppressed"
        pack = await memory.retrieve(
            RetrievalContext(**where, include_superseded=True, include_suppressed=True)
        )
        reached = {item.id: item for item in pack.items}
        assert (reached[first].status, reached[second].status) == (
            CurrencyStatus.SUPERSEDED,
            CurrencyStatus.SUPPRESSED,
        )
        assert road in reached[first].signals
        assert road in reached[second].signals
