"""The floor every grading benchmark prints beside its cases: the tests' own work, in one warm process.

The suites are collected once; each submission is imported once (for every test that asks for it) and
its tests are set up, called and torn down directly, with the seed the grader gives that submission.
No Python start, no pytest session, no reporting: what any way of grading must spend at the least.
Each submission is run twice and the second run is counted, so imports and caches are warm.

    python -m benchmarks.floor --exercise continuous_batching --tier premium FILE [FILE ...]

prints one JSON object: the CPU seconds (this process's own) and wall seconds of each file's counted
run, and the number of tests.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from pathlib import Path

import pytest
from _pytest.runner import runtestprotocol

import grader.harness.inprocess as inprocess
from grader.core.exercise import load_exercise
from grader.core.seeding import seed_for_source

ROOT = Path(__file__).resolve().parent.parent


class Floor:
    """A pytest plugin that takes over the test loop: every file's tests, twice, the second counted."""

    def __init__(self, files: list[Path], exercise) -> None:
        self.files, self.exercise = files, exercise
        self.cpu_s: dict[str, float] = {}
        self.wall_s: dict[str, float] = {}
        self.tests = 0

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        items = list(session.items)
        self.tests = len(items)
        for item in items:
            # A failure's report for a terminal (its traceback, each frame's source read again) is
            # presentation, not the tests' work: every grader may leave it out, as the harness does.
            item.repr_failure = _unpresented  # type: ignore[method-assign]
        for path in self.files:
            os.environ["GRADER_SUBMISSION"] = str(path)
            os.environ["GRADER_SEED"] = str(seed_for_source(path.read_bytes(), self.exercise))
            for counted in (False, True):
                started, began = time.process_time(), time.perf_counter()
                for item in items:
                    runtestprotocol(item, nextitem=None, log=False)
                if counted:
                    self.cpu_s[str(path)] = time.process_time() - started
                    self.wall_s[str(path)] = time.perf_counter() - began
        return True


def _unpresented(excinfo: object, style: object = None) -> str:
    return "failed"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exercise", default="continuous_batching")
    parser.add_argument("--tier", default="premium")
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args()
    missing = [str(path) for path in args.files if not path.is_file()]
    if missing:
        raise SystemExit(f"no such file: {', '.join(missing)}")
    exercise = load_exercise(args.exercise, ROOT)
    os.environ["GRADER_REFERENCE"] = str(exercise.reference)
    # Imported once per file and name, not once per test: the submission's import is not the tests' work.
    inprocess.load_module = functools.lru_cache(maxsize=None)(inprocess.load_module)  # type: ignore[assignment]
    plugin = Floor([path.resolve() for path in args.files], exercise)
    suites = [str(spec.path) for spec in exercise.suites_for(args.tier)]
    with open(os.devnull, "w") as quiet:
        stdout, sys.stdout = sys.stdout, quiet
        try:
            pytest.main(["-q", "-p", "grader.harness.inprocess", "-p", "no:cacheprovider", "-c", os.devnull,
                         "--rootdir", str(ROOT), *suites], plugins=[plugin])
        finally:
            sys.stdout = stdout
    if plugin.tests == 0 or len(plugin.cpu_s) != len(args.files):
        raise SystemExit(f"the floor ran {plugin.tests} tests for {len(plugin.cpu_s)} of {len(args.files)} files")
    print(json.dumps({"cpu_s": plugin.cpu_s, "wall_s": plugin.wall_s, "tests": plugin.tests}))


if __name__ == "__main__":
    main()
