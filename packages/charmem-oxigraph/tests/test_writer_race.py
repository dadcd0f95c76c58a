"""Writers in several OS processes on one real ``oxigraph serve`` keep the write path's invariants.

A short run of ``benchmarks/writer_race.py`` (the full race is ``nox -s race``): two worker
processes race commits of the same ids with different content, corrections of the same belief,
forgets and links, and the graph afterwards holds no id with two records, no belief with two
successors and no partial or lost write, and ``check`` finds nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

RACE = Path(__file__).resolve().parents[3] / "benchmarks" / "writer_race.py"


def test_two_processes_racing_keep_every_invariant() -> None:
    done = subprocess.run(  # the script starts its own oxigraph serve
        [sys.executable, str(RACE), "--processes", "2", "--slots", "6", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["operations"] == 2 * 6 * 5
    assert result["other_errors"] == {}
    # every slot's commit, batch, correction and link conflicts between the two workers: one wins
    assert result["conflicts"] == 4 * 6
    assert (result["two_records"], result["two_successors"], result["partial"]) == (0, 0, 0)
    assert result["check_problems"] == []
