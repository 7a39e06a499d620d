"""What a report says about a run as a whole: failures grouped by cause, and what the run covered.

One bug often fails many tests, each with its own scenario but the same broken rule ("a decode gets
exactly 1 token, but r3 got 2"; in the next test, "... but r7 got 2"). Listed one by one, sixteen
failures read as sixteen bugs. Here failures that share a cause are grouped: the cause is said once,
with the tests it fails named once each.

Two failures share a cause when their messages' first lines are the same once the particulars of
each scenario are masked: numbers, request-style ids (`r12`) and bracketed lists (plans, id lists).
The first line is where a message says what broke and, for a divergence, the first difference; its
details (the scenario, the trace) stay with each test.

Everything here works on the report's view of each test (grader.report.result_view), so it is a pure
function of the scorecard like every other part of a report.
"""

from __future__ import annotations

import re
from typing import Any

from grader.core.scorecard import Scorecard

_LISTS = re.compile(r"\[[^\[\]]*\]")
_IDS = re.compile(r"\b[A-Za-z]\d+\b")
_NUMBERS = re.compile(r"\d+(?:[.,]\d+)*")


def cause_key(view: dict[str, Any]) -> str:
    """The cause of a failure, with what differs from scenario to scenario masked."""
    line = next((line for line in str(view.get("message", "")).split("\n") if line.strip()), "")
    masked = line.strip()
    for _ in range(4):  # nested lists: innermost first
        masked = _LISTS.sub("[…]", masked)
    masked = _IDS.sub("x#", masked)
    masked = _NUMBERS.sub("#", masked)
    return f"{view.get('status', '')}\0{' '.join(masked.split())}"


def failure_groups(views: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The failing tests' views grouped by cause, in order of first appearance.

    Each group: `cause` (the first test's headline, as it was written), `lead` (the first test's view),
    `tests` (every view, the lead first), `count`. Every view after the lead of its group gets
    `same_as` (the lead's name and anchor), so a report can say so instead of repeating it. A test
    without a message is a group of its own; every other view gets `same_as` None.
    """
    groups: dict[str, dict[str, Any]] = {}
    order: list[dict[str, Any]] = []
    for view in views:
        view["same_as"] = None
    for view in (v for v in views if not v.get("passed")):
        key = cause_key(view) if view.get("message") else f"\0{view.get('anchor', id(view))}"
        group = groups.get(key)
        if group is None:
            group = {"cause": view.get("headline", ""), "lead": view, "tests": [], "count": 0}
            groups[key] = group
            order.append(group)
        else:
            view["same_as"] = {"name": group["lead"]["name"], "anchor": group["lead"]["anchor"]}
        group["tests"].append(view)
        group["count"] += 1
    return order


def coverage(card: Scorecard) -> dict[str, Any]:
    """What the run checked and what it did not: the tests run, and the behaviours left unchecked
    (one per test of a suite this tier does not run). `complete` is False while any test is locked:
    a report then never calls the result complete ("well done"), and says what was not checked."""
    locked = len(card.locked)
    ran = len(card.tests)
    label = card.suite_labels.get if card.suite_labels else (lambda name, default=None: name)
    suites = sorted({label(t.suite, t.suite) for t in card.tests})
    sentence = ""
    if locked:
        held = sorted({label(t.suite, t.suite) for t in card.locked})
        sentence = (f"The {card.tier} tier ran {ran} test{'s' if ran != 1 else ''} ({', '.join(suites) or 'none'}). "
                    f"{locked} more test{'s' if locked != 1 else ''} ({', '.join(held)}, "
                    f"{sum(t.max_score for t in card.locked)} points) did not run: {locked} "
                    f"behaviour{'s' if locked != 1 else ''} this report did not check, so passing here does not "
                    f"mean the solution is right.")
    return {"complete": locked == 0, "ran": ran, "unchecked": locked, "sentence": sentence}
