"""`grader package`: check what was asked before any work, write the bundle of the target platform, and
say what was written and what comes next (with the warnings the exercise's seeds and settings call for).
"""

from __future__ import annotations

from pathlib import Path

from grader.bundles.contents import BundleError, check_timeout
from grader.bundles.gradescope import gradescope_message, gradescope_zip, hidden_warning
from grader.bundles.prairielearn import (
    IMAGE_EXAMPLE,
    IMAGE_SUGGESTED,
    image_warning,
    prairielearn_folder,
    prairielearn_message,
)
from grader.core.seed_checks import check_seeds


def check_output(target: str, output: Path) -> None:
    """Refuse, before any work, an output the bundle cannot be written to (or should not overwrite)."""
    if target == "gradescope":
        if output.is_dir():
            raise BundleError(f"-o {output}: is a folder; Gradescope takes a zip: give a file name such as "
                              f"{output / 'autograder.zip'}")
        if output.suffix.lower() != ".zip":
            raise BundleError(f"-o {output}: Gradescope takes a zip: give a name ending in .zip")
        if not output.parent.is_dir():
            raise BundleError(f"-o {output}: the folder {output.parent} does not exist")
    elif output.exists() and not output.is_dir():
        raise BundleError(f"-o {output}: is a file; PrairieLearn takes a question folder: give a folder")
    elif not output.exists() and not output.parent.is_dir():
        raise BundleError(f"-o {output}: the folder {output.parent} does not exist")


def package(target: str, exercise_name: str | None, tier: str | None, output: Path,
            hidden_visibility: str | None = None, image: str | None = None) -> str:
    """Write the bundle for `target`; returns a line that says what was written and what comes next."""
    from grader.core.exercise import load_exercise

    check_output(target, output)
    exercise = load_exercise(exercise_name or _only_exercise())
    tier = exercise.tier(tier)
    seeds = check_seeds(exercise)
    if seeds.refusals:
        raise BundleError(f"{exercise.slug}: {seeds.refusals[0]}")
    warnings = "".join(f"\nwarning: {warning}" for warning in seeds.warnings)
    if hidden_visibility is not None and target != "gradescope":
        raise BundleError("--hidden-visibility is a Gradescope setting (PrairieLearn shows every test)")
    if image is not None and target != "prairielearn":
        raise BundleError("--image names PrairieLearn's grading image; Gradescope builds its own")
    if target == "gradescope":
        timeout = check_timeout("gradescope", exercise)
        output.write_bytes(gradescope_zip(exercise, tier, hidden_visibility))
        return (gradescope_message(output, exercise, tier, timeout, hidden_visibility) + warnings
                + hidden_warning(exercise, tier, hidden_visibility))
    if not image or not image.strip():
        raise BundleError(f"PrairieLearn pulls the grading image from a registry: name it with --image "
                          f"{IMAGE_EXAMPLE} (for example --image {IMAGE_SUGGESTED}), the name you build and push "
                          "the question's image/ folder as. One image grades every exercise of the course: give "
                          "each exercise's question the same --image")
    output.mkdir(parents=True, exist_ok=True)
    prairielearn_folder(exercise, tier, output, image)
    return prairielearn_message(output, exercise, tier, image) + warnings + image_warning(exercise, image)


def _only_exercise() -> str:
    from grader.core.exercise import project_root

    found = sorted(p.parent.name for p in (project_root() / "exercises").glob("*/exercise.toml"))
    if len(found) != 1:
        raise BundleError(f"name the exercise with --exercise (this project has {', '.join(found) or 'none'})")
    return found[0]

