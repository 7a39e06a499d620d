"""The pytest plugin that grades: the `ns`, `reference` and `feedback` fixtures, and the results.

Exercise authors write ordinary pytest tests against `ns`. Each test that touches `ns` gets a fresh
worker process with the submission imported in it; when the test ends the worker and everything it
started are killed, its scratch folder emptied, and the outcome turned into a result with a message
a student can act on. What the fixtures and hooks share is the run's `state.HarnessState`; the rules
that turn an outcome into a test's record are `outcomes`'s.
"""

from __future__ import annotations

import gc
import signal
import threading
from collections.abc import Generator, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from grader.confined.clock import OwnDeadline, own_charge
from grader.harness.client import WorkerClient
from grader.harness.contract import Results, collection_error, valid_text
from grader.harness.feedback import Feedback
from grader.harness.outcomes import (
    MAX_MESSAGE,
    TimeRanOut,
    explain,
    new_record,
    not_run_message,
    note_timeouts,
)
from grader.harness.scenario import Scenario
from grader.harness.state import SUITE, HarnessState


class ExerciseMisconfigured(Exception):
    """A test asked for what its exercise does not provide: the exercise's mistake, never the submission's.
    The grading is then an error naming it (no student loses points to it)."""


class UndeclaredName(ExerciseMisconfigured, KeyError):
    """`ns[name]` for a name exercise.toml does not list (a KeyError, so `name in ns` is simply false)."""


class SubmissionNames(Mapping[str, Any]):
    """`ns`: the submission's top-level names, as proxies. The worker starts on first use."""

    def __init__(self, harness: HarnessState, nodeid: str) -> None:
        self._harness = harness
        self._nodeid = nodeid  # the test's: an audit's shortened call limit may spare it
        self._client: WorkerClient | None = None
        self._values: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._harness.job.names:
            raise UndeclaredName(f"the exercise does not declare the name {name!r} (names in exercise.toml)")
        if name not in self._values:
            self._values[name] = self._worker().lookup(name)
        return self._values[name]

    def scenario(self) -> Scenario:
        """A scenario: many operations run in the worker in one message (`client.Scenario`)."""
        return Scenario(self._worker(), self._harness.job.names)

    def _worker(self) -> WorkerClient:
        """The test's worker, started on first use; recording the lines and arcs that run when the run asks it."""
        if self._client is None:
            self._client = client = self._harness.pool.start_worker()
            if self._harness.trace_lines:
                client.trace_lines()
            mutant_run = self._harness.mutant_run
            if mutant_run is not None:  # an audit's generated mutant: its call limit may be shortened
                client.limits = replace(client.limits, call_timeout_s=mutant_run.call_limit(
                    self._nodeid, client.limits.call_timeout_s))
        return self._client

    def __iter__(self) -> Iterator[str]:
        return iter(self._harness.job.names)

    def __len__(self) -> int:
        return len(self._harness.job.names)


SUBMISSION_NAMES = pytest.StashKey[SubmissionNames]()
FEEDBACK = pytest.StashKey[Feedback]()
CLOCK = pytest.StashKey[OwnDeadline]()
RUNNING = pytest.StashKey[bool]()  # the test's phases have begun (the hooks that wrap them have run)


def _failure_line(excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
    return valid_text(f"{excinfo.typename}: {excinfo.value}", 1000)


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
        names = SubmissionNames(harness, request.node.nodeid)
        request.node.stash[SUBMISSION_NAMES] = names
        yield names
        client = names._client
        if client is not None:
            record = harness.records.get(request.node.nodeid)
            if harness.trace_lines and record is not None:
                record.lines, record.arcs = client.reached()
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
        if harness.caught_by_name():
            return True  # an audit's mutant, caught by a named test: the rest is not run, and has no record
        # Every test has its record from here, before any hook of its setup (a skip mark's among them) runs.
        record = new_record(harness, item)
        if harness.budget is not None and harness.budget.left() <= 0:
            # The grading's time is spent: the tests left fail without running, and the grading is graded
            # (the submission scores what it earned before), not an error the submission could choose.
            record.status, record.message = "timeout", not_run_message(harness.job.limits.total_timeout_s)
            harness.report.not_run[item.nodeid] = "time"
            return True
        item.stash[RUNNING] = True  # from here the test's own phases run: its timer may stop it
        # Tests that timed out before cost nothing here: each test runs with its own limits, as long as the
        # grading's time lasts (a rare hang costs only the tests that reach it). An import that timed out
        # fails every later test at once (see `WorkerPool.start_worker`), saying why.
        return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool | None:
        """A lane's loop (`lanes`): it runs the next test no lane has taken, as soon as it is free. Each is
        claimed one test ahead, so that pytest's teardown knows the test that comes next in this lane (a
        module's fixtures are kept for it)."""
        lanes = self.harness.lanes
        if lanes.count < 2 or session.testsfailed or session.config.option.collectonly:
            return None  # pytest's own loop, which says why it runs nothing
        items = session.items
        following = lanes.claim(len(items))
        while following is not None:
            item, following = items[following], lanes.claim(len(items))
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=None if following is None else items[following])
            if session.shouldfail:
                raise session.Failed(session.shouldfail)
            if session.shouldstop:
                raise session.Interrupted(session.shouldstop)
        return True

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
            if not item.stash.get(RUNNING, False):
                # Still in the hooks that wrap the test (pytest's own): a stop raised there would break the
                # session, not the test. The test's phases begin in a moment.
                signal.setitimer(signal.ITIMER_REAL, 0.01)
                return
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
        if harness.budget is not None and harness.budget.left() <= 0:
            return True  # the grading's time is spent: the test is recorded as not run, with no timer
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
            record.status, record.message, record.traceback = status, valid_text(message, MAX_MESSAGE), trace
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
        if harness.job.lane_accounts and harness.fork_server is None and harness.nonce is not None:
            # The other lanes start now, with this collection and this run: each starts its confinement
            # while this one takes the first tests. What the collection made stays for the whole run.
            gc.freeze()
            harness.pool.settle()
            harness.lanes.fork(harness.job.lane_accounts, harness.become_helper)
            if harness.lanes.number == 0:
                harness.pool.let_go_of_lanes()

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        harness = self.harness
        harness.receive_run()  # collection may have failed before asking for it: the results need its nonce
        harness.pool.end_confinement()
        if exitstatus not in (0, 1) and not harness.problems:  # a problem found already says why
            harness.problems.append(f"pytest ended with exit status {exitstatus}")
        if harness.lanes.number:
            harness.lanes.send(harness.problems, harness.records.values(), harness.report)  # a helper leaves here
        order = [item.nodeid for item in session.items]
        harness.records = harness.lanes.gather(harness.problems, harness.records, harness.report, order)
        harness.pool.end_handed_over()  # the lanes are over: what the first lane started for them goes too
        note_timeouts(harness.records, harness.report)
        harness.results = Results.of(harness.nonce, harness.problems, harness.records.values())


GRADING = pytest.StashKey[GradingPlugin]()
