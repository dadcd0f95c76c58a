"""Deliberately broken adapters fail the suites, with messages that say what is wrong.

``broken_adapters.py`` (beside this file) holds the broken adapters and their test classes; it is
run once, in a child pytest process, and each test here checks one class's outcome.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from charmem_contract import GraphStoreContract

Outcomes = dict[str, tuple[str, str]]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> Outcomes:
    """``"TestClass::test_name"`` -> (outcome, message); outcomes as in a junit report."""
    workdir = tmp_path_factory.mktemp("broken")
    shutil.copy(Path(__file__).with_name("broken_adapters.py"), workdir / "test_broken_adapters.py")
    report = workdir / "report.xml"
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTEST_")}
    child = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "test_broken_adapters.py",
            "-q",
            "-p",
            "no:cacheprovider",
            "--import-mode=importlib",
            "-o",
            "asyncio_mode=auto",
            "-o",
            "asyncio_default_fixture_loop_scope=function",
            "-o",
            "junit_family=xunit1",
            f"--junitxml={report}",
            # the rule-breaking classes only need their guard to run
            "-k",
            "not TestRule or test_contract_guard",
        ],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert report.exists(), f"the child pytest did not run:\n{child.stdout}\n{child.stderr}"
    found: Outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        key = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        outcome, message = "passed", ""
        for child_element in case:
            kind = child_element.tag
            text = f"{child_element.get('message', '')}\n{child_element.text or ''}"
            if kind in ("failure", "error"):
                outcome, message = ("failed" if kind == "failure" else "error"), text
            elif kind == "skipped":
                xfail = child_element.get("type") == "pytest.xfail"
                outcome, message = ("xfailed" if xfail else "skipped"), text
        found[key] = outcome, message
    assert found, child.stdout
    return found


def failures(outcomes: Outcomes, cls: str) -> dict[str, str]:
    prefix = f"{cls}::"
    return {
        key.removeprefix(prefix): message
        for key, (outcome, message) in outcomes.items()
        if key.startswith(prefix) and outcome in ("failed", "error")
    }


def test_an_index_returning_ties_in_insertion_order_fails_the_tie_tests(outcomes: Outcomes) -> None:
    failed = failures(outcomes, "TestTiesInInsertionOrder")
    assert set(failed) == {
        "test_ties_are_ordered_by_id_whatever_the_insertion_order",
        "test_ties_with_a_text_cue_do_not_depend_on_insertion_order",
        "test_limit_cuts_at_a_tie_boundary_by_id",
        "test_scores_closer_than_the_resolution_are_ties_cut_by_id",
        "test_ties_on_a_surface_are_ordered_by_object_id",
    }
    message = failed["test_ties_are_ordered_by_id_whatever_the_insertion_order"]
    assert "ties must come back by id ascending" in message
    assert "inserted by descending ids" in message  # the report shows each insertion order
    assert "the tied run was cut by internal order" in failed["test_limit_cuts_at_a_tie_boundary_by_id"]


def test_an_index_blind_to_surfaces_fails_the_surface_tests(outcomes: Outcomes) -> None:
    failed = failures(outcomes, "TestSurfaceBlind")
    assert set(failed) == {
        "test_a_search_sees_its_own_surface_only",
        "test_ties_on_a_surface_are_ordered_by_object_id",
        "test_within_and_scanned_count_one_surface",
        "test_upsert_replaces_one_surface_and_leaves_the_others",
        "test_counts_and_point_ids_are_per_surface",
        "test_delete_removes_every_surface_of_an_object",
    }


def test_a_graph_store_writing_half_a_batch_fails_atomicity(outcomes: Outcomes) -> None:
    failed = failures(outcomes, "TestHalfBatch")
    assert "test_atomic_batch_leaves_nothing" in failed
    assert "a refused batch left" in failed["test_atomic_batch_leaves_nothing"]
    assert "a refused batch" in failed["test_id_conflict_refuses_the_whole_batch"]
    assert "a refused batch changed the store" in failed["test_write_batch_refuses_purged_ids"]
    assert outcomes["TestHalfBatch::test_contract_guard"][0] == "passed"


def test_a_stats_store_counting_replays_twice_fails(outcomes: Outcomes) -> None:
    failed = failures(outcomes, "TestAppendingStats")
    assert set(failed) == {"test_rows_are_keyed_by_id_so_replays_never_count_twice"}
    assert "a replay added rows" in failed["test_rows_are_keyed_by_id_so_replays_never_count_twice"]


def test_an_embedder_with_short_rows_fails(outcomes: Outcomes) -> None:
    failed = failures(outcomes, "TestShortRows")
    assert "test_one_row_per_text_of_vector_size_finite_floats" in failed
    assert "test_hostile_texts_embed_to_finite_vectors" in failed


def test_a_fixture_that_is_not_empty_fails_the_canary(outcomes: Outcomes) -> None:
    failed = failures(outcomes, "TestNotEmpty")
    assert "the graph_store_factory's store is not empty" in failed["test_fixture_starts_empty"]


def test_the_facade_suite_and_its_state_machine_notice_a_broken_index(outcomes: Outcomes) -> None:
    failed = failures(outcomes, "TestInsertionOrderStack")
    assert "insertion order changed the pack" in failed["test_ties_do_not_depend_on_insertion_order"]
    machine = failed["test_random_sequences_match_the_reference_stack"]
    assert "differs from the reference stack" in machine
    assert "state = MemoryComparison()" in machine  # hypothesis prints the steps to replay


@pytest.mark.parametrize(
    ("cls", "expected"),
    [
        ("TestRuleOverridesWithoutXfail", "test_atomic_batch_leaves_nothing is overridden without xfail"),
        ("TestRuleDeletesATest", "test_links_of_relation_filter is deleted"),
        (
            "TestRuleSwitchesOffAFlagNotAllowed",
            "supports_exhaustive = False, but CharacterMemoryContract does not",
        ),
        ("TestRuleMisspellsAFlag", "supports_reopn is not a capability of GraphStoreContract"),
        ("TestRuleMarksTooManyKnownFailures", "only 2 contract tests run"),
    ],
)
def test_the_guard_fails_a_class_that_breaks_the_rules(outcomes: Outcomes, cls: str, expected: str) -> None:
    outcome, message = outcomes[f"{cls}::test_contract_guard"]
    assert outcome == "failed"
    assert expected in message


def test_known_failures_are_allowed_and_xfail(outcomes: Outcomes) -> None:
    assert outcomes["TestKnownFailureIsAllowed::test_contract_guard"][0] == "passed"
    assert outcomes["TestKnownFailureIsAllowed::test_atomic_batch_leaves_nothing"] == (
        "xfailed",
        outcomes["TestKnownFailureIsAllowed::test_atomic_batch_leaves_nothing"][1],
    )
    assert "writes item by item" in outcomes["TestKnownFailureIsAllowed::test_atomic_batch_leaves_nothing"][1]
    assert failures(outcomes, "TestKnownFailureIsAllowed") == {}


def test_a_known_failure_does_not_mark_the_suite_itself() -> None:
    from charmem_contract import known_failure

    original = GraphStoreContract.test_atomic_batch_leaves_nothing
    marked = known_failure(original, reason="an adapter's bug")
    assert [m.name for m in getattr(marked, "pytestmark", [])] == ["xfail"]
    assert not [m for m in getattr(original, "pytestmark", []) if m.name == "xfail"]
    with pytest.raises(ValueError, match="needs a reason"):
        known_failure(original, reason=" ")


def test_skipping_a_whole_suite_or_replacing_the_guard_is_refused_at_import() -> None:
    with pytest.raises(TypeError, match="marks the whole suite skip"):

        class TestSkipsEverything(GraphStoreContract):
            pytestmark = [pytest.mark.skip(reason="later")]

    with pytest.raises(TypeError, match="overrides test_contract_guard"):

        class TestNoGuard(GraphStoreContract):
            def test_contract_guard(self) -> None:
                pass


SUITES = [
    "AdminToolsContract",
    "GraphStoreContract",
    "VectorIndexContract",
    "RetrievalStatsStoreContract",
    "EmbeddingProviderContract",
    "CharacterMemoryContract",
    "CharacterMemoryBlackBoxContract",
    "LifecycleContract",
    "RecallSignalsContract",
    "SituatedRecallContract",
]


@pytest.mark.parametrize("name", SUITES)
def test_each_suite_declares_a_reachable_minimum(name: str) -> None:
    """An adapter switching off every optional flag can still pass; at most 4 known failures on top."""
    import charmem_contract

    suite = getattr(charmem_contract, name)
    tests = suite.contract_tests()
    ungated = [
        test
        for test in tests.values()
        if not set(getattr(test, "__contract_requires__", ())) & suite.optional_capabilities
    ]
    assert len(ungated) - 4 <= suite.minimum_passing <= len(ungated)
    assert suite.optional_capabilities <= set(suite.capabilities)
    for test_name, test in tests.items():
        doc = (test.__doc__ or "").strip()
        last = doc.split("\n\n")[-1].strip()
        assert last.startswith("If this fails:"), (
            f"{name}.{test_name}: the docstring must end with what to check"
        )


def test_a_suite_whose_test_does_not_say_what_to_check_is_refused_at_import() -> None:
    from charmem_contract import ContractSuite

    with pytest.raises(TypeError, match="must end with a paragraph starting 'If this fails:'"):

        class MuteContract(ContractSuite, suite=True):
            async def test_fixture_starts_empty(self) -> None:
                """Starts empty.

                Adapter authors: a wording the suites no longer use.
                """


def test_a_stateful_suite_without_its_empty_canary_is_refused_at_import() -> None:
    from charmem_contract import ContractSuite

    with pytest.raises(TypeError, match="no empty canary"):

        class CanarylessContract(ContractSuite, suite=True):
            async def test_something(self) -> None:
                """Something.

                If this fails: check something.
                """


@pytest.mark.parametrize("name", SUITES)
def test_every_suite_module_keeps_pytest_assertion_messages(name: str) -> None:
    """Each module a suite's tests come from was loaded by pytest's assertion rewriter."""
    import charmem_contract

    suite = getattr(charmem_contract, name)
    modules = {sys.modules[test.__module__] for test in suite.contract_tests().values()}
    plain = sorted(m.__name__ for m in modules if "@py_builtins" not in vars(m))
    assert not plain, f"asserts in {plain} lose pytest's messages: register them for rewriting"
