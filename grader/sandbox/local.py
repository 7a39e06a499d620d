"""The local backend: the harness as a child process on this machine, the worker in namespaces.

The harness (trusted) runs as the grading user in a private job folder. Its workers (untrusted) run
under bubblewrap in mount, PID, network, IPC and UTS namespaces of their own, as an account of their
own when the grader runs as root (see `harness.confine`). They see a read-only system, the submission
and a private tmpfs: nothing of the project, the store, the batch folder or other jobs.

Where bubblewrap cannot make namespaces (not installed, or user namespaces switched off), the local
sandbox refuses untrusted code: `LocalBackend(unsafe=True)` (`--unsafe-local`) runs the worker as a
plain process instead, and is meant only for one's own trusted code.

What the machine allows is checked in `isolation`; a harness process's start, run and end are in
`harness_process`; the backend here chooses, keeps warm and retries.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field

from grader.core.backend import RawRun
from grader.core.exercise import Exercise
from grader.core.suite_tests import list_tests
from grader.errors import GradingError, SandboxUnavailable
from grader.harness.contract import Run, results_from_output
from grader.sandbox.forkservers import ForkedHarness, ForkServerLost, HarnessForkServer
from grader.sandbox.harness_process import (
    StartedHarness,
    finish_harness,
    fork_server_ended,
    start_fork_server,
    start_harness,
)
from grader.sandbox.interpreter import WaitingHarness
from grader.sandbox.isolation import (
    account_problem,
    bwrap_path,
    isolation_problem,
    local_isolation,
    readable_secrets,
    refusal,
    sandbox_python,
    worker_python,
)
from grader.sandbox.layout import WorkerSettings
from grader.sandbox.warm import WarmSlots
from grader.sandbox.worker_accounts import worker_account

UNSAFE_WARNING = ("--unsafe-local: the submission runs WITHOUT isolation, as a plain process that can read "
                  "whatever its account can read. Use it only for your own trusted code.")
# The fewest tests a lane is worth starting for: a lane's own confinement takes about as long to start as
# a few tests take to run, so a run of only a few tests is quicker in one lane.
TESTS_PER_LANE = 8
FORK_SERVERS_KEPT = 4  # harness fork servers a warm backend keeps (one per exercise and tier, the latest used)


@dataclass
class LocalBackend:
    """Grades on this machine. `unsafe`: no namespaces, for one's own trusted code only. `warm`: keep
    a sandbox started and ready (harness up, tests collected, workers' confinement waiting) for the
    next submission of the same exercise and tier; each still grades exactly one submission. A warm
    backend forks each harness from a fork server of the exercise's tier (see `harness.forkserver`), so
    that pytest's start and the collection happen once, not once per submission."""

    name = "local"

    unsafe: bool = False
    warm: bool = False
    # "namespaces" or "account" (`contract.ISOLATIONS`); None: chosen at the first grading by
    # `local_isolation` (namespaces where bubblewrap can make them, else inside a container an account).
    isolation: str | None = None
    lanes: int | None = None  # harness processes per grading; None: see `lane_count`
    # A harness started before this backend was chosen (`interpreter.early_harness`): the next cold
    # harness, where its folder fits.
    waiting: WaitingHarness | None = field(default=None, repr=False)
    _ready: WarmSlots[StartedHarness] = field(default_factory=WarmSlots, repr=False)
    _fork_servers: dict[tuple[str, str, str], HarnessForkServer] = field(default_factory=dict, repr=False)
    _retired: list[HarnessForkServer] = field(default_factory=list, repr=False)
    fork_servers_off: str = ""  # why this backend stopped using fork servers (one failed it): cold harnesses only

    _secrets_checked: set[tuple[str, str, str]] = field(default_factory=set, repr=False)

    def check(self) -> None:
        """Raise SandboxUnavailable when this machine cannot give workers the isolation promised."""
        if self.unsafe:
            return
        if self.isolation is None:
            self.isolation = local_isolation()
        elif self.isolation == "namespaces":
            problem = isolation_problem()
            if problem is not None:
                raise SandboxUnavailable(refusal(problem))
        elif self.isolation == "account":
            problem = account_problem()
            if problem is not None:
                raise SandboxUnavailable(f"the account isolation cannot be given here: {problem}")
        else:
            raise SandboxUnavailable(f"the local sandbox has no isolation {self.isolation!r}")

    def check_secrets(self, exercise: Exercise, tier: str, uid: int | None, gid: int | None) -> None:
        """Under the account isolation, refuse to grade where the worker's account could read the hidden
        suites, the reference or the seed key (once per exercise and tier of this backend)."""
        key = (str(exercise.root), exercise.slug, tier)
        if self.isolation != "account" or key in self._secrets_checked:
            return
        assert uid is not None and gid is not None  # account_problem() made sure the grader is root
        readable = readable_secrets(exercise, tier, uid, gid)
        if readable:
            shown = ", ".join(readable[:3]) + (f" and {len(readable) - 3} more" if len(readable) > 3 else "")
            raise SandboxUnavailable(
                f"without namespaces a submission runs on this container's files, and it could read {shown}: "
                f"make the exercise's hidden suites, reference and seed key readable by root only "
                f"(chmod -R go-rwx {exercise.root})")
        self._secrets_checked.add(key)

    def settings(self, uid: int | None, gid: int | None,
                 lane_accounts: tuple[tuple[int, int], ...] = ()) -> WorkerSettings:
        if self.unsafe:
            return WorkerSettings("none", worker_python(uid), uid, gid)
        if self.isolation == "account":
            return WorkerSettings("account", worker_python(uid), uid, gid)
        python = sandbox_python()
        assert python is not None  # check() made sure
        return WorkerSettings("namespaces", python, uid, gid, bwrap_path(), lane_accounts)

    def lane_count(self, tests: int | None = None) -> int:
        """How many harness processes share one grading's `tests` tests (`harness.lanes`). By default two
        for a single grading (a warm backend grades many at once: its gradings are its parallelism) on a
        machine with two cores or more, as root, where each lane gets a worker account of its own
        (sharing one, a lane's threads would count against the other's process limit), with namespaces
        (each lane's confinement is its own), and with `TESTS_PER_LANE` tests or more for each."""
        if self.lanes is not None:
            return max(1, self.lanes)
        if self.warm or self.unsafe or self.isolation == "account" or os.geteuid() != 0:
            return 1
        lanes = min(2, len(os.sched_getaffinity(0)))
        return lanes if tests is None else max(1, min(lanes, tests // TESTS_PER_LANE))

    def start(self, exercise: Exercise, tier: str) -> StartedHarness:
        """A harness started for this exercise and tier, getting ready while it waits for a submission."""
        account = contextlib.ExitStack()
        uid, gid = account.enter_context(worker_account(apart=self.isolation == "account"))
        try:
            self.check_secrets(exercise, tier, uid, gid)
            if self.warm and not self.fork_servers_off:
                order = self.fork_server(exercise, tier, self.settings(uid, gid)).order(uid, gid)
                if order is not None:
                    fork_server = order.process.fork_server
                    return StartedHarness(order.process, order.folder, order.output, fork_server.layout,
                                          fork_server.prepared, order.settings, account)
            waiting, self.waiting = self.waiting, None
            tests = sum(len(list_tests(suite)) for suite in exercise.suites_for(tier))
            lanes = self.lane_accounts(account, tests)
            return start_harness(exercise, tier, self.settings(uid, gid, lanes), account, waiting)
        except BaseException:
            account.close()
            raise

    def lane_accounts(self, account: contextlib.ExitStack, tests: int | None = None) -> tuple[tuple[int, int], ...]:
        """A worker account for each extra lane of a grading of `tests` tests, held with the grading's
        own; as many as are free (a grading with fewer lanes is only slower)."""
        found: list[tuple[int, int]] = []
        if self.unsafe or self.isolation == "account" or os.geteuid() != 0:
            return ()
        for _ in range(self.lane_count(tests) - 1):
            try:
                uid, gid = account.enter_context(worker_account())
            except GradingError:
                break
            assert uid is not None and gid is not None
            found.append((uid, gid))
        return tuple(found)

    def fork_server(self, exercise: Exercise, tier: str, settings: WorkerSettings) -> HarnessForkServer:
        """The fork server of this exercise and tier, started if missing, dead or made from older suites.
        A replaced fork server is retired, not ended: a grading forked from it may still be running."""
        key = WarmSlots.key(exercise, tier)
        fork_server = self._fork_servers.pop(key, None)
        if fork_server is not None and not fork_server.fresh_for(exercise, tier):
            self._retired.append(fork_server)
            fork_server = None
        if fork_server is None:
            fork_server = start_fork_server(exercise, tier, settings)
        self._fork_servers[key] = fork_server  # the latest used last
        while len(self._fork_servers) > FORK_SERVERS_KEPT:
            self._retired.append(self._fork_servers.pop(next(iter(self._fork_servers))))
        return fork_server

    def end_retired(self) -> None:
        while self._retired:
            self._retired.pop().close()

    def __call__(self, exercise: Exercise, source: bytes, tier: str, run: Run) -> RawRun:
        self.check()
        self.end_retired()  # the grading before this one is over: nothing runs from them any more
        start: Callable[[], StartedHarness] = lambda: self.start(exercise, tier)  # noqa: E731
        started = self._ready.take(exercise, tier, start)
        # A warm backend gets the next submission's sandbox ready while this one grades.
        then = self._ready.refill(exercise, tier, start) if self.warm else None
        try:
            raw = finish_harness(started, exercise, source, run, then)
        except ForkServerLost as lost:
            # The submission was not sent: grade it in a harness of its own, and use no fork server again.
            self.fork_servers_off = str(lost)
            return finish_harness(start(), exercise, source, run, then)
        if isinstance(started.process, ForkedHarness) and not raw.timed_out \
                and results_from_output(raw.output) is None and fork_server_ended(started.process.fork_server.process):
            # Its fork server died (nothing a submission can reach) and took it along, as a harness ends with
            # its fork server: the submission is graded again, in a sandbox of a new fork server.
            return finish_harness(start(), exercise, source, run)
        return raw

    def close(self) -> None:
        """End the sandboxes waiting for a submission, and the fork servers."""
        if self.waiting is not None:
            self.waiting.discard()
            self.waiting = None
        self._ready.close()
        self._retired.extend(self._fork_servers.values())
        self._fork_servers.clear()
        self.end_retired()


run_local = LocalBackend()
