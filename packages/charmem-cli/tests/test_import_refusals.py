"""``charmem import`` of damaged backups and interrupted imports, on the embedded default stores.

A backup that passes its checksum but does not restore must be refused before anything is
written or created; an interrupted import must say how to finish it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from pyoxigraph import Literal, NamedNode, Quad, Store

from charmem_cli.app import main

TEXT = "My sister Ana is visiting from Porto next week."
RECORD_START = '"{\\"created_at'
LAYOUT_PREDICATE = "<urn:charmem:vocab#layoutVersion>"


@pytest.fixture(autouse=True)
def _hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hashing")
    monkeypatch.delenv("CHARMEM_COLLECTION", raising=False)


@pytest.fixture
def backup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    store, directory = tmp_path / "store", tmp_path / "backup"
    assert main(["--store", str(store), "--collection", "cli", "remember", TEXT]) == 0
    assert main(["--store", str(store), "--collection", "cli", "export", str(directory)]) == 0
    capsys.readouterr()
    return directory


def _edit_graph(directory: Path, old: str, new: str) -> None:
    """Replace the first ``old`` in the graph file, then re-seal the manifest (checksum passes)."""
    path = directory / "graph.nq"
    text = path.read_text(encoding="utf-8")
    assert old in text
    data = text.replace(old, new, 1).encode()
    path.write_bytes(data)
    manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
    manifest["graph"].update(
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        statements=sum(1 for line in data.decode().splitlines() if line.strip()),
    )
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")


def _refused(target: Path, directory: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """Import ``directory`` into ``target``: refused with BackupFormatError, nothing created."""
    assert main(["--store", str(target), "import", str(directory), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "BackupFormatError" in err, err
    assert not target.exists() or not any(target.iterdir())
    assert main(["--store", str(target), "--collection", "cli", "recall", "Ana"]) == 2
    assert "there is no graph store" in capsys.readouterr().err
    return err


def test_a_record_that_does_not_decode_is_refused_before_anything_is_written(
    backup: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _edit_graph(backup, RECORD_START, '"NOTJSON{\\"created_at')
    err = _refused(tmp_path / "restored", backup, capsys)
    assert "urn:charmem:" in err and "not valid JSON" in err


def test_a_layout_version_no_charmem_writes_is_refused_up_front(
    backup: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (backup / "graph.nq").read_text(encoding="utf-8")
    line = next(line for line in text.splitlines() if LAYOUT_PREDICATE in line)
    for value, reason in (("0", "layout version 0"), ("-1", "layout version -1"), ("abc", "not a number")):
        edited = (
            line.split(LAYOUT_PREDICATE)[0] + f'{LAYOUT_PREDICATE} "{value}" <urn:charmem:collection:cli> .'
        )
        copy = tmp_path / f"backup-{value}"
        copy.mkdir()
        for name in ("graph.nq", "manifest.json"):
            (copy / name).write_bytes((backup / name).read_bytes())
        _edit_graph(copy, line, edited)
        err = _refused(tmp_path / f"restored-{value}", copy, capsys)
        assert reason in err and "newer charmem" not in err and "charmem migrate" not in err, err


def test_a_newer_layout_version_says_to_upgrade(
    backup: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (backup / "graph.nq").read_text(encoding="utf-8")
    line = next(line for line in text.splitlines() if LAYOUT_PREDICATE in line)
    _edit_graph(backup, line, line.replace('"3"', '"99"'))
    err = _refused(tmp_path / "restored", backup, capsys)
    assert "newer charmem" in err and "layout 99" in err


@pytest.mark.parametrize(
    "damage",
    ["truncated", "foreign graph", "syntax error"],
)
def test_refused_imports_create_no_store(
    damage: str, backup: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if damage == "truncated":
        with (backup / "graph.nq").open("r+b") as handle:
            handle.truncate(100)
    elif damage == "foreign graph":
        _edit_graph(backup, "<urn:charmem:collection:cli> .", "<urn:charmem:collection:other> .")
    else:
        _edit_graph(backup, RECORD_START, "<<<" + RECORD_START)
    _refused(tmp_path / "restored", backup, capsys)


def test_an_interrupted_import_says_how_to_finish_it(
    backup: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "restored"

    async def interrupted(*_args: object, **_kwargs: object) -> int:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr("charmem.admin._backup.rebuild_stats", interrupted)
        assert main(["--store", str(target), "import", str(backup), "--quiet"]) == 130
    err = capsys.readouterr().err
    assert "charmem check --repair" in err and "run the same command again to resume" not in err
    assert main(["--store", str(target), "import", str(backup), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "CollectionNotEmptyError" in err and "charmem check --repair" in err
    assert main(["--store", str(target), "--collection", "cli", "check", "--repair"]) == 0
    assert main(["--store", str(target), "--collection", "cli", "check"]) == 0


def test_export_of_a_store_with_unreadable_nodes_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    assert main(["--store", str(store), "--collection", "cli", "remember", TEXT]) == 0
    capsys.readouterr()
    raw = Store(str(store / "oxigraph"))
    record = NamedNode("urn:charmem:vocab#record")
    quad = next(iter(raw.quads_for_pattern(None, record, None, None)))
    raw.remove(quad)
    raw.add(Quad(quad.subject, record, Literal("NOTJSON"), quad.graph_name))
    raw.flush()
    del raw
    assert main(["--store", str(store), "--collection", "cli", "export", str(tmp_path / "bk")]) == 1
    err = capsys.readouterr().err
    assert quad.subject.value in err and "cannot be restored" in err
