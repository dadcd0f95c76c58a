"""``RecallSignalsContract``: each signal retrieval ranks by, on a small hand-built store.

Hub selectivity, currency along a correction chain, meaning over recency, event-time windows,
the recency preference, thread continuity and canonical order under two insertion orders. The
stores are built so each signal decides the outcome whatever the embedder: texts share words
with the query exactly where the test needs similarity (the hashing embedder and BM25 both see
it; a semantic model does too).

Subclass it as ``TestXxx`` and override the one fixture ``memory_factory`` (a
:class:`~charmem_contract.factories.MemoryFactory`, as for the facade suite).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import pytest

from charmem import (
    BeliefAssertion,
    CharacterMemory,
    CorrectionTarget,
    CorrectMemoryDraft,
    CurrencyStatus,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    EpisodeDraft,
    GraphLimits,
    KnownAs,
    MemoryId,
    ObjectType,
    ObservationDraft,
    RememberDrafts,
    RememberInput,
    ReplacementDerivedMemoryDraft,
    RetrievalContext,
    ThreadDraft,
)
from charmem_contract._base import ContractSuite
from charmem_contract.factories import MemoryFactory

__all__ = ["RecallSignalsContract"]

T0 = datetime(2024, 1, 10, 9, 0, tzinfo=UTC)


def _ids(namespace: str, count: int) -> list[MemoryId]:
    return [MemoryId.deterministic("charmem-recall-contract", namespace, n) for n in range(count)]


class RecallSignalsContract(ContractSuite, suite=True):
    """Recall signals every composition of adapters must show: hubs narrowed by a named notion,
    currency along a correction chain, meaning over recency, time windows and cues, the recency
    preference, thread continuity and canonical order.

    No capability may be switched off: every stack must run all of it (the guard checks).
    """

    minimum_passing: ClassVar[int] = 8

    @pytest.fixture
    def memory_factory(self) -> MemoryFactory:
        """Override: yield a MemoryFactory over the test's own stores; close what it opened afterwards."""
        raise NotImplementedError(
            f"{type(self).__name__} must override the memory_factory fixture to yield a "
            "charmem_contract.MemoryFactory (see charmem_contract.memory_factory)"
        )

    @pytest.fixture
    async def memory(self, memory_factory: MemoryFactory) -> CharacterMemory:
        """The memory of collection ``recall``, empty (closed by the factory)."""
        return await memory_factory.open("recall")

    # -- the canary ------------------------------------------------------------------------

    async def test_fixture_starts_empty(self, memory: CharacterMemory) -> None:
        """A fresh memory recalls nothing and omits nothing.

        If this fails: the ``memory_factory`` fixture must open every test's collection on fresh
        stores (a fresh temporary directory, or a fresh server).
        """
        pack = await memory.retrieve(RetrievalContext(query="anything at all about the dog Rex"))
        assert pack.items == () and pack.omissions == (), "the memory_factory's memories are not empty"

    # ------------------------------------------------------------------ helpers

    @staticmethod
    async def _episode(memory: CharacterMemory, text: str, when: datetime, **extra: Any) -> MemoryId:
        """One episode with a summary (an item of its own) and one observation of the same text."""
        outcome = await memory.remember(RememberInput(text, summary=text, occurred_at=when, **extra))
        return outcome.object_ids[0]

    @staticmethod
    def _ranked(pack: Any) -> list[MemoryId]:
        """Item ids in rank order, an observation standing for its episode too.

        :meth:`_episode`'s episode summary repeats its observation, so the pack keeps only the
        higher-ranked of the two (the other is a ``duplicate_text`` omission).
        """
        ranked: list[MemoryId] = []
        for item in pack.items:
            also = item.provenance_ids if item.object_type is ObjectType.OBSERVATION else ()
            ranked.extend(i for i in (item.id, *also) if i not in ranked)
        return ranked

    # ------------------------------------------------------------------ signals

    async def test_a_hub_yields_its_rare_relevant_memory_without_flooding(
        self, memory: CharacterMemory
    ) -> None:
        """A notion with 50 routine memories and one rare relevant one: naming the notion in the
        query brings the rare memory (reachable only through the notion: distractors fill
        candidate recall) and at most a few routine ones.

        If this fails: ``VectorQuery.within`` is ignored by the vector index, or stats degrees
        are wrong, so the hub is followed whole or not at all.
        """
        rex, episode = _ids("hub", 2)
        rare = _ids("hub-rare", 1)[0]
        routine = _ids("hub-routine", 50)
        await memory.remember(
            RememberDrafts(
                entities=[EntityDraft(id=rex, entity_type="dog", created_at=T0)],
                derived=[
                    DerivedMemoryDraft(
                        DerivedType.REFLECTION,
                        "The dog is called Rex.",
                        entity_ids=[rex],
                        assertions=[BeliefAssertion(rex, KnownAs("Rex"))],
                        given_by_application=True,
                        created_at=T0,
                    )
                ],
                episodes=[EpisodeDraft(id=episode, occurred_at=T0)],
                observations=[
                    *(
                        ObservationDraft(
                            id=i,
                            episode_id=episode,
                            text=f"Walked around the park, lap {n}.",
                            observed_at=T0 + timedelta(minutes=n),
                            mentioned_entity_ids=[rex],
                        )
                        for n, i in enumerate(routine)
                    ),
                    ObservationDraft(
                        id=rare,
                        episode_id=episode,
                        text="The vet heard a heart murmur.",
                        observed_at=T0 + timedelta(minutes=60),
                        mentioned_entity_ids=[rex],
                    ),
                ],
            )
        )
        for n in range(6):  # candidate recall fills with these
            await self._episode(
                memory, f"The boiler heart murmur report, part {n}.", T0 + timedelta(days=1, hours=n)
            )
        context = RetrievalContext(
            query="Rex heart murmur report",
            candidate_limit=4,
            graph_limits=GraphLimits(hub_edge_cap=32, per_node_fanout=8, context_window=0),
        )
        pack = await memory.retrieve(context)
        by_id = {item.id: item for item in pack.items}
        assert rare in by_id, "the rare memory reachable only through the hub was not recalled"
        assert "named_notion" in by_id[rare].signals
        flood = [i for i in routine if i in by_id]
        assert len(flood) <= 8 // 4 - 1, f"{len(flood)} routine memories of the hub flooded the pack"
        assert pack.telemetry["hub_notions_narrowed"] == 1

    async def test_only_the_newest_belief_of_a_correction_chain_is_current(
        self, memory: CharacterMemory
    ) -> None:
        """A belief corrected twice: only the newest is an item by default; the older two are
        omitted as superseded, and come back with that status under ``include_superseded``.

        If this fails: ``currency`` must count every incoming ``supersedes`` link, and ``delete``
        must take a superseded memory out of candidate recall.
        """
        outcome = await memory.remember(
            RememberInput("Mara plays the violin at the school concert.", occurred_at=T0).with_derived_memory(
                DerivedMemoryDraft(DerivedType.CLAIM, "Mara plays the violin.")
            )
        )
        first = outcome.object_ids[-1]
        chain = [first]
        for instrument in ("viola", "cello"):
            corrected = await memory.correct(
                CorrectMemoryDraft(
                    CorrectionTarget.derived_memory(chain[-1]), f"It is the {instrument}."
                ).with_replacement(
                    ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, f"Mara plays the {instrument}.")
                )
            )
            chain.append(corrected.replacement_ids[0])
        pack = await memory.retrieve(RetrievalContext(query="What does Mara play?"))
        ranked = self._ranked(pack)
        assert chain[-1] in ranked
        assert chain[0] not in ranked and chain[1] not in ranked
        omitted = {o.id: o.reason for o in pack.omissions}
        assert omitted.get(chain[1]) == CurrencyStatus.SUPERSEDED.value
        history = await memory.retrieve(
            RetrievalContext(query="What does Mara play?", include_superseded=True)
        )
        status = {item.id: item.status for item in history.items}
        assert status[chain[-1]] is CurrencyStatus.CURRENT
        assert status.get(chain[1]) is CurrencyStatus.SUPERSEDED

    async def test_an_old_memory_beats_a_recent_distractor_on_meaning(self, memory: CharacterMemory) -> None:
        """Meaning outranks age: a year-old memory that answers the query ranks above a memory
        from yesterday that only shares a word with it, with or without a recency preference.

        If this fails: the vector index's scores are not similarities (higher is closer), or the
        lexical cue outweighs them.
        """
        old = await self._episode(memory, "Mara won the regional chess tournament final.", T0)
        recent = await self._episode(memory, "Bought a new tournament backpack.", T0 + timedelta(days=365))
        for recency in (None, timedelta(days=30)):
            pack = await memory.retrieve(
                RetrievalContext(query="Mara chess tournament final", recency=recency)
            )
            ranked = self._ranked(pack)
            assert old in ranked
            assert recent not in ranked or ranked.index(old) < ranked.index(recent), recency

    async def test_a_recency_preference_reorders_near_ties(self, memory: CharacterMemory) -> None:
        """Two memories of almost the same meaning: without a preference the closer one comes
        first; with a 30-day half-life the one from yesterday does (ages count from the memory's
        clock).

        If this fails: the graph store must keep ``occurred_at`` exactly (timezone included), and
        the stack must pass the memory's clock through.
        """
        now = memory.clock.now()
        older = await self._episode(memory, "Dinner with Ana at the harbour.", now - timedelta(days=300))
        newer = await self._episode(memory, "Dinner with Ana at the harbour again.", now - timedelta(days=1))
        query = "Dinner with Ana at the harbour"
        plain = self._ranked(await memory.retrieve(RetrievalContext(query=query)))
        assert plain.index(older) < plain.index(newer)
        preferring = await memory.retrieve(RetrievalContext(query=query, recency=timedelta(days=30)))
        ranked = self._ranked(preferring)
        assert ranked.index(newer) < ranked.index(older)
        assert all("recency" in item.signals for item in preferring.items)

    async def test_a_time_window_keeps_only_what_happened_inside_it(self, memory: CharacterMemory) -> None:
        """``occurred_between`` admits only memories whose event time lies inside the window,
        closed or open on either side.

        If this fails: the graph store must keep ``occurred_at`` of episodes and ``observed_at`` of
        observations exactly (timezone included).
        """
        days = (0, 10, 20)
        hikes = [
            await self._episode(memory, f"We went hiking in the hills, trip {d}.", T0 + timedelta(days=d))
            for d in days
        ]

        async def window(start: datetime | None, end: datetime | None) -> set[MemoryId]:
            pack = await memory.retrieve(
                RetrievalContext(query="hiking in the hills", occurred_between=(start, end))
            )
            return set(self._ranked(pack)) & set(hikes)

        assert await window(T0 + timedelta(days=5), T0 + timedelta(days=15)) == {hikes[1]}
        assert await window(T0 + timedelta(days=5), None) == {hikes[1], hikes[2]}
        assert await window(None, T0 + timedelta(days=10)) == {hikes[0], hikes[1]}
        pack = await memory.retrieve(
            RetrievalContext(query="hiking", occurred_between=(T0 + timedelta(days=30), None))
        )
        assert pack.items == ()
        assert pack.telemetry.get("outside_time_window", 0) > 0

    async def test_a_date_in_the_query_prefers_what_happened_then(self, memory: CharacterMemory) -> None:
        """A date in the query ("... on 9 November 2022"): of two equally close memories of the
        same text, the one that happened that day ranks first, so it is the one kept (the other
        only repeats its line: a ``duplicate_text`` omission), and it carries the ``time_cue``
        signal; with ``time_cues=False`` the newer one does (canonical ties).

        If this fails: equal texts must get equal scores (a deterministic embedder, ties by id in
        the vector index), and ``occurred_at`` must be kept exactly.
        """
        then = await self._episode(
            memory, "We cooked coconut ice cream.", datetime(2022, 11, 9, 18, tzinfo=UTC)
        )
        later = await self._episode(
            memory, "We cooked coconut ice cream.", datetime(2023, 2, 1, 18, tzinfo=UTC)
        )
        query = "the coconut ice cream we cooked on 9 November 2022"
        pack = await memory.retrieve(RetrievalContext(query=query))
        ranked = self._ranked(pack)
        assert then in ranked and later not in ranked
        kept = next(item for item in pack.items if then in (item.id, *item.provenance_ids))
        assert "time_cue" in kept.signals
        assert later in {o.id for o in pack.omissions if o.duplicate_of == kept.id}
        assert pack.telemetry["time_cue_periods"] == 1
        plain = self._ranked(await memory.retrieve(RetrievalContext(query=query, time_cues=False)))
        assert later in plain and then not in plain

    async def test_an_active_thread_brings_its_most_recent_members(self, memory: CharacterMemory) -> None:
        """Recalling an active thread brings its newest members (three), not its older ones.

        If this fails: ``links_of`` with PART_OF_THREAD must find a thread's members, and the
        graph store must keep their ``occurred_at``.
        """
        thread = _ids("thread", 1)[0]
        await memory.remember(RememberDrafts(threads=[ThreadDraft(id=thread, title="Moving to Lisbon")]))
        members = [
            await self._episode(
                memory, f"Packed box number {n} today.", T0 + timedelta(days=n), thread_ids=[thread]
            )
            for n in range(6)
        ]
        pack = await memory.retrieve(RetrievalContext(query="Moving to Lisbon"))
        by_id = {item.id: item for item in pack.items}
        assert thread in by_id
        continued = {m for m in members if m in by_id and "expansion:part_of_thread" in by_id[m].signals}
        assert continued == set(members[-3:])
        assert not set(members[:3]) & set(by_id)

    async def test_identical_packs_whatever_the_insertion_order(self, memory_factory: MemoryFactory) -> None:
        """The same memories inserted in two orders give identical items, scores, signals and
        entities (canonical ties: score, newer, type, id).

        If this fails: the vector index orders or cuts ties by insertion order; sort hits by
        (score descending, id ascending) and cut the limit after sorting.
        """
        texts = [f"Rehearsal of the spring play, scene {n % 3}." for n in range(9)]
        ids = _ids("order", len(texts))

        async def pack_of(collection: str, order: Sequence[int]) -> dict[str, Any]:
            memory = await memory_factory.open(collection)
            try:
                for n in order:
                    when = T0 + timedelta(hours=n % 2)
                    await memory.remember(
                        RememberDrafts(episodes=[EpisodeDraft(id=ids[n], summary=texts[n], occurred_at=when)])
                    )
                pack = (
                    await memory.retrieve(RetrievalContext(query="spring play rehearsal scene"))
                ).to_dict()
            finally:
                await memory.close()
            # seconds_since_support is measured to the clock's now, which moves between the packs
            pack["items"] = [
                {k: v for k, v in i.items() if k != "seconds_since_support"} for i in pack["items"]
            ]
            return {key: pack[key] for key in ("items", "sections", "entities", "omissions")}

        forward = await pack_of("order-a", range(len(texts)))
        backward = await pack_of("order-b", range(len(texts) - 1, -1, -1))
        assert forward == backward
