"""The graph store suite's scenes: an episode's scene is stored, replayed and erased like its content."""

from __future__ import annotations

import io
from collections.abc import Mapping
from datetime import timedelta, timezone

import attrs
from hypothesis import given

from charmem.domain.graph import GraphBatch, GraphErasure, Tombstone
from charmem.domain.ids import MemoryId
from charmem.domain.model import Episode, MemoryObject, ObjectType
from charmem.domain.rules import canonical_content
from charmem.domain.scene import Scene, SceneParticipant, SceneSetting
from charmem.errors import IdConflictError
from charmem.ports import GraphStore
from charmem_contract import data
from charmem_contract.data import HOSTILE_STRINGS, at
from charmem_contract.factories import CONTRACT_COLLECTION, StoreFactory
from charmem_contract.strategies import fuzz_settings, scenes

__all__ = ["GraphSceneTests"]

#: Two offsets on either side of UTC, one of them not a whole hour.
INDIA, BRASILIA = timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-3))


def _scene_episodes() -> tuple[list[Episode], list[str]]:
    """Episodes with scenes of every shape (and one without), and what each one is."""
    person = data.entity()
    hostile = "\n".join(HOSTILE_STRINGS)
    full = Scene(
        at=at(0, INDIA),
        participants=[
            SceneParticipant(entity_id=person.id),
            SceneParticipant(name='Mina "the gardener"\nPark'),
            SceneParticipant(description=hostile),
            SceneParticipant(entity_id=data.entity().id, name="민아", description="a man with a deep voice"),
            SceneParticipant(name='Mina "the gardener"\nPark'),  # the same participant twice stays twice
        ],
        setting=SceneSetting(key="kitchen 'north'", words=hostile),
        custom_values={"activity": "chess", "empty": "", "mood\n": '"tense"', hostile: hostile},
    )
    shapes = {
        "every kind of participant, hostile text, several custom values": full,
        "no participants, words only, no custom values": Scene(
            at=at(30, BRASILIA), setting=SceneSetting(words="a bus stop in the rain")
        ),
        "a key only, a description only": Scene(
            at=at(45, BRASILIA),
            participants=[SceneParticipant(description="someone humming")],
            setting=SceneSetting(key="bus-stop"),
        ),
        "only a time": Scene(at=at(60, INDIA)),
    }
    episodes = [
        data.episode(summary=label, occurred_at=scene.at, scene=scene) for label, scene in shapes.items()
    ]
    episodes.append(data.episode(summary="no scene at all"))
    return episodes, [*shapes, "no scene"]


def _mismatches(expected: list[Episode], got: Mapping[MemoryId, MemoryObject]) -> list[str]:
    wrong: list[str] = []
    for episode in expected:
        back = got.get(episode.id)
        if not isinstance(back, Episode):
            wrong.append(f"{episode.summary!r}: read back as {back!r}")
            continue
        if back != episode or canonical_content(back) != canonical_content(episode):
            wrong.append(f"{episode.summary!r}: scene read back as {back.scene!r}")
        elif episode.scene is not None and back.scene is not None:
            if back.scene.at.utcoffset() != episode.scene.at.utcoffset():
                wrong.append(f"{episode.summary!r}: scene time lost its offset: {back.scene.at}")
            if dict(back.scene.custom_values) != dict(episode.scene.custom_values):
                wrong.append(f"{episode.summary!r}: custom values {dict(back.scene.custom_values)!r}")
    return wrong


