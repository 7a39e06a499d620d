"""Lanes: a single grading's tests shared by two harness processes, each with its own worker account
and confinement, give the scorecard one lane gives, and fail closed when a lane is lost."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from grader.core.exercise import load_exercise
from grader.core.grading import grade_bytes
from grader.sandbox.local import TESTS_PER_LANE, LocalBackend
from tests.helpers import EXERCISE, PROJECT, REFERENCE, STUB, WHO_AM_I, exercise_copy, mutant_file

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="lanes need a worker account each: root only")

MUTANT = mutant_file("03_skip_blocked_head")
CRASH_IN_ONE_CASE = PROJECT / "tests" / "solutions" / "crash_in_one_case.py"


def grade(data: bytes, lanes: int, exercise=None):
    return grade_bytes(data, exercise or load_exercise(EXERCISE), "premium", LocalBackend(lanes=lanes), "local")


def view(card):
    return (card.status, card.score, card.reason,
            [(t.id, t.status, t.message, t.traceback, t.artifacts) for t in card.tests])


@pytest.mark.unit
def test_a_single_grading_as_root_takes_two_lanes_and_a_warm_one_takes_one():
    assert LocalBackend().lane_count() == min(2, len(os.sched_getaffinity(0)))
    assert LocalBackend(warm=True).lane_count() == 1
    assert LocalBackend(unsafe=True).lane_count() == 1


@pytest.mark.unit
def test_a_grading_of_few_tests_stays_in_one_lane():
    """A second lane starts a confinement of its own, which costs about what a few tests take: a tier
    with fewer than `TESTS_PER_LANE` tests for each lane is graded in one."""
    lanes = LocalBackend().lane_count()
    assert LocalBackend().lane_count(2) == 1
    assert LocalBackend().lane_count(2 * TESTS_PER_LANE - 1) == 1
    assert LocalBackend().lane_count(2 * TESTS_PER_LANE) == lanes
    assert LocalBackend().lane_count(45) == lanes
    assert LocalBackend(lanes=2).lane_count(2) == 2  # asked for: as asked


@pytest.mark.parametrize("path", [REFERENCE, MUTANT, STUB, CRASH_IN_ONE_CASE], ids=lambda p: p.stem)
def test_two_lanes_give_the_scorecard_of_one(path):
    one, two = grade(path.read_bytes(), 1), grade(path.read_bytes(), 2)
    assert one.status == "graded", one.reason
    assert view(two) == view(one)



def test_each_lane_runs_its_workers_as_an_account_of_its_own():
    card = grade(WHO_AM_I, 2)
    assert card.status == "graded" and card.score == 0, card.reason
    uids = [re.search(r"worker uid (\d+)", t.message).group(1) for t in card.tests]
    assert len(set(uids)) == 2 and "0" not in uids  # each lane took tests as it was free


LANE_KILLER = '''
import os

import pytest


def _second_lane(config):
    from grader.harness.plugin import GRADING  # the harness's own state: this suite is trusted code

    grading = config.stash.get(GRADING, None)  # None where the host lists the tests
    return grading is not None and grading.harness.lanes.number > 0


def pytest_runtest_setup(item):
    if _second_lane(item.config):  # the first test the second lane takes: it dies midway through the run
        os.kill(os.getpid(), 9)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    if _second_lane(session.config):  # a second lane that took no test dies before it sends its results
        os.kill(os.getpid(), 9)
'''


def test_a_lane_lost_midway_makes_the_grading_an_error_not_a_pass(tmp_path):
    folder = exercise_copy(tmp_path)
    conftest = tmp_path / "hidden_tests" / EXERCISE / "conftest.py"
    conftest.write_text(conftest.read_text() + LANE_KILLER)
    exercise = load_exercise(folder)
    control = grade(REFERENCE.read_bytes(), 1, exercise)
    assert control.status == "graded" and control.score == control.max_score  # one lane: nothing dies
    card = grade(REFERENCE.read_bytes(), 2, exercise)
    assert card.status == "error" and card.score == 0
    assert "lane 2 of the harness ended without results" in card.reason


# Fails every test the second lane takes (at its setup) unless the lane's workers live in the confinement
# the first lane started for it: a first process that is the first lane's child, watched by a pidfd. With
# NO_PIDFD, that confinement cannot be watched from the second lane, which must start its own instead.
ADOPTED_CHECK = '''
import os

from grader.confined.forking import parent_of
from grader.harness import confine
from grader.harness.plugin import GRADING

NO_PIDFD = {no_pidfd}


def _refused(self, pid):
    raise OSError("no pidfd here")


def pytest_configure(config):
    if NO_PIDFD:
        confine.Adopted.__init__ = _refused


def pytest_runtest_setup(item):
    grading = item.config.stash.get(GRADING, None)
    if grading is None or grading.harness.lanes.number == 0:
        return
    first = grading.harness.pool.confinement().process
    started_by_first_lane = parent_of(first.pid) == os.getppid()
    assert isinstance(first, confine.Adopted) == started_by_first_lane == (not NO_PIDFD), (first, NO_PIDFD)
'''


@pytest.mark.parametrize("no_pidfd", [False, True], ids=["taken-over", "its-own"])
def test_the_second_lane_takes_over_the_confinement_the_first_started_for_it(tmp_path, no_pidfd):
    folder = exercise_copy(tmp_path)
    conftest = tmp_path / "hidden_tests" / EXERCISE / "conftest.py"
    conftest.write_text(conftest.read_text() + ADOPTED_CHECK.format(no_pidfd=no_pidfd))
    card = grade(WHO_AM_I, 2, load_exercise(folder))
    assert card.status == "graded" and card.score == 0, card.reason
    # Every test ran (none failed its setup) and the second lane took some, as an account of its own.
    assert all(t.message and "worker uid" in t.message for t in card.tests), [t.message for t in card.tests]
    assert len({re.search(r"worker uid (\d+)", t.message).group(1) for t in card.tests}) == 2


def test_a_grading_in_lanes_leaves_no_process_behind():
    """Whatever a harness leaves when it ends goes to the nearest subreaper up its line: this process, for
    the time of the grading. The first process of the confinement the first lane started for the
    second is the first lane's child: the first lane reaps it before it ends."""
    from grader.confined.forking import PR_SET_CHILD_SUBREAPER, prctl
    from grader.confined.processes import children_of

    before = set(children_of(os.getpid()))
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    try:
        cards = [grade(REFERENCE.read_bytes(), 2) for _ in range(3)]  # however the lanes' ends fall
        left = [pid for pid in children_of(os.getpid()) if pid not in before]
        names = {pid: Path(f"/proc/{pid}/comm").read_text().strip() for pid in left}
    finally:
        prctl(PR_SET_CHILD_SUBREAPER, 0)
        for pid in set(children_of(os.getpid())) - before:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
    assert all(card.status == "graded" and card.score == card.max_score for card in cards), cards[0].reason
    assert names == {}


