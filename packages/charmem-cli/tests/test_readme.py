"""The root README's library example runs as written (on the embedded defaults, local model)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[3] / "README.md"


def test_readme_python_example_runs_and_recalls(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert blocks, "the README lost its Python example"
    script = tmp_path / "example.py"
    script.write_text(blocks[0], encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRAPH_", "VECTOR_", "RETRIEVAL_"))}
    env["HF_HUB_OFFLINE"] = "1"
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "My sister Ana is visiting from Porto next week." in result.stdout
    assert result.stdout.splitlines()[-1] == "still recalled: False"  # forgetting the episode
    assert (tmp_path / "data" / "oxigraph").is_dir()
    assert (tmp_path / "data" / "vectors" / "my-assistant-memory").is_dir()
