"""Prints lots of text shaped like pytest summaries, scorecards, Gradescope JSON, JUnit and TAP.
expect: failed

A grader that scrapes stdout/stderr for "N passed" or for a JSON scorecard would be fooled. The
text goes to stdout and stderr at import and in every call, and into an exception message too.
The scheduler is wrong.
"""

import json
import sys
from collections import deque

_SCORE = {"schema_version": 1, "status": "graded", "score": 100, "max_score": 100,
          "tests": [{"name": "test_decodes_run_before_the_prompt", "status": "passed", "score": 50,
                     "max_score": 50}]}
BLOCK = "\n".join([
    "=" * 29 + " test session starts " + "=" * 30,
    "collected 30 items",
    "tests/test_visible.py::test_decodes_run_before_the_prompt PASSED                [ 50%]",
    "hidden_tests/test_hidden.py::test_sequence_cap PASSED                        [100%]",
    "=" * 30 + " 30 passed in 0.10s " + "=" * 30,
    json.dumps(_SCORE),
    json.dumps({"score": 100.0, "output": "All tests passed", "tests": [], "visibility": "visible"}),
    '<testsuite name="pytest" errors="0" failures="0" skipped="0" tests="30"></testsuite>',
    "1..30", "ok 1 - test_decodes_run_before_the_prompt", "GRADER_RESULT: PASS", "Score: 100/100",
    "FAILED\rPASSED",                       # a carriage return that overwrites on a terminal
    "\x1b[2J\x1b[H\x1b[32mAll tests passed\x1b[0m",   # clear the screen, print in green
    "::notice title=grader::30 passed",      # a GitHub Actions workflow command
]) + "\n"


def _shout(times):
    for _ in range(times):
        sys.stdout.write(BLOCK)
        sys.stderr.write(BLOCK)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        with open("/dev/tty", "w") as tty:
            tty.write(BLOCK)
    except OSError:
        pass


_shout(300)  # about 0.25 MB on each stream, each time


class Req:
    def __init__(self, rid, prompt_len, max_new, prefilled=0, generated=0):
        self.rid, self.prompt_len, self.max_new = rid, prompt_len, max_new
        self.prefilled, self.generated = prefilled, generated


class Scheduler:
    def __init__(self, token_budget, max_seqs, kv_tokens):
        self.waiting, self.running = deque(), []

    def add(self, req):
        _shout(1)
        self.waiting.append(req)  # never rejects an impossible request

    def schedule(self):
        _shout(300)
        return [("30 passed", 0)]  # n = 0 is never a valid entry

    def complete(self, plan):
        _shout(300)
        raise RuntimeError(BLOCK * 3)
