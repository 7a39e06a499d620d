"""The pytest plugin that grades: the `ns`, `reference` and `feedback` fixtures, and the results.

Exercise authors write ordinary pytest tests against `ns`. Each test that touches `ns` gets a fresh
worker process with the submission imported in it; when the test ends the worker and everything it
started are killed, its scratch folder emptied, and the outcome turned into a result with a message
a student can act on.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import resource
import signal
import sys
import threading
from collections.abc import Generator, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, BinaryIO

import pytest

from grader.confined.clock import OwnDeadline, own_charge
from grader.confined.forking import INPUT_CLOSED, PR_SET_DUMPABLE, end_with_input, prctl
from grader.harness import forkserver, lanes
from grader.harness.client import WorkerClient
from grader.harness.contract import (
    Job,
    Results,
    Run,
    Suite,
    TestRecord,
    TestStatus,
    collection_error,
    input_frame,
    read_input_frame,
)
from grader.harness.feedback import Feedback
from grader.harness.pool import WorkerPool
from grader.harness.scenario import Scenario
from grader.harness.stops import GradingStop, RemoteException

# The trusted harness's own address space. With the protocol's bounds it needs a small part of it; the
# limit makes sure no submission can make it take the machine's (or the container's) memory instead.
HARNESS_MEMORY_MB = 1024


class ExerciseMisconfigured(Exception):
    """A test asked for what its exercise does not provide: the exercise's mistake, never the submission's.
    The grading is then an error naming it (no student loses points to it)."""


class UndeclaredName(ExerciseMisconfigured, KeyError):
    """`ns[name]` for a name exercise.toml does not list (a KeyError, so `name in ns` is simply false)."""


class HarnessState:
    """Everything the fixtures and hooks share during one grading run."""

    def __init__(self, job: Job, base: str, stdin: BinaryIO | None = None, fork_server: int | None = None) -> None:
        self.job = job
        self.base = base
        self.stdin = stdin  # where the run (nonce, seed, submission) arrives, once the tests are collected
        self.fork_server = fork_server  # a fork server's control socket: fork a harness per grading (see `fork_server`)
        self.nonce: str | None = None
        self.records: dict[str, TestRecord] = {}
        self.problems: list[str] = []  # collection errors and the like: the run cannot be vouched for
        self.timed_out: list[str] = []  # the tests of this lane that ended in a timeout, by name
        self.lanes = lanes.Lanes()  # this process's part in the grading's lanes (see `lanes`)
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
        self.lanes.hand_on(input_frame(frame) + input_frame(source))
        self.nonce, self.job.seed = run.nonce, run.seed
        # It moves later by at most its own length: whatever a submission does to the readings, a grading
        # ends (graded) within twice its time, well before the host's last resort (`Limits.hard_stop_s`).
        total = self.job.limits.total_timeout_s
        self.budget = OwnDeadline(total, own_charge(self.pool.cpu_count()), self.workers, most=total)
        if self.job.isolation == "container":
            # The host holds a container's input open until the grading ends; it closes early only when
            # the host is gone, and then nobody waits for this grading.
            end_with_input(self.stdin)
        self.pool.load(source)

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

    def become_helper(self, number: int, account: list[int | None], run: BinaryIO) -> None:
        """In a process forked to run lane `number`'s share of the tests: take its own folder, output,
        worker account ([uid, gid]), and `run` for its input, which the first lane writes (see `lanes`)."""
        self.pool.subreaper = self.pool.become_subreaper()  # not inherited through fork
        if self.stdin is not None:
            self.stdin.close()  # the first lane's
        self.stdin = run
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

    @property
    def proven(self) -> bool:
        return self.pool.proven

    def recheck(self) -> float:
        return sum(client.charge.recheck() for client in self.pool.test_clients)

    def test_ended(self) -> None:
        self.ended = self.credit
        self.pool.test_clients = []


class TimeRanOut(GradingStop):
    """The grading's time ran out during a test."""

    status = "timeout"


def not_run_message(total_s: float) -> str:
    return f"not run: the grading's time ran out ({total_s:g} s)"


def not_run_after_timeouts(count: int) -> str:
    return (f"not run: your code already ran out of time in {count} tests of this grading, so the tests left "
            "are not run (is there an endless loop?)")


