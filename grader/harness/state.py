"""One grading run's state in the harness: its job, the tests' records, the workers' pool, the run's
arrival and time budget, and its life as a fork server's child or a lane's helper.

The plugin's fixtures and hooks (`plugin`) share it; `__main__` makes it and imports the reference into
it before any worker exists.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import resource
import sys
from pathlib import Path
from types import ModuleType
from typing import BinaryIO

import pytest

from grader.confined.clock import OwnDeadline, own_charge
from grader.confined.forking import INPUT_CLOSED, PR_SET_DUMPABLE, end_with_input, prctl
from grader.harness import forkserver, lanes
from grader.harness.contract import Job, MutantRun, Results, Run, Suite, TestRecord, read_input_frame
from grader.harness.pool import WorkerPool

# The trusted harness's own address space. With the protocol's bounds it needs a small part of it; the
# limit makes sure no submission can make it take the machine's (or the container's) memory instead.
HARNESS_MEMORY_MB = 1024

SUITE = pytest.StashKey[str]()  # a collected test's suite, found once at collection


class HarnessState:
    """Everything the fixtures and hooks share during one grading run."""

    def __init__(self, job: Job, base: str, stdin: BinaryIO | None = None, fork_server: int | None = None) -> None:
        self.job = job
        self.base = base
        self.stdin = stdin  # where the run (nonce, seed, submission) arrives, once the tests are collected
        self.fork_server = fork_server  # a fork server's control socket: fork a harness per grading (see `fork_server`)
        self.nonce: str | None = None
        self.trace_lines = False  # the run asks each test's lines of the submission (an audit's, of a correct solution)
        self.mutant_run: MutantRun | None = None  # an audit's grading of a generated mutant (`contract.MutantRun`)
        self.records: dict[str, TestRecord] = {}
        self.problems: list[str] = []  # collection errors and the like: the run cannot be vouched for
        self.lanes = lanes.Lanes()  # this process's part in the grading's lanes (see `lanes`)
        self.report = lanes.LaneReport()  # the tests this lane recorded without running
        self.pool = WorkerPool(job, base, self.problems, self.lanes.pids)
        self.reference_module: ModuleType | None = None
        self.results: Results | None = None  # what the run hands back, once it is over
        self.suite_by_file: dict[str, Suite | None] = {}  # see `suite`
        # The grading's time (exercise.toml's total_timeout_s), on the charged clock of this harness and its
        # workers, from the run's arrival: once it is spent, the tests left are not run (see `budget_left`).
        self.budget: OwnDeadline | None = None
        self.workers = WorkersCharge(self.pool)
        limit_own_memory(HARNESS_MEMORY_MB)
        # Same-user workers (non-root local runs) must not reach into this process through /proc.
        prctl(PR_SET_DUMPABLE, 0)

    def path(self, relative: str) -> str:
        return self.job.at(self.base, relative)

    def suite(self, path: Path) -> Suite | None:
        """The job's suite that holds the test file `path` (found once a file: a file's tests share it)."""
        key = str(path)
        if key not in self.suite_by_file:
            self.suite_by_file[key] = None
            resolved = path.resolve()
            for suite in self.job.suites:
                if resolved.is_relative_to(Path(self.path(suite.path)).resolve()):
                    self.suite_by_file[key] = suite
                    break
        return self.suite_by_file[key]

    def suite_of(self, path: Path) -> str:
        suite = self.suite(path)
        return suite.name if suite else "unknown"

    def suite_name(self, item: pytest.Item) -> str:
        """The suite of a collected test, as found once at collection (no path resolved per test)."""
        return item.stash.get(SUITE, None) or self.suite_of(Path(str(item.fspath)))

    def suite_of_item(self, item: pytest.Item) -> Suite | None:
        name = self.suite_name(item)
        return next((suite for suite in self.job.suites if suite.name == name), None)

    def details(self, suite_name: str) -> bool:
        """Whether a failure in this suite may show its assertion's expression (unknown: no)."""
        return any(suite.details for suite in self.job.suites if suite.name == suite_name)

    def receive_run(self) -> None:
        """Wait for the submission (a warm sandbox waits here, its tests collected) and hand it on.
        A fork server forks here instead, and each child goes on as the harness of one grading."""
        if self.fork_server is not None:
            self.become(forkserver.serve(self.fork_server))
        if self.nonce is not None or self.stdin is None:
            return
        try:
            frame = read_input_frame(self.stdin)
            run = Run.from_json(frame.decode("utf-8"))
            source = read_input_frame(self.stdin)
        except (EOFError, ValueError, KeyError, TypeError):
            # No submission will come (the pool that started this sandbox was closed): leave quietly.
            self.pool.end_confinement()
            os._exit(INPUT_CLOSED)
        self.nonce, self.job.seed, self.trace_lines = run.nonce, run.seed, run.trace_lines
        self.mutant_run = run.mutant_run
        self.start_budget()
        if self.job.isolation == "container":
            # The host holds a container's input open until the grading ends; it closes early only when
            # the host is gone, and then nobody waits for this grading.
            end_with_input(self.stdin)
        self.pool.load(source)

    def caught_by_name(self) -> bool:
        """Whether a mutant's run (`contract.MutantRun`) that stops at a catch has one: a test of this lane
        that does not draw from the seed caught the mutant, and the tests left need not run."""
        run = self.mutant_run
        return run is not None and run.stop_at_catch and any(map(run.settled, self.records.values()))

    def start_budget(self) -> None:
        """The grading's time, from now, on this lane's charged clock."""
        # It moves later by at most its own length: whatever a submission does to the readings, a grading
        # ends (graded) within twice its time, well before the host's last resort (`Limits.hard_stop_s`).
        total = self.job.limits.total_timeout_s
        self.budget = OwnDeadline(total, own_charge(self.pool.cpu_count()), self.workers, most=total)

    def become(self, order: forkserver.Order) -> None:
        """In a child of the fork server: take this grading's session, output, folder and worker account,
        and start its own worker confinement."""
        self.fork_server = None
        os.setsid()
        for fd in (1, 2):
            os.dup2(order.output_fd, fd)
        os.close(order.output_fd)
        self.stdin = os.fdopen(order.run_fd, "rb")
        self.job.private, self.job.worker_user, self.job.worker_group = order.private, order.user, order.group
        self.pool.subreaper = self.pool.become_subreaper()
        gc.freeze()  # what the collection made is shared with the fork server's other children
        self.pool.warm_up()

    def become_helper(self, number: int, account: list[int | None]) -> None:
        """In a process forked to run lane `number`'s tests, the tests collected and the run in: take its own
        folder, output and worker account ([uid, gid]), and its own confinement (the one the first lane
        started for it, else a new one) with the submission."""
        self.pool.subreaper = self.pool.become_subreaper()  # not inherited through fork
        self.pool.forget_confinement()  # the first lane's
        self.pool.first_lane = os.getppid()  # a harness of this grading: its CPU is the grading's
        if self.stdin is not None:
            self.stdin.close()  # the first lane's, read to its end
            self.stdin = None
        job = self.job
        private = f"{job.private}/lane-{number}"
        os.mkdir(self.path(private), 0o700)
        job.private, job.worker_user, job.worker_group = private, account[0], account[1]
        # What this lane prints goes to a log of its own, not into the first lane's output and results.
        log = os.open(os.path.join(self.path(private), "lane.log"),
                      os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        self.pool.take_over(number)  # the confinement the first lane started for this one, if it could
        self.pool.warm_up()  # with the submission, which the pool holds
        self.start_budget()


def limit_own_memory(megabytes: int) -> None:
    """Lower this process's soft address-space limit. Only the soft one: a worker raises its own to the
    exercise's memory limit, whatever that is."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    wanted = megabytes * 1024 * 1024
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    if soft == resource.RLIM_INFINITY or soft > wanted:
        resource.setrlimit(resource.RLIMIT_AS, (wanted, hard))


class WorkersCharge:
    """What the workers of a grading were credited for waiting for CPUs (see `clock`): the workers of
    the tests that ended, and those of the test running now, read again when a deadline is reached."""

    def __init__(self, pool: WorkerPool) -> None:
        self.pool = pool
        self.ended = 0.0

    @property
    def credit(self) -> float:
        return self.ended + sum(client.charge.credit for client in self.pool.test_clients)

    def recheck(self) -> float:
        return sum(client.charge.recheck() for client in self.pool.test_clients)

    def test_ended(self) -> None:
        self.ended = self.credit
        self.pool.test_clients = []


def load_reference(harness: HarnessState) -> None:
    """Import the reference into the harness, before any worker exists."""
    if harness.job.reference is not None:
        spec = importlib.util.spec_from_file_location("_grader_reference", harness.path(harness.job.reference))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up here
        spec.loader.exec_module(module)
        harness.reference_module = module
