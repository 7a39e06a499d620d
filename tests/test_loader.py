"""The loader: later tests' workers are forked from one import of the submission, when that import left
nothing a fork would not carry over; otherwise every worker imports it, as a fresh interpreter would."""

from __future__ import annotations

import time

import pytest

from grader.harness.client import WorkerCrashed
from grader.harness.confine import ZygoteUnavailable
from tests.helpers import confinement_for

WORKERS = 6  # the zygote forks the first two itself; on a quiet machine a loader is ready before the sixth

WHERE = '''
import os

IMPORTED_IN = os.getpid()
COUNT = [0]


def imported_here():
    return IMPORTED_IN == os.getpid()


def bump():
    COUNT[0] += 1
    return COUNT[0]


def end_parent():
    os.kill(os.getppid(), 9)
'''


def test_later_workers_are_forked_from_one_import_and_each_starts_from_its_state():
    with confinement_for(WHERE) as (_, spawn):
        forked: list[bool] = []
        # The loader gets ready in the background: on a busy machine later, never not at all. Workers are
        # asked for until one is forked from it (each asked for meanwhile imports the submission afresh).
        deadline = time.monotonic() + 120
        while len(forked) < WORKERS or not forked[-1]:
            assert time.monotonic() < deadline, f"no worker was forked from the loader: {forked}"
            client = spawn()
            forked.append(not client.lookup("imported_here")())
            # The module's state is the import's in every worker, whatever an earlier test did to it.
            assert client.lookup("bump")() == 1
            client.close()
            if len(forked) >= WORKERS and not forked[-1]:
                time.sleep(0.2)
    assert forked[:2] == [False, False]
    assert forked[-1], forked


# Imports that a forked worker would not see as a fresh import leaves them: each worker imports these.
UNCLEAN = {
    "a thread": '''
import threading, time
_ticks = [0]
def _tick():
    while True:
        _ticks[0] += 1
        time.sleep(0.001)
threading.Thread(target=_tick, daemon=True).start()
def works():
    before = _ticks[0]
    time.sleep(0.05)
    return _ticks[0] > before
''',
    "a timer": '''
import signal
_fired = []
signal.signal(signal.SIGALRM, lambda *_: _fired.append(1))
signal.setitimer(signal.ITIMER_REAL, 0.01)
def works():
    import time
    time.sleep(0.05)
    return bool(_fired)
''',
    "an open file": '''
import os
_log = open(os.path.join(os.environ["HOME"], "log.txt"), "w+")
def works():
    _log.write("x")
    _log.flush()
    _log.seek(0)
    return _log.read() == "x"
''',
    "output": '''
print("hello from the import")
def works():
    return True
''',
    "a rebound standard function": '''
import os
_fork = os.fork
os.fork = lambda: _fork()
def works():
    return True
''',
}


@pytest.mark.parametrize("what", sorted(UNCLEAN))
def test_an_import_that_leaves_something_behind_is_made_by_every_worker(what):
    source = ("import os\nIMPORTED_IN = os.getpid()\ndef imported_here():\n    return IMPORTED_IN == os.getpid()\n"
              + UNCLEAN[what])
    with confinement_for(source) as (_, spawn):
        for _ in range(WORKERS):
            client = spawn()
            assert client.lookup("works")() is True
            assert client.lookup("imported_here")() is True
            if what == "output":
                assert "hello from the import" in client.output_tail(1000)[0]
            client.close()


def test_a_worker_that_ends_its_loader_leaves_the_confinement_working():
    with confinement_for(WHERE) as (confinement, spawn):
        deadline = time.monotonic() + 120  # the loader is ready in the background: later on a busy machine
        asked = 0
        while True:
            client = spawn()
            asked += 1
            if not client.lookup("imported_here")():
                break
            client.close()
            assert time.monotonic() < deadline, "no worker was forked from a loader"
            if asked >= WORKERS:
                time.sleep(0.2)
        try:
            client.lookup("end_parent")()
        except WorkerCrashed:
            pass  # a worker ends with the loader it was forked from, before or after it answers
        client.close()
        assert not confinement.broken, "the worker's end was not reported"
        for _ in range(3):  # the zygote forks the next ones itself
            client = spawn()
            assert client.lookup("imported_here")() is True
            assert client.lookup("bump")() == 1
            client.close()
        assert not confinement.broken


# An import the loader cannot see through (a method of a class, not a module's function, rebound): the
# loader hangs on its first fork order. Its workers never call that method.
HANGS_THE_LOADER = WHERE + '''
import socket, time
_send = socket.socket.send
def _send_slowly(self, data, *args):
    if b'"pid"' in bytes(data):
        time.sleep(30)
    return _send(self, data, *args)
socket.socket.send = _send_slowly
'''


def test_a_loader_that_does_not_fork_costs_its_confinement_not_the_running_test():
    with confinement_for(HANGS_THE_LOADER) as (confinement, spawn):
        running = spawn()
        deadline = time.monotonic() + 120  # the loader is ready (and then hangs) later on a busy machine
        with pytest.raises(ZygoteUnavailable, match="refused"):
            for asked in range(10_000):
                following = spawn()
                running.close()
                running = following
                assert time.monotonic() < deadline, "no fork order ever went to the loader"
                if asked >= WORKERS:
                    time.sleep(0.2)
        # The order went to a loader that never answered: the zygote refused it rather than hand its
        # pipes to another worker, and the confinement is to be replaced. The test running meanwhile
        # was not touched.
        assert confinement.broken
        assert running.lookup("bump")() == 1


def test_a_spares_fork_is_answered_when_its_pid_is_first_needed():
    """A spare worker is ordered while a test runs and the zygote's answer read only when it is needed:
    here while the running worker's end is awaited, the answer arriving first."""
    with confinement_for(WHERE) as (confinement, spawn):
        running = spawn()
        spare = spawn(wait=False)
        assert spare.process._pid is None and confinement.forking == [spare.process]  # nothing read yet
        running.close()  # awaits the zygote's note of its end, which comes after the spare's answer
        assert confinement.forking == [] and spare.process._pid is not None
        spare.wait_ready()
        assert spare.lookup("bump")() == 1
        spare.close()
        assert not confinement.broken


class _Gone:
    """A confinement whose zygote no longer answers."""

    broken, namespaced = False, True

    def _next(self, deadline):
        raise ZygoteUnavailable("the zygote closed its socket")

    def kill(self, pid):
        raise AssertionError("a fork that never happened has nothing to kill")


@pytest.mark.unit
@pytest.mark.parametrize("answer", [{"refused": "the loader did not fork"}, None])
def test_a_spare_whose_fork_was_refused_or_never_answered_is_ended_as_killed(answer):
    from grader.confined import control
    from grader.harness.confine import ForkedProcess

    process = ForkedProcess(_Gone())
    if answer is not None:
        process.answered({control.REFUSED: answer["refused"]})
    with pytest.raises(ZygoteUnavailable, match="refused" if answer else "closed its socket"):
        process.resolve()
    assert process.confinement.broken
    process.kill()  # nothing to kill, nothing raised
    assert process.poll() == process.wait() == -9 and process.seen_as() is None
