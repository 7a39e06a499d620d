"""Fills every writable place it can name (/tmp, /dev/shm, /, /dev, its folder) with files under the file-size limit.
expect: failed

Each file stays below the file-size limit (8 MiB each), so only the size of the file system can stop
the fill. The files sit outside the worker's own folder, so they outlive the test that wrote them and
every later test of the grading meets a full /tmp. The failure message says how much each place took
and why it stopped ("FILL /tmp 64 MiB: No space left on device"). The fill stops at 256 MiB a place
even where nothing else would stop it (a courtesy to the machine running the attack suite).
"""

import os
from collections import deque

CHUNK = b"\1" * (1 << 20)
PER_FILE_MB = 8
CAP_MB = 256


def _fill_one(folder):
    written = 0
    why = f"stopped at the {CAP_MB} MiB courtesy cap"
    try:
        for number in range(CAP_MB // PER_FILE_MB):
            with open(os.path.join(folder, f".student-tmpfs-fill-{number}"), "wb", buffering=0) as handle:
                for _ in range(PER_FILE_MB):
                    handle.write(CHUNK)
                    written += 1
    except OSError as exc:
        why = exc.strerror
    return f"FILL {folder} {written} MiB: {why}"


def _fill():
    raise RuntimeError("; ".join(_fill_one(folder) for folder in ("/tmp", "/dev/shm", "/", "/dev", os.getcwd())))


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

    def complete(self, plan):
        _fill()
