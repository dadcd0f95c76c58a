"""``SituatedRecallContract``: recall from a scene, on a small hand-built store, on any stack.

Who walks in, where, when and what is being done bring memories to mind with no topic at all:
participants by id or by their current name, a setting key and custom values, a supplied time
range, an anniversary, an activity; nothing after the scene's time; last interactions and how
each participant resolved. None of it depends on the embedder: the roads are the graph's.

Subclass it as ``TestXxx`` and override the one fixture ``memory_factory`` (a
:class:`~charmem_contract.factories.MemoryFactory`, as for the facade suite).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, ClassVar

import pytest

from charmem import (
    AdmissionRoad,
    BeliefAssertion,
    CharacterMemory,
    CorrectionTarget,
    CorrectMemoryDraft,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    ForgetMemoryDraft,
    KnownAs,
    LinkDraft,
    MemoryId,
    Relation,
    RememberDrafts,
    RememberInput,
    ReplacementDerivedMemoryDraft,
    RetrievalContext,
    Scene,
    SceneParticipant,
    SceneResolutionStatus,
    SceneSetting,
    ThreadDraft,
)
from charmem_contract._base import ContractSuite
from charmem_contract.data import T0
from charmem_contract.factories import MemoryFactory

__all__ = ["SituatedRecallContract"]

DAY = timedelta(days=1)
#: Well before the stacks' fixed clock, so every record time is in the past.
START = T0 - 400 * DAY


def _id(*parts: object) -> MemoryId:
    return MemoryId.deterministic("charmem-situated-contract", *parts)


class SituatedRecallContract(ContractSuite, suite=True):
    """Scene recall every composition of adapters must show: the roads of participants, place,
    range, anniversary and activity; the reference time; last interactions; resolutions.

    No capability may be switched off: every stack must run all of it (the guard checks).
    """

    minimum_passing: ClassVar[int] = 12

    @pytest.fixture
    def memory_factory(self) -> MemoryFactory:
        """Override: yield a MemoryFactory over the test's own stores; close what it opened afterwards."""
        raise NotImplementedError(
            f"{type(self).__name__} must override the memory_factory fixture to yield a "
            "charmem_contract.MemoryFactory (see charmem_contract.memory_factory)"
        )

    @pytest.fixture
    async def memory(self, memory_factory: MemoryFactory) -> CharacterMemory:
        """The memory of collection ``situated``, empty (closed by the factory)."""
        return await memory_factory.open("situated")

    # ------------------------------------------------------------------ helpers

    @staticmethod
    async def _person(memory: CharacterMemory, key: str, name: str) -> MemoryId:
        """A person notion with the given belief naming it."""
        notion = _id("person", key)
        await memory.remember(
            RememberDrafts(
                entities=[EntityDraft(id=notion, entity_type="person", created_at=START - DAY)],
                derived=[
                    DerivedMemoryDraft(
                        DerivedType.RELATIONSHIP_NOTE,
                        f"I know this person as {name}.",
                        id=_id("name", key, name),
                        entity_ids=[notion],
                        assertions=[BeliefAssertion(notion, KnownAs(name))],
                        given_by_application=True,
                        created_at=START - DAY,
                    )
                ],
            )
        )
        return notion

    @staticmethod
    async def _visit(
        memory: CharacterMemory, text: str, at: datetime, *who: MemoryId, **scene: Any
    ) -> MemoryId:
        """One occasion: an episode of ``text`` at ``at`` whose scene lists ``who`` by id."""
        episode = _id("episode", text)
        await memory.remember(
            RememberInput(text, episode_id=episode, occurred_at=at, created_at=at).with_scene(
                Scene(at=at, participants=[SceneParticipant(entity_id=w) for w in who], **scene)
            )
        )
        return episode

    @staticmethod
    async def _recall(memory: CharacterMemory, at: datetime, **scene: Any) -> Any:
        extra = {key: scene.pop(key) for key in ("time_range", "activity", "max_items") if key in scene}
        return await memory.retrieve(RetrievalContext(scene=Scene(at=at, **scene), **extra))

    @staticmethod
    def _texts(pack: Any) -> set[str]:
        return {item.text for item in pack.items}

    @staticmethod
    def _roads(pack: Any, text: str) -> tuple[AdmissionRoad, ...]:
        return next((item.admitted_by for item in pack.items if item.text == text), ())

    # ------------------------------------------------------------------ the canary

    async def test_fixture_starts_empty(self, memory: CharacterMemory) -> None:
        """A fresh memory recalls nothing for a scene, and a named stranger resolves to no one.

        If this fails: the ``memory_factory`` fixture must open every test's collection on fresh
        stores (a fresh temporary directory, or a fresh server).
        """
        pack = await self._recall(memory, START, participants=[SceneParticipant(name="Ann")])
        assert pack.items == () and pack.omissions == (), "the memory_factory's memories are not empty"
        assert [r.status for r in pack.scene_resolutions] == [SceneResolutionStatus.UNKNOWN]

    # ------------------------------------------------------------------ roads

    async def test_a_participant_brings_their_occasions_and_nothing_later(
        self, memory: CharacterMemory
    ) -> None:
        """A scene with only a participant (no topic) recalls the occasions they were at, up to
        the scene's time, and says when they were last met.

        If this fails: the graph store does not keep an episode's scene or its ``involves`` links
        to participants given by id, or its occasions (``OccasionReader``) ignore the
        participant or the time bound.
        """
        ann, bob = await self._person(memory, "ann", "Ann"), await self._person(memory, "bob", "Bob")
        await self._visit(memory, "Ann brought sourdough bread", START, ann)
        await self._visit(memory, "Bob fixed the garden gate", START + DAY, bob)
        await self._visit(memory, "Ann planted tomatoes with me", START + 2 * DAY, ann)
        await self._visit(memory, "Ann came back with a cake", START + 5 * DAY, ann)

        pack = await self._recall(memory, START + 3 * DAY, participants=[SceneParticipant(entity_id=ann)])

        assert {"Ann brought sourdough bread", "Ann planted tomatoes with me"} <= self._texts(pack)
        assert "Ann came back with a cake" not in self._texts(pack)
        assert AdmissionRoad.PARTICIPANT in self._roads(pack, "Ann planted tomatoes with me")
        assert all(item.occurred_at <= START + 3 * DAY for item in pack.items)
        [last] = pack.last_interactions
        assert (last.entity_id, last.last_met_at, last.elapsed) == (ann, START + 2 * DAY, DAY)

    async def test_a_renamed_friend_resolves_by_the_current_name_only(self, memory: CharacterMemory) -> None:
        """After a correction renames a notion, the new name resolves to it and the old one to no
        one; the occasions under the old name are still theirs.

        If this fails: ``name_index`` keeps a superseded name as current, or misses the new one.
        """
        sam = await self._person(memory, "sam", "Sam")
        await self._visit(memory, "Sam sang the solo at the concert", START, sam)
        await memory.correct(
            CorrectMemoryDraft(
                CorrectionTarget.derived_memory(_id("name", "sam", "Sam")),
                "now goes by Samira",
                replacement=ReplacementDerivedMemoryDraft(
                    DerivedType.RELATIONSHIP_NOTE,
                    "I know this person as Samira.",
                    entity_ids=[sam],
                    assertions=[BeliefAssertion(sam, KnownAs("Samira"))],
                    given_by_application=True,
                    created_at=START + DAY,
                ),
                recorded_at=START + DAY,
            )
        )
        participants = [SceneParticipant(name="samira"), SceneParticipant(name="Sam")]
        pack = await self._recall(memory, START + 2 * DAY, participants=participants)

        resolved = [(r.participant_index, r.status, r.entity_ids) for r in pack.scene_resolutions]
        assert resolved == [
            (0, SceneResolutionStatus.RESOLVED, (sam,)),
            (1, SceneResolutionStatus.UNKNOWN, ()),
        ]
        assert "Sam sang the solo at the concert" in self._texts(pack)

    async def test_a_shared_name_is_ambiguous_with_one_last_meeting_each(
        self, memory: CharacterMemory
    ) -> None:
        """Two notions known by one name: the participant is ambiguous, both are recalled, and
        each has its own last interaction; a description alone resolves to no one.

        If this fails: names are matched case-sensitively, or only the first notion of a name
        is kept.
        """
        first, second = (
            await self._person(memory, "alex-1", "Alex"),
            await self._person(memory, "alex-2", "ALEX"),
        )
        await self._visit(memory, "Alex taught me a climbing knot", START, first)
        await self._visit(memory, "Alex played piano upstairs", START + DAY, second)

        participants = [
            SceneParticipant(name="alex"),
            SceneParticipant(description="a tall man in a grey coat"),
        ]
        pack = await self._recall(memory, START + 2 * DAY, participants=participants)

        assert [r.status for r in pack.scene_resolutions] == [
            SceneResolutionStatus.AMBIGUOUS,
            SceneResolutionStatus.UNKNOWN,
        ]
        assert pack.scene_resolutions[0].entity_ids == tuple(sorted((first, second)))
        assert {li.entity_id: li.last_met_at for li in pack.last_interactions} == {
            first: START,
            second: START + DAY,
        }
        assert {"Alex taught me a climbing knot", "Alex played piano upstairs"} <= self._texts(pack)

    async def test_a_forgotten_occasion_is_not_recalled_nor_the_last_meeting(
        self, memory: CharacterMemory
    ) -> None:
        """Forgetting an occasion hides it from scene recall and from the last interaction.

        If this fails: currency (suppression) is not read for occasions, or the store's occasion
        answer leaves out suppressed episodes itself (it must return them; recall judges).
        """
        bob = await self._person(memory, "bob", "Bob")
        await self._visit(memory, "Bob brought plum jam", START, bob)
        quarrel = await self._visit(memory, "Bob shouted about the noise", START + DAY, bob)
        await memory.forget(
            ForgetMemoryDraft(target_id=quarrel, rationale="asked to", recorded_at=START + 2 * DAY)
        )
        never = await self._person(memory, "dana", "Dana")

        pack = await self._recall(
            memory,
            START + 3 * DAY,
            participants=[SceneParticipant(entity_id=bob), SceneParticipant(name="Dana")],
        )

        assert "Bob shouted about the noise" not in self._texts(pack)
        assert "Bob brought plum jam" in self._texts(pack)
        assert {li.entity_id: li.last_met_at for li in pack.last_interactions} == {bob: START, never: None}

    async def test_a_setting_key_and_a_custom_value_bring_what_happened_there(
        self, memory: CharacterMemory
    ) -> None:
        """The scene's setting key recalls occasions with that key, a custom value those with it.

        If this fails: the graph store does not keep the setting key or custom values of an
        episode's scene exactly, or its occasion query ignores them.
        """
        await self._visit(memory, "We repotted the fern", START, setting=SceneSetting(key="greenhouse"))
        await self._visit(memory, "Carla won at chess", START + DAY, custom_values={"activity": "chess"})
        await self._visit(
            memory, "A quiet afternoon reading", START + 2 * DAY, setting=SceneSetting(key="library")
        )

        pack = await self._recall(
            memory,
            START + 30 * DAY,
            setting=SceneSetting(key="greenhouse"),
            custom_values={"activity": "chess"},
        )

        assert AdmissionRoad.PLACE in self._roads(pack, "We repotted the fern")
        assert AdmissionRoad.PLACE in self._roads(pack, "Carla won at chess")
        assert AdmissionRoad.PLACE not in self._roads(pack, "A quiet afternoon reading")

    async def test_a_time_range_and_an_anniversary_bring_their_occasions(
        self, memory: CharacterMemory
    ) -> None:
        """Occasions inside a supplied range come to mind (a cue, not a filter), and so do those
        on the scene's month and day in an earlier year.

        If this fails: the occasion query compares instants in the wrong zone, or reads month and
        day in UTC instead of the episode's own offset.
        """
        birthday = START.replace(month=3, day=14, hour=19)
        await self._visit(memory, "Ann's birthday with a lemon cake", birthday)
        await self._visit(memory, "Coffee and wedding plans", birthday + 200 * DAY)
        next_year = birthday.replace(year=birthday.year + 1)

        pack = await self._recall(memory, next_year, time_range=(birthday + 199 * DAY, birthday + 201 * DAY))

        assert AdmissionRoad.ANNIVERSARY in self._roads(pack, "Ann's birthday with a lemon cake")
        assert AdmissionRoad.RANGE in self._roads(pack, "Coffee and wedding plans")

    async def test_an_activity_brings_a_threads_members_and_an_open_loops_sources(
        self, memory: CharacterMemory
    ) -> None:
        """An activity that is a thread recalls its members; one that is an open loop, the loop
        and what it was grounded on.

        If this fails: ``part_of_thread`` links or a derived memory's sources are not read back.
        """
        thread = _id("thread", "garden")
        await memory.remember(
            RememberDrafts(threads=[ThreadDraft(id=thread, title="The garden", created_at=START)])
        )
        await memory.remember(
            RememberInput("We dug the vegetable beds", occurred_at=START + DAY, thread_ids=[thread])
        )
        loop = _id("loop")
        await memory.remember(
            RememberInput(
                "Ann asked to borrow a ladder", occurred_at=START + 2 * DAY, created_at=START + 2 * DAY
            ).with_derived_memory(
                DerivedMemoryDraft(
                    DerivedType.OPEN_LOOP, "Lend Ann the ladder", id=loop, created_at=START + 2 * DAY
                )
            )
        )

        by_thread = await self._recall(memory, START + 10 * DAY, activity=thread)
        by_loop = await self._recall(memory, START + 10 * DAY, activity=loop)

        assert AdmissionRoad.ACTIVITY in self._roads(by_thread, "We dug the vegetable beds")
        assert AdmissionRoad.ACTIVITY in self._roads(by_loop, "Lend Ann the ladder")
        assert AdmissionRoad.ACTIVITY in self._roads(by_loop, "Ann asked to borrow a ladder")

    async def test_participants_take_turns(self, memory: CharacterMemory) -> None:
        """One participant with many occasions cannot fill the pack: another's occasions are
        recalled beside them.

        If this fails: a participant's occasions are not limited, or scores do not interleave.
        """
        ann, bob = await self._person(memory, "ann", "Ann"), await self._person(memory, "bob", "Bob")
        for day in range(12):
            await self._visit(memory, f"Ann dropped by for tea, visit {day}", START + day * DAY, ann)
        await self._visit(memory, "Bob mended the fence", START - DAY, bob)

        pack = await self._recall(
            memory,
            START + 20 * DAY,
            participants=[SceneParticipant(entity_id=ann), SceneParticipant(entity_id=bob)],
            max_items=6,
        )

        assert "Bob mended the fence" in self._texts(pack)
        assert len(pack.items) <= 6

    async def test_a_query_with_a_scene_still_stops_at_the_scene_time(self, memory: CharacterMemory) -> None:
        """With a topic and a scene, what the topic finds after the scene's time is left out.

        If this fails: the reference-time rule is applied to scene roads only.
        """
        await memory.remember(RememberInput("The blue kite flew over the hill", occurred_at=START))
        await memory.remember(RememberInput("The blue kite tore in the storm", occurred_at=START + 5 * DAY))

        pack = await memory.retrieve(RetrievalContext(query="the blue kite", scene=Scene(at=START + DAY)))

        assert "The blue kite flew over the hill" in self._texts(pack)
        assert "The blue kite tore in the storm" not in self._texts(pack)
        assert AdmissionRoad.TOPIC in self._roads(pack, "The blue kite flew over the hill")

    async def test_described_people_and_settings_bring_similar_occasions(
        self, memory: CharacterMemory
    ) -> None:
        """A participant known only by a description, and setting words, recall the occasions
        whose participants or setting were described alike, through their own vector surfaces.

        If this fails: the vector index does not keep an episode's scene surfaces apart from its
        content (``VectorQuery.surface``), or the scene's words were not embedded on write.
        """
        stranger = Scene(
            at=START,
            participants=[SceneParticipant(description="a tall man with a deep voice and a grey coat")],
            setting=SceneSetting(words="the front door under the porch light"),
        )
        await memory.remember(
            RememberInput("Someone asked the way to the station", created_at=START).with_scene(stranger)
        )
        await memory.remember(RememberInput("We baked bread all morning", occurred_at=START + DAY))

        pack = await self._recall(
            memory,
            START + 2 * DAY,
            participants=[SceneParticipant(description="a man with a deep voice")],
            setting=SceneSetting(words="a knock at the front door"),
        )

        roads = self._roads(pack, "Someone asked the way to the station")
        assert AdmissionRoad.PERSON_DESCRIPTION in roads and AdmissionRoad.SETTING_WORDS in roads
        assert [r.status for r in pack.scene_resolutions] == [SceneResolutionStatus.UNKNOWN]
        assert pack.last_interactions == ()

    async def test_a_participants_unsettled_obligations_come_even_when_beliefs_fill_the_pack(
        self, memory: CharacterMemory
    ) -> None:
        """A participant's unsettled commitment is recalled even when many newer beliefs about
        them would fill the pack; a settled one has no such priority.

        If this fails: obligations about a participant are not read through ``about`` links, or
        ``resolves`` / ``fulfills_commitment`` links to them are not read.
        """
        ann = await self._person(memory, "ann", "Ann")
        promise, kept = _id("promise"), _id("kept-promise")
        await memory.remember(
            RememberDrafts(
                derived=[
                    DerivedMemoryDraft(
                        DerivedType.COMMITMENT,
                        text,
                        id=memory_id,
                        entity_ids=[ann],
                        given_by_application=True,
                        created_at=START,
                    )
                    for memory_id, text in ((promise, "Water Ann's plants"), (kept, "Return Ann's ladder"))
                ]
            )
        )
        for n in range(12):
            await memory.remember(
                RememberDrafts(
                    derived=[
                        DerivedMemoryDraft(
                            DerivedType.RELATIONSHIP_NOTE,
                            f"Ann likes tea number {n}",
                            entity_ids=[ann],
                            given_by_application=True,
                            created_at=START + (n + 1) * DAY,
                        )
                    ]
                )
            )
        done = await memory.remember(
            RememberInput("I gave Ann her ladder back", occurred_at=START + 20 * DAY)
        )
        await memory.link(LinkDraft(done.object_ids[0], Relation.FULFILLS_COMMITMENT, kept))

        pack = await self._recall(
            memory, START + 30 * DAY, participants=[SceneParticipant(name="Ann")], max_items=4
        )

        ranked = [item.id for item in pack.items]
        assert promise in ranked[:2], "the open promise did not come first"
        assert kept not in ranked[:1]

    async def test_a_name_brings_the_occasions_that_listed_it(self, memory: CharacterMemory) -> None:
        """Occasions whose scene listed a participant by name come back for that name (compared
        as names are), whether or not a notion is known by it.

        If this fails: the store does not match a scene participant's name under
        :func:`charmem.domain.rules.normalise_name` when finding occasions.
        """
        heard = Scene(at=START, participants=[SceneParticipant(name="Zed")])
        await memory.remember(RememberInput("Zed sold me a red bicycle", created_at=START).with_scene(heard))
        await memory.remember(RememberInput("We baked bread all morning", occurred_at=START + DAY))

        pack = await self._recall(memory, START + 2 * DAY, participants=[SceneParticipant(name="ZED")])

        assert AdmissionRoad.PARTICIPANT in self._roads(pack, "Zed sold me a red bicycle")
        assert AdmissionRoad.PARTICIPANT not in self._roads(pack, "We baked bread all morning")
        assert [r.status for r in pack.scene_resolutions] == [SceneResolutionStatus.UNKNOWN]
