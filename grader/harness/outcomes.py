"""A test's outcome turned into its record: the status, and the message a student can act on.

A test that raised is explained by what it raised (a stop the harness made, the submission's own
exception, a failed assertion, a timeout); a test the grading's time did not reach is not run, saying why.
"""

from __future__ import annotations

import re

import pytest

from grader.harness.contract import TestRecord, TestStatus
from grader.harness.lanes import LaneReport
from grader.harness.state import HARNESS_MEMORY_MB, HarnessState
from grader.harness.stops import GradingStop, RemoteException


class TimeRanOut(GradingStop):
    """The grading's time ran out during a test."""

    status = "timeout"


def not_run_message(total_s: float) -> str:
    return f"not run: the grading's time ran out ({total_s:g} s)"


def note_timeouts(records: dict[str, TestRecord], report: LaneReport) -> None:
    """Say, in each test that ran out of time, what the timeouts cost: those tests alone, every other test
    ran with its own limits (a rare hang costs only the tests that reach it, wherever they sit in the
    collection order). Settled on the merged records, whichever lane ran which test (`lanes`)."""
    timed_out = [record for nodeid, record in records.items()
                 if record.status == "timeout" and report.not_run.get(nodeid) != "time"]
    if not timed_out or len(timed_out) == len(records):
        return
    names = ", ".join(record.name for record in timed_out[:TIMEOUTS_NAMED])
    more = f" and {len(timed_out) - TIMEOUTS_NAMED} more" if len(timed_out) > TIMEOUTS_NAMED else ""
    ran = len(records) - len(timed_out) - sum(1 for why in report.not_run.values() if why == "time")
    if ran == 0:
        return  # no other test ran: the timeouts cost nothing it could say
    them = "it" if len(timed_out) == 1 else "them"
    others = "test ran with its" if ran == 1 else "tests ran with their"
    note = (f"{timeouts_phrase(len(timed_out))} of this grading ran out of time ({names}{more}); that cost only "
            f"{them}: the {ran} other {others} own limits.")
    for record in timed_out:
        if note not in record.message:
            record.message = f"{record.message}\n{note}" if record.message else note


TIMEOUTS_NAMED = 10  # the timed-out tests named in the note, at most


def timeouts_phrase(count: int) -> str:
    return "1 test" if count == 1 else f"{count} tests"


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


# pytest's hints to whoever runs it (more verbosity, a hidden part of a diff): a student cannot pass -v to
# the grader, so they are taken out of what a student reads.
_DEVELOPER_HINTS = re.compile(r"^\s*(?:Use -v to get (?:more|the full) diff|\.\.\.Full output truncated .*|"
                              r".*,\s*use -v{1,2} to show\)?)\s*$", re.IGNORECASE)


def without_developer_hints(text: str) -> str:
    """`text` without the lines in which pytest tells its user to run it again with -v or -vv."""
    return "\n".join(line for line in text.split("\n") if not _DEVELOPER_HINTS.match(line))


def assertion_message(exc: AssertionError, details: bool, description: str = "") -> str:
    """What a student reads of a failed assert. pytest's rewriting appends "assert <expression>" (the values
    compared) to the author's message: with details, both, the author's words first; without, the
    author's words alone, or, for a bare assert, the rule the test checks (its description), so that a
    held-back failure still says what to fix."""
    text = without_developer_hints(str(exc))
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
        # Its workloads are drawn from the run's seed: another submission's run draws others.
        seeded="seed" in getattr(item, "fixturenames", ()),
    )
    return record
