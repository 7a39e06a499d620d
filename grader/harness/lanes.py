"""Lanes: one grading's tests run by several harness processes at once, on a machine with a core to
spare, so that a submission's feedback comes sooner.

When the job names accounts for extra lanes (the local backend does for a single grading as root, when
the tier has tests enough for each), the harness forks a helper per extra lane once it has collected the
tests and read the run: a helper has the same collection and the same submission by construction. Each
lane has a confinement of its own (its own worker account, zygote and namespaces): the first lane starts
the helpers' beside its collection, as their accounts, and each helper takes its own over when it is
forked (watching its first process, a child of the first lane's, through a pidfd), so that every lane's
first worker is ready about as soon as the first lane's; a helper that cannot take one over starts its
own. The lanes take the tests in collection order, each the next one no lane has taken as
soon as it is free (`claim`, a counter the lanes share under a lock), so that they end together however
long each test takes and however late a lane starts; every test still gets a fresh worker, and no lane's
workers can reach or starve another's. A helper sends its records and what decided how its tests ran
(`LaneReport`) through a pipe when its session ends; the first lane merges them in collection order
before writing the results. A helper that ends without sending them makes the run an error: the grader
cannot vouch for tests it has no result of. Which lane ran a test is a matter of timing, so nothing of a
grade may depend on it: what is said across tests (`outcomes.note_timeouts`) is settled on the merged
records.

A harness process keeps its part in the lanes in a `Lanes`; what a lane needs of the rest of the harness
(its problems, its records, how a forked process becomes a helper) it is handed, never reaches for.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from grader.confined.forking import die_with_parent
from grader.harness.contract import TestRecord

# How a forked process becomes the helper of lane `number` with its worker account ([uid, gid]): the
# harness's own business (its folder, output, account and confinement).
BecomeHelper = Callable[[int, list[int | None]], None]
CLAIM_BYTES = 8  # the shared count of tests taken


@dataclass
class Helper:
    """An extra lane, as the first lane sees it."""

    number: int
    pid: int
    results: int  # the read end of the pipe its records come through


@dataclass
class LaneReport:
    """What decided how a lane's tests ran, beside their records: the tests it recorded without running
    them, and why ("time": the grading's time was spent)."""

    not_run: dict[str, str] = field(default_factory=dict)


@dataclass
class Lanes:
    """One harness process's part in its grading's lanes."""

    number: int = 0  # the lane this process runs: 0 is the first, which writes the results
    count: int = 1  # how many lanes the grading has
    helpers: list[Helper] = field(default_factory=list)  # the first lane's helpers
    results: int | None = None  # a helper's pipe to the first lane
    claims: int | None = None  # a memory file the lanes share: the number of tests taken so far

    def pids(self) -> list[int]:
        """The helpers' pids: harness processes of this grading, which a sweep of its processes spares."""
        return [helper.pid for helper in self.helpers]

    def fork(self, accounts: list[list[int | None]], become_helper: BecomeHelper) -> None:
        """Fork a helper per extra lane (one per account), once the tests are collected and the run is in.
        In a helper, returns once `become_helper` has set it up."""
        parent = os.getpid()
        self.count = len(accounts) + 1
        if self.count > 1:
            self.claims = os.memfd_create("grader-claims")  # closed on exec: no worker, zygote or loader has it
            os.pwrite(self.claims, bytes(CLAIM_BYTES), 0)
        for number in range(1, self.count):
            results_read, results_write = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(results_read)
                for helper in self.helpers:  # the earlier helpers' pipes are the first lane's
                    os.close(helper.results)
                self.helpers = []
                die_with_parent(parent)  # the first lane's end (a timeout, a kill) ends this lane too
                self.number, self.results = number, results_write
                become_helper(number, accounts[number - 1])
                return
            os.close(results_write)
            self.helpers.append(Helper(number, pid, results_read))

    def claim(self, tests: int) -> int | None:
        """The position (in collection order) of the next of `tests` tests that no lane has taken, now
        this lane's; None when all are taken."""
        assert self.claims is not None, "lanes share a counter from their fork on"
        fcntl.lockf(self.claims, fcntl.LOCK_EX)  # a lock of this process's: the forked lanes exclude each other
        try:
            taken = int.from_bytes(os.pread(self.claims, CLAIM_BYTES, 0), "little")
            if taken >= tests:
                return None
            os.pwrite(self.claims, (taken + 1).to_bytes(CLAIM_BYTES, "little"), 0)
            return taken
        finally:
            fcntl.lockf(self.claims, fcntl.LOCK_UN)

    def send(self, problems: list[str], records: Iterable[TestRecord], report: LaneReport) -> NoReturn:
        """In a helper, at the end of its session: its records, problems and report to the first lane, then
        leave."""
        document = {"problems": problems, "tests": [record.to_dict() for record in records],
                    "not_run": report.not_run}
        data = json.dumps(document).encode()
        pipe = self.results
        assert pipe is not None, "only a helper lane sends, and it has its pipe"
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(pipe, view):]
        finally:
            os._exit(0)

    def gather(self, problems: list[str], records: dict[str, TestRecord], report: LaneReport,
               order: list[str]) -> dict[str, TestRecord]:
        """In the first lane, at the end of its session: `records` with every helper's, in collection
        `order`, and the helpers' reports added to `report`, its own; a helper without them is added to
        `problems`, the run's."""
        for helper in self.helpers:
            chunks = []
            while chunk := os.read(helper.results, 1 << 16):
                chunks.append(chunk)
            os.close(helper.results)
            _, status = os.waitpid(helper.pid, 0)
            try:
                document: dict[str, Any] = json.loads(b"".join(chunks))
                tests, sent = document["tests"], document["problems"]
                not_run = dict(document["not_run"])
            except (ValueError, KeyError, TypeError):
                code = os.waitstatus_to_exitcode(status)
                problems.append(f"lane {helper.number + 1} of the harness ended without results (exit status {code})")
                continue
            problems.extend(p for p in sent if p not in problems)
            report.not_run.update(not_run)
            for entry in tests:  # a lane of this very harness wrote them: records as they were
                record = TestRecord(**entry)
                records[record.nodeid] = record
        self.helpers = []
        position = {nodeid: i for i, nodeid in enumerate(order)}
        return dict(sorted(records.items(), key=lambda kv: position.get(kv[0], len(position))))
