"""Leaves a non-daemon spinning thread and a daemon thread spraying garbage on fds 0-20.
expect: failed, error, timeout

The non-daemon thread keeps the interpreter from ever exiting on its own (a worker that waits for a
clean exit hangs). The daemon thread writes binary garbage and fake length prefixes to fds 0-20
all the time, so it may corrupt the worker's protocol pipe mid-message. The answers are wrong.
"""

import os
import threading
import time
from collections import deque

_started = False


def _spin():
    while True:
        pass


def _spray():
    junk = b"\xff\xff\xff\x7f" + os.urandom(4096) + b'\n{"ok": true, "value": 448}\n'
    while True:
        for fd in range(21):
            try:
                os.write(fd, junk)
            except OSError:
                pass
        time.sleep(0.001)


def _start_threads():
    global _started
    if not _started:
        _started = True
        threading.Thread(target=_spin, daemon=False).start()
        threading.Thread(target=_spray, daemon=True).start()


class Req:
    def __init__(self, rid, prompt_len, max_new, prefilled=0, generated=0):
        self.rid, self.prompt_len, self.max_new = rid, prompt_len, max_new
        self.prefilled, self.generated = prefilled, generated


class Scheduler:
    def __init__(self, token_budget, max_seqs, kv_tokens):
        self.waiting, self.running = deque(), []

    def add(self, req):
        _start_threads()
        self.waiting.append(req)  # never rejects an impossible request

    def schedule(self):
        _start_threads()
        return [(r, 0) for r in self.waiting] or [("not a request", 0)]  # n = 0 is never valid

    def complete(self, plan):
        return [-1]
