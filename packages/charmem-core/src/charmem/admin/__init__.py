"""Operational tools (DESIGN §1): not memory operations, for operators and scripts.

* :func:`check` / :func:`check_settings`: compare a collection's vectors and statistics with its
  graph authority and look for partial graph batches; :func:`repair` rebuilds what drifted.
"""

from charmem.admin._check import (
    CHECK_FORMAT_VERSION,
    CheckReport,
    GraphProblem,
    GraphProblemKind,
    RepairOutcome,
    StatsDrift,
    check,
    check_settings,
    repair,
)

__all__ = [
    "CHECK_FORMAT_VERSION",
    "CheckReport",
    "GraphProblem",
    "GraphProblemKind",
    "RepairOutcome",
    "StatsDrift",
    "check",
    "check_settings",
    "repair",
]
