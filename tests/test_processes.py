"""The tests' own clean-up (tests/processes.py): what a test started ends with it, and is looked for."""

from __future__ import annotations

import subprocess
import sys

from tests.processes import Started, descendants

# A process that starts a child in a session of its own (as a sandbox does), says so, then waits.
PARENT = """
import signal, subprocess, sys, time
if sys.argv[1] == "ignore":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
print("ready", flush=True)
time.sleep(120)
"""


def start(how: str) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", PARENT, how], stdout=subprocess.PIPE, text=True,
                               start_new_session=True)
    assert process.stdout is not None and process.stdout.readline() == "ready\n"
    return process


def test_a_process_that_ignores_sigterm_is_killed_with_what_it_started_and_reported():
    started = Started(grace_s=1)
    stubborn = start("ignore")
    tree = descendants([stubborn.pid])
    assert len(tree) == 2
    started.track("stubborn", stubborn)
    assert started.close() == [f"stubborn (pid {stubborn.pid}) did not stop within 1 s of signal SIGTERM: killed"]
    assert not any(each.alive() for each in tree)


def test_a_child_left_behind_by_a_process_that_stopped_is_killed_and_reported():
    started = Started(grace_s=5)
    parent = start("obey")
    (child,) = [each for each in descendants([parent.pid]) if each.pid != parent.pid]
    started.track("parent", parent)
    problems = started.close()
    assert len(problems) == 1 and problems[0].startswith(f"pid {child.pid} (") and "outlived its parent" in problems[0]
    assert not child.alive()


def test_the_killing_reaches_only_the_processes_the_test_started():
    started = Started(grace_s=1)
    mine = start("ignore")
    other = start("ignore")  # started, but not tracked: not the clean-up's to end
    try:
        started.track("mine", mine)
        started.kill("mine")
        assert mine.poll() is not None
        assert all(each.alive() for each in descendants([other.pid])) and len(descendants([other.pid])) == 2
        assert started.close() == []
    finally:
        spare = Started(grace_s=1)
        spare.track("other", other)
        spare.close()


def test_wait_for_any_wakes_when_one_ends_and_not_before():
    import time

    from grader.confined.processes import wait_for_any

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    quick = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    try:
        started = time.monotonic()
        wait_for_any([sleeper.pid, quick.pid], 30)  # woken by the quick one's end, long before 30 s
        assert quick.poll() is not None and sleeper.poll() is None
        assert time.monotonic() - started < 20
        started = time.monotonic()
        wait_for_any([sleeper.pid], 0.2)  # none ends: the timeout
        assert time.monotonic() - started >= 0.2 and sleeper.poll() is None
        quick.wait()
        started = time.monotonic()
        wait_for_any([quick.pid, sleeper.pid], 30)  # one cannot be watched (reaped already): at once
        assert time.monotonic() - started < 20
    finally:
        sleeper.kill()
        sleeper.wait()
