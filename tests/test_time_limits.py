"""Time limits count the submission's own time: a busy machine never turns a correct call into a
timeout, an endless loop is still stopped, and a grading whose time runs out is graded, not an error.

The contention here is made, not hoped for: the processes under test are pinned to one CPU together
with busy processes that the test starts and always stops (`contention`), so that they wait for that
CPU most of the time, whatever else the machine is doing.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from grader.confined.clock import AccountCPU, OwnDeadline, process_charge, process_cpu_s
from grader.confined.limits import Limits
from grader.core.exercise import load_exercise
from grader.core.grading import grade_bytes
from grader.core.scorecard import Scorecard
from grader.harness.client import CallTimeout
from grader.harness.confine import Confinement, ZygoteUnavailable
from grader.harness.contract import Job
from grader.sandbox.isolation import worker_python
from grader.sandbox.local import run_local
from grader.sandbox.worker_accounts import worker_account
from tests.helpers import REFERENCE, exercise_copy, worker_for

HOG = "import os, sys, time\nos.sched_setaffinity(0, {int(sys.argv[1])})\nend = time.monotonic() + 120\n" \
      "while time.monotonic() < end:\n    pass\n"


@contextlib.contextmanager
def contention(hogs: int = 3) -> Iterator[int]:
    """Pin this thread (and so whatever it starts) to one CPU shared with `hogs` busy processes, at a
    lower priority than theirs (as root, which can raise it again): the CPU's number. The scheduler
    favours a process that wakes from a sleep over busy ones of the same priority, so without the lower
    priority a grading's processes, which take turns, would hardly wait. Everything is undone at the
    end, the hogs killed (they end by themselves after 2 min)."""
    before = os.sched_getaffinity(0)
    cpu = min(before)
    processes = [subprocess.Popen([sys.executable, "-c", HOG, str(cpu)]) for _ in range(hogs)]
    os.sched_setaffinity(0, {cpu})
    priority = os.getpriority(os.PRIO_PROCESS, 0)
    if os.geteuid() == 0:
        os.setpriority(os.PRIO_PROCESS, 0, priority + 5)
    try:
        time.sleep(0.2)  # the hogs are pinned and running
        yield cpu
    finally:
        if os.geteuid() == 0:
            os.setpriority(os.PRIO_PROCESS, 0, priority)
        os.sched_setaffinity(0, before)
        for process in processes:
            process.kill()
        for process in processes:
            process.wait()


def child(code: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", code])


# -- the clock ---------------------------------------------------------------------------------------

def test_a_process_that_waits_for_a_cpu_is_credited_its_wait():
    with contention():
        spinner = child("while True: pass")
        try:
            charge = process_charge(lambda: spinner.pid)
            time.sleep(1.5)
            charge.recheck()
        finally:
            spinner.kill()
            spinner.wait()
    # Four busy processes on one CPU: the spinner waits about three quarters of the time.
    assert charge.credit > 0.6, charge.credit


def test_a_process_that_sleeps_is_charged_its_sleep():
    with subprocess.Popen([sys.executable, "-c", "import time; print('asleep', flush=True); time.sleep(30)"],
                          stdout=subprocess.PIPE) as sleeper:  # its end waits for it and closes the pipe
        try:
            assert sleeper.stdout is not None and sleeper.stdout.readline() == b"asleep\n"
            deadline = OwnDeadline(0.5, process_charge(lambda: sleeper.pid).baseline())
            time.sleep(0.6)
            assert deadline.left() <= 0
        finally:
            sleeper.kill()


def test_a_process_that_keeps_its_own_threads_busy_is_not_credited_for_waiting_on_them():
    code = ("import os, threading\n"
            "def spin():\n    while True: pass\n"
            "for _ in range(3): threading.Thread(target=spin, daemon=True).start()\n"
            "spin()\n")
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        busy = child(code)  # its four threads share one CPU: each waits for the others
    finally:
        os.sched_setaffinity(0, before)
    try:
        charge = process_charge(lambda: busy.pid)
        started, cpu_before = time.monotonic(), process_cpu_s(busy.pid)
        time.sleep(1.5)
        charge.recheck()
        span, used = time.monotonic() - started, process_cpu_s(busy.pid) - cpu_before
    finally:
        busy.kill()
        busy.wait()
    # What its main thread waited for while its other threads ran is its own work, not credited: at
    # most the time the process as a whole had no CPU (other work on the machine) is.
    assert charge.credit <= span - used + 0.1, (charge.credit, span, used)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs an account of its own for the processes (root)")
def test_a_process_whose_own_children_hold_the_cpu_is_not_credited_for_waiting_on_them():
    """A fork bomb's main process waits for the CPU its own children hold: that is the submission's
    work, and every process of the worker's account counts."""
    code = ("import os\n"
            "for _ in range(3):\n    if os.fork() == 0:\n        break\n"
            "while True: pass\n")
    before = os.sched_getaffinity(0)
    with worker_account() as (uid, gid):
        os.sched_setaffinity(0, {min(before)})
        try:
            bomb = subprocess.Popen([worker_python(uid), "-c", code], user=uid, group=gid, extra_groups=[],
                                    start_new_session=True)
        finally:
            os.sched_setaffinity(0, before)
        try:
            time.sleep(0.3)  # the children are there
            charge = process_charge(lambda: bomb.pid, uid).baseline()
            account = AccountCPU(uid)
            account.used()
            started = time.monotonic()
            used = 0.0
            # On a busy machine the pinned processes get less of their CPU: watch until they have had
            # half a second of it (the bound below holds whatever the span).
            while used <= 0.5 and time.monotonic() - started < 20:
                time.sleep(0.5)
                used += account.used()  # what they used since the last reading
            charge.recheck()
            span, used = time.monotonic() - started, used + account.used()
        finally:
            os.killpg(bomb.pid, signal.SIGKILL)
            bomb.wait()
    assert used > 0.5, f"the processes hardly ran ({used:.2f} s of CPU in {span:.2f} s)"
    assert charge.credit <= span - used + 0.15, (charge.credit, span, used)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs an account of its own for the process (root)")
