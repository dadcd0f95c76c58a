"""charmem.admin.check on the reference stack: drift in vectors and stats, partial graph batches."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import attrs
import pytest

from charmem import (
    CharacterMemory,
    CorrectionTarget,
    CorrectMemoryDraft,
    DerivedMemoryDraft,
    DerivedType,
    EntityDraft,
    ForgetMemoryDraft,
    LinkDraft,
    MemoryId,
    ObjectType,
    Relation,
    RememberDrafts,
    RememberInput,
    ReplacementDerivedMemoryDraft,
    ThreadDraft,
)
from charmem.admin import CheckReport, GraphProblemKind, check, repair
from charmem.admin._check import check_stores
from charmem.domain.graph import GraphBatch, LifecycleAction, LifecycleRecord
from charmem.domain.model import DerivedMemory, Episode, MemoryLink, Observation
from charmem.domain.retrieval import CurrencyStatus
from charmem.errors import ConfigurationError
from charmem.ports import VectorPoint
from charmem.testing import FaultyStatsStore, stores_of
from charmem.usecases.commit import object_stats_row
from charmem.usecases.planning import derive_links

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)


async def _world(memory: CharacterMemory) -> dict[str, MemoryId]:
    """Every write path: remember, drafts with a thread and notion, correct, forget, link."""
    ids: dict[str, MemoryId] = {}
    first = await memory.remember(
        RememberInput("Ines started violin lessons.", occurred_at=T0).with_derived_memory(
            DerivedMemoryDraft(DerivedType.CLAIM, "Ines learns the violin.")
        )
    )
    ids["episode"], ids["observation"], ids["claim"] = first.object_ids
    thread, notion = MemoryId.new(), MemoryId.new()
    second = await memory.remember(
        RememberDrafts(
            entities=[EntityDraft(id=notion, entity_type="person")],
            threads=[ThreadDraft(id=thread, title="Music")],
            derived=[
                DerivedMemoryDraft(
                    DerivedType.USER_PREFERENCE,
                    "Likes Bach.",
                    observation_ids=[ids["observation"]],
                    entity_ids=[notion],
                    thread_ids=[thread],
                )
            ],
        )
    )
    ids.update(thread=thread, notion=notion, preference=second.object_ids[-1])
    corrected = await memory.correct(
        CorrectMemoryDraft(
            CorrectionTarget.derived_memory(ids["claim"]), "It is the cello."
        ).with_replacement(ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "Ines learns the cello."))
    )
    ids["replacement"] = corrected.replacement_ids[0]
    third = await memory.remember(RememberInput("A rainy walk.", occurred_at=T0))
    ids["walk"], ids["walk_observation"] = third.object_ids
    await memory.forget(ForgetMemoryDraft.suppress(ids["walk_observation"], "Not worth keeping."))
    await memory.link(LinkDraft(ids["preference"], Relation.SUPPORTS, ids["replacement"]))
    return ids


async def _check(memory: CharacterMemory) -> CheckReport:
    return await check(memory)


async def test_every_write_path_leaves_a_consistent_collection(memory: CharacterMemory) -> None:
    ids = await _world(memory)
    report = await _check(memory)
    assert report.consistent, report.describe()
    assert report.objects == len(await stores_of(memory).graph.object_ids())
    assert report.links == len(await stores_of(memory).graph.link_ids())
    # observation, preference, thread, replacement are indexed; the claim is superseded, the
    # walk's observation suppressed, episodes echo their observation, notions have no vector
    assert report.expected_vectors == report.vector_points == 4
    assert await stores_of(memory).vectors.point_ids() == {
        ids["observation"],
        ids["preference"],
        ids["thread"],
        ids["replacement"],
    }
    data = report.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["format_version"] == 2
    assert data["consistent"] is True
    assert data["repairable"] is True
    assert data["vectors"] == {
        "consistent": True,
        "index_missing": False,
        "expected": 4,
        "points": 4,
        "missing": [],
        "orphans": [],
        "surfaces": {
            "setting_words": {"expected": 0, "points": 0, "missing": [], "orphans": []},
            "person_words": {"expected": 0, "points": 0, "missing": [], "orphans": []},
        },
    }
    assert data["graph"] == {"consistent": True, "problems": []}
    assert report.describe()[0] == "collection 'test': consistent"


async def test_missing_and_orphan_vectors_are_reported_and_repaired(memory: CharacterMemory) -> None:
    ids = await _world(memory)
    await stores_of(memory).vectors.delete([ids["preference"]])
    stranger = MemoryId.new()
    vector = await memory.embedder.embed_query("x")
    await stores_of(memory).vectors.upsert(
        [
            VectorPoint(id=ids["claim"], object_type=ObjectType.DERIVED, vector=vector),  # superseded
            VectorPoint(id=stranger, object_type=ObjectType.DERIVED, vector=vector),  # no object
            VectorPoint(id=ids["notion"], object_type=ObjectType.ENTITY, vector=vector),  # not indexable
        ]
    )
    report = await _check(memory)
    assert not report.consistent
    assert not report.vectors_consistent
    assert report.stats_consistent
    assert report.graph_consistent
    assert report.repairable
    assert report.missing_vectors == (ids["preference"],)
    assert set(report.orphan_vectors) == {ids["claim"], stranger, ids["notion"]}
    assert list(report.orphan_vectors) == sorted(report.orphan_vectors)

    outcome = await repair(memory, report)
    assert outcome.vectors is not None
    assert outcome.vectors.removed == 3
    assert outcome.stats_rows is None  # stats were fine: not rebuilt
    assert (await _check(memory)).consistent


async def test_a_lost_vector_index_reports_every_expected_point(memory: CharacterMemory) -> None:
    await _world(memory)
    report = await check_stores(stores_of(memory).graph, None, stores_of(memory).stats)
    assert report.vector_index_missing
    assert report.vector_points is None
    assert len(report.missing_vectors) == report.expected_vectors == 4
    assert report.to_dict()["vectors"]["index_missing"] is True
    assert any("lost shard" in line for line in report.describe())


async def test_stats_drift_after_a_failed_stats_write_is_repaired(memory: CharacterMemory) -> None:
    faulty = FaultyStatsStore(stores_of(memory).stats)
    memory._stats = faulty  # type: ignore[assignment]
    await _world(memory)
    faulty.fail("record", on_call=1)
    outcome = await memory.remember(
        RememberInput("Tomas flew to Lisbon.", occurred_at=T0).with_derived_memory(
            DerivedMemoryDraft(DerivedType.CLAIM, "Tomas travels for work.")
        )
    )
    assert outcome.repair_markers  # the stats write failed, as a repairable write
    report = await _check(memory)
    assert report.vectors_consistent
    assert not report.stats_consistent
    drifted = {(d.counter, d.key): (d.stored, d.expected) for d in report.stats_drift}
    rows_before = drifted[("rows", "")][0]
    assert drifted[("rows", "")] == (rows_before, rows_before + 6)  # 3 objects, 3 links
    assert drifted[("objects", "episode")][1] == drifted[("objects", "episode")][0] + 1
    assert drifted[("links", "derived_from")][1] == drifted[("links", "derived_from")][0] + 2
    assert ("degree", str(outcome.object_ids[0])) in drifted
    assert report.to_dict()["stats"]["drift"][0] == {
        "counter": "rows",
        "key": "",
        "stored": rows_before,
        "expected": rows_before + 6,
    }
    result = await repair(memory, report)
    assert result.vectors is None
    assert result.stats_rows == rows_before + 6
    assert (await _check(memory)).consistent


async def test_a_stale_currency_flag_in_the_stats_is_drift(memory: CharacterMemory) -> None:
    ids = await _world(memory)
    claim = (await stores_of(memory).graph.get_objects([ids["claim"]]))[ids["claim"]]
    await stores_of(memory).stats.record([object_stats_row(claim, {claim.id: CurrencyStatus.CURRENT})])
    report = await _check(memory)
    assert [(d.counter, d.key, d.stored, d.expected) for d in report.stats_drift] == [
        ("current_objects", "derived", 3, 2)  # the preference and the replacement
    ]


async def test_missing_stats_count_as_empty(memory: CharacterMemory) -> None:
    await _world(memory)
    report = await check_stores(stores_of(memory).graph, stores_of(memory).vectors, None)
    assert report.stats_missing
    assert report.stats_rows is None
    rows = next(d for d in report.stats_drift if d.counter == "rows")
    assert rows.stored == 0
    assert rows.expected == await stores_of(memory).stats.row_count()


async def test_half_written_batches_are_found(memory: CharacterMemory) -> None:
    """What a partial batch leaves behind (written here on purpose, bypassing commit)."""
    ids = await _world(memory)
    plan = await memory.prepare(
        RememberInput("Half of this was written.", occurred_at=T0).with_derived_memory(
            DerivedMemoryDraft(DerivedType.CLAIM, "Only partly stored.")
        )
    )
    episode, observation, belief = plan.objects
    assert isinstance(observation, Observation)
    assert isinstance(belief, DerivedMemory)
    # the observation and belief without the episode they name, and without their derived links
    await stores_of(memory).graph.write_batch(GraphBatch(objects=[observation, belief]))
    # a caller link to a memory that was never written
    absent = MemoryId.new()
    dangling = MemoryLink(
        id=MemoryId.new(), from_id=ids["preference"], relation=Relation.SUPPORTS, to_id=absent, created_at=T0
    )
    # a correction record whose replacement exists but does not supersede its target
    broken = LifecycleRecord(
        id=MemoryId.new(),
        target_id=ids["preference"],
        action=LifecycleAction.CORRECT,
        rationale="half a correction",
        recorded_at=T0,
        related_ids=[ids["replacement"]],
    )
    # a cascaded suppression without the forget record of its origin
    cascade = LifecycleRecord(
        id=MemoryId.new(),
        target_id=ids["preference"],
        action=LifecycleAction.SUPPRESS,
        rationale="half a forget",
        recorded_at=T0 + timedelta(hours=1),
        related_ids=[ids["observation"]],
    )
    await stores_of(memory).graph.write_batch(GraphBatch(links=[dangling], records=[broken, cascade]))

    report = await _check(memory)
    assert not report.graph_consistent
    assert not report.consistent
    assert not report.repairable
    found = {(p.kind, p.id): p.related_ids for p in report.graph_problems}
    assert found[(GraphProblemKind.DANGLING_LINK, dangling.id)] == (absent,)
    assert found[(GraphProblemKind.MISSING_REFERENCE, observation.id)] == (episode.id,)
    missing_links = found[(GraphProblemKind.MISSING_DERIVED_LINK, observation.id)]
    assert episode.id in missing_links  # the has_observation link from its episode
    assert (GraphProblemKind.MISSING_DERIVED_LINK, belief.id) in found  # derived_from links
    assert found[(GraphProblemKind.BROKEN_CORRECTION, broken.id)] == (ids["replacement"],)
    assert found[(GraphProblemKind.ORPHAN_CASCADE, cascade.id)] == (ids["observation"],)
    assert isinstance(episode, Episode)
    assert (GraphProblemKind.MISSING_REFERENCE, belief.id) in found  # its source episode
    kinds = [p["kind"] for p in report.to_dict()["graph"]["problems"]]
    assert kinds == sorted(kinds)
    assert any("replay the plan" in line for line in report.describe())


async def test_a_record_naming_a_missing_replacement_is_found(memory: CharacterMemory) -> None:
    ids = await _world(memory)
    ghost = MemoryId.new()
    record = LifecycleRecord(
        id=MemoryId.new(),
        target_id=ids["preference"],
        action=LifecycleAction.CORRECT,
        rationale="the replacement was never written",
        recorded_at=T0,
        related_ids=[ghost],
    )
    await stores_of(memory).graph.write_batch(GraphBatch(records=[record]))
    report = await _check(memory)
    assert [(p.kind, p.id, p.related_ids) for p in report.graph_problems] == [
        (GraphProblemKind.MISSING_REFERENCE, record.id, (ghost,))
    ]


async def test_a_replayed_plan_after_a_partial_write_is_clean(memory: CharacterMemory) -> None:
    """The graph half without vectors and stats (a crash after the batch), then the replay."""
    plan = await memory.prepare(
        RememberInput("Crash right after the graph batch.", occurred_at=T0).with_derived_memory(
            DerivedMemoryDraft(DerivedType.CLAIM, "Replays repair it.")
        )
    )
    await stores_of(memory).graph.write_batch(
        GraphBatch(objects=plan.objects, links=derive_links(plan.collection, plan.objects))
    )
    report = await _check(memory)
    assert report.graph_consistent
    assert set(report.missing_vectors) == {entry.id for entry in plan.index_entries}
    assert report.stats_drift
    await memory.commit(plan)
    assert (await _check(memory)).consistent


async def test_repair_refuses_a_report_about_another_collection(memory: CharacterMemory) -> None:
    report = attrs.evolve(await _check(memory), collection="other")
    with pytest.raises(ConfigurationError, match="collection 'other'"):
        await repair(memory, report)


async def test_the_facade_offers_no_enumeration(memory: CharacterMemory) -> None:
    """No public attribute of the memory lists what it holds: it answers through retrieve only."""
    await _world(memory)
    for name in dir(memory):
        if name.startswith("_"):
            continue
        value = getattr(memory, name)
        for method in ("object_ids", "link_ids", "point_ids", "export_graph", "summary"):
            assert not hasattr(value, method), f"memory.{name}.{method} enumerates the collection"


async def test_check_takes_the_memory_and_the_store_form_warns(memory: CharacterMemory) -> None:
    await _world(memory)
    report = await check(memory)
    assert report.consistent
    assert report.objects > 0
    stores = stores_of(memory)
    with pytest.warns(DeprecationWarning, match=r"check\(memory\)"):
        old = await check(stores.graph, stores.vectors, stores.stats)
    assert old == report
    with pytest.raises(TypeError, match="takes the memory alone"):
        await check(memory, stores.vectors, stores.stats)
