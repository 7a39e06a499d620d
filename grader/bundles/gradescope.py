"""The Gradescope bundle (https://gradescope-autograders.readthedocs.io/en/latest/specs/): a zip with
`setup.sh` and `run_autograder` at its root. Gradescope unpacks it to /autograder/source, runs setup.sh as
root once while building its image, then runs /autograder/run_autograder for each submission, the
student's files in /autograder/submission; the results go to /autograder/results/results.json. The zip's
README.md, and what `grader package` prints, say what to set on the assignment.
"""

from __future__ import annotations

import io
import math
import zipfile
from pathlib import Path

import grader
from grader.bundles.contents import EXECUTABLE, FILES, check_timeout, exercise_members, packages_for, runner_members
from grader.core.exercise import VISIBILITIES, Exercise

GRADESCOPE_DEFAULT_TIMEOUT_S = 10 * 60


def point_total(exercise: Exercise, tier: str) -> int:
    """The points a run of this tier is out of: the total to set on the platform's assignment."""
    from grader.core.grading import expected_max

    return sum(expected_max(exercise, tier).values())


def points_by_visibility(exercise: Exercise, tier: str, hidden_visibility: str | None) -> dict[str, int]:
    """The tier's points by when Gradescope shows their tests (exports.suite_visibility's rule)."""
    from grader.core.grading import expected_max
    from grader.report.exports import visibility_of

    found: dict[str, int] = {}
    for (suite, _), points in expected_max(exercise, tier).items():
        shown = visibility_of(suite, exercise.suite_visibility, list(exercise.open_suites), hidden_visibility)
        found[shown] = found.get(shown, 0) + points
    return found


def gradescope_zip(exercise: Exercise, tier: str, hidden_visibility: str | None) -> bytes:
    """autograder.zip: setup.sh and run_autograder at the root, beside the grader and the exercise, and a
    README.md that says how to set up the assignment (its point total first)."""
    readme = gradescope_readme(exercise, tier, hidden_visibility, check_timeout("gradescope", exercise))
    members = [
        ("README.md", readme.encode(), 0o644),
        ("setup.sh", (FILES / "setup.sh").read_bytes(), EXECUTABLE),
        ("run_autograder", (FILES / "run_autograder").read_bytes(), EXECUTABLE),
        *runner_members(packages_for(exercise)),
        *exercise_members("gradescope", exercise, tier, hidden_visibility),
    ]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data, mode in members:
            info = zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0))  # the same inputs, the same zip
            info.external_attr = (0o100000 | mode) << 16  # a regular file; run_autograder keeps its x bit
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return buffer.getvalue()


def timeout_minutes(timeout: int) -> int:
    return max(math.ceil(timeout / 60), GRADESCOPE_DEFAULT_TIMEOUT_S // 60)


def visibility_lines(exercise: Exercise, tier: str, hidden_visibility: str | None) -> list[str]:
    """What students see of the results, and when, in points: the total is held back with the most
    held-back tests (exports.total_visibility), as Gradescope counts their points in the total it shows."""
    from grader.report.exports import WHEN_SHOWN

    found = points_by_visibility(exercise, tier, hidden_visibility)
    total = sum(found.values())
    lines = [f"tests worth {points} of {total} points {WHEN_SHOWN[visibility]} ({visibility})"
             for visibility, points in sorted(found.items(), key=lambda item: VISIBILITIES.index(item[0]))]
    held = min(found, key=VISIBILITIES.index, default="visible")
    if held != "visible":
        lines.append(f"the total score is held back with them (results.json's top-level visibility {held}): "
                     "Gradescope would otherwise show a total that counts tests students cannot see")
    return lines


def gradescope_readme(exercise: Exercise, tier: str, hidden_visibility: str | None, timeout: int) -> str:
    """The bundle's README: what to set on the assignment, so that nothing about it is left to guess."""
    shown = "".join(f"- {line}\n" for line in visibility_lines(exercise, tier, hidden_visibility))
    return (f"# Gradescope autograder: {exercise.title or exercise.slug} ({tier} tier)\n\n"
            f"Made by grader {grader.__version__} (`grader package --target gradescope`).\n\n"
            "## Set on the assignment\n\n"
            f"- Total points: **{point_total(exercise, tier)}** (the tests of the {tier} tier)\n"
            "- Autograder: upload this zip, base image Ubuntu 22.04 or 24.04\n"
            f"- Autograder timeout: at least {timeout_minutes(timeout)} minutes\n\n"
            "## What students see\n\n" + shown + "\n"
            "Each submission is one file, graded as `" + exercise.submission_file + "`. setup.sh installs what the "
            "grader needs with apt-get and pip, which needs the network; offline, it says what to pre-install.\n")


def gradescope_message(output: Path, exercise: Exercise, tier: str, timeout: int,
                       hidden_visibility: str | None = None) -> str:
    shown = "".join(f"\n  - {line}" for line in visibility_lines(exercise, tier, hidden_visibility))
    return (f"{output}: Gradescope autograder for {exercise.slug} ({tier} tier).\n"
            f"Set the assignment's total points to {point_total(exercise, tier)}. Upload the zip as its autograder "
            "with the base image Ubuntu 22.04 or 24.04, and set the autograder timeout to at least "
            f"{timeout_minutes(timeout)} minutes (so that the grader's own limits end every run).\n"
            f"What students see:{shown}\n"
            "Gradescope starts its containers with Docker's defaults: there each submission runs as an account "
            "of its own, and results.json says so (extra_data.isolation \"account\"). The zip's README.md says "
            "all this again. Try it first: grader package --target gradescope ... --run SUBMISSION (or "
            "--run-each FOLDER)")


def hidden_warning(exercise: Exercise, tier: str, hidden_visibility: str | None) -> str:
    """Tests students never see hold their total back for good: said at packaging, with the way out."""
    never = points_by_visibility(exercise, tier, hidden_visibility).get("hidden", 0)
    if not never:
        return ""
    return (f"\nwarning: tests worth {never} of {point_total(exercise, tier)} points are never shown to students "
            "(visibility hidden), so their total score in the autograder's results is never shown either: a "
            "total that counts tests they cannot see would contradict what they can. To show it later, choose "
            "--hidden-visibility after_due_date or after_published")

