"""The pytest plugin that grades: the `ns`, `reference` and `feedback` fixtures, and the results.

Exercise authors write ordinary pytest tests against `ns`. Each test that touches `ns` gets a fresh
worker process with the submission imported in it; when the test ends the worker and everything it
started are killed, its scratch folder emptied, and the outcome turned into a result with a message
a student can act on.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import resource
import shutil
import signal
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from grader.harness.client import GradingStop, RemoteException, WorkerClient
from grader.harness.feedback import Feedback
from grader.harness.job import RESULTS_SCHEMA, Job
from grader.harness.processes import children_of
from grader.harness.zygote import Zygote

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
# The trusted harness's own address space. With the protocol's bounds it needs a small part of it; the
# limit makes sure no submission can make it take the machine's (or the container's) memory instead.
HARNESS_MEMORY_MB = 1024


@dataclass
class TestRecord:
    nodeid: str
    suite: str
    name: str
    description: str
    status: str = "passed"
    message: str = ""
    traceback: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    output: str = ""
    output_cut: int = 0
    artifacts: list[dict[str, Any]] = field(default_factory=list)


class HarnessState:
    """Everything the fixtures and hooks share during one grading run."""

    def __init__(self, job: Job, nonce: str) -> None:
        self.job = job
        self.nonce = nonce
        self.records: dict[str, TestRecord] = {}
        self.problems: list[str] = []  # collection errors and the like: the run cannot be vouched for
        self.import_failure: tuple[type[BaseException] | RemoteException, str] | None = None
        self.workers_started = 0
        self.spare: WorkerClient | None = None  # the next test's worker, already starting
        self._zygote: Zygote | None = None
        self.zygote_failed = False
        self.reference_module: ModuleType | None = None
        self.subreaper = _prctl(PR_SET_CHILD_SUBREAPER, 1)
        limit_own_memory(HARNESS_MEMORY_MB)
        # Same-user workers (non-root local runs) must not reach into this process through /proc.
        _prctl(PR_SET_DUMPABLE, 0)

    def suite_of(self, path: Path) -> str:
        for suite in self.job.suites:
            try:
                path.resolve().relative_to(Path(suite.path).resolve())
                return suite.name
            except ValueError:
                continue
        return "unknown"

    def worker_env(self, scratch: Path) -> dict[str, str]:
        return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(scratch)}

    def zygote(self) -> Zygote | None:
        """The run's fork server, started on first use; None once it is gone (workers then start slower)."""
        if self._zygote is None and not self.zygote_failed:
            job = self.job
            try:
                self._zygote = Zygote(python=job.python, harness_root=job.harness_root, limits=job.limits,
                                      cwd=job.scratch, log_path=os.path.join(job.private, "zygote.log"),
                                      user=job.worker_user, group=job.worker_group,
                                      env=self.worker_env(Path(job.scratch)))
            except OSError:
                self.zygote_failed = True
        if self._zygote is not None and self._zygote.broken:
            self._zygote.close()
            self._zygote, self.zygote_failed = None, True
        return self._zygote

    def spawn(self) -> WorkerClient:
        self.workers_started += 1
        job = self.job
        scratch = Path(job.scratch) / f"worker-{self.workers_started}"
        scratch.mkdir(mode=0o700)
        if job.worker_user is not None:
            os.chown(scratch, job.worker_user, job.worker_group if job.worker_group is not None else -1)
        return WorkerClient(
            python=job.python, harness_root=job.harness_root, submission=job.submission,
            module=job.module, limits=job.limits, cwd=str(scratch),
            output_path=os.path.join(job.private, f"output-{self.workers_started}.txt"),
            user=job.worker_user, group=job.worker_group, env=self.worker_env(scratch), zygote=self.zygote(),
        )

    def start_worker(self) -> WorkerClient:
        """A fresh worker with the submission imported, for one test.

        The next test's worker is started now, while this test runs, so that its start-up (an
        interpreter and the submission's import) is off the critical path. Each test still gets its
        own process, folder and output file.
        """
        if self.import_failure is not None:
            # The import already failed in this run (it is deterministic enough): fail at once
            # instead of waiting out the same endless import in every test.
            failure, message = self.import_failure
            if isinstance(failure, RemoteException):
                raise failure.as_exception()
            raise failure(message)
        spare, self.spare = self.spare, None
        if spare is not None and not self.survived(spare):
            # The spare lived through another test, which may have killed it (`kill(-1)`) or starved
            # it: a test fails only for what happened in it, so its own worker, started now, decides.
            self.discard(spare)
            spare = None
        client = spare or self.spawn()
        try:
            client.wait_ready()
        except GradingStop as stop:
            self.import_failure = (type(stop), stop.message)
            raise
        if client.import_error is not None:
            self.import_failure = (client.import_error, "")
        else:
            self.spare = self.spawn()
        return client

    def close_spare(self) -> None:
        if self.spare is not None:
            self.spare.close()
            self.spare = None
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None
        self.reap_strays()

    @staticmethod
    def survived(spare: WorkerClient) -> bool:
        """Whether a spare finished its import and is still there to take calls."""
        try:
            spare.wait_ready()
        except GradingStop:
            return False
        return spare.import_error is not None or spare.idle()

    def discard(self, client: WorkerClient) -> None:
        self.clean_up_after(client)
        Path(client.output_path).unlink(missing_ok=True)

    def clean_up_after(self, client: WorkerClient) -> None:
        client.close()
        self.reap_strays()
        shutil.rmtree(client.cwd, ignore_errors=True)

    def reap_strays(self) -> None:
        """Kill what a worker left behind: as a subreaper, its orphans became our children."""
        if not self.subreaper:
            return
        deadline = time.monotonic() + 5
        keep = {self.spare.process.pid} if self.spare is not None and self.spare.process is not None else set()
        if self._zygote is not None:
            keep.add(self._zygote.process.pid)
        while time.monotonic() < deadline:
            strays = [pid for pid in children_of(os.getpid()) if pid not in keep]
            for pid in strays:
                try:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, os.WNOHANG)  # reap it if it is already gone; the next pass retries
                except (ProcessLookupError, ChildProcessError):
                    pass
            if not strays:
                return
            time.sleep(0.01)
        self.problems.append("processes left by the submission could not all be stopped")


