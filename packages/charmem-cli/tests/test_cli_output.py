"""``charmem --version``, ``-v`` and the model-loading line: stderr for people, stdout for scripts."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest

from charmem import __version__ as core_version
from charmem.testing import HashingEmbeddingProvider
from charmem_cli import __version__ as cli_version
from charmem_cli._common import announce_model_load
from charmem_cli.app import main

TEXT = "My sister Ana is visiting from Porto next week."


@pytest.fixture(autouse=True)
def _hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDDING_PROVIDER", "hashing")
    monkeypatch.delenv("CHARMEM_COLLECTION", raising=False)
    monkeypatch.delenv("CHARMEM_SERVER_URL", raising=False)


def test_version_prints_the_cli_and_core_versions(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    out = capsys.readouterr().out.strip()
    assert out == f"charmem-cli {cli_version} (charmem-core {core_version})"


@pytest.mark.parametrize("where", ["before", "after"])
def test_verbose_recall_json_keeps_stdout_machine_readable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    store = str(tmp_path / "store")
    assert main(["--store", store, "--collection", "cli", "remember", TEXT]) == 0
    capsys.readouterr()
    after = ["recall", "-v", "--json", "Ana visiting"]
    args = after if where == "after" else ["-v", "recall", "--json", "Ana"]
    assert main(["--store", store, "--collection", "cli", *args]) == 0
    captured = capsys.readouterr()
    pack = json.loads(captured.out)  # stdout is the JSON document alone
    assert pack["items"] and TEXT in [item["text"] for item in pack["items"]]
    assert " DEBUG charmem." in captured.err  # charmem's debug events went to stderr
    assert "event='" in captured.err


def test_without_verbose_no_debug_log_and_logging_is_left_as_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    store = str(tmp_path / "store")
    assert main(["--store", store, "--collection", "cli", "remember", TEXT]) == 0
    assert "DEBUG" not in capsys.readouterr().err
    assert main(["-v", "--store", store, "--collection", "cli", "recall", "Ana"]) == 0
    assert (list(root.handlers), root.level) == (handlers, level)  # -v configures one run only


class _LazyHashing(HashingEmbeddingProvider):
    """A hashing embedder that pretends to load a model, as charmem-local-embed's does."""

    loads = 0

    @property
    def is_loaded(self) -> bool:
        return self.loads > 0

    def load(self) -> None:
        self.loads += 1


async def test_a_lazily_loaded_model_is_announced_on_stderr_once() -> None:
    provider, out = _LazyHashing(), io.StringIO()
    await announce_model_load(provider, out)
    await announce_model_load(provider, out)
    assert provider.loads == 1
    assert out.getvalue() == f"charmem: loading the embedding model {provider.model_id} ...\n"


async def test_an_embedder_without_a_model_to_load_is_left_alone() -> None:
    out = io.StringIO()
    await announce_model_load(HashingEmbeddingProvider(), out)
    assert out.getvalue() == ""


def test_recall_announces_the_model_on_stderr_not_stdout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "store")
    assert main(["--store", store, "--collection", "cli", "remember", TEXT]) == 0
    capsys.readouterr()
    monkeypatch.setattr(HashingEmbeddingProvider, "from_settings", classmethod(lambda cls, s: _LazyHashing()))
    assert main(["--store", store, "--collection", "cli", "recall", "--json", "Ana"]) == 0
    captured = capsys.readouterr()
    json.loads(captured.out)
    assert "charmem: loading the embedding model" in captured.err
