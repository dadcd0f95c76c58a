"""``charmem migrate`` on a graph store written in layout 1 (the adapter's fixture), end to end."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from pyoxigraph import RdfFormat, Store, parse

from charmem_cli.app import main

FIXTURE = Path(__file__).resolve().parents[2] / "charmem-oxigraph" / "tests" / "fixtures" / "layout1.nq"


def test_a_layout_1_store_is_refused_until_migrated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hashing")
    store = tmp_path / "my store"  # a space: the printed command must quote it
    (store / "oxigraph").mkdir(parents=True)
    raw = Store(str(store / "oxigraph"))
    raw.extend(parse(path=FIXTURE, format=RdfFormat.N_QUADS))
    raw.flush()
    del raw
    base = ["--store", str(store), "--collection", "fixture"]

    assert main([*base, "recall", "tomatoes"]) == 2
    err = capsys.readouterr().err
    assert "StoreLayoutError" in err and "charmem migrate" in err and "layout 1" in err
    assert sorted(p.name for p in store.iterdir()) == ["oxigraph"]  # no vectors or stats created

    hint = re.search(r"`(charmem migrate [^`]*)`", err)
    assert hint is not None
    by_hint = shlex.split(hint.group(1))[1:]  # the fix, runnable as printed
    assert by_hint == ["migrate", "--store", str(store), "--collection", "fixture"]
    assert main(by_hint) == 0
    assert "from layout 1 to 3" in capsys.readouterr().out
    assert main([*base, "migrate", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["objects"] == 0  # a current store: nothing to do

    assert main([*base, "rebuild-vectors", "--quiet"]) == 0
    capsys.readouterr()
    assert main([*base, "recall", "--json", "cherry tomatoes"]) == 0
    texts = [item["text"] for item in json.loads(capsys.readouterr().out)["items"]]
    assert "the user likes cherry tomatoes" in texts


def test_migrate_refuses_a_missing_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--store", str(tmp_path / "none"), "--collection", "c", "migrate"]) == 2
    assert "ConfigurationError" in capsys.readouterr().err
    assert not (tmp_path / "none").exists()