def limit_own_memory(megabytes: int) -> None:
    """Lower this process's soft address-space limit. Only the soft one: a worker raises its own to the
    exercise's memory limit, whatever that is."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    wanted = megabytes * 1024 * 1024
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    if soft == resource.RLIM_INFINITY or soft > wanted:
        resource.setrlimit(resource.RLIMIT_AS, (wanted, hard))


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


STATE: HarnessState | None = None


def state() -> HarnessState:
    if STATE is None:
        raise RuntimeError("the grading plugin was loaded without a job")
    return STATE


class Namespace(Mapping[str, Any]):
    """`ns`: the submission's top-level names, as proxies. The worker starts on first use."""

    def __init__(self, harness: HarnessState) -> None:
        self._harness = harness
        self._client: WorkerClient | None = None
        self._values: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._harness.job.names:
            raise KeyError(f"the exercise does not declare the name {name!r}")
        if name not in self._values:
            if self._client is None:
                self._client = self._harness.start_worker()
            self._values[name] = self._client.lookup(name)
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._harness.job.names)

    def __len__(self) -> int:
        return len(self._harness.job.names)


@pytest.fixture
def ns(request: pytest.FixtureRequest) -> Iterator[Namespace]:
    harness = state()
    namespace = Namespace(harness)
    request.node.stash[NAMESPACE] = namespace
    yield namespace
    client = namespace._client
    if client is not None:
        record = harness.records.get(request.node.nodeid)
        harness.clean_up_after(client)
        text, cut = client.output_tail(harness.job.limits.output_kb * 1024)
        # Only the tail is kept: the file goes, so many chatty tests cannot fill the job's disk.
        Path(client.output_path).unlink(missing_ok=True)
        if record is not None:
            record.output, record.output_cut = text, cut
        # The item lives to the end of the run: let go of the worker's proxies and of what the test's
        # frames held (an incident's traceback keeps them), so no test's values outlive it.
        namespace._client, namespace._values = None, {}


@pytest.fixture
def reference() -> dict[str, Any]:
    """The reference solution's names: trusted code, imported into the harness itself."""
    harness = state()
    if harness.job.reference is None:
        raise RuntimeError("this suite needs the reference solution, and the job has none")
    if harness.reference_module is None:
        spec = importlib.util.spec_from_file_location("_grader_reference", harness.job.reference)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up here
        spec.loader.exec_module(module)
        harness.reference_module = module
    return vars(harness.reference_module)


@pytest.fixture
def feedback(request: pytest.FixtureRequest) -> Feedback:
    recorder = Feedback()
    request.node.stash[FEEDBACK] = recorder
    return recorder


