"""The candidate-recall suite: :class:`VectorIndexContract` (the :class:`~charmem.ports.VectorIndex` port)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any, ClassVar

import pytest

from charmem.domain.ids import MemoryId
from charmem.domain.model import ObjectType
from charmem.domain.retrieval import SCORE_RESOLUTION, CompletenessKind
from charmem.errors import BackendError, DimensionMismatchError, EmbedderMismatchError
from charmem.ports import VectorIndex, VectorPoint, VectorQuery, VectorSearchResult
from charmem_contract import data
from charmem_contract._base import ContractSuite, requires
from charmem_contract._store_lifecycle import StoreLifecycleTests
from charmem_contract._vector_surfaces import VectorSurfaceTests
from charmem_contract.factories import CONTRACT_COLLECTION, StoreFactory

__all__ = ["VectorIndexContract"]

OBS, DER, EPI, THR = ObjectType.OBSERVATION, ObjectType.DERIVED, ObjectType.EPISODE, ObjectType.THREAD


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return 0.0 if norm == 0.0 else dot / norm


def _short(memory_id: MemoryId) -> str:
    return str(memory_id)[:8]


def _order(result: VectorSearchResult) -> list[MemoryId]:
    return [hit.id for hit in result.hits]


class VectorIndexContract(VectorSurfaceTests, StoreLifecycleTests[VectorIndex], ContractSuite, suite=True):
    """Contract suite of :class:`charmem.ports.VectorIndex`.

    Subclass it as ``TestMyVectorIndex`` and override the one fixture ``vector_index_factory``: it
    yields a :class:`~charmem_contract.factories.StoreFactory` whose ``open(collection, *,
    model_id, vector_size, store="main")`` opens an index with that embedder fingerprint on the
    test's own backing stores, and closes what it opened at the end
    (:func:`charmem_contract.opening`). The suite asks for the fingerprint
    (:attr:`contract_model_id`, :attr:`contract_vector_size`), and for another one to check that a
    reopen refuses it.

    Tests that compare exact order pass no cue text (``VectorQuery.text=None``), so an index with
    a lexical cue may keep it on here.
    """

    capabilities: ClassVar[dict[str, str]] = {
        "supports_reopen": (
            "keeps its points and its embedder fingerprint across close() and a new open of the "
            "same store and collection"
        ),
        "supports_lock": (
            "refuses a second opener of the same collection with StoreLockedError while it is open "
            "(the factory's open_competitor)"
        ),
        "supports_lexical": "lifts points whose text matches VectorQuery.text (a lexical cue)",
        "supports_exhaustive": "scans exhaustively and reports the count scanned",
        "supports_closed_errors": "raises BackendError when used after close()",
    }
    optional_capabilities: ClassVar[frozenset[str]] = frozenset(capabilities)
    minimum_passing: ClassVar[int] = 20

    supports_reopen: ClassVar[bool] = True
    supports_lock: ClassVar[bool] = True
    supports_lexical: ClassVar[bool] = True
    supports_exhaustive: ClassVar[bool] = True
    supports_closed_errors: ClassVar[bool] = True

    #: The embedder fingerprint the suite opens its indexes with.
    contract_model_id: ClassVar[str] = "charmem-contract-model"
    contract_vector_size: ClassVar[int] = 4

    # -- what an adapter provides ----------------------------------------------------------

    @pytest.fixture
    def vector_index_factory(self) -> StoreFactory[VectorIndex]:
        """Override: yield a factory of vector indexes on this test's own backing stores."""
        raise NotImplementedError(
            f"{type(self).__name__} must override the vector_index_factory fixture to yield a "
            "StoreFactory of VectorIndex whose open(collection, *, model_id, vector_size, store) opens "
            "an index on the test's own backing stores (see charmem_contract.opening)"
        )

    # -- what the suite derives from it ----------------------------------------------------

    @pytest.fixture
    async def vector_index(self, vector_index_factory: StoreFactory[VectorIndex]) -> VectorIndex:
        """The collection ``"contract"`` of store ``"main"`` with the contract fingerprint."""
        return await self._open_store(vector_index_factory)

    @pytest.fixture
    def store_factory(self, vector_index_factory: StoreFactory[VectorIndex]) -> StoreFactory[VectorIndex]:
        """The factory under the name the store lifecycle tests use."""
        return vector_index_factory

    # -- helpers ---------------------------------------------------------------------------

    def _point(
        self, memory_id: MemoryId, *head: float, kind: ObjectType = OBS, text: str = ""
    ) -> VectorPoint:
        return VectorPoint(id=memory_id, object_type=kind, vector=self._vec(*head), text=text)

    async def _search(
        self,
        index: VectorIndex,
        *head: float,
        limit: int = 100,
        types: tuple[ObjectType, ...] = (),
        text: str | None = None,
    ) -> VectorSearchResult:
        return await index.search(
            VectorQuery(vector=self._vec(*head), limit=limit, object_types=types, text=text)
        )

    # -- the canary ------------------------------------------------------------------------

    async def test_fixture_starts_empty(self, vector_index: VectorIndex) -> None:
        """The fixture yields an empty index with the contract fingerprint.

        If this fails: the ``vector_index_factory`` fixture must give every test fresh backing
        stores (a new temporary directory, a new collection) and open the index with the
        ``model_id`` and ``vector_size`` the suite passes.
        """
        assert vector_index.vector_size == self.contract_vector_size
        assert vector_index.model_id == self.contract_model_id
        assert await vector_index.count() == 0, "the vector_index_factory's index is not empty"
        assert await vector_index.point_ids() == set()
        assert (await self._search(vector_index, 1.0)).hits == ()

    # -- ranking ---------------------------------------------------------------------------

    async def test_search_orders_by_cosine_score_descending(self, vector_index: VectorIndex) -> None:
        """Hits come by score descending, and the score is the cosine similarity (to 1e-5).

        If this fails: use cosine distance (normalise vectors), report similarity (higher is
        closer, not a distance), and sort by score descending.
        """
        angles = [0.0, 0.3, 0.9, 1.4, 2.0, 2.8]
        ids = data.ids("cosine", len(angles))
        points = [self._point(i, math.cos(a), math.sin(a)) for i, a in zip(ids, angles, strict=True)]
        await vector_index.upsert(list(reversed(points)))
        query = self._vec(1.0, 0.2)
        result = await vector_index.search(VectorQuery(vector=query, limit=10))
        expected = sorted(points, key=lambda p: -_cosine(query, p.vector))
        assert _order(result) == [p.id for p in expected], "hits are not ordered by score descending"
        by_id = {p.id: p for p in points}
        for hit in result.hits:
            want = _cosine(query, by_id[hit.id].vector)
            assert math.isclose(hit.score, want, abs_tol=1e-5), (
                f"{_short(hit.id)} scored {hit.score}, cosine is {want}"
            )

    async def test_ties_are_ordered_by_id_whatever_the_insertion_order(
        self, vector_index: VectorIndex
    ) -> None:
        """All-equal vectors inserted in different orders come back in one order: id ascending.

        If this fails: the index returns ties in insertion (or storage) order. Sort hits by
        (score descending, id ascending) and, when ``limit`` cuts through a tie, fetch enough
        points to see every tied one before cutting.
        """
        ids = data.ids("ties", 12)
        expected = sorted(ids)
        orders = {
            "descending ids": sorted(ids, reverse=True),
            "ascending ids": sorted(ids),
            "shuffled": random.Random(4).sample(ids, len(ids)),  # noqa: S311 - reproducible
        }
        seen: dict[str, tuple[list[MemoryId], list[MemoryId]]] = {}
        for label, order in orders.items():
            await vector_index.delete(sorted(await vector_index.point_ids()))
            await vector_index.upsert([self._point(i, 0.6, 0.8) for i in order])
            full = _order(await self._search(vector_index, 0.6, 0.8, limit=12))
            cut = _order(await self._search(vector_index, 0.6, 0.8, limit=5))
            seen[label] = (full, cut)
        report = "\n".join(
            f"  inserted by {label}: {[_short(i) for i in full]} (limit 5: {[_short(i) for i in cut]})"
            for label, (full, cut) in seen.items()
        )
        for full, cut in seen.values():
            assert full == expected and cut == expected[:5], (
                f"ties must come back by id ascending {[_short(i) for i in expected]}, got:\n{report}"
            )

    async def test_ties_with_a_text_cue_do_not_depend_on_insertion_order(
        self, vector_index: VectorIndex
    ) -> None:
        """Equal vectors with equal texts, searched with a cue text, come back by id ascending.

        The canonical order (score descending, id ascending) holds when ``VectorQuery.text`` is set
        too: identical points must get identical scores, whatever the insertion order.

        If this fails: a fused (dense + lexical) score must not depend on where a point landed
        among equals in one stage; e.g. give tied points of a stage the same rank before fusing,
        or fuse on scores rather than on positions.
        """
        ids = data.ids("text-ties", 8)
        results: dict[str, list[MemoryId]] = {}
        for label, order in {"descending": sorted(ids, reverse=True), "ascending": sorted(ids)}.items():
            await vector_index.delete(sorted(await vector_index.point_ids()))
            await vector_index.upsert([self._point(i, 1.0, text="hello garden world") for i in order])
            results[label] = _order(await self._search(vector_index, 1.0, limit=5, text="garden"))
        report = {label: [_short(i) for i in got] for label, got in results.items()}
        assert results["descending"] == results["ascending"] == sorted(ids)[:5], (
            f"tied points came back in insertion-dependent order with a cue text: {report}; "
            f"expected {[_short(i) for i in sorted(ids)[:5]]}"
        )

    async def test_limit_cuts_at_a_tie_boundary_by_id(self, vector_index: VectorIndex) -> None:
        """When ``limit`` falls inside a run of tied scores, the smallest ids of the run are kept.

        If this fails: the index cut the tie by its internal order; fetch past the boundary until
        the last fetched point scores lower, then sort and cut.
        """
        best = data.ids("boundary-best", 3)
        tied = data.ids("boundary-tied", 20)
        await vector_index.upsert(
            [self._point(i, 1.0, 0.1 * n) for n, i in enumerate(best)]
            + [self._point(i, 0.0, 1.0) for i in sorted(tied, reverse=True)]
        )
        got = _order(await self._search(vector_index, 1.0, 0.5, limit=7))
        assert got[:3] == list(reversed(best)), "the three nearest points are not first"
        assert got[3:] == sorted(tied)[:4], (
            f"the tied run was cut by internal order: {[_short(i) for i in got[3:]]}, expected the "
            f"smallest ids {[_short(i) for i in sorted(tied)[:4]]}"
        )

    async def test_scores_closer_than_the_resolution_are_ties_cut_by_id(
        self, vector_index: VectorIndex
    ) -> None:
        """Scores less than ``SCORE_RESOLUTION`` apart are ties: ``limit`` keeps the smaller id.

        A float32 index and a float64 one give one point scores a few 1e-8 apart; the candidates a
        cut keeps must not depend on that noise.

        If this fails: compare scores with ``charmem.domain.retrieval.score_step`` wherever the
        index orders or cuts hits (and ranks fused stages), not with raw floats.
        """
        small, large = sorted(data.ids("near-ties", 2))
        await vector_index.upsert([self._point(large, 1.0, 0.0), self._point(small, 1.0, 3e-4)])
        full = await self._search(vector_index, 1.0, 0.0, limit=2)
        assert abs(full.hits[0].score - full.hits[1].score) < SCORE_RESOLUTION
        got = _order(await self._search(vector_index, 1.0, 0.0, limit=1))
        assert got == [small], (
            f"a cut between scores {[h.score for h in full.hits]} kept {_short(got[0])}, not the "
            f"smaller id {_short(small)}: noise below SCORE_RESOLUTION decided it"
        )

    async def test_limit_zero_and_limit_above_count(self, vector_index: VectorIndex) -> None:
        """``limit=0`` returns no hits; a limit above the count returns every point.

        If this fails: handle ``limit <= 0`` before querying the driver, and do not pad.
        """
        ids = data.ids("limits", 3)
        await vector_index.upsert([self._point(i, 1.0, n) for n, i in enumerate(ids)])
        assert (await self._search(vector_index, 1.0, limit=0)).hits == ()
        assert sorted(_order(await self._search(vector_index, 1.0, limit=50))) == sorted(ids)

    # -- scope and completeness ------------------------------------------------------------

    async def test_filter_by_object_type(self, vector_index: VectorIndex) -> None:
        """``object_types`` keeps only points of those types; empty means all; hits carry the type.

        If this fails: store the object type with each point (payload, column), filter inside the
        search (not after the limit), and return the stored type in each hit.
        """
        kinds = [OBS, DER, EPI, THR, OBS, DER]
        ids = data.ids("types", len(kinds))
        points = [
            self._point(i, 1.0, 0.1 * n, kind=k) for n, (i, k) in enumerate(zip(ids, kinds, strict=True))
        ]
        await vector_index.upsert(points)
        derived = await self._search(vector_index, 1.0, limit=1, types=(DER,))
        assert [h.id for h in derived.hits] == [ids[1]], "the filter was applied after the limit"
        pair = await self._search(vector_index, 1.0, types=(OBS, THR))
        assert {h.id for h in pair.hits} == {ids[0], ids[3], ids[4]}
        everything = await self._search(vector_index, 1.0)
        assert {h.id for h in everything.hits} == set(ids)
        kind_of = dict(zip(ids, kinds, strict=True))
        assert all(h.object_type is kind_of[h.id] for h in everything.hits), "hits carry the wrong type"

    async def test_within_restricts_the_search_to_given_ids(self, vector_index: VectorIndex) -> None:
        """``within`` ranks only those points (with the type filter and the lexical cue); ids
        without a point are ignored; an empty ``within`` finds nothing; ``None`` finds everything.

        If this fails: apply an id filter inside the search (Qdrant: ``HasIdCondition``), before
        the limit and in every fused stage, not after it.
        """
        ids = data.ids("within", 6)
        kinds = [OBS, OBS, DER, OBS, DER, OBS]
        await vector_index.upsert(
            [
                self._point(i, 1.0, 0.2 * n, kind=k, text="violin lesson" if n == 4 else "routine walk")
                for n, (i, k) in enumerate(zip(ids, kinds, strict=True))
            ]
        )
        absent = data.ids("within-absent", 1)[0]
        members = (ids[3], ids[4], ids[5], absent)

        def query(within: tuple[MemoryId, ...] | None, **extra: Any) -> VectorQuery:
            return VectorQuery(vector=self._vec(1.0), limit=extra.pop("limit", 100), within=within, **extra)

        nearest = await vector_index.search(query(members, limit=1))
        assert [h.id for h in nearest.hits] == [ids[3]], "the id filter was applied after the limit"
        scoped = await vector_index.search(query(members))
        assert {h.id for h in scoped.hits} == {ids[3], ids[4], ids[5]}
        typed = await vector_index.search(query(members, object_types=(DER,)))
        assert [h.id for h in typed.hits] == [ids[4]]
        cued = await vector_index.search(query(members, text="violin lesson"))
        assert {h.id for h in cued.hits} <= set(members), "the lexical stage ignored the id filter"
        assert (await vector_index.search(query(()))).hits == ()
        assert {h.id for h in (await vector_index.search(query(None))).hits} == set(ids)

    async def test_min_score_is_a_floor_on_dense_similarity(self, vector_index: VectorIndex) -> None:
        """``min_score`` drops dense candidates less similar than it (cosine); ``None`` keeps all.

        If this fails: pass the floor to the dense search (Qdrant ``score_threshold``) instead
        of cutting after fusion, and compare cosine, not a fused score.
        """
        ids = data.ids("floor", 3)
        await vector_index.upsert(
            [self._point(ids[0], 1.0), self._point(ids[1], 1.0, 1.0), self._point(ids[2], 0.0, 1.0)]
        )
        query = self._vec(1.0)
        floored = await vector_index.search(VectorQuery(vector=query, limit=10, min_score=0.5))
        assert [h.id for h in floored.hits] == [ids[0], ids[1]]  # cosines 1.0 and 0.707; 0.0 dropped
        everything = await vector_index.search(VectorQuery(vector=query, limit=10))
        assert {h.id for h in everything.hits} == set(ids)

    @requires("supports_exhaustive")
    async def test_exhaustive_completeness_reports_the_count_scanned(self, vector_index: VectorIndex) -> None:
        """An exact scan reports ``exhaustive`` with ``scanned`` = points in scope, ``fetched`` = hits.

        If this fails: count the points matching the type filter (not the whole collection, not the
        hits) and report them as ``scanned``; ``fetched`` is the number of hits returned.
        """
        kinds = [OBS] * 5 + [DER] * 3 + [THR] * 2
        ids = data.ids("completeness", len(kinds))
        await vector_index.upsert(
            [self._point(i, 1.0, 0.1 * n, kind=k) for n, (i, k) in enumerate(zip(ids, kinds, strict=True))]
        )
        cases = [((), 4, 10), ((DER,), 2, 3), ((OBS, THR), 20, 7), ((EPI,), 5, 0)]
        for types, limit, scope in cases:
            result = await self._search(vector_index, 1.0, limit=limit, types=types)
            got = result.completeness
            want = (CompletenessKind.EXHAUSTIVE, scope, min(limit, scope))
            assert (got.kind, got.scanned, got.fetched) == want, f"types={types} limit={limit}: {got}"

    async def test_completeness_is_always_reported(self, vector_index: VectorIndex) -> None:
        """Every search says whether it was exhaustive or approximate, and how many hits it fetched.

        If this fails: never report ``not_requested`` from a search; set ``fetched`` to the number
        of hits.
        """
        await vector_index.upsert([self._point(i, 1.0) for i in data.ids("reported", 3)])
        result = await self._search(vector_index, 1.0, limit=2)
        assert result.completeness.kind in (CompletenessKind.EXHAUSTIVE, CompletenessKind.APPROXIMATE)
        assert result.completeness.fetched in (None, len(result.hits))

    # -- writes ----------------------------------------------------------------------------

    async def test_upsert_replaces_a_point_with_the_same_id(self, vector_index: VectorIndex) -> None:
        """Upserting an existing id replaces its vector and type; the count does not grow.

        If this fails: key points by the memory id (the UUID), not by an internal row number.
        """
        memory_id, other = data.ids("replace", 2)
        await vector_index.upsert([self._point(memory_id, 1.0, kind=OBS), self._point(other, 0.7, 0.7)])
        await vector_index.upsert([self._point(memory_id, 0.0, 1.0, kind=DER)])
        assert await vector_index.count() == 2
        hits = (await self._search(vector_index, 0.0, 1.0)).hits
        assert hits[0].id == memory_id and hits[0].object_type is DER
        assert math.isclose(hits[0].score, 1.0, abs_tol=1e-5)

    async def test_delete_and_re_upsert(self, vector_index: VectorIndex) -> None:
        """Deleted points leave search, ``point_ids`` and ``count``; absent ids are ignored; re-upsert works.

        If this fails: delete by memory id, ignore ids that are not stored (no error), and make
        deletes visible to the next search.
        """
        ids = data.ids("delete", 4)
        await vector_index.upsert([self._point(i, 1.0, n) for n, i in enumerate(ids)])
        await vector_index.delete([ids[0], ids[2], MemoryId.new()])
        await vector_index.delete([])
        assert await vector_index.point_ids() == {ids[1], ids[3]}
        assert await vector_index.count() == 2
        assert set(_order(await self._search(vector_index, 1.0))) == {ids[1], ids[3]}
        await vector_index.upsert([self._point(ids[0], 1.0)])
        assert await vector_index.point_ids() == {ids[0], ids[1], ids[3]}
        assert ids[0] in _order(await self._search(vector_index, 1.0))

    async def test_wrong_dimension_is_refused_and_writes_nothing(self, vector_index: VectorIndex) -> None:
        """A vector of another size raises DimensionMismatchError (expected/actual); the batch writes nothing.

        If this fails: check every point of a batch before writing any, and raise
        :class:`~charmem.errors.DimensionMismatchError` with ``expected`` = the index size and
        ``actual`` = the offered size, for upserts and for queries.
        """
        size = self.contract_vector_size
        good, bad = data.ids("dimension", 2)
        points = [
            self._point(good, 1.0),
            VectorPoint(id=bad, object_type=OBS, vector=[1.0] * (size + 1)),
        ]
        with pytest.raises(DimensionMismatchError) as caught:
            await vector_index.upsert(points)
        assert (caught.value.expected, caught.value.actual) == (size, size + 1)
        assert await vector_index.count() == 0, "a refused batch wrote some of its points"
        with pytest.raises(DimensionMismatchError):
            await vector_index.search(VectorQuery(vector=[1.0] * (size - 1), limit=3))

    async def test_non_finite_vectors_are_refused(self, vector_index: VectorIndex) -> None:
        """NaN or infinite values raise BackendError and write nothing.

        If this fails: validate vectors with :func:`math.isfinite` before writing, and raise
        :class:`~charmem.errors.BackendError` (the embedding provider is faulty).
        """
        for bad_value in (math.nan, math.inf, -math.inf):
            memory_id, good = MemoryId.new(), MemoryId.new()
            with pytest.raises(BackendError):
                await vector_index.upsert([self._point(good, 1.0), self._point(memory_id, 1.0, bad_value)])
        assert await vector_index.count() == 0
        with pytest.raises(BackendError):
            await self._search(vector_index, math.nan)

    async def test_many_points_are_all_listed(self, vector_index: VectorIndex) -> None:
        """``point_ids`` and ``count`` are exact beyond one driver page (1,100 points).

        If this fails: page through the driver's listing until it is exhausted, and count exactly.
        """
        ids = [MemoryId.new() for _ in range(1100)]
        rng = random.Random(11)  # noqa: S311 - reproducible test data
        for start in range(0, len(ids), 400):
            await vector_index.upsert(
                [self._point(i, rng.random(), rng.random(), 1.0) for i in ids[start : start + 400]]
            )
        assert await vector_index.count() == len(ids)
        assert await vector_index.point_ids() == set(ids)
        assert len((await self._search(vector_index, 1.0, limit=10)).hits) == 10

    async def test_hostile_texts_are_accepted(self, vector_index: VectorIndex) -> None:
        """Points and cue texts with quotes, NUL, emoji, Korean... are stored and searched without error.

        If this fails: the text (for a lexical cue) must be passed to the driver as data; check
        tokenisation of the listed strings.
        """
        ids = data.ids("hostile", len(data.HOSTILE_STRINGS))
        await vector_index.upsert(
            [
                self._point(i, 1.0, n, text=t)
                for n, (i, t) in enumerate(zip(ids, data.HOSTILE_STRINGS, strict=True))
            ]
        )
        failures = []
        for text in data.HOSTILE_STRINGS:
            try:
                result = await self._search(vector_index, 1.0, text=text, limit=3)
            except BackendError as exc:
                failures.append(f"{text!r}: {exc}")
                continue
            if len(result.hits) != 3:
                failures.append(f"{text!r}: {len(result.hits)} hits")
        assert not failures, "searches with hostile cue texts failed:\n" + "\n".join(failures)
        assert await vector_index.point_ids() == set(ids)

    @requires("supports_lexical")
    async def test_lexical_cue_lifts_points_whose_text_matches(self, vector_index: VectorIndex) -> None:
        """Of two points at equal vector distance, the one whose text holds the cue word ranks first.

        If this fails: index each point's ``text`` for the lexical cue and fuse the lexical stage
        with the dense stage when ``VectorQuery.text`` is given.
        """
        near, match, miss = data.ids("lexical", 3)
        await vector_index.upsert(
            [
                self._point(near, 1.0, text="sunny weather report"),
                self._point(miss, 0.0, 1.0, text="the piano lesson went well"),
                self._point(match, 0.0, 1.0, text="the violin lesson went well"),
            ]
        )
        order = _order(await self._search(vector_index, 1.0, limit=3, text="violin"))
        assert match in order and miss in order
        assert order.index(match) < order.index(miss), "the cue word did not lift the matching point"

    # -- the embedder fingerprint ----------------------------------------------------------

    @requires("supports_reopen")
    async def test_reopen_refuses_another_fingerprint(
        self, vector_index_factory: StoreFactory[VectorIndex]
    ) -> None:
        """Reopened with another ``vector_size`` the index raises DimensionMismatchError, with the
        same size and another ``model_id`` EmbedderMismatchError; then the right fingerprint opens.

        If this fails: record the fingerprint with the collection (a marker file, metadata) when it
        is created and check it on every open before touching points.
        """
        first = await self._open_store(vector_index_factory)
        ids, _ = await self._fill(first)
        await first.close()
        size, model = self.contract_vector_size, self.contract_model_id
        with pytest.raises(DimensionMismatchError):
            await vector_index_factory.open(CONTRACT_COLLECTION, model_id=model, vector_size=size + 1)
        with pytest.raises(EmbedderMismatchError):
            await vector_index_factory.open(CONTRACT_COLLECTION, model_id=f"{model}-other", vector_size=size)
        reopened = await self._open_store(vector_index_factory)
        assert await reopened.point_ids() == set(ids)

    # -- the store lifecycle (reopen, lock, closed handle) for a vector index ---------------

    def _fingerprint(self) -> dict[str, Any]:
        return {"model_id": self.contract_model_id, "vector_size": self.contract_vector_size}

    async def _open_store(self, factory: StoreFactory[VectorIndex], *, store: str = "main") -> VectorIndex:
        return await factory.open(CONTRACT_COLLECTION, store=store, **self._fingerprint())

    async def _open_competitor(self, factory: StoreFactory[VectorIndex]) -> None:
        await factory.open_competitor(CONTRACT_COLLECTION, **self._fingerprint())

    async def _fill(self, handle: VectorIndex) -> Any:
        ids = data.ids("reopen", 5)
        await handle.upsert([self._point(i, 1.0, n) for n, i in enumerate(ids)])
        return ids, _order(await self._search(handle, 1.0, 0.5, limit=5))

    async def _check_reopened(self, handle: VectorIndex, filled: Any) -> None:
        ids, before = filled
        size, model = self.contract_vector_size, self.contract_model_id
        assert (handle.model_id, handle.vector_size) == (model, size)
        assert await handle.point_ids() == set(ids)
        assert _order(await self._search(handle, 1.0, 0.5, limit=5)) == before

    async def _write_one(self, handle: VectorIndex) -> None:
        await handle.upsert([self._point(MemoryId.new(), 1.0)])

    async def _read_one(self, handle: VectorIndex) -> None:
        await self._search(handle, 1.0)
