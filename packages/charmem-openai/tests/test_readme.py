"""The README's Python example runs, so the documentation cannot drift from the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)


def test_readme_has_examples() -> None:
    assert BLOCKS


@pytest.mark.parametrize("block", BLOCKS)
def test_readme_example_runs(block: str) -> None:
    exec(compile(block, str(README), "exec"), {"__name__": "readme"})
