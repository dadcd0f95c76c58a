"""The scene example of docs/concepts/retrieval.md runs and prints exactly the output shown there."""

from __future__ import annotations

import contextlib
import io
import re
import runpy
from pathlib import Path

DOC = Path(__file__).resolve().parents[3] / "docs" / "concepts" / "retrieval.md"


def test_the_scene_example_prints_what_the_docs_show(tmp_path: Path) -> None:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("### Example: a scene with no topic") :]
    code = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    shown = re.findall(r"```text\n(.*?)```", section, re.S)[0]
    script = tmp_path / "example.py"
    script.write_text(code, encoding="utf-8")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        runpy.run_path(str(script), run_name="__main__")
    assert printed.getvalue() == shown
