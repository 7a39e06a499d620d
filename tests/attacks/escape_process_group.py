"""Leaves daemons behind (new session, signals ignored, pipes held open); answers wrongly.
expect: failed, timeout, error

In schedule() the worker double-forks a daemon that calls setsid() (so killing the worker's process
group misses it), ignores every catchable signal, keeps every inherited file descriptor open (so
a harness that waits for EOF on the worker's pipes never gets it) and spawns a few more such
processes to eat the pids limit the next test's worker needs. The call itself returns a wrong plan.
The grader must still finish in bounded time, run the next tests and leave no process behind
(Docker: the container goes; local backend: everything of the worker's uid or cgroup is killed).
Courtesy for the machine running the attack suite: the daemons exit by themselves after 10 minutes.
"""

import os
import signal
import time
from collections import deque

LIFETIME_S = 600


def _daemon_body():
    os.setsid()                                   # new session and process group
    for sig in signal.valid_signals():
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            try:
                signal.signal(sig, signal.SIG_IGN)
            except (OSError, ValueError):
                pass
    for _ in range(16):                           # a few siblings to eat the pids limit
        try:
            if os.fork() == 0:
                break
        except OSError:
            break
    end = time.monotonic() + LIFETIME_S
    while time.monotonic() < end:                 # hold the inherited fds; wake up now and then
        time.sleep(0.5)
    os._exit(0)


def _leave_daemons():
    try:
        pid = os.fork()
    except OSError:
        return
    if pid == 0:                                  # child: fork the daemon, then vanish
        try:
            if os.fork() == 0:
                _daemon_body()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)                            # the daemon is now an orphan, reparented away


class Req:
    def __init__(self, rid, prompt_len, max_new, prefilled=0, generated=0):
        self.rid, self.prompt_len, self.max_new = rid, prompt_len, max_new
        self.prefilled, self.generated = prefilled, generated


class Scheduler:
    def __init__(self, token_budget, max_seqs, kv_tokens):
        self.waiting, self.running = deque(), []

    def add(self, req):
        self.waiting.append(req)  # never rejects an impossible request

    def schedule(self):
        _leave_daemons()
        return [("not a request", 0)]  # n = 0 is never a valid entry

    def complete(self, plan):
        _leave_daemons()
        return [-1]
