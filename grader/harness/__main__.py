"""The harness entry point, inside the sandbox: unpack the job, run its suites, report the results.

    python3 -I -c "<contract.bootstrap(root, 'grader.harness.__main__', 'main')>" BASE [--fork-server FD]

Standard input brings the job (a tar, see `unpack`), then, possibly much later, the run: the nonce,
the seed and the submission (see `contract.Job`). In between, the harness gets ready: it imports the
reference, starts the worker's confinement and lets pytest collect the tests. The results go to
standard output as the last line (`contract.results_line`), carrying the nonce: the worker never
sees the harness's standard input or output, so nothing it prints or writes can pass for them.

With `--fork-server FD` the harness is a fork server (see `forkserver`): once the tests are collected it forks
a harness per grading ordered on the socket FD, each with its own input and output.
"""

from __future__ import annotations

import gc
import io
import os
import sys
from pathlib import Path

import pytest
import pytest_timeout

from grader.confined.forking import INPUT_CLOSED, end_with_parent
from grader.harness import plugin, state
from grader.harness.bytecode import install_bytecode
from grader.harness.contract import JOB_FILE, TEST_FILES, Job, read_input_frame, results_line
from grader.harness.unpack import unpack

GC_YOUNG_THRESHOLD = 20_000  # new container objects between collections (Python's default: 700)


def pytest_arguments(job: Job, base: str) -> list[str]:
    ini = os.path.join(job.at(base, job.private), "pytest.ini")
    # An ini of our own, so no configuration file near the suites (or a submission) can add options.
    with os.fdopen(os.open(ini, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600), "w") as handle:
        handle.write(f"[pytest]\npython_files = {TEST_FILES}\n")
    roots = [job.at(base, suite.path) for suite in job.suites]
    return [
        *roots,
        "-c", ini, "--rootdir", os.path.commonpath(roots),
        "-p", "no:cacheprovider", "-p", "no:stepwise",
        f"--timeout={job.limits.test_timeout_s:g}",  # pytest-timeout's option: the plugin comes with `main`
        "-q", "--no-header", "-p", "no:warnings",
        # No tracebacks or summary of failures for a terminal nobody reads: the results line carries them.
        "--tb=no", "-rN",
        # Capture at the level of sys.stdout only: a fork server's child points descriptors 1 and 2 at its
        # own output, which descriptor-level capture (holding copies of the fork server's) would undo.
        "--capture=sys",
        # Its session-end check runs full garbage collections over everything the run made, a cost that
        # grows with a scenario's size, to report exceptions no test would see; the results don't use it.
        "-p", "no:unraisableexception",
    ]


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    fork_server: int | None = None
    if len(args) == 3 and args[1] == "--fork-server" and args[2].isdigit():
        fork_server, args = int(args[2]), args[:1]
    if len(args) != 1:
        print("usage: python3 -m grader.harness BASE [--fork-server FD]  (the job, then the run, on standard input)",
              file=sys.stderr)
        return 2
    end_with_parent()  # a host killed outright takes this harness (and a fork server's gradings) along
    base = str(Path(args[0]).resolve())
    # A descriptor of our own for the input: pytest points descriptor 0 at /dev/null while it runs.
    stdin = os.fdopen(os.dup(0), "rb")
    try:
        unpack(io.BytesIO(read_input_frame(stdin)), Path(base))
    except EOFError:
        return INPUT_CLOSED  # closed before a job came: a warm sandbox that was never used
    install_bytecode(base)  # the suites' modules, compiled by the host, where pytest and Python look first
    job = Job.from_json(Path(base, JOB_FILE).read_text(encoding="utf-8"))
    harness = state.HarnessState(job, base, stdin, fork_server)
    # Everything trusted is loaded before the first worker exists.
    state.load_reference(harness)
    gc.freeze()  # pytest, the harness and the reference stay for the whole run: no full collection walks them
    if fork_server is None:  # a fork server's children each start their own confinement
        harness.pool.warm_up()
        # The other lanes' too, beside the collection: each lane is forked once the tests are collected,
        # and takes its own over (see `lanes`).
        harness.pool.start_for_lanes(job.lane_accounts)
    # A run's tests make values by the hundred thousand (a crowd's observations, many steps long) that live
    # until their test ends and are freed by reference counting: collecting every 700 new objects walked
    # them again and again (docs/benchmarks.md). Cycles are still collected, just less often.
    gc.set_threshold(GC_YOUNG_THRESHOLD, 10, 10)
    # pytest-timeout is handed over as the module it is: named with -p, pytest would first look for it
    # among the entry points of every installed distribution.
    code = pytest.main(pytest_arguments(job, base), plugins=[plugin.GradingPlugin(harness), pytest_timeout])
    if harness.results is None:
        return int(code) or 3
    sys.stdout.write(f"\n{results_line(harness.results)}\n")
    sys.stdout.flush()
    # The confinement ended with the session and the results are out: leave without the interpreter's
    # teardown of every module and object of the run, which the host would otherwise wait for.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
