"""Named crash points on the reference stack: each stops an operation where its name says, and
charmem.admin.check sees exactly what that leaves behind; a replay repairs it.

The crash here raises a BaseException (the real trials use SIGKILL, see
packages/charmem-cli/tests/test_crash_trials.py): repairable writes catch ``Exception`` only, so
the operation really stops at the point, as a killed process would.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from charmem import (
    CharacterMemory,
    CorrectionTarget,
    CorrectMemoryDraft,
    DerivedMemoryDraft,
    DerivedType,
    ForgetMemoryDraft,
    MemoryId,
    RememberInput,
    ReplacementDerivedMemoryDraft,
)
from charmem.admin import check
from charmem.testing import CRASH_SITES, CrashPoint, CrashPoints, stores_of

T0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)


class SimulatedCrash(BaseException):
    """Stands for SIGKILL in-process."""


def _crash(method: str) -> None:
    raise SimulatedCrash(method)


def _input(text: str) -> RememberInput:
    return RememberInput(text, occurred_at=T0, created_at=T0).with_derived_memory(
        DerivedMemoryDraft(DerivedType.CLAIM, f"Believed: {text}", created_at=T0)
    )


def test_every_point_has_a_site() -> None:
    assert set(CRASH_SITES) == set(CrashPoint)


@pytest.mark.parametrize(
    ("point", "graph_written", "vectors_written", "stats_written"),
    [
        (CrashPoint.BEFORE_GRAPH_BATCH, False, False, False),
        (CrashPoint.AFTER_GRAPH_BATCH, True, False, False),
        (CrashPoint.BEFORE_VECTOR_UPSERT, True, False, False),
        (CrashPoint.BEFORE_STATS_RECORD, True, True, False),
        (CrashPoint.AFTER_STATS_RECORD, True, True, True),
    ],
)
async def test_a_commit_stops_at_the_point_and_a_replay_repairs_it(
    memory: CharacterMemory,
    point: CrashPoint,
    graph_written: bool,
    vectors_written: bool,
    stats_written: bool,
) -> None:
    points = CrashPoints(memory, action=_crash)
    await points.memory.remember(_input("Before the crash."))
    plan = await points.memory.prepare(_input("During the crash."))
    points.arm(point)
    with pytest.raises(SimulatedCrash):
        await points.memory.commit(plan)
    points.disarm()

    stored = await stores_of(memory).graph.get_objects(plan.object_ids)
    assert (len(stored) == len(plan.objects)) is graph_written
    assert stored == {} or len(stored) == len(plan.objects)  # never part of the batch
    report = await check(memory)
    assert report.graph_consistent
    indexed = {entry.id for entry in plan.index_entries}
    assert (not indexed & set(report.missing_vectors)) is (vectors_written or not graph_written)
    assert report.stats_consistent is (stats_written or not graph_written)

    await points.memory.commit(plan)  # the replay
    assert (await check(memory)).consistent


async def test_a_correction_stopped_after_its_batch_leaves_the_target_indexed(
    memory: CharacterMemory,
) -> None:
    points = CrashPoints(memory, action=_crash)
    claim = (await points.memory.remember(_input("Ines plays the violin."))).object_ids[-1]
    draft = CorrectMemoryDraft(
        CorrectionTarget.derived_memory(claim), "It is the cello.", recorded_at=T0
    ).with_replacement(
        ReplacementDerivedMemoryDraft(DerivedType.CORRECTION, "Ines plays the cello.", id=MemoryId.new())
    )
    points.arm(CrashPoint.AFTER_GRAPH_BATCH)
    with pytest.raises(SimulatedCrash):
        await points.memory.correct(draft)
    points.disarm()
    report = await check(memory)
    assert report.graph_consistent
    assert report.orphan_vectors == (claim,)  # superseded, still in candidate recall
    assert draft.replacement is not None
    assert report.missing_vectors == (draft.replacement.id,)
    assert not report.stats_consistent
    await points.memory.correct(draft)
    assert (await check(memory)).consistent


async def test_a_forget_stopped_before_its_vector_delete_leaves_suppressed_points(
    memory: CharacterMemory,
) -> None:
    points = CrashPoints(memory, action=_crash)
    outcome = await points.memory.remember(_input("A rainy walk."))
    _episode, observation, claim = outcome.object_ids
    draft = ForgetMemoryDraft.suppress(observation, "Not worth keeping.", recorded_at=T0)
    points.arm(CrashPoint.BEFORE_VECTOR_DELETE)
    with pytest.raises(SimulatedCrash):
        await points.memory.forget(draft)
    points.disarm()
    report = await check(memory)
    assert report.graph_consistent
    assert set(report.orphan_vectors) == {observation, claim}  # the cascade suppressed the claim
    assert not report.stats_consistent
    await points.memory.forget(draft)
    assert (await check(memory)).consistent


async def test_a_crash_point_fires_on_the_requested_call_only(memory: CharacterMemory) -> None:
    fired: list[str] = []
    points = CrashPoints(memory, action=fired.append)
    points.arm(CrashPoint.AFTER_GRAPH_BATCH, on_call=2)
    await points.memory.remember(_input("First."))
    assert fired == []
    await points.memory.remember(_input("Second."))
    assert fired == ["write_batch"]
    await points.memory.remember(_input("Third."))
    assert fired == ["write_batch"]
