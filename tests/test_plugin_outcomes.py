"""The grading plugin's outcome rules, in-process with pytester (milliseconds, no sandbox): what a test's
end counts as. A skip is never a pass, a swallowed timeout or crash of the submission is never a pass,
a test over its time is a timeout, a failure in a fixture is an error, and a suite that holds details
back still names the rule a bare assert checks."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from types import SimpleNamespace

import pytest

from grader.harness.contract import Job, Suite, TestRecord
from grader.harness.lanes import LaneReport
from grader.harness.outcomes import not_run_message, note_timeouts
from grader.harness.plugin import GRADING, SUBMISSION_NAMES, GradingPlugin
from grader.harness.state import HarnessState
from tests.helpers import PROJECT

pytest_plugins = ["pytester"]


@pytest.fixture
def grade_suite(pytester: pytest.Pytester):
    """Run a suite's source through the grading plugin in a fresh interpreter (tests/plugin_run.py), as a
    grading's harness runs in a process of its own; {test name: record}. What the harness does to its process (a
    subreaper, a memory cap, its timers, a frozen heap) is for a process of its own, as in a grading: it
    never reaches the tests that run after in this one."""
    runs: list[str] = []

    def run(source: str, details: bool = True) -> tuple[dict, list[str]]:
        runs.append(source)
        folder = pytester.mkdir(f"suite{len(runs)}")
        (folder / "test_suite.py").write_text(source)
        job = Job(submission="solution.py", module="solution", names=["f"],
                  suites=[Suite("hidden", folder.name, details=details)], worker_code="", worker_python="",
                  isolation="none")
        given, out = pytester.path / f"job{len(runs)}.pickle", pytester.path / f"out{len(runs)}.pickle"
        given.write_bytes(pickle.dumps((job, str(pytester.path), str(folder))))
        done = subprocess.run([sys.executable, "-m", "tests.plugin_run", str(given), str(out)], cwd=PROJECT,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and out.exists(), f"the run ended with status {done.returncode}: {done.stderr[-2000:]}"
        return pickle.loads(out.read_bytes())

    return run


def test_a_skipped_test_is_an_error_never_a_pass(grade_suite):
    records, _ = grade_suite('''
import pytest

def test_skipped():
    pytest.skip("not today")

@pytest.mark.skipif(True, reason="never")
def test_skipped_by_mark():
    pass

def test_passes():
    pass
''')
    assert records["test_skipped"].status == "error" and "skipped" in records["test_skipped"].message
    assert "not today" in records["test_skipped"].message
    assert records["test_skipped_by_mark"].status == "error"
    assert records["test_passes"].status == "passed"


def test_a_swallowed_timeout_or_crash_of_the_submission_is_never_a_pass(grade_suite):
    """A test that catches what the submission's worker did (here, the incident the worker client
    records) and passes anyway: the incident decides."""
    records, _ = grade_suite('''
from types import SimpleNamespace

from grader.harness.plugin import SUBMISSION_NAMES


def test_catches_the_timeout(request):
    incident = SimpleNamespace(status="timeout", message="schedule() did not return within 5 s")
    request.node.stash[SUBMISSION_NAMES] = SimpleNamespace(_client=SimpleNamespace(incident=incident))
    try:
        raise TimeoutError("caught by the test")
    except TimeoutError:
        pass
''')
    record = records["test_catches_the_timeout"]
    assert (record.status, record.message) == ("timeout", "schedule() did not return within 5 s")
    assert SUBMISSION_NAMES and SimpleNamespace  # the names the suite above imports


def test_a_test_over_its_time_is_a_timeout_with_its_limit(grade_suite):
    records, _ = grade_suite('''
import time
import pytest

@pytest.mark.timeout(0.3)
def test_sleeps():
    time.sleep(5)
''')
    record = records["test_sleeps"]
    assert record.status == "timeout" and "did not finish within" in record.message
    assert record.duration_s < 3


def test_after_timeouts_the_tests_left_run_and_only_the_tests_that_hang_lose_points(grade_suite):
    """A hang costs only the tests that hang: the tests after any number of timeouts run with their own
    limits, and each test that timed out says which tests the timeouts cost and that the rest ran."""
    records, _ = grade_suite('''
from grader.harness.stops import CallTimeout

def test_1_passes():
    pass

def test_2_loops():
    raise CallTimeout("schedule() did not finish within 5 s (is there an endless loop?)")

def test_3_loops():
    raise CallTimeout("schedule() did not finish within 5 s (is there an endless loop?)")

def test_4_passes():
    pass

def test_5_loops():
    raise CallTimeout("complete() did not finish within 5 s (is there an endless loop?)")

def test_6_passes():
    pass

def test_7_fails():
    assert 1 == 2
''')
    statuses = {name: record.status for name, record in records.items()}
    assert statuses == {"test_1_passes": "passed", "test_2_loops": "timeout", "test_3_loops": "timeout",
                        "test_4_passes": "passed", "test_5_loops": "timeout", "test_6_passes": "passed",
                        "test_7_fails": "failed"}
    note = ("3 tests of this grading ran out of time (test_2_loops, test_3_loops, test_5_loops); that cost only "
            "them: the 4 other tests ran with their own limits.")
    assert records["test_5_loops"].message == f"complete() did not finish within 5 s (is there an endless loop?)\n{note}"
    assert all(note in records[name].message for name in ("test_2_loops", "test_3_loops"))
    assert all(note not in record.message for record in records.values() if record.status != "timeout")


def _records(outcomes: str) -> dict[str, TestRecord]:
    """Records in collection order, one a letter: p passed, f failed, t timed out, g not run for the
    grading's time."""
    found = {}
    for at, kind in enumerate(outcomes):
        status = {"p": "passed", "f": "failed"}.get(kind, "timeout")
        message = {"t": "schedule() did not finish within 5 s", "g": not_run_message(160)}.get(kind, "")
        found[f"t::test_{at}"] = TestRecord(f"t::test_{at}", "hidden", f"test_{at}", "", status, message)
    return found


