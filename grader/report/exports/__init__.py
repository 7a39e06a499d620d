"""Exports of a scorecard for other platforms: pure functions of the `Scorecard`, each returning text,
one module a platform (each opens with the platform's format as it is written):

- `gradescope_results`: Gradescope's `results.json`, with when each suite's results are shown to students;
- `prairielearn_results`: PrairieLearn's `results.json`, under its 1 MB;
- `junit_xml`: JUnit XML as Jenkins and GitLab read it (`gitlab`: the same with GitLab's `file` on each test);
- `shared`: when each suite is shown (`suite_visibility`, which PrairieLearn follows too) and the
  provenance every export carries.

`export(card, format)` is the one entry point the command line and the platform bundles use.
"""

from __future__ import annotations

from collections.abc import Callable

from grader.core.scorecard import Scorecard

# The modules are named after what they write, not after their functions: a module `gradescope` would be
# hidden by the function `gradescope` imported here (`import grader.report.exports.gradescope as m` would
# give the function).
from grader.report.exports.gradescope_results import gradescope
from grader.report.exports.junit_xml import junit, xml_text
from grader.report.exports.prairielearn_results import (
    HELD_DETAILS,
    PRAIRIELEARN_IMAGE_BYTES,
    PRAIRIELEARN_MAX_BYTES,
    PRAIRIELEARN_SHRINK,
    _message,
    prairielearn,
)
from grader.report.exports.shared import HIDDEN_DEFAULT, WHEN_SHOWN, suite_visibility, total_visibility, visibility_of

EXPORTS: dict[str, Callable[[Scorecard], str]] = {
    "gradescope": gradescope,
    "prairielearn": prairielearn,
    "junit": junit,
    "gitlab": lambda card: junit(card, testcase_file=True),
}


def export(card: Scorecard, format: str, hidden_visibility: str | None = None) -> str:
    """The card in `format` (one of EXPORTS); `hidden_visibility` applies to Gradescope only."""
    if format == "gradescope":
        return gradescope(card, hidden_visibility)
    if hidden_visibility is not None:
        raise ValueError(f"--hidden-visibility applies to the gradescope format, not {format}")
    return EXPORTS[format](card)


__all__ = ["EXPORTS", "HELD_DETAILS", "HIDDEN_DEFAULT", "PRAIRIELEARN_IMAGE_BYTES", "PRAIRIELEARN_MAX_BYTES",
           "PRAIRIELEARN_SHRINK", "WHEN_SHOWN", "_message", "export", "gradescope", "junit", "prairielearn",
           "suite_visibility", "total_visibility", "visibility_of", "xml_text"]
