"""PrairieLearn `results.json` (https://prairielearn.readthedocs.io/en/latest/externalGrading/): `score`
as a fraction in [0, 1], `gradable` (false for invalid student input and for a run the grader could
not vouch for: "invalid, not gradable", no points and no attempt used) with `format_errors`, `message`, `output`, `images` and `tests[]` with
`name`, `description`, `points`, `max_points`, `message`, `output`, `images` (each `{label, url}`, the
url a `data:` URL: here the trace timelines as SVG). `succeeded` and `max_points` as PrairieLearn's
own Python grader writes them (false with score 0 when the grader failed; PrairieLearn's grader host
reads results.json only when the entrypoint exits 0, so the bundle's entrypoint does whenever it
wrote one, and the message says the run is no grade of the student's code). PrairieLearn shows the
results at once and has no "after the due date": a test of a suite that is not `visible` (the same
`suite_visibility` as for Gradescope) shows its name, pass or fail and points, never its message,
output or images, and the diagnosis is left out when a held-back test failed.
PrairieLearn keeps the whole object with the submission, so `provenance` (submission hash, grader
version, exercise, tier) stays with it. The file must stay under 1 MB.
"""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from typing import Any

from grader.core.scorecard import Scorecard, TestResult
from grader.report import MESSAGE_LIMIT, clip, one_line, printable, result_text, run_text
from grader.report.exports.shared import provenance, suite_visibility
from grader.report.render import render_timeline_svg

# What a student reads on PrairieLearn in place of a held-back test's details.
HELD_DETAILS = "the details of this suite's tests are not shown"
PRAIRIELEARN_MAX_BYTES = 1_000_000
PRAIRIELEARN_IMAGE_BYTES = 200_000  # the largest timeline image kept
PRAIRIELEARN_SHRINK = (2_000, 500, 100, 0)  # characters of each test's message and output kept when too big


def _message(test: TestResult) -> str:
    text, cut = clip(printable(test.message).strip("\n"), MESSAGE_LIMIT)
    return text + (f"\n… {cut:,} more characters not shown" if cut else "")


def _headline(card: Scorecard) -> str:
    if card.status == "rejected":
        return f"Not graded, the submission was rejected: {one_line(card.reason, 300)}"
    if card.status == "error":
        return f"Not graded, the grader could not vouch for a result: {one_line(card.reason, 300)}"
    passed = sum(t.status == "passed" for t in card.tests)
    return f"{card.score}/{card.max_score} points: {passed} of {len(card.tests)} tests passed"


def _svg_url(svg: str) -> str:
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")


def _images(test: TestResult) -> list[dict[str, str]]:
    """The timeline of each trace artifact of a failed test, as an SVG data URL (one too large to be
    worth its place is left out: the step table in the output says the same)."""
    if test.status == "passed":
        return []
    images = []
    for artifact in test.artifacts:
        if isinstance(artifact, dict) and artifact.get("kind") == "trace":
            url = _svg_url(render_timeline_svg(artifact))
            if len(url) <= PRAIRIELEARN_IMAGE_BYTES:
                images.append({"label": f"{one_line(test.name, 120)}: {one_line(artifact.get('title', 'trace'), 80)}",
                               "url": url})
    return images


def _prairielearn_test(test: TestResult, shown: str) -> dict[str, Any]:
    """A test as PrairieLearn shows it. PrairieLearn shows external grading results at once, with no
    "after the due date": a test of a suite held back anywhere else (hidden, after_due_date,
    after_published) shows its name, pass or fail and points, never its message, output or timelines."""
    base = {"name": test.name, "description": one_line(test.description, 400) or f"a {test.suite} test",
            "points": test.score, "max_points": test.max_score}
    if shown != "visible":
        verdict = "passed" if test.status == "passed" else "did not pass"
        return {**base, "message": f"{verdict}; {HELD_DETAILS}", "output": "", "images": []}
    return {**base, "message": _message(test), "output": result_text(test, message=False), "images": _images(test)}


def prairielearn(card: Scorecard) -> str:
    graded = card.status == "graded"
    fraction = min(1.0, max(0.0, card.score / card.max_score)) if graded and card.max_score > 0 else 0.0
    shown = suite_visibility(card)
    tests = [_prairielearn_test(test, shown[test.suite]) for test in (card.tests if graded else [])]
    # A diagnosis drawn from a held-back suite's failures says what its messages would: only where every
    # test it could come from is shown.
    told = card if all(shown[t.suite] == "visible" for t in card.tests if t.status != "passed") else replace(
        card, diagnosis=[])
    results: dict[str, Any] = {
        "succeeded": card.status != "error",
        # Only a graded run counts: a rejected file or a run the grader could not vouch for is "invalid,
        # not gradable", so PrairieLearn records no 0 and the student keeps the attempt.
        "gradable": graded,
        "score": round(fraction, 6),
        "max_points": card.max_score,
        "message": _headline(card),
        "output": run_text(told),
        "tests": tests,
        "provenance": provenance(card),
    }
    if card.status == "rejected":
        results["format_errors"] = [clip(printable(card.reason).strip(), 2_000)[0] or "the submission was rejected"]
    elif not graded:
        results["format_errors"] = [
            "the grader could not grade this submission, which is no judgement of your code: submit it again "
            f"({clip(printable(card.reason).strip(), 1_500)[0] or 'no reason given'})"]
    return _under_limit(results, tests)


def _under_limit(results: dict[str, Any], tests: list[dict[str, Any]]) -> str:
    """The results as JSON under PrairieLearn's 1 MB. Text comes first: without the images, every
    test's message and output are shortened alike until they fit; then the images go back, test by
    test in order, while they fit (the step tables in the output say what a timeline shows)."""
    def size() -> int:
        return len(json.dumps(results, indent=2, ensure_ascii=False).encode("utf-8"))

    budget = int(PRAIRIELEARN_MAX_BYTES * 0.95)
    images = [test["images"] for test in tests]
    for test in tests:
        test["images"] = []
    full = [(test["message"], test["output"]) for test in tests]
    for limit in PRAIRIELEARN_SHRINK:
        if size() <= budget:
            break
        for test, (message, output) in zip(tests, full):
            test["message"], test["output"] = _shorter(message, limit), _shorter(output, limit)
    room = budget - size()
    for test, kept in zip(tests, images):
        cost = len(json.dumps(kept, indent=2, ensure_ascii=False).encode("utf-8")) + 16 * len(kept)  # + indentation
        if kept and cost <= room:
            test["images"], room = kept, room - cost
    return json.dumps(results, indent=2, ensure_ascii=False) + "\n"


def _shorter(text: str, limit: int) -> str:
    kept, cut = clip(text, limit)
    return kept + (f"\n… {cut:,} more characters not shown (the results must stay under 1 MB)" if cut else "")
