"""The harness entry point, inside the sandbox: unpack the job, run its suites, report the results.

    python3 -I -c "<bootstrap>" BASE

Standard input brings a nonce line and then the job as a tar (see `unpack`). The results go to
standard output as the last line, `GRADER-RESULTS <base64 JSON>`, carrying the nonce: the worker
never sees the harness's standard input or output, so nothing it prints or writes can pass for them.
"""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path

import pytest

from grader.harness import plugin
from grader.harness.job import Job
from grader.harness.unpack import unpack

BOOTSTRAP = "import sys; sys.path.insert(0, {root!r}); from grader.harness.__main__ import main; sys.exit(main())"
RESULTS_MARKER = "GRADER-RESULTS"
JOB_FILE = "secret/job.json"


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
        print("usage: python3 -m grader.harness BASE  (a nonce line, then the job tar, on standard input)",
              file=sys.stderr)
        return 2
    base = Path(args[0])
    stdin = sys.stdin.buffer
    nonce = stdin.readline().decode("ascii").strip()
    unpack(stdin, base)
    job = Job.load(base / JOB_FILE)
    plugin.STATE = plugin.HarnessState(job, nonce)
    code = pytest.main(pytest_arguments(job), plugins=[plugin])
    results = Path(job.results)
    if not results.exists():
        return int(code) or 3
    sys.stdout.write(f"\n{RESULTS_MARKER} {base64.b64encode(results.read_bytes()).decode()}\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
