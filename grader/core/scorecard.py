"""The scorecard: one JSON document per graded submission, the contract every report reads.

Reports, exports, the store and the published site are all functions of a `Scorecard`; nothing
downstream goes back to the harness's raw results.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, get_args

from grader.harness.contract import TEST_STATUSES as TEST_STATUSES
from grader.harness.contract import TestRecord, TestStatus
from grader.text import without_surrogates

SCHEMA_VERSION = 1

# What a whole run can end as: graded (the tests ran), rejected (the submission was refused before
# running: syntax error, wrong encoding, too big, empty) or error (the grader cannot vouch for a result).
RunStatus = Literal["graded", "rejected", "error"]
RUN_STATUSES: tuple[RunStatus, ...] = get_args(RunStatus)
# What one test can end as (`TestStatus`, `TEST_STATUSES`) is the contract's: the harness records it.
TIMED_OUT = "grading did not finish"  # how the reason of a run stopped at the exercise's time limit starts


def stopped_at_time_limit(card: Scorecard) -> bool:
    """Whether the whole run was stopped at the exercise's time limit (an `error` the grader gives, not
    a fault of its own): told apart from wrong answers wherever results are counted."""
    return card.status == "error" and card.reason.startswith(TIMED_OUT)


def utc_now() -> str:
    """A moment as scorecards and the store write it: UTC, to the second, ISO 8601."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass
class TestResult:
    """One test on the card: the harness's record of it (`contract.TestRecord`, checked where it entered
    the host) with its points. pytest's `nodeid` is the card's `id`."""

    __test__ = False  # a result, not a test class, wherever pytest meets its name

    id: str
    name: str
    suite: str
    status: TestStatus
    score: int
    max_score: int
    message: str = ""
    description: str = ""
    duration_s: float = 0.0
    # Seconds by which the test's time limits were moved because its processes waited for a CPU that
    # other work held (a busy machine): that time is not the submission's (grader/confined/clock.py).
    cpu_wait_s: float = 0.0
    traceback: list[str] = field(default_factory=list)
    output: str = ""
    output_cut: int = 0
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    # Its workloads were drawn from the run's seed, so another submission's run tested others: what
    # `similarity` leaves out when it asks whether two submissions fail alike.
    seeded: bool = False

    @classmethod
    def scored(cls, record: TestRecord, points: int) -> TestResult:
        """The card's result of a test the harness recorded, worth `points`, which only a pass earns."""
        return cls(id=record.nodeid, name=record.name, suite=record.suite, status=record.status,
                   score=points if record.status == "passed" else 0, max_score=points, message=record.message,
                   description=record.description, duration_s=record.duration_s, cpu_wait_s=record.cpu_wait_s,
                   traceback=record.traceback, output=record.output, output_cut=record.output_cut,
                   artifacts=record.artifacts, seeded=record.seeded)


@dataclass
class LockedTest:
    name: str
    suite: str
    max_score: int


@dataclass
class Diagnosis:
    """A misconception the submission's failures look like: a hand-written mutant's hint, in a
    student's words ("your program behaves like one that <hint>"), and how alike the two runs' failures
    are (0..1; grader/audit/match.py)."""

    mutant: str  # the mutant's file name without .py: what the instructor's counts are keyed by
    hint: str
    similarity: float


