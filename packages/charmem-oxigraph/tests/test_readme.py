"""The README's Python examples run, so the documentation cannot drift from the code."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_readme_has_examples() -> None:
    assert BLOCKS


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{n}" for n in range(len(BLOCKS))])
def test_readme_example_runs(code: str, tmp_path: Path) -> None:
    # A fresh interpreter: the example calls asyncio.run, which needs no running loop.
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
