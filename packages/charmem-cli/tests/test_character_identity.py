"""One memory per character: ``open(..., character_id=...)`` on the embedded stores (real Oxigraph,
Qdrant Edge, SQLite) records the id with the graph and refuses another one, before any vector
store opens; an open without an id is allowed; ``check`` and export/import keep it."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from charmem import (
    CharacterIdentityMismatchError,
    CharacterMemory,
    MemoryId,
    RememberInput,
    RetrievalContext,
    Settings,
    SyncCharacterMemory,
)
from charmem.admin import check, export_collection, import_collection


async def test_the_first_id_is_recorded_and_another_refused(
    caplog: pytest.LogCaptureFixture, embedded_settings: Settings, store_root: Path
) -> None:
    ana, ben = MemoryId.new(), MemoryId.new()  # ana's notion need not be stored
    caplog.set_level(logging.INFO, logger="charmem")
    async with CharacterMemory.open(embedded_settings, "ana-memory", character_id=ana) as memory:
        assert memory.character_id == ana
    # recorded once every store is open: a new collection has nothing to rebuild
    assert "memory_opened" in caplog.text
    assert "missing" not in caplog.text and "rebuilt" not in caplog.text
    async with CharacterMemory.open(embedded_settings, "ana-memory", character_id=ana) as memory:
        await memory.remember(RememberInput("Ben borrowed my bike."))
    with pytest.raises(CharacterIdentityMismatchError) as refused:
        await CharacterMemory.open(embedded_settings, "ana-memory", character_id=ben)
    assert (refused.value.collection, refused.value.recorded, refused.value.given) == ("ana-memory", ana, ben)
    assert str(ana) in str(refused.value) and str(ben) in str(refused.value)
    # the refused open released every store (a later open would fail on a held lock)
    async with CharacterMemory.open(embedded_settings, "ana-memory") as memory:
        assert memory.character_id == ana  # read back without asking
        pack = await memory.retrieve(RetrievalContext(query="who borrowed the bike?"))
        assert pack.items
        assert (await check(memory)).consistent
    async with CharacterMemory.open(embedded_settings, "ana-memory", character_id=ana) as memory:
        assert memory.character_id == ana


async def test_a_refused_open_never_opens_the_vector_store(
    embedded_settings: Settings, store_root: Path
) -> None:
    """With the shard gone, an open that reached the vector store would create (and rebuild) it."""
    ana = MemoryId.new()
    async with CharacterMemory.open(embedded_settings, "fresh", character_id=ana) as memory:
        await memory.remember(RememberInput("The kettle whistles."))
    shard = store_root / "vectors" / "fresh"
    shutil.rmtree(shard)
    with pytest.raises(CharacterIdentityMismatchError):
        await CharacterMemory.open(embedded_settings, "fresh", character_id=MemoryId.new())
    assert not shard.exists()
    async with CharacterMemory.open(embedded_settings, "fresh", character_id=ana) as memory:
        assert shard.exists()  # the right character's open rebuilds the lost shard
        assert (await memory.retrieve(RetrievalContext(query="kettle"))).items


async def test_an_export_carries_the_character(
    embedded_settings: Settings, tmp_path: Path, env_for: Callable[[Path], dict[str, str]]
) -> None:
    ana = MemoryId.new()
    backup = tmp_path / "backup"
    async with CharacterMemory.open(embedded_settings, "exported", character_id=ana) as memory:
        await memory.remember(RememberInput("We planted tomatoes."))
        await export_collection(memory, backup)
    target = Settings.from_mapping(env_for(tmp_path / "restored"))
    async with CharacterMemory.open(target, "exported") as memory:  # an empty target: no id given
        await import_collection(memory, backup)
    async with CharacterMemory.open(target, "exported") as memory:
        assert memory.character_id == ana
    with pytest.raises(CharacterIdentityMismatchError):
        await CharacterMemory.open(target, "exported", character_id=MemoryId.new())


def test_the_blocking_facade_takes_it_too(embedded_settings: Settings) -> None:
    ana = MemoryId.new()
    with SyncCharacterMemory.open(embedded_settings, "sync-memory", character_id=ana) as memory:
        assert memory.character_id == ana
    with pytest.raises(CharacterIdentityMismatchError):
        SyncCharacterMemory.open(embedded_settings, "sync-memory", character_id=MemoryId.new())