class SubmissionNames(Mapping[str, Any]):
    """`ns`: the submission's top-level names, as proxies. The worker starts on first use."""

    def __init__(self, harness: HarnessState) -> None:
        self._harness = harness
        self._client: WorkerClient | None = None
        self._values: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._harness.job.names:
            raise UndeclaredName(f"the exercise does not declare the name {name!r} (names in exercise.toml)")
        if name not in self._values:
            if self._client is None:
                self._client = self._harness.pool.start_worker()
            self._values[name] = self._client.lookup(name)
        return self._values[name]

    def scenario(self) -> Scenario:
        """A scenario: many operations run in the worker in one message (`client.Scenario`)."""
        if self._client is None:
            self._client = self._harness.pool.start_worker()
        return Scenario(self._client, self._harness.job.names)

    def __iter__(self) -> Iterator[str]:
        return iter(self._harness.job.names)

    def __len__(self) -> int:
        return len(self._harness.job.names)


def load_reference(harness: HarnessState) -> None:
    """Import the reference into the harness, before any worker exists."""
    if harness.job.reference is not None:
        spec = importlib.util.spec_from_file_location("_grader_reference", harness.path(harness.job.reference))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up here
        spec.loader.exec_module(module)
        harness.reference_module = module


SUBMISSION_NAMES = pytest.StashKey[SubmissionNames]()
FEEDBACK = pytest.StashKey[Feedback]()
SUITE = pytest.StashKey[str]()
CLOCK = pytest.StashKey[OwnDeadline]()


# -- turning outcomes into results -------------------------------------------------------------------

def explain(harness: HarnessState, excinfo: pytest.ExceptionInfo[BaseException], suite: str, description: str = ""
            ) -> tuple[TestStatus, str, list[str]]:
    """(status, message, the student's traceback lines) for a test that raised."""
    exc = excinfo.value
    if isinstance(exc, GradingStop):
        return exc.status, exc.message, []
    if isinstance(exc, pytest.skip.Exception):  # a skip in a test's body, like a skip by a mark: never a pass
        return "error", f"the test was skipped, so it cannot count as passed ({exc})", []
    if isinstance(exc, MemoryError) and getattr(exc, "remote", None) is None:
        return "error", f"the grader itself ran out of memory ({HARNESS_MEMORY_MB} MiB) during this test", []
    if excinfo.typename == "Failed" and str(exc).startswith("Timeout"):
        limit = harness.job.limits.test_timeout_s
        return "timeout", f"the test did not finish within {limit:g} s", []
    remote: RemoteException | None = getattr(exc, "remote", None)
    if remote is not None:
        if remote.type_name == "NotImplementedError":
            # A stub's own words usually say just this ("schedule() is not implemented yet"): said once.
            said = remote.message.strip()
            same = said.rstrip(". ").lower().endswith("not implemented yet") and remote.where.split("(")[0] in said
            message = f"{remote.where} is not implemented yet" + ("" if not said or same else f" ({said})")
        else:
            message = f"{remote.where} raised {remote.type_name}: {remote.message}".rstrip(": ")
        return "failed", message, remote.traceback
    if isinstance(exc, AssertionError):
        return "failed", assertion_message(exc, harness.details(suite), description), []
    if excinfo.typename == "Failed":  # pytest.fail(message): the author's words, as they are
        return "failed", str(exc), []
    return "failed", f"{type(exc).__name__}: {exc}", []


MAX_MESSAGE = 20_000  # characters of a test's message kept in its record


