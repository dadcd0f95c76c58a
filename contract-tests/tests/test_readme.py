"""The README cannot drift: its file listings equal the example files, and its snippets run."""

from __future__ import annotations

import importlib.util
import re
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

from charmem_contract import ContractSuite

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
LISTED = re.findall(r"<!-- file: (\S+) -->\n```python\n(.*?)```", README, re.DOTALL)
SNIPPETS = [
    block
    for block in re.findall(r"```python\n(.*?)```", README, re.DOTALL)
    if block not in {text for _, text in LISTED}
]


def _shelf() -> ModuleType:
    spec = importlib.util.spec_from_file_location("readme_shelf_index", ROOT / "examples" / "shelf_index.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_lists_both_example_files() -> None:
    assert sorted(name for name, _ in LISTED) == ["examples/shelf_index.py", "examples/test_shelf_index.py"]


@pytest.mark.parametrize(("name", "text"), LISTED, ids=[name for name, _ in LISTED])
def test_listed_files_equal_the_examples(name: str, text: str) -> None:
    assert (ROOT / name).read_text(encoding="utf-8") == text, f"README listing of {name} drifted"


@pytest.mark.parametrize("snippet", SNIPPETS)
def test_snippets_define_classes_that_keep_the_rules(snippet: str) -> None:
    namespace: dict[str, object] = {"__name__": "readme", "ShelfVectorIndex": _shelf().ShelfVectorIndex}
    exec(compile(textwrap.dedent(snippet), "README.md", "exec"), namespace)
    classes = [v for v in namespace.values() if isinstance(v, type) and issubclass(v, ContractSuite)]
    adapters = [cls for cls in classes if cls.__name__.startswith("Test")]
    assert adapters, "each Python snippet shows an adapter test class"
    for cls in adapters:
        assert cls.guard_violations() == []
