"""What a report says about a run as a whole: failures grouped by cause, and what the run covered.

One bug often fails many tests, each with its own scenario but the same broken rule. Listed one by
one, sixteen failures read as sixteen bugs. Here failures that share a cause (grader.core.causes: the
first line of the message, where it says the first call at which the program and the reference part
ways, with each scenario's particulars masked) are one group: the cause is said once, headed by the
test that shows it most directly (the fewest steps before it), the others folded under it, each named
once. The details (the scenario, the trace) stay with each test.

Everything here works on the report's view of each test (grader.report.view), so it is a pure function
of the scorecard like every other part of a report.
"""

from __future__ import annotations

from typing import Any

from grader.core.causes import first_step, masked_headline
from grader.core.scorecard import Scorecard


def cause_key(view: dict[str, Any]) -> str:
    """The cause of a failure, with what differs from scenario to scenario masked."""
    return f"{view.get('status', '')}\0{masked_headline(str(view.get('message', '')))}"


def _directness(view: dict[str, Any]) -> tuple[int, int]:
    """How directly a failure shows its cause, least first: the steps before it, then its message's length
    (a shorter scenario and replay)."""
    message = str(view.get("message", ""))
    step = first_step(message)
    return (step if step is not None else 10**9, len(message))


def failure_groups(views: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The failing tests' views grouped by cause, in order of first appearance.

    Each group: `cause` (the lead's headline, as it was written), `lead` (the view of the test that shows
    the cause most directly: the fewest steps before it, then the shortest message, then the first),
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
            group = {"tests": [], "count": 0}
            groups[key] = group
            order.append(group)
        group["tests"].append(view)
        group["count"] += 1
    for group in order:
        # The lead: the test that shows the cause most directly; the others follow it in their order.
        lead = min(group["tests"], key=_directness)
        group["tests"] = [lead] + [view for view in group["tests"] if view is not lead]
        group["lead"], group["cause"] = lead, lead.get("headline", "")
        for view in group["tests"][1:]:
            view["same_as"] = {"name": lead["name"], "anchor": lead["anchor"]}
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
