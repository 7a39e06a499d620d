"""Golden scorecards: real gradings, stored as JSON, for the tests of what is made from a scorecard
(reports, exports, the published site) to read instead of grading in a sandbox each time.

`python -m tests.golden` grades every case afresh and writes them again; tests/test_golden.py checks
that grading today still gives them, bar what differs from run to run (`comparable`), so they cannot rot.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.core.scorecard import Scorecard
from tests.helpers import EXERCISE, REFERENCE, STUB, mutant_file

GOLDEN = Path(__file__).resolve().parent
MUTANT = mutant_file("03_skip_blocked_head")
LOOP = 'raise NotImplementedError("schedule() is not implemented yet")'
# What changes from one grading to the next, or with the machine and the release, not with the result.
VARYING = ("graded_at", "duration_s", "grader_version", "exercise_fingerprint", "isolation")
VARYING_PER_TEST = ("duration_s", "cpu_wait_s")


@dataclass(frozen=True)
class Case:
    """A submission, the tier it is graded on, and the exercise's limits changed for it (if any)."""

    source: Callable[[], bytes]
    tier: str
    limits: tuple[tuple[str, float], ...] = ()
    killed: bool = False  # the harness ran, then was killed before its results reached the host


def _stub_with(body: str) -> Callable[[], bytes]:
    def source() -> bytes:
        text = STUB.read_text(encoding="utf-8")
        assert LOOP in text
        return text.replace(LOOP, body, 1).encode("utf-8")

    return source


def _evil() -> bytes:
    from tests.test_reports import EVIL

    return _stub_with(f"print({EVIL!r}); raise ValueError({EVIL!r})")()


CASES: dict[str, Case] = {
    "reference": Case(REFERENCE.read_bytes, "premium"),
    "reference_free": Case(REFERENCE.read_bytes, "free"),
    "stub": Case(STUB.read_bytes, "premium"),
    "mutant": Case(MUTANT.read_bytes, "premium"),
    # Prints and raises hostile text (the reports' escaping), on the free tier.
    "evil_free": Case(_evil, "free"),
    # Every call times out (a limit of 1 s, so that it is quick).
    "timeout_free": Case(_stub_with("while True: pass"), "free", (("call_timeout_s", 1),)),
    # The grader cannot vouch for a result: an error, not a grade.
    "error_killed": Case(REFERENCE.read_bytes, "premium", killed=True),
    "rejected_unclosed": Case(lambda: b"def schedule(self:\n    return []\n", "premium"),
    "rejected_syntax": Case(lambda: b"def f(:\n", "premium"),
}


def path(name: str) -> Path:
    return GOLDEN / f"{name}.json"


def load(name: str) -> Scorecard:
    """The golden scorecard `name` (one of CASES), as a grading gave it."""
    return Scorecard.read(path(name))


def grade(name: str, folder: Path) -> Scorecard:
    """Grade case `name` afresh in the local sandbox (`folder`: room for an exercise with other limits)."""
    from grader.audit.match import diagnose_graded
    from grader.core.exercise import load_exercise
    from grader.core.grading import grade_bytes
    from grader.sandbox.local import run_local
    from tests.helpers import exercise_copy

    case = CASES[name]
    exercise = load_exercise(str(exercise_copy(folder, **dict(case.limits))) if case.limits else EXERCISE)
    return grade_bytes(case.source(), exercise, case.tier, _killed(run_local) if case.killed else run_local, "local",
                       diagnose=diagnose_graded)


def _killed(backend: Any) -> Any:
    """`backend`, its run ending as one whose harness was killed (SIGKILL) before it printed its results."""
    from dataclasses import replace

    def run(*args: Any) -> Any:
        return replace(backend(*args), output=b"", exit_status=137)

    return run


def grade_all(folder: Path, jobs: int = 3) -> dict[str, Scorecard]:
    """Every case graded afresh, `jobs` at a time, each with a folder of its own under `folder`."""
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {name: pool.submit(grade, name, folder / name) for name in CASES}
        return {name: future.result() for name, future in futures.items()}


def comparable(card: Scorecard) -> dict[str, Any]:
    """The scorecard as data without what varies between gradings of the same file (`VARYING`)."""
    data = json.loads(card.to_json())
    for key in VARYING:
        data.pop(key, None)
    for test in data["tests"]:
        for key in VARYING_PER_TEST:
            test.pop(key, None)
    return data
