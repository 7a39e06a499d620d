"""The workers of one harness process: the confinement they are forked in, and a worker for each test.

Each test gets a fresh worker; the next test's is started while a test runs (the spare), so that its
fork and the submission's import are off the critical path. A confinement that breaks is replaced,
and retired rather than ended while the test whose worker lives in it runs. What a worker leaves
behind is killed after its test.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from grader.confined import cgroups
from grader.confined.clock import CPUCount, GroupCPU, process_cpu_s
from grader.confined.forking import PR_SET_CHILD_SUBREAPER, prctl
from grader.confined.processes import children_of, wait_for_any
from grader.harness.client import WorkerClient
from grader.harness.confine import Confinement, ZygoteUnavailable
from grader.harness.contract import Job
from grader.harness.stops import GradingStop, RemoteException, WorkerUnavailable

# A count of the gradings' CPU may start from a reading this recent (a test's own count and its spare
# worker's are made a moment apart): an earlier start only counts more of the gradings' CPU.
RECENT_S = 0.25


class WorkerPool:
    """The confinement and the workers of one harness process (one lane of a grading)."""

    def __init__(self, job: Job, base: str, problems: list[str],
                 siblings: Callable[[], Iterable[int]] = lambda: ()) -> None:
        self.job = job
        self.base = base
        self.problems = problems  # the run's: a worker that cannot be started is the grader's problem
        self.siblings = siblings  # the other lanes' processes: children of this one, but not strays
        self.first_lane: int | None = None  # in a helper lane: the first lane's process (its parent)
        self.source: bytes | None = None  # the submission, once the run has arrived
        self.import_failure: tuple[type[BaseException] | RemoteException, str] | None = None
        self.workers_started = 0
        self.confinements_started = 0
        self.spare: WorkerClient | None = None  # the next test's worker, already starting
        self.last_test = False  # the test running is this process's last: no spare after it
        self._confinement: Confinement | None = None
        self.retired: list[Confinement] = []  # broken confinements, ended once their test is over
        # The other lanes' confinements, started by the first lane beside its collection (`start_for_lanes`),
        # each taken over by its lane at the fork (`take_over`); then only their first processes' pids,
        # children of this process that its sweeps spare (`handed_over`).
        self.for_lanes: list[Confinement | None] = []
        self.handed_over: list[int] = []
        self.test_clients: list[WorkerClient] = []  # the workers of the test running now
        self.subreaper = self.become_subreaper()
        # Where the CPU of this lane's processes is counted (see `cgroups`): each confinement's own control
        # group; else, as root in a container, the container's group (`shared`); else nowhere (None).
        self.counted: str | None = None
        self.shared: cgroups.Place | None = None
        self.ended_cpu = 0.0  # what the confinements ended so far used

    @property
    def proven(self) -> bool:
        """Whether every CPU second of this lane's processes is counted (a control group)."""
        return self.counted is not None

    def cpu_seconds(self) -> float | None:
        """The CPU this lane's processes used so far, by their control groups."""
        if self.shared is not None:
            return cgroups.cpu_seconds(self.shared)
        total = self.ended_cpu
        for confinement in [self._confinement, *self.retired]:
            if confinement is not None:
                used = confinement.cpu_seconds()
                if used is None:
                    return None
                total += used
        return total

    def cpu_count(self) -> Callable[[], CPUCount] | None:
        """A new count of what the gradings' processes use (for `clock`'s charges: no wait behind them is
        credited), None where unproven: with groups of its own, those of every grading it can find, this
        grading's every lane among them, and this grading's harness processes; in a container, the
        container's (the harness, every lane). Either way the charged thread's own CPU is among them."""
        if self.counted is None:
            return None
        if self.shared is not None:
            return lambda: GroupCPU(self.cpu_seconds)
        return lambda: GroupCPU(self.gradings_cpu, start=lambda: self.gradings_cpu(RECENT_S))

    def gradings_cpu(self, max_age: float = 0.0) -> dict[str, float] | None:
        """What the gradings' groups used so far (`cgroups.gradings_cpu`), with this grading's harness
        processes (every lane's: outside any group of theirs, and a submission can keep them busy too)."""
        found = cgroups.gradings_cpu(max_age)
        if found is None:
            return None
        harnesses = [os.getpid(), *self.siblings(), *([self.first_lane] if self.first_lane is not None else [])]
        for pid in harnesses:
            used = process_cpu_s(pid)
            if used is not None:
                found[f"harness {pid}"] = used
        return found

    def _counted_by(self, confinement: Confinement) -> None:
        if confinement.group is not None:
            self.counted = "own" if self.counted in (None, "own") else None
        elif self.job.worker_user is not None and (self.counted in (None, "shared")):
            self.shared = self.shared or cgroups.shared()
            self.counted = "shared" if self.shared is not None else None
        else:
            self.counted, self.shared = None, None

    def _ended(self, confinement: Confinement) -> None:
        confinement.close()
        if confinement.group is not None:
            self.ended_cpu += confinement.cpu_seconds() or 0.0

    @staticmethod
    def become_subreaper() -> bool:
        """Make this process the subreaper of what its workers leave (not inherited through fork)."""
        return prctl(PR_SET_CHILD_SUBREAPER, 1)

    def load(self, source: bytes) -> None:
        """The run's submission: loaded into the confinement now, and into any started later."""
        self.source = source
        if self._confinement is not None and not self._confinement.broken:
            self._confinement.load(self.job.submission, source)

    def confinement(self) -> Confinement:
        """The worker's confinement with its zygote, started on first use and again after a breakdown.

        A broken confinement is retired, not ended: the worker of the test running now may live in it,
        and only that test's end may take it away (see `clean_up_after`)."""
        if self._confinement is not None and self._confinement.broken:
            self.retired.append(self._confinement)
            self._confinement = None
        if self._confinement is None:
            self.confinements_started += 1
            self._confinement = Confinement(self.job, self.base, self.confinements_started)
            self._counted_by(self._confinement)
            if self.source is not None:
                self._confinement.load(self.job.submission, self.source)
        return self._confinement

    def warm_up(self) -> None:
        """Start the worker's confinement now, while pytest starts and collects, before any submission."""
        try:
            self.confinement()
        except OSError as exc:
            self.problems.append(f"the worker's sandbox could not be started ({exc})")

    def start_for_lanes(self, accounts: list[list[int | None]]) -> None:
        """In the first lane: start a confinement for each other lane now (as its account), so that each
        is ready when its lane is forked, once the tests are collected. One that cannot start is left to
        its lane, which then starts its own."""
        for number, account in enumerate(accounts, start=1):
            try:
                self.for_lanes.append(Confinement(self.job, self.base, 1, account, f"zygote-lane-{number}.log"))
            except OSError:
                self.for_lanes.append(None)

    def take_over(self, number: int) -> None:
        """In lane `number`, just forked: make the confinement started for it this lane's own (with the
        submission), and let go of the other lanes'. Without one, the lane starts its own (`warm_up`)."""
        mine = self.for_lanes[number - 1] if number <= len(self.for_lanes) else None
        for confinement in self.for_lanes:
            if confinement is not None and confinement is not mine:
                confinement.channel.close()
        self.for_lanes = []
        if mine is None:
            return
        try:
            mine.adopt()
        except OSError:  # no pidfd to watch it by: it is left to its parent's sweep, and a new one started
            mine.channel.close()
            return
        self.confinements_started += 1
        self._confinement = mine
        self._counted_by(mine)
        if self.source is not None:
            mine.load(self.job.submission, self.source)

    def let_go_of_lanes(self) -> None:
        """In the first lane, once the other lanes are forked: their confinements are theirs. Only the
        first processes stay, as this process's children, spared by its sweeps until it ends."""
        for confinement in self.for_lanes:
            if confinement is not None:
                confinement.channel.close()
                self.handed_over.append(confinement.process.pid)
        self.for_lanes = []

    def settle(self) -> None:
        """Wait until every confinement of this process's has its processes in its control group: a
        thread puts them there (see `Confinement`), and no thread may run across a fork of the lanes."""
        for confinement in [self._confinement, *self.retired, *self.for_lanes]:
            if confinement is not None:
                confinement.joined()

    def end_handed_over(self) -> None:
        """In the first lane, once the other lanes have ended: end and reap what is left of the confinements
        it started for them (their first processes are its children, and what those leave becomes its
        children too), whether their lanes ended them or were lost. Nothing is left for whatever adopts
        this process's orphans."""
        self.handed_over = []
        self.reap_strays()

    def forget_confinement(self) -> None:
        """In a lane forked from another: let go of that lane's confinement without ending it (it is the
        other lane's), closing only this process's copy of its socket, and count this lane's own from
        nothing."""
        for confinement in [self._confinement, *self.retired]:
            if confinement is not None:
                confinement.channel.close()
        self._confinement, self.retired, self.spare = None, [], None
        self.counted, self.shared, self.ended_cpu = None, None, 0.0

    def end_retired(self) -> None:
        while self.retired:
            self._ended(self.retired.pop())

    def end_confinement(self) -> None:
        """End the confinement and everything in it, the spare worker included (and the other lanes'
        confinements, where no lane took them over)."""
        for unused in self.for_lanes:
            if unused is not None:
                unused.close()
        self.for_lanes = []
        if self.spare is not None:
            self.spare.close()
            self.spare = None
        if self._confinement is not None:
            self._ended(self._confinement)
            self._confinement = None
        self.end_retired()
        self.reap_strays()
        cgroups.remove_pending(tries=20)  # the groups whose last processes were reaped just now

    def spawn(self, wait: bool = True) -> WorkerClient:
        """A new worker. Without `wait` the zygote's answer to its fork is read later (a spare's, when the
        test it is for takes it, or when the test running ends)."""
        self.workers_started += 1
        output = os.path.join(self.job.at(self.base, self.job.private), f"output-{self.workers_started}.txt")
        failures: list[str] = []
        for attempt in range(2):  # a broken zygote is replaced once; a second failure is the run's problem
            confinement = self.confinement()
            try:
                return WorkerClient(confinement=confinement, module=self.job.module, limits=self.job.limits,
                                    cpu=self.cpu_count(), wait=wait,
                                    output_path=output if attempt == 0 else output + ".again")
            except ZygoteUnavailable as exc:
                # The confinement is marked broken: the next attempt starts a new one. Its log is gone
                # with the job's folder, so what it said goes into the reason.
                log = confinement.log_tail()
                failures.append(f"{exc}" + (f"; its log ends:\n{log}" if log else "; its log is empty"))
        problem = "the worker's sandbox could not be started: " + " / then: ".join(failures)
        if problem not in self.problems:
            self.problems.append(problem)
        raise WorkerUnavailable("the grader could not start a worker for your code")

    def start_worker(self) -> WorkerClient:
        """A fresh worker with the submission imported, for one test.

        The next test's worker is started now, while this test runs, so that its start-up (a fork and
        the submission's import) is off the critical path. Each test still gets its own process, folder
        and output file.
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
        self.test_clients.append(client)
        try:
            client.wait_ready()
        except GradingStop as stop:
            self.import_failure = (type(stop), stop.message)
            raise
        if client.import_error is not None:
            self.import_failure = (client.import_error, "")
        elif not self.last_test:  # after the last test a spare would only be started to be killed
            self.spare = self.spawn(wait=False)
        return client

    @staticmethod
    def survived(spare: WorkerClient) -> bool:
        """Whether a spare finished its import and is still there to take calls."""
        try:
            spare.process.resolve()
            spare.wait_ready()
        except (GradingStop, ZygoteUnavailable):
            return False
        return spare.import_error is not None or spare.idle()

    def discard(self, client: WorkerClient) -> None:
        self.clean_up_after(client)
        Path(client.output_path).unlink(missing_ok=True)

    def clean_up_after(self, client: WorkerClient) -> None:
        confinement = self._confinement
        # Under namespaces the sweep below ends the worker with whatever it left: one request to the
        # zygote, and the worker's end is awaited once, after the sweep's answer.
        swept = (confinement is not None and confinement.namespaced and not confinement.broken
                 and client.process.confinement is confinement)
        client.close(swept=swept)
        if self.spare is not None and (self.spare.process.confinement.broken or not self.spare_forked()):
            self.spare.close()  # started in a confinement that broke since: not to be trusted with a test
            self.spare = None
        self.end_retired()
        if confinement is not None and confinement.namespaced:
            keep = {self.spare.process.pid} if self.spare is not None else set()
            if not confinement.sweep(keep) or (swept and not client.process.await_end()):
                self.end_confinement()
        self.reap_strays()

    def spare_forked(self) -> bool:
        """Whether the spare's fork was answered with a worker (read now if it was not yet)."""
        if self.spare is None:
            return False
        try:
            self.spare.process.resolve()
        except ZygoteUnavailable:
            return False
        return True

    def reap_strays(self) -> None:
        """Kill what a worker left behind outside a PID namespace: as a subreaper, its orphans became
        our children (and so does a namespace's init once its `bwrap` is gone)."""
        if not self.subreaper:
            return
        # Killed processes end as fast as the machine lets them: while fewer are left at each look, the
        # harness waits on; only 5 s without any ending is a failure.
        deadline, fewest = time.monotonic() + 5, None
        keep = {*self.siblings(), *self.handed_over}  # the other lanes (and their confinements): not strays
        if self._confinement is not None:
            keep.add(self._confinement.process.pid)
            if self.spare is not None and not self._confinement.namespaced:
                keep.add(self.spare.process.pid)
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
            if fewest is None or len(strays) < fewest:
                deadline, fewest = time.monotonic() + 5, len(strays)
            wait_for_any(strays, 0.01)
        self.problems.append("processes left by the submission could not all be stopped")
