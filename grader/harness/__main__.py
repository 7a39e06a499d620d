"""The harness entry point, inside the sandbox: run the job's suites and write the results.

    python3 -I -c "<bootstrap>" JOB.json      (the run's nonce arrives on standard input)

The nonce proves to the host that the results file was written by this process: the worker never sees
standard input, so a file it forges cannot carry it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from grader.harness import plugin
from grader.harness.job import Job

BOOTSTRAP = "import sys; sys.path.insert(0, {root!r}); from grader.harness.__main__ import main; sys.exit(main())"


def pytest_arguments(job: Job) -> list[str]:
    ini = Path(job.private) / "pytest.ini"
    # An ini of our own, so no configuration file near the suites (or a submission) can add options.
    ini.write_text("[pytest]\npython_files = test_*.py\n", encoding="utf-8")
    roots = [suite.path for suite in job.suites]
    return [
        *roots,
        "-c", str(ini), "--rootdir", os.path.commonpath(roots),
        "-p", "no:cacheprovider", "-p", "no:stepwise", "-p", "pytest_timeout",
        f"--timeout={job.limits.test_timeout_s:g}",
        "-q", "--no-header", "-p", "no:warnings",
    ]


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 1:
        print("usage: python3 -m grader.harness JOB.json  (the nonce on standard input)", file=sys.stderr)
        return 2
    job = Job.load(args[0])
    nonce = sys.stdin.readline().strip()
    plugin.STATE = plugin.HarnessState(job, nonce)
    code = pytest.main(pytest_arguments(job), plugins=[plugin])
    return 0 if Path(job.results).exists() else int(code) or 3


if __name__ == "__main__":
    sys.exit(main())