def cut_text(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… [{len(text) - limit:,} more characters cut]"


def assertion_message(exc: AssertionError, details: bool, description: str = "") -> str:
    """What a student reads of a failed assert. pytest's rewriting appends "assert <expression>" (the values
    compared) to the author's message: with details, both, the author's words first; without, the
    author's words alone, or, for a bare assert, the rule the test checks (its description), so that a
    held-back failure still says what to fix."""
    text = str(exc)
    head, _sep, explanation = text.partition("\nassert ")
    if text.startswith("assert "):
        head, explanation = "", text[len("assert "):]
    head, values = head.strip(), f"assert {explanation}".strip() if explanation.strip() else ""
    if not details:
        if head:
            return head
        return f"a check of this test failed: {description}" if description else "a check of this test failed"
    if head and values:
        return f"{head}\n{values}"
    return head or values


def new_record(harness: HarnessState, item: pytest.Item) -> TestRecord:
    doc = getattr(getattr(item, "function", None), "__doc__", None) or ""
    record = harness.records[item.nodeid] = TestRecord(
        # Named as the host lists it: the id without the file (`test_x[case]`, `TestClass::test_x`).
        nodeid=item.nodeid, name=item.nodeid.split("::", 1)[1],
        suite=harness.suite_name(item),
        description=doc.strip().splitlines()[0] if doc.strip() else "",
    )
    return record


def _failure_line(excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
    return cut_text(f"{excinfo.typename}: {excinfo.value}", 1000)


class GradingPlugin:
    """The plugin that grades, as an object holding its run (pytest's `junitxml` is the model): the
    fixtures tests use and the hooks that turn outcomes into records. `pytest_configure` puts it in
    `config.stash[GRADING]`, where a trusted suite (or a test of the plugin) finds the run."""

    def __init__(self, harness: HarnessState) -> None:
        self.harness = harness

    def pytest_configure(self, config: pytest.Config) -> None:
        config.stash[GRADING] = self

    # -- the fixtures ---------------------------------------------------------------------------------

    @pytest.fixture
    def ns(self, request: pytest.FixtureRequest) -> Iterator[SubmissionNames]:
        harness = self.harness
        names = SubmissionNames(harness)
        request.node.stash[SUBMISSION_NAMES] = names
        yield names
        client = names._client
        if client is not None:
            record = harness.records.get(request.node.nodeid)
            harness.pool.clean_up_after(client)
            text, cut = client.output_tail(harness.job.limits.output_kb * 1024)
            # Only the tail is kept: the file goes, so many chatty tests cannot fill the job's disk.
            Path(client.output_path).unlink(missing_ok=True)
            if record is not None:
                record.output, record.output_cut = text, cut
            # The item lives to the end of the run: let go of the worker's proxies and of what the test's
            # frames held (an incident's traceback keeps them), so no test's values outlive it.
            names._client, names._values = None, {}

    @pytest.fixture
    def reference(self, request: pytest.FixtureRequest) -> dict[str, Any]:
        """The reference solution's names: trusted code, imported into the harness itself, for the tests
        of a suite that exercise.toml allows it (`reference = true`)."""
        harness = self.harness
        suite = harness.suite_of_item(request.node)
        if suite is None or not suite.reference:
            name = suite.name if suite else "?"
            raise ExerciseMisconfigured(f"suite {name!r} uses the reference solution: exercise.toml must say "
                                        "reference = true")
        if harness.reference_module is None:
            raise ExerciseMisconfigured("this suite needs the reference solution, and the job has none")
        return vars(harness.reference_module)

    @pytest.fixture
    def seed(self) -> int:
        """The run's seed for random workloads: per submission, the same on a regrade (grader.core.seeding)."""
        return self.harness.job.seed

    @pytest.fixture
    def feedback(self, request: pytest.FixtureRequest) -> Feedback:
        recorder = Feedback()
        request.node.stash[FEEDBACK] = recorder
        return recorder

    # -- the hooks ------------------------------------------------------------------------------------

    @staticmethod
    def pytest_itemcollected(item: pytest.Item) -> None:
        # pytest describes every failure for its terminal report, re-parsing each frame's source file to
        # find the statement, for every failed test a failing submission has (docs/benchmarks.md). The
        # record's message and traceback come from `explain`; the report only needs a line.
        item.repr_failure = _failure_line  # type: ignore[method-assign]

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        # Each test's suite, found once at collection (in a fork server, once for every grading forked from it).
        harness = self.harness
        for item in items:
            item.stash[SUITE] = harness.suite_of(Path(str(item.fspath)))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
        harness = self.harness
        harness.pool.last_test = nextitem is None
        harness.workers.test_ended()
        # Every test has its record from here, before any hook of its setup (a skip mark's among them) runs.
        record = new_record(harness, item)
        if harness.budget is not None and harness.budget.left() <= 0:
            # The grading's time is spent: the tests left fail without running, and the grading is graded
            # (the submission scores what it earned before), not an error the submission could choose.
            record.status, record.message = "timeout", not_run_message(harness.job.limits.total_timeout_s)
            return True
        # An import that timed out fails every later test at once (see `WorkerPool.start_worker`), saying why.
        if len(harness.timed_out) >= harness.job.limits.timed_out_tests and harness.pool.import_failure is None:
            record.status, record.message = "timeout", not_run_after_timeouts(len(harness.timed_out))
            return True
        return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_timeout_set_timer(self, item: pytest.Item, settings: Any) -> bool | None:
        """A test's time limit (pytest-timeout's `--timeout`, or a test's own `timeout` mark) on the charged
        clock of the harness and the test's workers, and the grading's time left, whichever ends first.

        The timer is pytest-timeout's signal method, with one difference: when it goes off, the time the
        harness and the workers waited for a CPU that other work held is read, and the timer is set again
        for what is left (see `clock`). On a busy machine a test gets the time it would have had on an
        idle one; an endless loop is still stopped, after as much of its own time."""
        if settings.method != "signal" or threading.current_thread() is not threading.main_thread():
            return None  # pytest-timeout's own way
        harness = self.harness
        limit = float(settings.timeout)
        test = OwnDeadline(limit, own_charge(harness.pool.cpu_count()), harness.workers)

        def left() -> tuple[float, float]:
            return test.left(), (harness.budget.left() if harness.budget is not None else float("inf"))

        def on_alarm(signum: int, frame: Any) -> None:
            __tracebackhide__ = True
            for_test, for_grading = left()
            if for_grading <= 0:
                raise TimeRanOut(f"the grading's time ran out ({harness.job.limits.total_timeout_s:g} s) during "
                                 "this test")
            if for_test <= 0:
                pytest.fail(f"Timeout >{limit:g}s")
            signal.setitimer(signal.ITIMER_REAL, max(0.01, min(for_test, for_grading)))

        def cancel() -> None:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)

        item.cancel_timeout = cancel  # type: ignore[attr-defined]  # what pytest-timeout's cancel hook calls
        item.stash[CLOCK] = test
        signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, max(0.01, min(left())))
        return True

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
        outcome = yield
        report: pytest.TestReport = outcome.get_result()
        harness = self.harness
        record = harness.records.get(item.nodeid)
        if record is None:
            return
        record.duration_s += report.duration
        if call.excinfo is not None and isinstance(call.excinfo.value, ExerciseMisconfigured):
            message = str(call.excinfo.value.args[0] if call.excinfo.value.args else call.excinfo.value)
            problem = f"the exercise is misconfigured: {item.nodeid}: {message}"
            if problem not in harness.problems:
                harness.problems.append(problem)
        if call.excinfo is not None and record.status == "passed":
            status, message, trace = explain(harness, call.excinfo, record.suite, record.description)
            if call.when != "call" and status == "failed":
                status = "error"
            record.status, record.message, record.traceback = status, cut_text(message, MAX_MESSAGE), trace
        if report.failed:
            # pytest keeps every failure's report to the end of the run; the record holds what counts, so its
            # copy stays small however large the values in the failure (a 20,000-entry plan in every frame).
            report.longrepr = f"{record.status}: {record.message[:1000]}"
        if call.when == "call":
            names = item.stash.get(SUBMISSION_NAMES, None)
            client = names._client if names is not None else None
            if record.status == "passed" and client is not None and client.incident is not None:
                # The test swallowed a timeout or crash of the submission: that is never a pass.
                record.status, record.message = client.incident.status, client.incident.message
            recorder = item.stash.get(FEEDBACK, None)
            if recorder is not None:
                record.artifacts = recorder.artifacts
        if call.when == "teardown" and (clock := item.stash.get(CLOCK, None)) is not None:
            record.cpu_wait_s = round(clock.credited(), 3)
        if call.when == "teardown" and record.status == "timeout":
            harness.timed_out.append(record.name)
        if report.skipped and record.status == "passed":
            record.status, record.message = "error", "the test was skipped, so it cannot count as passed"

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            error = collection_error(str(report.longrepr))
            self.harness.problems.append(f"a test file could not be collected: {report.nodeid}: {error}")

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        harness = self.harness
        for item in session.items:
            # pytest finds each test's file and line for every report it makes (reading the file's source):
            # done once here, before the submission, it is shared by every grading a fork server forks.
            item.location  # noqa: B018 - a cached property
        harness.receive_run()
        harness.lanes.share(session)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        harness = self.harness
        harness.receive_run()  # collection may have failed before asking for it: the results need its nonce
        harness.pool.end_confinement()
        if exitstatus not in (0, 1) and not harness.problems:  # a problem found already says why
            harness.problems.append(f"pytest ended with exit status {exitstatus}")
        if harness.lanes.number:
            harness.lanes.send(harness.problems, harness.records.values())  # a helper lane leaves here
        harness.records = harness.lanes.gather(harness.problems, harness.records)
        harness.results = Results.of(harness.nonce, harness.problems, harness.records.values())


GRADING = pytest.StashKey[GradingPlugin]()