NAMESPACE = pytest.StashKey[Namespace]()
FEEDBACK = pytest.StashKey[Feedback]()


# -- turning outcomes into results -------------------------------------------------------------------

def explain(excinfo: pytest.ExceptionInfo[BaseException], suite: str) -> tuple[str, str, list[str]]:
    """(status, message, the student's traceback lines) for a test that raised."""
    exc = excinfo.value
    if isinstance(exc, GradingStop):
        return exc.status, exc.message, []
    if isinstance(exc, MemoryError) and getattr(exc, "remote", None) is None:
        return "error", f"the grader itself ran out of memory ({HARNESS_MEMORY_MB} MiB) during this test", []
    if excinfo.typename == "Failed" and str(exc).startswith("Timeout"):
        limit = state().job.limits.test_timeout_s
        return "timeout", f"the test did not finish within {limit:g} s", []
    remote: RemoteException | None = getattr(exc, "remote", None)
    if remote is not None:
        if remote.type_name == "NotImplementedError":
            message = f"{remote.where} is not implemented yet ({remote.type_name}: {remote.message})"
        else:
            message = f"{remote.where} raised {remote.type_name}: {remote.message}".rstrip(": ")
        return "failed", message, remote.traceback
    if isinstance(exc, AssertionError):
        return "failed", assertion_message(exc, suite), []
    if excinfo.typename == "Failed":  # pytest.fail(message): the author's words, as they are
        return "failed", str(exc), []
    return "failed", f"{type(exc).__name__}: {exc}", []


MAX_MESSAGE = 20_000  # characters of a test's message kept in its record


def cut_text(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… [{len(text) - limit:,} more characters cut]"


def assertion_message(exc: AssertionError, suite: str) -> str:
    text = str(exc)
    # pytest's rewriting appends "assert <expression>" to the author's message; the author's words
    # are what a student should read. A hidden test's expression is not shown at all.
    head, sep, explanation = text.partition("\nassert ")
    if text.startswith("assert "):
        head, explanation = "", text[len("assert "):]
    if head.strip():
        return head.strip()
    if suite == "hidden":
        return "a check of this test failed"
    return f"assert {explanation}".strip()


def pytest_runtest_setup(item: pytest.Item) -> None:
    harness = state()
    doc = getattr(getattr(item, "function", None), "__doc__", None) or ""
    harness.records[item.nodeid] = TestRecord(
        nodeid=item.nodeid, suite=harness.suite_of(Path(str(item.fspath))), name=item.name,
        description=doc.strip().splitlines()[0] if doc.strip() else "",
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    harness = state()
    record = harness.records.get(item.nodeid)
    if record is None:
        return
    record.duration_s += report.duration
    if call.excinfo is not None and record.status == "passed":
        status, message, trace = explain(call.excinfo, record.suite)
        if call.when != "call" and status == "failed":
            status = "error"
        record.status, record.message, record.traceback = status, cut_text(message, MAX_MESSAGE), trace
    if report.failed:
        # pytest keeps every failure's report to the end of the run; the record holds what counts, so its
        # copy stays small however large the values in the failure (a 20,000-entry plan in every frame).
        report.longrepr = f"{record.status}: {record.message[:1000]}"
    if call.when == "call":
        namespace = item.stash.get(NAMESPACE, None)
        client = namespace._client if namespace is not None else None
        if record.status == "passed" and client is not None and client.incident is not None:
            # The test swallowed a timeout or crash of the submission: that is never a pass.
            record.status, record.message = client.incident.status, client.incident.message
        recorder = item.stash.get(FEEDBACK, None)
        if recorder is not None:
            record.artifacts = recorder.artifacts
    if report.skipped and record.status == "passed":
        record.status, record.message = "error", "the test was skipped, so it cannot count as passed"


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        state().problems.append(f"a test file could not be collected: {report.nodeid}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    harness = state()
    harness.close_spare()
    if exitstatus not in (0, 1):
        harness.problems.append(f"pytest ended with exit status {exitstatus}")
    results = {
        "schema": RESULTS_SCHEMA,
        "nonce": harness.nonce,
        "problems": harness.problems,
        "tests": [vars(r) for r in harness.records.values()],
    }
    target = Path(harness.job.results)
    temporary = target.with_suffix(".partial")
    temporary.write_text(json.dumps(results), encoding="utf-8")
    os.replace(temporary, target)
