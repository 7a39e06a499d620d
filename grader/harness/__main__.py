"""The harness entry point, inside the sandbox: unpack the job, run its suites, report the results.

    python3 -I -c "<contract.bootstrap(root, 'grader.harness.__main__', 'main')>" BASE

Standard input brings a nonce line and then the job as a tar (see `unpack`). The results go to
standard output as the last line (`contract.results_line`), carrying the nonce: the worker never
sees the harness's standard input or output, so nothing it prints or writes can pass for them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from grader.harness import plugin
from grader.harness.contract import JOB_FILE, Job, results_line
from grader.harness.unpack import unpack


def pytest_arguments(job: Job, base: str) -> list[str]:
    ini = os.path.join(job.at(base, job.private), "pytest.ini")
    # An ini of our own, so no configuration file near the suites (or a submission) can add options.
    with os.fdopen(os.open(ini, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600), "w") as handle:
        handle.write("[pytest]\npython_files = test_*.py\n")
    roots = [job.at(base, suite.path) for suite in job.suites]
    return [
        *roots,
        "-c", ini, "--rootdir", os.path.commonpath(roots),
        "-p", "no:cacheprovider", "-p", "no:stepwise", "-p", "pytest_timeout",
        f"--timeout={job.limits.test_timeout_s:g}",
        "-q", "--no-header", "-p", "no:warnings",
    ]


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 1:
        print("usage: python3 -m grader.harness BASE  (a nonce line, then the job tar, on standard input)",
              file=sys.stderr)
        return 2
    base = str(Path(args[0]).resolve())
    stdin = sys.stdin.buffer
    nonce = stdin.readline().decode("ascii").strip()
    unpack(stdin, Path(base))
    job = Job.from_json(Path(base, JOB_FILE).read_text(encoding="utf-8"))
    harness = plugin.STATE = plugin.HarnessState(job, nonce, base)
    # Everything trusted is loaded before the first worker exists.
    plugin.load_reference(harness)
    code = pytest.main(pytest_arguments(job, base), plugins=[plugin])
    if harness.results is None:
        return int(code) or 3
    sys.stdout.write(f"\n{results_line(harness.results)}\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
