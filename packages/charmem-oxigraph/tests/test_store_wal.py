"""A closed embedded store keeps no spent write-ahead log (``charmem_oxigraph._registry.release``).

pyoxigraph lets RocksDB keep up to ten flushed write-ahead logs for reuse, at their full size, and a
close used to leave them on disk (648 MiB of 1,092 MiB at 50,000 memories). The last close now
opens the flushed store once more so RocksDB deletes them.
"""

from __future__ import annotations

from pathlib import Path

from charmem.domain.graph import GraphBatch
from charmem.domain.model import Relation

from charmem_oxigraph import OxigraphGraphStore, _disk

from oxigraph_builders import derived, entity, episode, link, observation, record


def _session(count: int) -> GraphBatch:
    ep = episode(summary="a long evening")
    observations = [observation(ep.id, text=f"utterance {n} " + "word " * 40) for n in range(count)]
    belief = derived(text="a belief", observation_ids=[o.id for o in observations[:3]])
    return GraphBatch(
        objects=[entity(), ep, *observations, belief],
        links=[link(ep.id, Relation.HAS_OBSERVATION, o.id) for o in observations],
        records=[record(belief.id)],
    )


def _logs(path: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in path.glob("*.log") if p.name[0].isdigit()}


async def test_close_leaves_one_empty_log_and_the_data_reopens(tmp_path: Path) -> None:
    """Writes, a flush mid-session (a log kept for reuse, which the close's flush reuses), close.

    An adapter author checks, when it fails: that the last release still flushes and then opens
    the store once more (RocksDB deletes the spent logs at open), and that nothing is lost.
    """
    path = tmp_path / "oxigraph"
    batches = [_session(300) for _ in range(3)]
    for batch in batches:
        store = await OxigraphGraphStore.open_async("c", path=path)
        try:
            await store.write_batch(batch)
            store._handle().store.flush()  # the log just written becomes one kept for reuse
            await store.write_batch(_session(300))
        finally:
            await store.close()
        logs = _logs(path)
        assert len(logs) == 1, logs
        assert all(size <= _disk.WAL_SLACK for size in logs.values()), logs
        assert not _disk.holds_spent_logs(path)
    store = await OxigraphGraphStore.open_async("c", path=path)
    try:
        for batch in batches:
            ids = [obj.id for obj in batch.objects]
            assert await store.get_objects(ids) == {obj.id: obj for obj in batch.objects}
            assert len(await store.links_of(ids)) == len(batch.links)
    finally:
        await store.close()


async def test_a_session_that_writes_nothing_closes_without_a_reopen(tmp_path: Path) -> None:
    """A read-only session leaves the one empty log it found: no extra open is needed.

    An adapter author checks, when it fails: that :func:`_disk.holds_spent_logs` counts only
    ``NNNNNN.log`` files and allows one live log of up to ``WAL_SLACK`` bytes.
    """
    path = tmp_path / "oxigraph"
    store = await OxigraphGraphStore.open_async("c", path=path)
    await store.write_batch(_session(50))
    await store.close()
    opens_before = len(list(path.glob("LOG.old.*")))  # RocksDB starts a new info LOG at every open
    store = await OxigraphGraphStore.open_async("c", path=path)
    assert await store.statement_count() > 0
    await store.close()
    assert len(list(path.glob("LOG.old.*"))) == opens_before + 1
    assert len(_logs(path)) == 1
    assert not _disk.holds_spent_logs(path)