def test_what_a_process_of_the_account_used_before_the_count_began_is_not_counted():
    """Another process of the same account (a leftover, a container's with the same uid) that ran
    before: its past CPU is not this count's, or it would take a starved worker's credit away."""
    with worker_account() as (uid, gid):
        earlier = subprocess.Popen([worker_python(uid), "-c", "import time\n_s = time.process_time()\n"
                                    "while time.process_time() - _s < 1: pass\ntime.sleep(30)\n"],
                                   user=uid, group=gid, extra_groups=[])
        try:
            deadline = time.monotonic() + 30
            while (process_cpu_s(earlier.pid) or 0) < 1 and time.monotonic() < deadline:
                time.sleep(0.1)
            count = AccountCPU(uid)
            time.sleep(0.3)
            assert count.used() < 0.1
        finally:
            earlier.kill()
            earlier.wait()


@pytest.mark.unit
def test_a_deadline_never_moves_earlier_and_without_readings_is_the_wall_clock():
    deadline = OwnDeadline(0.2, process_charge(lambda: None))
    assert 0.1 < deadline.left() <= 0.2
    time.sleep(0.25)
    assert deadline.left() <= 0


# -- calls into a worker -----------------------------------------------------------------------------

WORK = '''
import time

def work(seconds):
    """Spend `seconds` of CPU."""
    start = time.process_time()
    n = 0
    while time.process_time() - start < seconds:
        n += 1
    return n > 0

def spin():
    while True:
        pass
'''


def proven_or_skip(worker) -> None:
    """These waits are credited only where a control group counts the gradings' CPU (as root; CI is);
    elsewhere the worker's account's visible CPU counts, which a busy harness may take the credit from."""
    if not worker.charge.proven and os.environ.get("CI") != "true":
        pytest.skip("no control group the harness may make here: a limit moves by its own length at most")


def test_a_call_that_waits_for_a_busy_cpu_is_not_a_timeout_and_an_endless_loop_still_is():
    """A limit moves later by at most its own length (clock.py): 1.2 s of CPU against a limit of 2 s, on
    a CPU shared with a busy process, takes between 2 and 4 s on the wall clock (the grading's control
    group, where the harness makes one, has half of that CPU beside the busy process's group)."""
    limits = Limits(call_timeout_s=2.0, import_timeout_s=5)
    with contention(hogs=1), worker_for(WORK, limits) as worker:
        proven_or_skip(worker)
        work = worker.lookup("work")
        took: list[float] = []
        # 1.2 s of CPU at half of one is over 2 s on the wall clock. What share the grading's group gets
        # depends on the groups beside it on a shared machine: where it got more, more work (still under
        # the limit's CPU) is slowed past it. Every call must finish, slowed or not.
        for seconds in (1.2, 1.6):
            started = time.monotonic()
            assert work(seconds) is True
            took.append(time.monotonic() - started)
            if took[-1] > limits.call_timeout_s:
                break
        assert took[-1] > limits.call_timeout_s, f"the worker was not slowed down ({took} s)"
        started = time.monotonic()
        with pytest.raises(CallTimeout, match=r"spin\(\.\.\.\) did not finish within 2 s"):
            worker.lookup("spin")()
        assert time.monotonic() - started < 2 * limits.call_timeout_s + 1


def test_an_import_that_waits_for_a_busy_cpu_is_not_a_timeout():
    slow_import = "import time\n_s = time.process_time()\nwhile time.process_time() - _s < 0.6:\n    pass\n" \
                  "def ok():\n    return 1\n"
    with contention(hogs=1), worker_for(slow_import, Limits(call_timeout_s=1, import_timeout_s=2.0)) as worker:
        proven_or_skip(worker)
        assert worker.lookup("ok")() == 1


