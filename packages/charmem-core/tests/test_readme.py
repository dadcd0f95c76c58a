"""The package README's Python example runs as written (on core's reference stores)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    assert len(blocks) == 1, "the README's example changed shape"
    command = [sys.executable, "-c", blocks[0]]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("backed up ") and lines[0].endswith(" statements")
    assert lines[1:] == ["purged 2, consistent: True", "a replay cannot bring it back"]
