"""``charmem export``, ``charmem import`` and ``charmem purge`` on the embedded default stores."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from charmem_cli.app import main

TEXT = "My sister Ana is visiting from Porto next week."


@pytest.fixture(autouse=True)
def _hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hashing")
    monkeypatch.delenv("CHARMEM_COLLECTION", raising=False)


def _recalled(store: Path, collection: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert main(["--store", str(store), "--collection", collection, "recall", "--json", "Ana visiting"]) == 0
    return [item["text"] for item in json.loads(capsys.readouterr().out)["items"]]


def test_export_then_import_into_new_stores(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store, restored, backup = tmp_path / "store", tmp_path / "restored", tmp_path / "backup"
    assert main(["--store", str(store), "--collection", "cli", "remember", TEXT]) == 0
    capsys.readouterr()
    assert main(["--store", str(store), "export", str(backup), "--collection", "cli"]) == 0
    assert "exported collection 'cli'" in capsys.readouterr().out
    assert sorted(p.name for p in backup.iterdir()) == ["graph.nq", "manifest.json"]
    # no --collection: the backup's own
    assert main(["--store", str(restored), "import", str(backup), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "restored collection 'cli'" in out and "check: consistent" in out
    assert _recalled(restored, "cli", capsys) == _recalled(store, "cli", capsys)
    assert main(["--store", str(restored), "import", str(backup), "--quiet"]) == 2
    assert "CollectionNotEmptyError" in capsys.readouterr().err
    assert main(["--store", str(tmp_path / "other"), "--collection", "other", "import", str(backup)]) == 2
    assert "BackupFormatError" in capsys.readouterr().err
    assert not (tmp_path / "other").exists()  # refused before any store was created
    assert main(["--store", str(store), "--collection", "cli", "export", str(backup)]) == 2
    assert "not an empty directory" in capsys.readouterr().err


def test_purge_asks_first_and_erases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    assert main(["--store", str(store), "--collection", "cli", "remember", TEXT]) == 0
    ids = json.loads(capsys.readouterr().out)["object_ids"]
    assert TEXT in _recalled(store, "cli", capsys)

    monkeypatch.setattr(sys.stdin, "isatty", lambda: False)
    assert main(["--store", str(store), "purge", *ids, "--collection", "cli"]) == 2
    assert "pass --yes" in capsys.readouterr().err
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: "not the name")
    assert main(["--store", str(store), "purge", *ids, "--collection", "cli"]) == 2
    assert "nothing was purged" in capsys.readouterr().err
    assert TEXT in _recalled(store, "cli", capsys)

    monkeypatch.setattr("builtins.input", lambda prompt: "cli")
    assert main(["--store", str(store), "--collection", "cli", "purge", *ids]) == 0
    out = capsys.readouterr().out
    assert f"purged {len(ids)} memory object(s) from 'cli'" in out and "consistent" in out
    assert TEXT not in _recalled(store, "cli", capsys)

    assert main(["--store", str(store), "--collection", "cli", "purge", "--yes", "--json", *ids]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["purged_ids"] == [] and report["already_purged_ids"] == sorted(ids)
    assert report["check"]["consistent"]

    unknown = "00000000-0000-4000-8000-000000000000"
    assert main(["--store", str(store), "--collection", "cli", "purge", "--yes", unknown]) == 2
    assert "PurgeTargetError" in capsys.readouterr().err
    assert main(["--store", str(store), "--collection", "cli", "purge", "--yes", "not-an-id"]) == 2
    assert "not a UUID" in capsys.readouterr().err


@pytest.mark.parametrize(
    "command",
    [
        ["recall", "Ana visiting"],
        ["export", "backup"],
        ["purge", "--yes", "0c7f3a4e-1b2c-4d5e-8f90-123456789abc"],
        ["rebuild-vectors", "--quiet"],
    ],
    ids=["recall", "export", "purge", "rebuild-vectors"],
)
def test_reading_commands_on_a_missing_store_create_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    # a mistyped --store must not leave new, empty stores behind and answer "nothing recalled"
    monkeypatch.chdir(tmp_path)
    missing = tmp_path / "mistyped"
    assert main(["--store", str(missing), "--collection", "cli", *command]) == 2
    err = capsys.readouterr().err
    assert "ConfigurationError" in err and "no graph store" in err and str(missing) in err
    assert not missing.exists()
    assert not (tmp_path / "backup").exists()


@pytest.mark.parametrize(
    "command",
    [
        ["recall", "Ana visiting"],
        ["export", "backup"],
        ["purge", "--yes", "0c7f3a4e-1b2c-4d5e-8f90-123456789abc"],
    ],
    ids=["recall", "export", "purge"],
)
def test_reading_commands_on_a_mistyped_collection_create_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    # the store exists, the collection does not: no empty shard is left behind
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "store"
    assert main(["--store", str(store), "--collection", "cli", "remember", TEXT]) == 0
    capsys.readouterr()
    assert main(["--store", str(store), "--collection", "clii", *command]) == 2
    err = capsys.readouterr().err
    assert "ConfigurationError" in err and "'clii' holds nothing" in err
    assert not (store / "vectors" / "clii").exists()
    assert not (tmp_path / "backup").exists()
    assert main(["--store", str(store), "--collection", "cli", "recall", "Ana visiting"]) == 0


def test_rebuild_vectors_of_a_mistyped_collection_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # rebuild-vectors re-creates a lost shard, but not a collection that exists nowhere
    store = tmp_path / "store"
    assert main(["--store", str(store), "--collection", "cli", "remember", TEXT]) == 0
    capsys.readouterr()
    assert main(["--store", str(store), "--collection", "clii", "rebuild-vectors", "--quiet"]) == 2
    assert "'clii' holds nothing" in capsys.readouterr().err
    assert not (store / "vectors" / "clii").exists()
    assert main(["--store", str(store), "--collection", "", "recall", "Ana"]) == 2  # not the default
    assert "ConfigurationError" in capsys.readouterr().err
    # a lost shard of a real collection is rebuilt from the graph
    assert main(["--store", str(store), "--collection", "cli", "rebuild-vectors", "--drop", "--quiet"]) == 0
    capsys.readouterr()
    assert TEXT in _recalled(store, "cli", capsys)


@pytest.mark.parametrize(
    ("value", "says"), [("2024-06-01", "has no UTC offset"), ("yesterday", "is not an ISO 8601 time")]
)
def test_remember_occurred_at_errors_name_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, says: str
) -> None:
    store = tmp_path / "store"
    assert main(["--store", str(store), "remember", TEXT, "--occurred-at", value]) == 2
    err = capsys.readouterr().err
    assert f"--occurred-at {value!r} {says}" in err and "2024-06-01T18:30:00+00:00" in err
    assert main(["--store", str(store), "remember", TEXT, "--occurred-at", "2024-06-01T18:30:00Z"]) == 0


def test_the_printed_pack_lists_entities_in_the_order_render_does() -> None:
    """The demo printed "Tomas; Ines" above a rendered "Ines; Tomas": both now sort by name."""
    import io
    import uuid

    from charmem import ContinuityContextPack, MemoryId, PackEntity
    from charmem_cli.app import print_pack

    first_id, second_id = sorted(MemoryId(uuid.uuid4()) for _ in range(2))
    pack = ContinuityContextPack(
        query="who?",
        entities=(
            PackEntity(id=first_id, entity_type="person", names=("Tomas",)),
            PackEntity(id=second_id, entity_type="person", names=("Ines",)),
        ),
    )
    out = io.StringIO()
    print_pack(pack, out)
    assert "entities: Ines; Tomas" in out.getvalue()
