"""``AdminToolsContract``: backup, restore and purge (``charmem.admin``) over any stack of adapters.

Subclass it as ``TestXxx`` and override the one fixture ``memory_factory`` (a
:class:`~charmem_contract.factories.MemoryFactory`), whose ``open(collection, store=name)`` opens
a collection on *named* backing stores: each distinct name is a separate, initially empty set of
stores (a directory, a server), the same name again reaches the same stores. A backup made on
stores ``"a"`` is restored into stores ``"b"``. The factory may give the collection another
actual name (a suffix that keeps tests apart on a shared server), as long as the same requested
name gets the same actual name on every store within one test.
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar, cast

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
    ForgetMemoryDraft,
    KnownAs,
    LifecycleErrorKind,
    LifecycleValidationError,
    LinkDraft,
    MemoryId,
    ObjectType,
    ObservationDraft,
    Relation,
    RememberDrafts,
    RememberInput,
    RememberWritePlan,
    ReplacementDerivedMemoryDraft,
    RetrievalContext,
    ThreadDraft,
)
from charmem.admin import MANIFEST_NAME, export_collection, import_collection, purge, read_manifest
from charmem.domain.model import DerivedMemory
from charmem.errors import (
    BackupFormatError,
    CollectionNotEmptyError,
    PurgedMemoryError,
    PurgeTargetError,
)
from charmem.testing import stores_of
from charmem_contract._base import ContractSuite
from charmem_contract.factories import MemoryFactory

__all__ = ["PERSONAL_TEXT", "PERSONAL_WORD", "PURGED_AT", "AdminToolsContract", "AdminWorld"]

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
PURGED_AT = datetime(2024, 4, 1, 12, 0, tzinfo=UTC)
#: The personal data the purge tests erase; "Porto" occurs nowhere else in the world.
PERSONAL_TEXT = "My sister Ana is visiting from Porto next week."
PERSONAL_WORD = "Porto"


def _hour(n: float) -> datetime:
    return T0 + timedelta(hours=n)


class AdminWorld:
    """The world every test of the suite builds (:meth:`build`): its ids and replayable inputs.

    Attributes:
        ids: names (``"ana"``, ``"episode"``, ``"observation"``, ``"claim"``, ``"replacement"``,
            ``"walk"``...) -> ids.
        plan_json: the persisted plan of the episode holding :data:`PERSONAL_TEXT`.
        correction: the correction of the claim (replayable).
    """

    def __init__(self) -> None:
        self.ids: dict[str, MemoryId] = {}
        self.plan_json = ""
        self.correction: CorrectMemoryDraft | None = None

    async def build(self, memory: CharacterMemory) -> AdminWorld:
        """Every write path: drafts with notions, names and a thread; remember with a persisted plan;
        a correction; a forget; a caller link.
        """
        await self._name_ana(memory)
        await self._plan_the_visit(memory)
        await self._plant_tomatoes(memory)
        await self._correct_forget_and_link(memory)
        return self

    async def _name_ana(self, memory: CharacterMemory) -> None:
        """A notion (Ana) with a given name belief, and a thread (the allotment)."""
        ana, garden, name = MemoryId.new(), MemoryId.new(), MemoryId.new()
        await memory.remember(
            RememberDrafts(
                entities=[EntityDraft(id=ana, entity_type="person", created_at=T0)],
                threads=[ThreadDraft(title="the allotment", summary="growing vegetables", id=garden)],
                derived=[
                    DerivedMemoryDraft(
                        DerivedType.REFLECTION,
                        "I know her as Ana.",
                        id=name,
                        entity_ids=[ana],
                        assertions=[BeliefAssertion(ana, KnownAs("Ana"))],
                        given_by_application=True,
                        created_at=T0,
                    )
                ],
            )
        )
        self.ids.update(ana=ana, garden=garden, name=name)

    async def _plan_the_visit(self, memory: CharacterMemory) -> None:
        """:data:`PERSONAL_TEXT` and a claim about it, through a persisted plan."""
        ana = self.ids["ana"]
        plan = await memory.prepare(
            RememberInput(
                PERSONAL_TEXT, occurred_at=_hour(1), participant_entity_ids=[ana], created_at=_hour(1)
            ).with_derived_memory(
                DerivedMemoryDraft(
                    DerivedType.CLAIM, "Ana visits next week.", entity_ids=[ana], created_at=_hour(1)
                )
            )
        )
        self.plan_json = plan.to_json()
        visit = await memory.commit(plan)
        self.ids["episode"], self.ids["observation"], self.ids["claim"] = visit.object_ids

    async def _plant_tomatoes(self, memory: CharacterMemory) -> None:
        """An afternoon at the allotment, a turn said by Ana, and a preference grounded on it."""
        ana, garden = self.ids["ana"], self.ids["garden"]
        allotment, turn, likes = MemoryId.new(), MemoryId.new(), MemoryId.new()
        await memory.remember(
            RememberDrafts(
                episodes=[
                    EpisodeDraft(
                        summary="an afternoon at the allotment",
                        occurred_at=_hour(2),
                        id=allotment,
                        participant_entity_ids=[ana],
                        thread_ids=[garden],
                        created_at=_hour(2),
                    )
                ],
                observations=[
                    ObservationDraft(
                        text="We planted tomatoes at the allotment.",
                        episode_id=allotment,
                        id=turn,
                        speaker_entity_id=ana,
                        created_at=_hour(2),
                    )
                ],
                derived=[
                    DerivedMemoryDraft(
                        DerivedType.USER_PREFERENCE,
                        "Likes growing tomatoes.",
                        id=likes,
                        observation_ids=[turn],
                        thread_ids=[garden],
                        created_at=_hour(2),
                    )
                ],
            )
        )
        self.ids.update(allotment=allotment, turn=turn, likes=likes)

    async def _correct_forget_and_link(self, memory: CharacterMemory) -> None:
        """The claim corrected, a walk remembered and its observation forgotten, a caller link."""
        self.correction = CorrectMemoryDraft(
            CorrectionTarget.derived_memory(self.ids["claim"]), "She moved the date.", recorded_at=_hour(3)
        ).with_replacement(ReplacementDerivedMemoryDraft(DerivedType.CLAIM, "Ana visits in two weeks."))
        corrected = await memory.correct(self.correction)
        self.ids["replacement"] = corrected.replacement_ids[0]
        walk = await memory.remember(
            RememberInput("A rainy walk in the park.", occurred_at=_hour(4), created_at=_hour(4))
        )
        self.ids["walk"], self.ids["walk_observation"] = walk.object_ids
        await memory.forget(
            ForgetMemoryDraft.suppress(
                self.ids["walk_observation"], "not worth keeping", recorded_at=_hour(5)
            )
        )
        await memory.link(
            LinkDraft(self.ids["likes"], Relation.SUPPORTS, self.ids["replacement"], recorded_at=_hour(6))
        )


def _contexts(world: AdminWorld) -> list[RetrievalContext]:
    ana = world.ids["ana"]
    return [
        RetrievalContext(query="When is Ana visiting?"),
        RetrievalContext(query="When is Ana visiting?", include_superseded=True, include_suppressed=True),
        RetrievalContext(query="tomatoes at the allotment", focus_entity_ids=[ana]),
        RetrievalContext(query="a rainy walk", include_suppressed=True),
        RetrievalContext(query="Ana", as_of=_hour(2.5)),
    ]


async def _packs(memory: CharacterMemory, world: AdminWorld) -> list[str]:
    return [
        json.dumps((await memory.retrieve(context)).to_dict(), sort_keys=True, ensure_ascii=False)
        for context in _contexts(world)
    ]


async def _dump(memory: CharacterMemory) -> bytes:
    """Everything the graph holds, as its adapter exports it."""
    out = io.BytesIO()
    await stores_of(memory).graph.export_graph(out)
    return out.getvalue()


async def _counts(memory: CharacterMemory) -> tuple[int, int, int, int]:
    return (
        await stores_of(memory).graph.statement_count(),
        len(await stores_of(memory).graph.tombstones()),
        await stores_of(memory).vectors.count(),
        await stores_of(memory).stats.row_count(),
    )


class AdminToolsContract(ContractSuite, suite=True):
    """Backup, restore and purge over one stack; no capability may be switched off.

    Override the one fixture ``memory_factory``: its ``open(collection, store=name)`` opens the
    collection on the stores named ``name``. Use a fixed clock and the lexical cue as the stack's
    users do: restored packs are compared byte for byte with the original's, on the same stack.
    """

    minimum_passing: ClassVar[int] = 9

    @pytest.fixture
    def memory_factory(self) -> MemoryFactory:
        """Override: yield a MemoryFactory whose ``open(collection, store=name)`` opens the collection
        on the stores named ``name`` (each name its own, initially empty stores).
        """
        raise NotImplementedError(
            f"{type(self).__name__} must override the memory_factory fixture to yield a "
            "charmem_contract.MemoryFactory whose open(collection, store=name) opens the collection on "
            "the stores named `name` (a separate directory or server per name; see "
            "charmem_contract.memory_factory)"
        )

    async def _open(self, memory_factory: MemoryFactory, store: str, collection: str = "admin") -> Any:
        return await memory_factory.open(collection, store=store)

    # -- the canary ------------------------------------------------------------------------

    async def test_fixture_starts_empty(self, memory_factory: MemoryFactory) -> None:
        """Two store names open two empty memories: no statement, tombstone, point or stats row.

        If this fails: the ``memory_factory`` fixture must open fresh stores for every test and
        a separate set of stores for each store name.
        """
        for store in ("a", "b"):
            memory = await self._open(memory_factory, store)
            assert await _counts(memory) == (0, 0, 0, 0), (
                f"the memory_factory's stores {store!r} are not empty"
            )

    # -- backup and restore ----------------------------------------------------------------

    async def test_round_trip_gives_byte_identical_packs(
        self, memory_factory: MemoryFactory, tmp_path: Path
    ) -> None:
        """Export, import into empty stores: every pack (superseded, suppressed, as_of) is identical.

        The world holds notions with names, a thread, a correction, a forget and a caller link.
        The restore rebuilds vectors and statistics, and its check is clean.

        If this fails: compare the two exports (every statement must survive the dump), then
        the vector rebuild (``current_index_entries``) with what commit indexes.
        """
        source = await self._open(memory_factory, "a")
        world = await AdminWorld().build(source)
        expected = await _packs(source, world)
        manifest = await export_collection(source, tmp_path / "backup")
        assert manifest.collection == source.collection
        assert manifest.graph.statements == await stores_of(source).graph.statement_count()
        assert manifest.counts.vector_points == await stores_of(source).vectors.count()
        assert manifest.counts.objects["derived"] == len(
            await stores_of(source).graph.object_ids([ObjectType.DERIVED])
        )
        assert (tmp_path / "backup" / MANIFEST_NAME).is_file()
        assert read_manifest(tmp_path / "backup") == manifest
        target = await self._open(memory_factory, "b")
        report = await import_collection(target, tmp_path / "backup")
        assert report.statements == manifest.graph.statements
        assert not report.embedder_changed
        assert report.check.consistent, "\n".join(report.check.describe())
        assert await _counts(target) == await _counts(source)
        assert sorted((await _dump(target)).splitlines()) == sorted((await _dump(source)).splitlines())
        got = await _packs(target, world)
        for n, (want, have) in enumerate(zip(expected, got, strict=True)):
            assert have == want, f"pack {n} ({_contexts(world)[n]}) differs after the restore"

    async def test_restored_collection_keeps_working(
        self, memory_factory: MemoryFactory, tmp_path: Path
    ) -> None:
        """After a restore, replaying the original plan is idempotent and new writes work.

        If this fails: the restore lost statements a replay compares against (content equality),
        or the rebuilt stats and vectors differ from what commits maintain.
        """
        source = await self._open(memory_factory, "a")
        world = await AdminWorld().build(source)
        await export_collection(source, tmp_path / "backup")
        target = await self._open(memory_factory, "b")
        await import_collection(target, tmp_path / "backup")
        before = await stores_of(target).graph.statement_count()
        outcome = await target.commit(RememberWritePlan.from_json(world.plan_json))
        assert outcome.warnings, "a replay of a restored plan must be reported as already stored"
        assert await stores_of(target).graph.statement_count() == before
        await target.remember(RememberInput("A new day after the restore.", occurred_at=_hour(9)))
        pack = await target.retrieve(RetrievalContext(query="a new day after the restore"))
        assert pack.items and pack.items[0].text == "A new day after the restore."

    async def test_import_refuses_what_it_cannot_restore(
        self, memory_factory: MemoryFactory, tmp_path: Path
    ) -> None:
        """Non-empty target, damaged file, missing manifest, another collection: typed, nothing written.

        If this fails: check the manifest and the graph file's SHA-256 before writing, and that
        the graph, the vectors and the statistics are all empty.
        """
        source = await self._open(memory_factory, "a")
        await AdminWorld().build(source)
        backup = tmp_path / "backup"
        await export_collection(source, backup)
        before = await _counts(source)
        with pytest.raises(CollectionNotEmptyError) as caught:
            await import_collection(source, backup)
        assert caught.value.counts["graph statements"] == before[0]
        assert await _counts(source) == before
        with pytest.raises(BackupFormatError):
            await export_collection(source, backup)  # never overwrites a backup
        target = await self._open(memory_factory, "b")
        other = await self._open(memory_factory, "c", "another")
        graph_file = backup / read_manifest(backup).graph.file
        intact = graph_file.read_bytes()
        refusals: list[tuple[str, Any, Any]] = [("another collection", other, backup)]
        damaged = tmp_path / "damaged"
        damaged.mkdir()
        (damaged / MANIFEST_NAME).write_bytes((backup / MANIFEST_NAME).read_bytes())
        (damaged / graph_file.name).write_bytes(intact.replace(b"Ana", b"Ann", 1))
        refusals.append(("a damaged graph file", target, damaged))
        incomplete = tmp_path / "incomplete"
        incomplete.mkdir()
        (incomplete / graph_file.name).write_bytes(intact)
        refusals.append(("no manifest", target, incomplete))
        accepted = []
        for label, memory, directory in refusals:
            try:
                await import_collection(memory, directory)
            except BackupFormatError:
                pass
            else:
                accepted.append(label)
            if (await _counts(memory))[0]:
                accepted.append(f"{label}: refused but the graph was written")
        assert not accepted, f"import accepted what it cannot restore: {accepted}"

    # -- purge -----------------------------------------------------------------------------

    async def test_purge_erases_the_memory_from_every_store(
        self, memory_factory: MemoryFactory, tmp_path: Path
    ) -> None:
        """Purging an episode and its observation removes their text from graph, vectors and export.

        The derived memories grounded on them stay, their provenance ids now resolving to
        tombstones; statistics are rebuilt; the check afterwards is clean; recall of the text
        finds neither the purged memories nor the text.

        If this fails: see which store still has it: the export (graph statements), the vector
        point ids, or the check report (statistics, dangling references).
        """
        memory = await self._open(memory_factory, "a")
        world = await AdminWorld().build(memory)
        episode, observation = world.ids["episode"], world.ids["observation"]
        assert PERSONAL_WORD.encode() in await _dump(memory)
        report = await purge(memory, [str(episode), observation], purged_at=PURGED_AT)
        assert report.purged_ids == tuple(sorted([episode, observation]))
        assert report.already_purged_ids == ()
        assert {world.ids["claim"], world.ids["replacement"], world.ids["ana"]} <= set(report.linked_ids)
        assert report.check.consistent, "\n".join(report.check.describe())
        await _assert_purged_from_the_stores(memory, world)
        await _assert_purged_from_recall_and_backups(memory, world, tmp_path)

    async def test_purged_memories_never_come_back(self, memory_factory: MemoryFactory) -> None:
        """A replayed plan, link, forget, correction or new draft naming a purged memory is refused.

        Each raises :class:`~charmem.errors.PurgedMemoryError` and writes nothing; a correction of
        a survivor whose only sources were purged has no grounding left.

        If this fails: validation must ask the graph for tombstones of every id a plan names
        (``GraphStore.tombstones``), and ``write_batch`` must refuse tombstoned ids.
        """
        memory = await self._open(memory_factory, "a")
        world = await AdminWorld().build(memory)
        episode, observation = world.ids["episode"], world.ids["observation"]
        await purge(memory, [episode, observation], purged_at=PURGED_AT)
        before = await _counts(memory)
        attempts: dict[str, Any] = {
            "the persisted plan": lambda: memory.commit(RememberWritePlan.from_json(world.plan_json)),
            "a link": lambda: memory.link(
                LinkDraft(world.ids["likes"], Relation.SUPPORTS, observation, recorded_at=_hour(7))
            ),
            "a forget": lambda: memory.forget(ForgetMemoryDraft.suppress(observation, "again")),
            "a correction of it": lambda: memory.correct(
                CorrectMemoryDraft(CorrectionTarget.source_object(episode), "wrong", recorded_at=_hour(7))
            ),
            "a new memory citing it": lambda: memory.remember(
                RememberDrafts(
                    derived=[
                        DerivedMemoryDraft(
                            DerivedType.CLAIM, "Someone visits.", observation_ids=[observation]
                        )
                    ]
                )
            ),
        }
        accepted = []
        for label, attempt in attempts.items():
            try:
                await attempt()
            except PurgedMemoryError:
                pass
            else:
                accepted.append(label)
        assert not accepted, f"writes naming a purged memory were accepted: {accepted}"
        assert await _counts(memory) == before
        with pytest.raises(LifecycleValidationError) as caught:
            await memory.correct(
                CorrectMemoryDraft(
                    CorrectionTarget.derived_memory(world.ids["replacement"]), "later", recorded_at=_hour(8)
                )
            )
        assert caught.value.kind is LifecycleErrorKind.MISSING_REPLACEMENT_SOURCE
        assert await _counts(memory) == before

    async def test_purging_a_correction_keeps_the_old_belief_superseded(
        self, memory_factory: MemoryFactory
    ) -> None:
        """Purging a replacement leaves its predecessor superseded; replaying the correction is refused.

        If this fails: keep ``supersedes`` links from a purged memory to a surviving one (they
        hold no text), so currency of survivors never changes, and refuse the replacement's id.
        """
        memory = await self._open(memory_factory, "a")
        world = await AdminWorld().build(memory)
        claim, replacement = world.ids["claim"], world.ids["replacement"]
        report = await purge(memory, [replacement], purged_at=PURGED_AT)
        assert len(report.kept_link_ids) == 1
        assert report.check.consistent, "\n".join(report.check.describe())
        assert await stores_of(memory).graph.currency([claim]) == {claim: CurrencyStatus.SUPERSEDED}
        assert claim not in await stores_of(memory).vectors.point_ids()
        before = await _counts(memory)
        assert world.correction is not None
        with pytest.raises(PurgedMemoryError):
            await memory.correct(world.correction)
        assert await _counts(memory) == before

    async def test_purge_again_is_harmless(self, memory_factory: MemoryFactory) -> None:
        """Purging the same ids again changes nothing and reports them as already purged.

        If this fails: accept tombstoned ids as already purged (re-deleting their vectors,
        rebuilding the statistics) and keep the first tombstone.
        """
        memory = await self._open(memory_factory, "a")
        world = await AdminWorld().build(memory)
        ids = [world.ids["walk"], world.ids["walk_observation"]]
        await purge(memory, ids, purged_at=PURGED_AT)
        before = await _counts(memory)
        again = await purge(memory, ids, purged_at=PURGED_AT + timedelta(days=1))
        assert again.purged_ids == ()
        assert again.already_purged_ids == tuple(sorted(ids))
        assert again.check.consistent
        assert await _counts(memory) == before
        assert {t.purged_at for t in (await stores_of(memory).graph.tombstones(ids)).values()} == {PURGED_AT}

    async def test_purge_of_an_unknown_id_is_refused_and_writes_nothing(
        self, memory_factory: MemoryFactory
    ) -> None:
        """Unknown ids and link ids raise PurgeTargetError naming each; nothing is written.

        If this fails: look every id up (objects, tombstones, links) before erasing anything.
        """
        memory = await self._open(memory_factory, "a")
        world = await AdminWorld().build(memory)
        before = await _counts(memory)
        dump = await _dump(memory)
        unknown = MemoryId.new()
        links = await stores_of(memory).graph.links_of([world.ids["likes"]], relations=[Relation.SUPPORTS])
        with pytest.raises(PurgeTargetError) as caught:
            await purge(memory, [world.ids["episode"], unknown, links[0].id])
        assert set(caught.value.ids) == {str(unknown), str(links[0].id)}
        assert "link" in caught.value.reasons[str(links[0].id)]
        with pytest.raises(PurgeTargetError):
            await purge(memory, [])
        assert await _counts(memory) == before
        assert await _dump(memory) == dump

    async def test_backup_after_a_purge_keeps_the_tombstones(
        self, memory_factory: MemoryFactory, tmp_path: Path
    ) -> None:
        """A restore of a post-purge backup still refuses the purged ids and recalls alike.

        If this fails: export tombstones with the rest of the graph.
        """
        source = await self._open(memory_factory, "a")
        world = await AdminWorld().build(source)
        await purge(source, [world.ids["episode"], world.ids["observation"]], purged_at=PURGED_AT)
        expected = await _packs(source, world)
        await export_collection(source, tmp_path / "backup")
        target = await self._open(memory_factory, "b")
        report = await import_collection(target, tmp_path / "backup")
        assert report.check.consistent, "\n".join(report.check.describe())
        assert await stores_of(target).graph.tombstones() == await stores_of(source).graph.tombstones()
        assert await _packs(target, world) == expected
        with pytest.raises(PurgedMemoryError):
            await target.commit(RememberWritePlan.from_json(world.plan_json))


async def _assert_purged_from_the_stores(memory: CharacterMemory, world: AdminWorld) -> None:
    """The purged episode and observation are tombstones in the graph, gone from the vectors; the
    claim grounded on them keeps their ids and stays superseded.
    """
    episode, observation = world.ids["episode"], world.ids["observation"]
    assert await stores_of(memory).graph.get_objects([episode, observation]) == {}
    assert await stores_of(memory).graph.links_of([episode, observation]) == [], "links to them remain"
    assert await stores_of(memory).graph.get_records([episode, observation]) == []
    tombstones = await stores_of(memory).graph.tombstones([episode, observation])
    assert sorted(tombstones) == sorted([episode, observation])
    assert all(t.purged_at == PURGED_AT for t in tombstones.values())
    dump = await _dump(memory)
    assert PERSONAL_WORD.encode() not in dump, "the purged text is still in the graph"
    assert str(episode).encode() in dump, "the tombstones must be in the graph (and its backups)"
    points = await stores_of(memory).vectors.point_ids()
    assert not points & {episode, observation}, "the purged memories still have vectors"
    claim = (await stores_of(memory).graph.get_objects([world.ids["claim"]]))[world.ids["claim"]]
    claim = cast(DerivedMemory, claim)
    assert claim.episode_ids == (episode,) and claim.observation_ids == (observation,), (
        "a survivor's provenance must keep the purged ids (now tombstones)"
    )
    assert await stores_of(memory).graph.currency([world.ids["claim"]]) == {
        world.ids["claim"]: CurrencyStatus.SUPERSEDED
    }


async def _assert_purged_from_recall_and_backups(
    memory: CharacterMemory, world: AdminWorld, tmp_path: Path
) -> None:
    """Recall of the purged text finds neither it nor the purged ids; a new backup holds no trace."""
    episode, observation = world.ids["episode"], world.ids["observation"]
    query = PERSONAL_TEXT.replace(PERSONAL_WORD, "")  # the pack repeats its query
    pack = await memory.retrieve(
        RetrievalContext(query=query, include_superseded=True, include_suppressed=True)
    )
    assert not {item.id for item in pack.items} & {episode, observation}
    assert PERSONAL_WORD not in json.dumps(pack.to_dict(), ensure_ascii=False)
    await export_collection(memory, tmp_path / "after")
    files = [p for p in (tmp_path / "after").iterdir() if p.name != MANIFEST_NAME]
    assert all(PERSONAL_WORD.encode() not in p.read_bytes() for p in files)