def test_without_a_free_account_for_a_second_lane_a_grading_runs_in_one(monkeypatch):
    from grader.errors import GradingError
    from grader.sandbox import worker_accounts

    last = worker_accounts.WORKER_UIDS[-1]
    monkeypatch.setattr(worker_accounts, "WORKER_UIDS", range(last, last + 1))
    try:
        card = grade(WHO_AM_I, 2)
    except GradingError as exc:  # the range's one account may be another grading's, beside this test
        if "worker accounts are in use" not in str(exc):
            raise
        pytest.skip(f"the one account of the range is in use: {exc}")
    assert card.status == "graded", card.reason
    assert len({re.search(r"worker uid (\d+)", t.message).group(1) for t in card.tests}) == 1


TIMEOUTS = '''
import time

from grader.harness.stops import CallTimeout


def endless(call):
    raise CallTimeout(f"{call} did not finish within 5 s (is there an endless loop?)")


def test_t1_slow():
    time.sleep(0.4)


def test_t2_loops():
    endless("schedule()")


def test_t3_passes():
    pass


def test_t4_loops():
    endless("complete()")


def test_t5_slow():
    time.sleep(0.2)


def test_t6_loops():
    endless("add()")


def test_t7_would_pass():
    pass


def test_t8_would_loop():
    endless("schedule()")


def test_t9_would_pass():
    time.sleep(0.1)
'''


def test_after_timeouts_two_lanes_run_every_test_as_one_lane_does(tmp_path):
    """Which lane runs a test is a matter of timing (each takes the next as soon as it is free): the tests
    after any number of timeouts run in either, and what the timeouts cost is said over the whole run, as
    one lane says it."""
    folder = exercise_copy(tmp_path)
    (tmp_path / "hidden_tests" / EXERCISE / "test_zz_timeouts.py").write_text(TIMEOUTS)
    exercise = load_exercise(folder)
    one, two = grade(REFERENCE.read_bytes(), 1, exercise), grade(REFERENCE.read_bytes(), 2, exercise)
    assert one.status == "graded", one.reason
    assert view(two) == view(one)
    statuses = {t.name: t.status for t in two.tests if re.match(r"test_t\d_", t.name)}
    assert statuses == {"test_t1_slow": "passed", "test_t2_loops": "timeout", "test_t3_passes": "passed",
                        "test_t4_loops": "timeout", "test_t5_slow": "passed", "test_t6_loops": "timeout",
                        "test_t7_would_pass": "passed", "test_t8_would_loop": "timeout",
                        "test_t9_would_pass": "passed"}
    assert all("4 tests of this grading ran out of time" in t.message for t in two.tests if t.status == "timeout")