@pytest.mark.unit
def test_the_note_of_the_timeouts_counts_the_tests_that_ran_and_not_those_the_gradings_time_left():
    records = _records("ptpttggp")
    note_timeouts(records, LaneReport({"t::test_5": "time", "t::test_6": "time"}))
    timed_out = [r for r in records.values() if r.message.startswith("schedule()")]
    assert len(timed_out) == 3 and all(r.message.endswith("the 3 other tests ran with their own limits.")
                                       for r in timed_out)
    assert records["t::test_5"].message == not_run_message(160)


@pytest.mark.unit
def test_no_note_when_every_test_timed_out_or_none_did():
    for outcomes in ("ttt", "ppf"):
        records = _records(outcomes)
        before = {nodeid: record.message for nodeid, record in records.items()}
        note_timeouts(records, LaneReport())
        assert {nodeid: record.message for nodeid, record in records.items()} == before


def test_a_failure_outside_the_test_body_is_an_error_and_a_fail_keeps_the_authors_words(grade_suite):
    records, _ = grade_suite('''
import pytest

@pytest.fixture
def broken():
    raise RuntimeError("the fixture broke")

def test_uses_broken(broken):
    pass

def test_fails():
    pytest.fail("the plan held 3 entries; 4 expected")
''')
    assert records["test_uses_broken"].status == "error"
    assert (records["test_fails"].status, records["test_fails"].message) == \
        ("failed", "the plan held 3 entries; 4 expected")


def test_held_back_details_still_name_the_rule_and_an_authors_message(grade_suite):
    source = '''
def test_bare():
    """Decodes go before prefills."""
    plan = [2, 1]
    assert plan == sorted(plan)

def test_with_message():
    plan = [2, 1]
    assert plan == sorted(plan), "step 3: the plan is out of order"
'''
    held, _ = grade_suite(source, details=False)
    assert held["test_bare"].message == "a check of this test failed: Decodes go before prefills."
    assert held["test_with_message"].message == "step 3: the plan is out of order"
    shown, _ = grade_suite(source, details=True)
    assert shown["test_with_message"].message.startswith("step 3: the plan is out of order\nassert [2, 1] == [1, 2]")


def test_a_file_that_cannot_be_collected_is_a_problem_of_the_run(grade_suite):
    _, problems = grade_suite("import not_a_module_anywhere\n")
    assert problems and "could not be collected" in problems[0] and "not_a_module_anywhere" in problems[0]


def test_the_plugin_is_found_in_the_config_stash(pytester):
    """A trusted suite (or a test of the plugin) reaches the run through `config.stash[GRADING]` (in a
    process of its own, as `grade_suite` runs the harness)."""
    job = Job(submission="s.py", module="s", names=[], suites=[], worker_code="", worker_python="", isolation="none")
    pid = os.fork()
    if pid == 0:
        found = False
        try:
            harness = HarnessState(job, str(pytester.path))
            harness.pool.subreaper = False
            grading = GradingPlugin(harness)
            pytester.plugins.append(grading)
            config = pytester.parseconfigure()
            found = config.stash[GRADING] is grading and config.stash[GRADING].harness is harness
        finally:
            os._exit(0 if found else 1)
    _, status = os.waitpid(pid, 0)
    assert status == 0, "the plugin was not in the config's stash"


def test_a_long_message_is_cut_with_a_count_and_made_valid_text_as_the_contract_does(grade_suite):
    """The plugin cuts a message as the contract cuts every text from the sandbox (`valid_text`): the
    count of what was cut after it, a lone surrogate replaced."""
    records, _ = grade_suite('''
def test_long():
    assert False, "\\ud800" + "x" * 30_000
''')
    message = records["test_long"].message
    assert message.startswith("\ufffdxxx") and message.endswith("x… [10,014 more characters cut]")
    assert len(message) == 20_000 + len("… [10,014 more characters cut]")


def test_a_student_never_reads_pytests_hints_to_run_it_again_with_v(grade_suite):
    """pytest's "Use -v to get more diff" speaks to whoever runs pytest; a student cannot pass -v."""
    records, _ = grade_suite('''
def test_lists():
    assert [1, 2, 3, 4] == [1, 2, 3, 5], "the lists differ"
''')
    message = records["test_lists"].message
    assert "the lists differ" in message and "At index 3 diff" in message, message
    assert "-v" not in message and "Use" not in message, message


def test_a_student_never_reads_pytests_hints_to_show_what_it_skipped(grade_suite):
    records, _ = grade_suite('''
def test_texts():
    assert "a" * 300 + "b" + "c" * 300 == "a" * 300 + "x" + "c" * 300
''')
    message = records["test_texts"].message
    assert "assert" in message and "Skipping" not in message and "-v" not in message, message
