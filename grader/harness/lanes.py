"""Lanes: one grading's tests run by several harness processes at once, on a machine with a core to
spare, so that a submission's feedback comes sooner.

When the job names accounts for extra lanes (the local backend does for a single grading as root), the
harness forks a helper per extra lane once the tests are collected and the submission is in hand. Lane
k of n runs the tests k, k+n, k+2n... of the collection order; every test still gets a fresh worker,
and each lane has its own worker account and its own confinement (its own zygote and namespaces), so
no lane's workers can reach or starve another's. A helper sends its records through a pipe when its
session ends; the first lane merges them in collection order before writing the results. A helper that
ends without sending them makes the run an error: the grader cannot vouch for tests it has no result of.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from grader.confined.forking import die_with_parent

if TYPE_CHECKING:
    import pytest

    from grader.harness.plugin import HarnessState



@dataclass
class Helper:
    """An extra lane, as the first lane sees it."""

    number: int
    pid: int
    results: int  # the read end of the pipe its records come through


def split(harness: HarnessState, session: pytest.Session) -> None:
    """Fork a helper per extra lane and keep this lane's share of the tests. In a helper, returns
    with the helper set up for its own share."""
    accounts = harness.job.lane_accounts
    items = list(session.items)
    if not accounts or len(items) < 2 or harness.problems:
        return
    count = min(len(accounts) + 1, len(items))
    harness.order = [item.nodeid for item in items]
    parent = os.getpid()
    for number in range(1, count):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            for helper in harness.helpers:  # the earlier helpers' pipes are the first lane's
                os.close(helper.results)
            harness.helpers = []
            _become_helper(harness, number, accounts[number - 1], write_end, parent)
            session.items[:] = items[number::count]
            return
        os.close(write_end)
        harness.helpers.append(Helper(number, pid, read_end))
    session.items[:] = items[0::count]


def _become_helper(harness: HarnessState, number: int, account: list[int | None], results: int,
                   parent: int) -> None:
    die_with_parent(parent)  # the first lane's end (a timeout, a kill) ends this lane too
    harness.lane, harness.lane_results = number, results
    harness.pool.subreaper = harness.pool.become_subreaper()  # not inherited through fork
    # The first lane's confinement stays the first lane's: forget its socket without ending it.
    harness.pool.forget_confinement()
    job = harness.job
    private = f"{job.private}/lane-{number}"
    os.mkdir(harness.path(private), 0o700)
    job.private, job.worker_user, job.worker_group = private, account[0], account[1]
    # What this lane prints goes to a log of its own, not into the first lane's output and results.
    log = os.open(os.path.join(harness.path(private), "lane.log"),
                  os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    harness.pool.warm_up()


def send(harness: HarnessState) -> None:
    """In a helper, at the end of its session: its records and problems to the first lane, then leave."""
    document = {"problems": harness.problems, "tests": [r.to_dict() for r in harness.records.values()]}
    data = json.dumps(document).encode()
    pipe = harness.lane_results
    assert pipe is not None, "only a helper lane sends, and it has its pipe"
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(pipe, view):]
    finally:
        os._exit(0)


def gather(harness: HarnessState) -> None:
    """In the first lane, at the end of its session: every helper's records, merged in collection
    order; a helper without them is a problem of the run."""
    for helper in harness.helpers:
        chunks = []
        while chunk := os.read(helper.results, 1 << 16):
            chunks.append(chunk)
        os.close(helper.results)
        _, status = os.waitpid(helper.pid, 0)
        try:
            document: dict[str, Any] = json.loads(b"".join(chunks))
            tests, problems = document["tests"], document["problems"]
        except (ValueError, KeyError, TypeError):
            code = os.waitstatus_to_exitcode(status)
            harness.problems.append(f"lane {helper.number + 1} of the harness ended without results "
                                    f"(exit status {code})")
            continue
        harness.problems.extend(p for p in problems if p not in harness.problems)
        harness.merge_records(tests)
    harness.helpers = []
    position = {nodeid: i for i, nodeid in enumerate(harness.order)}
    harness.records = dict(sorted(harness.records.items(), key=lambda kv: position.get(kv[0], len(position))))
