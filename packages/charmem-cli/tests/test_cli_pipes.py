"""The ``charmem`` process and its standard output: a reader that stops early is no error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_output_piped_into_a_reader_that_stops_ends_quietly(tmp_path: Path) -> None:
    env = {**os.environ, "EMBEDDING_PROVIDER": "hashing", "HF_HUB_OFFLINE": "1"}
    charmem = [sys.executable, "-m", "charmem_cli", "--store", str(tmp_path / "store")]
    for text in ("Ana plays the cello.", "Ana's dog is called Biscuit.", "Ana lives in Porto."):
        subprocess.run([*charmem, "remember", text], env=env, check=True)
    child = subprocess.Popen(
        [*charmem, "recall", "Ana"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout is not None
    child.stdout.close()  # the reader is gone before the first line is written (`| head -0`)
    _out, err = child.communicate(timeout=120)
    assert child.returncode == 141
    assert b"Broken pipe" not in err and b"Traceback" not in err, err.decode()
