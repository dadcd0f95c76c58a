"""The vector suite's surfaces: an object's content and scene-surface points kept apart."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from charmem.domain.ids import MemoryId
from charmem.domain.model import ObjectType
from charmem.ports import VectorIndex, VectorPoint, VectorQuery, VectorSearchResult, VectorSurface
from charmem_contract import data
from charmem_contract._base import requires

__all__ = ["VectorSurfaceTests"]

CONTENT, SETTING, PERSON = VectorSurface.CONTENT, VectorSurface.SETTING_WORDS, VectorSurface.PERSON_WORDS
EPI = ObjectType.EPISODE


def _ids(result: VectorSearchResult) -> list[MemoryId]:
    return [hit.id for hit in result.hits]


class VectorSurfaceTests:
    """Surfaces (mixed into ``VectorIndexContract``): one index, several texts per object."""

    contract_vector_size: ClassVar[int]

    def _vec(self, *head: float) -> list[float]:
        """A vector of the contract size: ``head`` then zeros."""
        size = self.contract_vector_size
        return [*head, *([0.0] * (size - len(head)))][:size]

    def _on(self, surface: VectorSurface, memory_id: MemoryId, *head: float, text: str = "") -> VectorPoint:
        return VectorPoint(id=memory_id, object_type=EPI, vector=self._vec(*head), text=text, surface=surface)

    async def _find(
        self,
        index: VectorIndex,
        surface: VectorSurface,
        *head: float,
        text: str | None = None,
        within: Sequence[MemoryId] | None = None,
        limit: int = 10,
    ) -> VectorSearchResult:
        query = VectorQuery(
            vector=self._vec(*head),
            limit=limit,
            text=text,
            surface=surface,
            within=None if within is None else tuple(within),
        )
        return await index.search(query)

    async def _three_surfaces(self, index: VectorIndex) -> tuple[MemoryId, MemoryId]:
        """Episode ``a``: content, setting words and person words; ``b``: person words only."""
        a, b = data.ids("surfaces", 2)
        await index.upsert(
            [
                self._on(CONTENT, a, 1.0, text="we baked bread together"),
                self._on(SETTING, a, 0.0, 1.0, text="a rainy harbour at dusk"),
                self._on(PERSON, a, 0.0, 0.0, 1.0, text="Mara\na tall woman with a red scarf"),
                self._on(PERSON, b, 0.0, 1.0, text="a man with a deep voice"),
            ]
        )
        return a, b

    async def test_a_search_sees_its_own_surface_only(self, vector_index: VectorIndex) -> None:
        """A search of one surface returns only that surface's points, each hit naming the object.

        If this fails: keep each surface's points apart (a payload field and a filter, separate
        vectors, or separate collections) and give every search the condition of
        ``VectorQuery.surface`` (content when not given); a hit's id is the object's id, not a
        derived point id.
        """
        a, b = await self._three_surfaces(vector_index)
        assert _ids(await self._find(vector_index, CONTENT, 0.0, 1.0)) == [a]
        assert _ids(await self._find(vector_index, SETTING, 0.0, 1.0)) == [a]
        person = await self._find(vector_index, PERSON, 0.0, 1.0)
        assert _ids(person) == [b, a], "person words are ranked by their own vectors"
        assert person.hits[0].object_type is EPI and person.hits[0].score > person.hits[1].score
        default = await vector_index.search(VectorQuery(vector=self._vec(0.0, 1.0), limit=10))
        assert _ids(default) == [a], "a query without a surface searches content"

    @requires("supports_lexical")
    async def test_a_lexical_cue_never_matches_another_surfaces_text(self, vector_index: VectorIndex) -> None:
        """A cue word that only a scene surface's text holds lifts nothing on the content surface.

        If this fails: the lexical stage must carry the same surface condition as the dense one.
        """
        a, b = await self._three_surfaces(vector_index)
        other = data.ids("surfaces-other", 1)[0]
        await vector_index.upsert([self._on(CONTENT, other, 0.9, 0.1, text="a quiet evening")])
        content = await self._find(vector_index, CONTENT, 1.0, text="voice harbour scarf")
        assert set(_ids(content)) == {a, other}, "a content search met a scene surface's point"
        person = await self._find(vector_index, PERSON, 1.0, text="voice")
        assert _ids(person)[0] == b, "the cue did not lift the person words that hold it"
        setting = await self._find(vector_index, SETTING, 0.0, 0.0, 1.0, text="bread voice")
        assert _ids(setting) == [a]

    async def test_ties_on_a_surface_are_ordered_by_object_id(self, vector_index: VectorIndex) -> None:
        """Equal scene-surface points come back by object id ascending, with or without a cue text.

        If this fails: order a surface's ties by the object's id (a derived point id orders
        differently), also after fusing a lexical stage.
        """
        ids = data.ids("surface-ties", 6)
        await vector_index.upsert(
            [self._on(SETTING, i, 0.6, 0.8, text="an old lighthouse") for i in sorted(ids, reverse=True)]
        )
        assert _ids(await self._find(vector_index, SETTING, 0.6, 0.8, limit=4)) == sorted(ids)[:4]
        cued = await self._find(vector_index, SETTING, 0.6, 0.8, text="lighthouse", limit=4)
        assert _ids(cued) == sorted(ids)[:4]

    async def test_within_and_scanned_count_one_surface(self, vector_index: VectorIndex) -> None:
        """``within`` names objects; the search sees their points on its surface, and counts those.

        If this fails: map ``within``'s object ids to the searched surface's points, and report
        ``scanned`` as the points of that surface in scope.
        """
        a, b = await self._three_surfaces(vector_index)
        assert _ids(await self._find(vector_index, PERSON, 0.0, 1.0, within=[a])) == [a]
        assert _ids(await self._find(vector_index, SETTING, 0.0, 1.0, within=[b])) == []
        result = await self._find(vector_index, PERSON, 0.0, 1.0)
        if result.completeness.scanned is not None:
            assert result.completeness.scanned == 2

    async def test_upsert_replaces_one_surface_and_leaves_the_others(self, vector_index: VectorIndex) -> None:
        """Upserting an object's point on one surface replaces that point only.

        If this fails: identify a point by (object id, surface), not by the object id alone.
        """
        a, _b = await self._three_surfaces(vector_index)
        await vector_index.upsert([self._on(SETTING, a, 1.0, text="a sunny square")])
        assert await vector_index.count(SETTING) == 1
        setting = await self._find(vector_index, SETTING, 1.0)
        assert _ids(setting) == [a] and setting.hits[0].score > 0.99
        content = await self._find(vector_index, CONTENT, 1.0)
        assert _ids(content) == [a] and content.hits[0].score > 0.99, "the content point changed"

    async def test_counts_and_point_ids_are_per_surface(self, vector_index: VectorIndex) -> None:
        """``count(surface)`` and ``point_ids(surface)`` list one surface; without one, content.

        If this fails: count and list the points of the given surface only, reading the object's
        id of a scene surface's point.
        """
        a, b = await self._three_surfaces(vector_index)
        assert await vector_index.count() == await vector_index.count(CONTENT) == 1
        assert await vector_index.point_ids() == await vector_index.point_ids(CONTENT) == {a}
        assert await vector_index.count(SETTING) == 1 and await vector_index.point_ids(SETTING) == {a}
        assert await vector_index.count(PERSON) == 2 and await vector_index.point_ids(PERSON) == {a, b}

    async def test_delete_removes_every_surface_of_an_object(self, vector_index: VectorIndex) -> None:
        """Deleting an object's id removes its points on every surface, and only its own.

        If this fails: ``delete`` must remove the content point and each scene surface's point
        of the ids (derived point ids included).
        """
        a, b = await self._three_surfaces(vector_index)
        await vector_index.delete([a])
        for surface in VectorSurface:
            assert a not in await vector_index.point_ids(surface), f"{surface.value} point left"
        assert await vector_index.point_ids(PERSON) == {b}
        assert _ids(await self._find(vector_index, PERSON, 0.0, 1.0)) == [b]