@dataclass
class Scorecard:
    exercise: str
    tier: str
    submission_sha256: str
    status: RunStatus
    score: int
    max_score: int
    tests: list[TestResult] = field(default_factory=list)
    locked: list[LockedTest] = field(default_factory=list)
    reason: str = ""  # why a run was rejected or errored, in plain words
    title: str = ""
    backend: str = ""
    # How the submission's processes were kept apart from the grader (`harness.contract.ISOLATIONS`):
    # "namespaces" (the local sandbox), "container" (the Docker sandbox), "account" (inside a container
    # someone else started: an account of its own, limits, filters; see docs/security.md),
    # "none" (--unsafe-local); "" where nothing ran.
    isolation: str = ""
    graded_at: str = ""
    duration_s: float = 0.0
    grader_version: str = ""
    seed: int | None = None  # what random workloads were drawn from (grader.core.seeding); None: not run
    suite_labels: dict[str, str] = field(default_factory=dict)  # suite name -> what a student sees
    # When Gradescope shows each suite's results (exercise.toml's `visibility`, for the suites that set
    # one), and the suites of the free tier, whose results are shown at once unless they set otherwise.
    suite_visibility: dict[str, str] = field(default_factory=dict)
    open_suites: list[str] = field(default_factory=list)
    submission_file: str = ""  # the file name the submission is graded as (exercise.toml's `submission`)
    exercise_fingerprint: str = ""  # the suites, exercise.toml and reference graded against (fingerprint.py)
    # The misconceptions a graded run's failures look like, the closest first (grader/diagnosis/);
    # empty for full marks, a run that is not `graded`, or failures like no mutant's.
    diagnosis: list[Diagnosis] = field(default_factory=list)
    schema_version: int = SCHEMA_VERSION

    @property
    def exercise_max_score(self) -> int:
        """The points of the whole exercise: this tier's and those of the tests it did not run (`locked`).
        A free tier's 10/10 is 10 of these, never the exercise's full marks."""
        return self.max_score + sum(test.max_score for test in self.locked)

    def suite_label(self, suite: str) -> str:
        return self.suite_labels.get(suite) or f"{suite} tests"

    @property
    def suites(self) -> dict[str, dict[str, int]]:
        """Per suite: tests, passed, score, max_score (derived, so it can never disagree with tests)."""
        summary: dict[str, dict[str, int]] = {}
        for test in self.tests:
            row = summary.setdefault(test.suite, {"tests": 0, "passed": 0, "score": 0, "max_score": 0})
            row["tests"] += 1
            row["passed"] += test.status == "passed"
            row["score"] += test.score
            row["max_score"] += test.max_score
        return summary

    def to_dict(self) -> dict[str, Any]:
        """The scorecard as plain data, as `to_json` writes it. Its values are the scorecard's own, not
        copies (`dataclasses.asdict` deep-copied every test's artifacts, for a document
        that is only serialised)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["tests"] = [dict(vars(test)) for test in self.tests]
        data["locked"] = [dict(vars(test)) for test in self.locked]
        data["diagnosis"] = [dict(vars(found)) for found in self.diagnosis]
        data["suites"] = self.suites
        return data

    def to_json(self, compact: bool = False) -> str:
        """The scorecard as JSON: indented for a reader, or `compact` (for the store: json's C encoder, where
        the indenting one is pure Python and far slower)."""
        # Text from a submission is made valid where results enter the host (grading.judge, by TestRecord.from_untrusted); this
        # is the last guard before a file or the store, so one stray surrogate can never stop a write.
        text = json.dumps(self.to_dict(), indent=None if compact else 2, ensure_ascii=False,
                          separators=(",", ":") if compact else None)
        return without_surrogates(text)

    def write(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json() + "\n", encoding="utf-8")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Scorecard:
        if data.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(f"scorecard schema version {data.get('schema_version')!r} is not {SCHEMA_VERSION}")
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["tests"] = [TestResult(**t) for t in data.get("tests", [])]
        values["locked"] = [LockedTest(**t) for t in data.get("locked", [])]
        values["diagnosis"] = [Diagnosis(**d) for d in data.get("diagnosis", [])]
        card = cls(**values)
        if card.status not in RUN_STATUSES:
            raise ValueError(f"unknown scorecard status {card.status!r}")
        return card

    @classmethod
    def read(cls, path: str | Path) -> Scorecard:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: not a readable scorecard ({exc})") from None
        if not isinstance(data, dict) or "schema_version" not in data or "status" not in data:
            raise ValueError(f"{path}: not a scorecard (a scorecard is the JSON that `grader grade --json` writes, "
                             "with schema_version, status and score)")
        try:
            return cls.from_dict(data)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
        except TypeError as exc:
            raise ValueError(f"{path}: malformed scorecard ({exc})") from None
