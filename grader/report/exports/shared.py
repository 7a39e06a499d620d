"""What every platform's export shares: when each suite's results are shown to students (Gradescope's
`visibility`, which PrairieLearn follows as it can), and the provenance that travels with the results."""

from __future__ import annotations

from typing import Any

from grader.core.exercise import VISIBILITIES
from grader.core.scorecard import Scorecard

HIDDEN_DEFAULT = "after_published"  # a suite outside the free tier that sets no visibility
WHEN_SHOWN = {"hidden": "are not shown to students", "after_due_date": "are shown after the due date",
              "after_published": "are shown once the grades are published", "visible": "are shown"}


def suite_visibility(card: Scorecard, hidden_visibility: str | None = None) -> dict[str, str]:
    """When Gradescope shows each suite of the card: `hidden_visibility` for every suite outside the
    free tier when given, else exercise.toml's setting, else `visible` for the free tier's suites and
    HIDDEN_DEFAULT for the others (also for a suite the card says nothing of: fail closed)."""
    if hidden_visibility is not None and hidden_visibility not in VISIBILITIES:
        raise ValueError(f"visibility {hidden_visibility!r} is not one of {', '.join(VISIBILITIES)}")
    names = dict.fromkeys([*card.open_suites, *card.suite_visibility, *(t.suite for t in card.tests),
                           *(t.suite for t in card.locked)])
    return {name: visibility_of(name, card.suite_visibility, card.open_suites, hidden_visibility) for name in names}


def visibility_of(suite: str, configured: dict[str, str], open_suites: list[str],
                  hidden_visibility: str | None = None) -> str:
    """One suite's visibility (suite_visibility's rule; `grader package` states it in points too)."""
    if hidden_visibility is not None and suite not in open_suites:
        return hidden_visibility
    if configured.get(suite) in VISIBILITIES:
        return configured[suite]
    return "visible" if suite in open_suites else HIDDEN_DEFAULT


def total_visibility(shown: dict[str, str]) -> str:
    """When the results as a whole (the total score, the top-level output) are shown: no sooner than
    the most held-back suite. Gradescope counts a hidden test's points in the total it shows unless the
    total is held back too (the top-level `visibility`); each test keeps its own, so the free tier's
    suites are still shown at once."""
    return min(shown.values(), key=VISIBILITIES.index, default="visible")


def provenance(card: Scorecard) -> dict[str, Any]:
    # `isolation` travels with the results: how a run was kept apart (namespaces, or an account of its
    # own inside the platform's container) is then read beside the score, not dug out of a log.
    return {"exercise": card.exercise, "tier": card.tier, "status": card.status,
            "submission_sha256": card.submission_sha256, "grader_version": card.grader_version,
            "schema_version": card.schema_version, "graded_at": card.graded_at, "isolation": card.isolation}
