"""What a platform would show of a bundle tried on one submission: the run's outcome, as the platform
reads its results.json, in a few lines for whoever tried it, or in one line a submission.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Outcome:
    """One submission's run, as its platform would take it."""

    platform: str
    exit_status: int | None  # None: stopped at the platform's timeout
    log: str  # what the container printed: the staff's view (Gradescope's stdout, PrairieLearn's job log)
    folder: Path  # where results.json and the log were kept
    results: dict[str, Any] | None = None  # None: the platform shows a failed run, no results
    failure: str = ""  # why the platform would show no results

    @property
    def results_file(self) -> Path:
        return self.folder / "results.json"

    def summary(self) -> str:
        """What the platform will show, in a few lines, and where the files are."""
        lines = [*(_gradescope_summary(self) if self.platform == "gradescope" else _prairielearn_summary(self))]
        log = self.folder / ("stdout" if self.platform == "gradescope" else "job.log")
        where = f"results.json: {self.results_file}" if self.results is not None else "no results.json"
        lines.append(f"  {where}; the log the staff read: {log}")
        return "\n".join(lines)


def _gradescope_summary(outcome: Outcome) -> Iterable[str]:
    results = outcome.results
    if results is None:
        yield f"Gradescope would show a failed autograder run: {outcome.failure}"
        return
    extra = results.get("extra_data", {})
    yield (f"Gradescope: {results.get('score')} of {extra.get('max_score')} points, run {extra.get('status')}"
           + _isolation(outcome.log, results))
    tests = [t for t in results.get("tests", []) if "max_score" in t]
    by_visibility: dict[str, list[int]] = {}
    for test in tests:
        row = by_visibility.setdefault(test.get("visibility", "visible"), [0, 0])
        row[0] += test.get("status") == "passed"
        row[1] += 1
    for visibility, (passed, count) in by_visibility.items():
        yield f"  {visibility:<16} {passed:>4} of {count} tests passed" + (
            "" if visibility == "visible" else " (students see them, and the total, only then)")


def _isolation(log: str, results: dict[str, Any] | None = None) -> str:
    """How the submission was kept apart: as results.json records it, else as the runner's log says it."""
    recorded = (results or {}).get("extra_data", (results or {}).get("provenance", {}))
    if isinstance(recorded, dict) and recorded.get("isolation"):
        return f", isolation {recorded['isolation']}"
    found = re.search(r"^outcome: .*, isolation (\w+)\r?$", log, re.M)  # a TTY ends lines with CR LF
    return f", isolation {found.group(1)}" if found else ""


def _prairielearn_summary(outcome: Outcome) -> Iterable[str]:
    results = outcome.results
    if results is None:
        yield f"PrairieLearn would show a failed grading job: {outcome.failure}"
        return
    score = results.get("score")
    gradable = "gradable" if results.get("gradable", True) else "not gradable (no attempt used)"
    shown = f"score {score:.0%}" if isinstance(score, (int, float)) else "no score"
    yield f"PrairieLearn: {shown}, {gradable}" + _isolation(outcome.log, results)
    tests = results.get("tests", [])
    if tests:
        full = sum(t.get("points") == t.get("max_points") for t in tests)
        yield f"  {full} of {len(tests)} tests at full points"
    for error in results.get("format_errors", []) or []:
        yield f"  format error: {str(error).splitlines()[0] if str(error) else ''}"
    if results.get("message"):
        yield f"  message: {str(results['message']).splitlines()[0]}"


def score_line(name: str, outcome: Outcome) -> str:
    """One submission's outcome in a line: its score as the platform records it, the run's status and
    isolation."""
    results = outcome.results
    if results is None:
        return f"{name}: no results ({outcome.failure})"
    if outcome.platform == "gradescope":
        extra = results.get("extra_data", {})
        return (f"{name}: {results.get('score')}/{extra.get('max_score')} points, {extra.get('status')}"
                + _isolation(outcome.log, results))
    score = results.get("score")
    shown = f"{score:.0%}" if isinstance(score, (int, float)) else "no score"
    status = results.get("provenance", {}).get("status") or ("graded" if results.get("gradable", True) else "not gradable")
    return f"{name}: {shown}, {status}" + _isolation(outcome.log, results)


def parsed_results(data: bytes | None) -> tuple[dict[str, Any] | None, str]:
    """results.json as the platform reads it, or None and why not."""
    if data is None:
        return None, "no results.json was written"
    try:
        value = json.loads(data)
    except ValueError as exc:
        return None, f"results.json is not JSON ({exc})"
    return (value, "") if isinstance(value, dict) else (None, "results.json is not a JSON object")