# -- the grader's own processes ----------------------------------------------------------------------

def test_a_zygote_that_cannot_start_is_reported_with_its_log(tmp_path):
    """Its log is removed with the job's folder: what it said is kept in the reason."""
    base = tmp_path
    os.chmod(base, 0o711)
    (base / "pub").mkdir()
    (base / "pub" / "worker.zip").write_bytes(b"")
    (base / "private").mkdir(mode=0o700)
    broken = base / "pub" / "python3"  # an interpreter that says why it cannot start, and ends
    broken.write_text("#!/bin/sh\necho 'Fatal Python error: init_fs_encoding: failed to get the codec' >&2\n"
                      "exit 1\n")
    broken.chmod(0o755)
    job = Job(submission="student.py", module="student", names=[], suites=[], worker_code="pub/worker.zip",
              worker_python=str(broken), isolation="none", private="private")
    confinement = Confinement(job, str(base), 1)
    confinement.load(job.submission, b"x = 1\n")
    pipes = [os.open(os.devnull, os.O_RDWR) for _ in range(3)]
    try:
        with pytest.raises(ZygoteUnavailable):  # gone, or its socket closed or reset, as the race goes
            confinement.fork(env={}, module="student", fds=(pipes[0], pipes[1], pipes[2]))
    finally:
        for fd in pipes:
            os.close(fd)
        confinement.close()
    assert confinement.log_tail() == "Fatal Python error: init_fs_encoding: failed to get the codec"


# -- the grading's time ------------------------------------------------------------------------------

SLEEPER = REFERENCE.read_bytes() + b'''

import time as _time

_plain_init = Scheduler.__init__


def _slow_init(self, token_budget, max_seqs, kv_tokens):
    # The visible tests' schedulers are quick; every other one takes 4.5 s to make.
    if kv_tokens != 10**7:
        _time.sleep(4.5)
    _plain_init(self, token_budget, max_seqs, kv_tokens)


Scheduler.__init__ = _slow_init
'''


@pytest.mark.slow
def test_a_grading_whose_time_runs_out_is_graded_with_what_it_earned(tmp_path):
    exercise = load_exercise(str(exercise_copy(tmp_path, total_timeout_s=8)))
    started = time.monotonic()
    card = grade_bytes(SLEEPER, exercise, "premium", run_local, "local")
    took = time.monotonic() - started
    assert card.status == "graded", card.reason
    by_status: dict[str, list[str]] = {}
    for test in card.tests:
        by_status.setdefault(test.status, []).append(test.message)
    visible = [t for t in card.tests if t.suite == "visible"]
    assert visible and all(t.status == "passed" for t in visible)
    not_run = [m for m in by_status.get("timeout", []) if m == "not run: the grading's time ran out (8 s)"]
    assert not_run, by_status
    assert card.score >= sum(t.max_score for t in visible)
    assert took < 40, took


BUSY_CALLS = REFERENCE.read_bytes() + b'''

import time as _time

_plain_schedule = Scheduler.schedule


def _busy_schedule(self):
    # Correct, and slow on purpose: 10 ms of CPU a step.
    started = _time.process_time()
    while _time.process_time() - started < 0.01:
        pass
    return _plain_schedule(self)


Scheduler.schedule = _busy_schedule
'''


@pytest.mark.slow
def test_correct_code_keeps_full_marks_under_tight_limits_on_a_crowded_cpu(tmp_path):
    """Limits a few times what a correct but slow solution needs (10 ms of CPU a step, 0.1 s a call,
    3 s a test), on a CPU shared with busy processes, where its calls and tests can take longer than
    their limits on the wall clock (up to twice: a limit moves by its own length at most): it still gets
    full marks, the tests whose limits moved saying so."""
    exercise = exercise_copy(tmp_path, call_timeout_s=0.1, test_timeout_s=3)
    submission, result = tmp_path / "scheduler.py", tmp_path / "card.json"
    submission.write_bytes(BUSY_CALLS)
    # A grader of its own, started under the contention: every process of the grading inherits it (one
    # that this process had started before, a waiting sandbox, would not).
    with contention():
        subprocess.run([sys.executable, "-c", "import sys; from grader.__main__ import run; sys.exit(run())",
                        "grade", str(submission), "--exercise", str(exercise), "--tier", "free",
                        "--sandbox", "local", "--json", str(result)], check=True, stdout=subprocess.DEVNULL)
    card = Scorecard.from_dict(json.loads(result.read_text()))
    assert card.status == "graded", card.reason
    assert card.score == card.max_score, [(t.name, t.status, t.message) for t in card.tests if t.status != "passed"]
    # Where a test took longer than its 3 s limit on the wall clock (the contention does not always
    # bite as hard: the scheduler favours processes that wake from a sleep), it was credited the wait.
    # The calls' own crediting is shown above, where the contention is certain.
    for test in card.tests:
        if test.duration_s > 3.2:
            assert test.cpu_wait_s > 0, (test.name, test.duration_s)
