"""Earns "the machine was busy" credit on purpose: its own spinners keep the CPUs from its calls.
expect: timeout, failed

schedule() lowers its own thread's priority to nice 19 and does 1 s of work, while helper threads
keep forking short spinner processes at nice 0 with SIGCHLD ignored, so that the kernel reaps them and
their CPU reaches no process's counters in /proc. The answering thread then mostly waits for a CPU
(the call takes tens of seconds), and a grader that credits every wait as another's load lets it run
on for many times its limit. The wait is the submission's own doing: the call must time out as it
would were that work its own, and the grading end in its usual time. (A call let through returns an
empty plan: the test fails. Where the helpers cannot keep its thread from a CPU, that is all.)
"""

import os
import signal
import threading
import time
from collections import deque

_helpers = []


def _spinners():
    while True:
        try:
            pid = os.fork()
        except OSError:
            time.sleep(0.01)
            continue
        if pid == 0:
            end = time.monotonic() + 0.04
            while time.monotonic() < end:
                pass
            os._exit(0)
        time.sleep(0.035)


def _hold_the_cpus():
    if not _helpers:
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps them: no CPU reaches the parent
        for _ in range(2 * (os.cpu_count() or 2)):
            thread = threading.Thread(target=_spinners, daemon=True)
            thread.start()
            _helpers.append(thread)
    os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    start = time.thread_time()
    while time.thread_time() - start < 1.0:
        pass


class Req:
    def __init__(self, rid, prompt_len, max_new, prefilled=0, generated=0):
        self.rid, self.prompt_len, self.max_new = rid, prompt_len, max_new
        self.prefilled, self.generated = prefilled, generated


class Scheduler:
    def __init__(self, token_budget, max_seqs, kv_tokens):
        self.waiting, self.running = deque(), []

    def add(self, req):
        self.waiting.append(req)

    def schedule(self):
        _hold_the_cpus()
        return []

    def complete(self, plan):
        return []