class GraphSceneTests:
    """An episode's scene: round trips, replays, conflicts, erasure (mixed into ``GraphStoreContract``)."""

    async def test_scenes_round_trip_exactly(
        self, graph_store: GraphStore, graph_store_factory: StoreFactory[GraphStore]
    ) -> None:
        """An episode's scene reads back equal, offset and participant order kept; none reads ``None``.

        Scenes at +05:30 and -03:00, participants given by id, by name, by description and by
        all three (a repeated one stays repeated, in place), quotes, newlines and the hostile
        strings in names, descriptions, setting key and words and custom keys and values, no or
        several custom values (an empty value too); an episode written without a scene reads
        ``scene is None``. Read again after a reopen where the store keeps its data.

        If this fails: store the scene with the episode (its ``at`` as given, not normalised to
        UTC; participants as a list in order, each with its index, not as a set), serialise every
        text with the driver's literal or parameter API, and decode a missing scene as ``None``.
        """
        episodes, _ = _scene_episodes()
        await graph_store.write_batch(GraphBatch(objects=episodes))
        ids = [episode.id for episode in episodes]
        wrong = _mismatches(episodes, await graph_store.get_objects(ids))
        assert not wrong, "scenes did not round-trip:\n" + "\n".join(wrong)
        if getattr(self, "supports_reopen", False):
            await graph_store.close()
            reopened = await graph_store_factory.open(CONTRACT_COLLECTION)
            wrong = _mismatches(episodes, await reopened.get_objects(ids))
            assert not wrong, "scenes did not round-trip after a reopen:\n" + "\n".join(wrong)

    async def test_drawn_scenes_round_trip(self, graph_store: GraphStore) -> None:
        """Scenes drawn by :func:`charmem_contract.strategies.scenes` read back equal, in one batch.

        If this fails: the message names the episode (its summary is the draw's number) and the
        scene read back; write that scene alone to find which field the store loses.
        """
        drawn: list[Scene] = []

        @fuzz_settings(25)
        @given(scene=scenes())
        def draw(scene: Scene) -> None:
            drawn.append(scene)

        draw()
        episodes = [
            data.episode(summary=f"draw {n}", occurred_at=scene.at, scene=scene)
            for n, scene in enumerate(drawn)
        ]
        await graph_store.write_batch(GraphBatch(objects=episodes))
        got = await graph_store.get_objects([episode.id for episode in episodes])
        wrong = _mismatches(episodes, got)
        assert not wrong, f"{len(wrong)} of {len(drawn)} drawn scenes did not round-trip:\n" + "\n".join(
            wrong
        )

    async def test_scene_replay_is_skipped_and_another_scene_conflicts(self, graph_store: GraphStore) -> None:
        """An equal scene replayed is existing content; another scene under the id is a conflict.

        Refused, each writing nothing: another setting key, one more custom value, a participant
        left out, the scene dropped, and a scene added to an episode stored without one.

        If this fails: the scene is part of the episode's content
        (:func:`charmem.domain.rules.content_equal` compares it): compare it when an id is
        stored again, and refuse the batch with :class:`~charmem.errors.IdConflictError`.
        """
        episodes, _ = _scene_episodes()
        stored, bare = episodes[0], episodes[-1]
        await graph_store.write_batch(GraphBatch(objects=[stored, bare]))
        count = await graph_store.statement_count()
        again = await graph_store.write_batch(GraphBatch(objects=[stored, bare]))
        assert list(again.existing_ids) == [stored.id, bare.id] and not again.inserted_ids
        assert await graph_store.statement_count() == count, "an equal replay changed the store"
        scene = stored.scene
        assert scene is not None
        others = {
            "another setting key": attrs.evolve(scene, setting=SceneSetting(key="garden")),
            "one more custom value": attrs.evolve(scene, custom_values={**scene.custom_values, "x": "y"}),
            "a participant left out": attrs.evolve(scene, participants=scene.participants[1:]),
            "no scene": None,
        }
        attempts = {label: attrs.evolve(stored, scene=other) for label, other in others.items()}
        attempts["a scene added"] = attrs.evolve(bare, scene=data.scene(at=bare.occurred_at, names=["Mina"]))
        accepted: list[str] = []
        for label, changed in attempts.items():
            try:
                await graph_store.write_batch(GraphBatch(objects=[changed]))
            except IdConflictError as exc:
                if str(changed.id) not in exc.ids:
                    accepted.append(f"{label}: refused, but IdConflictError.ids = {exc.ids}")
            else:
                accepted.append(label)
        assert not accepted, f"another scene under a stored id was not refused: {accepted}"
        assert await graph_store.statement_count() == count, "a refused scene changed the store"
        back = await graph_store.get_objects([stored.id, bare.id])
        assert back == {stored.id: stored, bare.id: bare}

    async def test_erase_removes_an_episodes_scene(self, graph_store: GraphStore) -> None:
        """Erasing an episode removes its scene: no name, description, setting or custom text stays.

        If this fails: ``erase`` must remove every statement describing the episode, the nodes
        of its scene (participants, custom key/values) included; check the export after a purge.
        """
        marks = ("participant-name-7f3a", "participant-words-7f3a", "setting-key-7f3a", "setting-words-7f3a")
        custom = ("custom-key-7f3a", "custom-value-7f3a")
        scene = Scene(
            at=at(0, INDIA),
            participants=[
                SceneParticipant(entity_id=data.entity().id, name=marks[0], description=marks[1]),
                SceneParticipant(name=marks[0]),
            ],
            setting=SceneSetting(key=marks[2], words=marks[3]),
            custom_values={custom[0]: custom[1]},
        )
        episode = data.episode(occurred_at=scene.at, scene=scene)
        kept = data.episode(summary="kept", occurred_at=scene.at, scene=attrs.evolve(scene, custom_values={}))
        await graph_store.write_batch(GraphBatch(objects=[episode, kept]))
        tombstone = Tombstone(id=episode.id, object_type=ObjectType.EPISODE, purged_at=at(5))
        await graph_store.erase(GraphErasure(tombstones=[tombstone]))
        assert await graph_store.get_objects([episode.id, kept.id]) == {kept.id: kept}
        await graph_store.erase(GraphErasure(tombstones=[attrs.evolve(tombstone, id=kept.id)]))
        out = io.BytesIO()
        await graph_store.export_graph(out)
        left = [mark for mark in (*marks, *custom) if mark.encode() in out.getvalue()]
        assert not left, f"erased scenes left text behind in the export: {left}"

    async def test_occasions_answer_as_their_definition(self, graph_store: GraphStore) -> None:
        """A store that finds occasions itself (:class:`~charmem.ports.OccasionReader`) answers
        every kind of condition as reading its episodes would, newest first, up to the limit.

        Episodes in two offsets, some involving a notion (links as commit derives them), some in
        a setting or with a custom value, one a year earlier on the same local day; queries by
        participant, participant name (compared as names are), setting key, custom value, time
        bound, range, month and day, earlier year, and combinations. A store without the
        capability is read through its definition.

        If this fails: compare instants as ``xsd:dateTime`` (not as text), read month and day in
        the episode's own offset, match the setting key and custom values exactly, follow the
        ``involves`` links from the episode, compare participant names under
        :func:`charmem.domain.rules.normalise_name`, and order by time descending then id.
        """
        from charmem.domain.model import Relation
        from charmem.domain.occasions import OccasionQuery
        from charmem.usecases.occasions import find_occasions, read_occasions

        person = data.entity()
        episodes, links = [], []
        for n in range(8):
            when = at(n * 600, INDIA if n % 2 else BRASILIA)
            scene = Scene(
                at=when,
                participants=[SceneParticipant(entity_id=person.id)]
                if n % 3 == 0
                else [SceneParticipant(name="ＭＩＮＡ  park" if n % 2 else "Mina Park")],
                setting=SceneSetting(key="kitchen" if n < 4 else "garden 'south'"),
                custom_values={"activity": "chess"} if n in (2, 5) else {},
            )
            episode = data.episode(summary=f"occasion {n}", occurred_at=when, scene=scene)
            episodes.append(episode)
            if scene.participants:
                links.append(data.link(episode.id, Relation.INVOLVES, person.id))
        earlier = at(0, INDIA).replace(year=at(0, INDIA).year - 1)
        episodes.append(data.episode(summary="a year before", occurred_at=earlier))
        await graph_store.write_batch(GraphBatch(objects=[person, *episodes], links=links))
        first = episodes[0].occurred_at
        queries = [
            OccasionQuery(limit=20),
            OccasionQuery(limit=2),
            OccasionQuery(limit=20, participant=person.id),
            OccasionQuery(limit=20, setting_key="garden 'south'"),
            OccasionQuery(limit=20, custom_value=("activity", "chess")),
            OccasionQuery(limit=20, participant_name="mina park"),
            OccasionQuery(limit=20, at_or_before=episodes[3].occurred_at),
            OccasionQuery(limit=20, between=(episodes[2].occurred_at, episodes[5].occurred_at)),
            OccasionQuery(limit=20, month_day=(earlier.month, earlier.day), before_year=first.year),
            OccasionQuery(
                limit=3, participant=person.id, setting_key="kitchen", at_or_before=episodes[7].occurred_at
            ),
        ]
        for query in queries:
            expected = await read_occasions(graph_store, query)
            got = await find_occasions(graph_store, query)
            assert [(o.episode_id, o.occurred_at) for o in got] == [
                (o.episode_id, o.occurred_at) for o in expected
            ], f"occasions differ from their definition for {query!r}"
        assert len(await read_occasions(graph_store, queries[0])) == len(episodes)
