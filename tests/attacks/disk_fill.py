"""Writes one huge file into every folder it can name (cwd, /tmp, HOME, ...), then answers wrongly.
expect: failed, timeout, crashed

SIGXFSZ is ignored so a file-size limit shows up as EFBIG and the worker carries on to the next
folder; a full tmpfs shows up as ENOSPC. The grader must stay able to write its own scorecard, and
the host disk must be untouched. The file name is fixed, so repeated tests overwrite rather than
add up; each file stops at 1 GiB even where no limit exists (a courtesy to the machine running
the attack suite, far above any sane limit).
"""

import os
import signal
import tempfile
from collections import deque

CHUNK = b"\0" * (1 << 20)
CAP = 1 << 30


def _fill():
    try:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    except (OSError, ValueError, AttributeError):
        pass
    here = os.path.dirname(os.path.abspath(__file__))
    folders = [os.getcwd(), here, "/tmp", tempfile.gettempdir(), "/var/tmp", "/dev/shm",
               os.path.expanduser("~"), "/job", "/work"]
    for d in dict.fromkeys(folders):
        try:
            with open(os.path.join(d, ".student-disk-fill"), "wb", buffering=0) as f:
                written = 0
                while written < CAP:
                    written += f.write(CHUNK)
        except OSError:
            pass  # EFBIG, ENOSPC, EACCES, EROFS: on to the next folder
    try:  # and inodes: many empty files in the working folder
        for i in range(20000):
            open(f".student-inode-{i}", "wb").close()
    except OSError:
        pass


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
        _fill()
        return [("disk full", 0)]  # n = 0 is never a valid entry

    def complete(self, plan):
        _fill()
        return [-1]
