"""Bundles that run the grader unchanged inside a course platform's own container: Gradescope's
autograder zip (`gradescope`) and PrairieLearn's question folder with its grading image (`prairielearn`).

Both carry the grader's own source and the exercise as a small project of its own (`contents`), grade
with the local sandbox inside the platform's container (in namespaces where the container allows them;
with Docker's defaults, as the platforms start theirs, each submission as an account of its own) and
write the platform's results with `grader export` (`run`). `packaging` is `grader package`; everything
the platform runs is in `files/`; `trial` tries a bundle on one submission as its platform would run it.
"""

from grader.bundles.contents import (
    CONFIG,
    FILES,
    HOST_PACKAGES,
    TARGETS,
    BundleError,
    config_for,
    exercise_files,
    packages_for,
)
from grader.bundles.gradescope import gradescope_zip
from grader.bundles.packaging import package
from grader.bundles.prairielearn import course_packages, prairielearn_folder

__all__ = ["CONFIG", "FILES", "HOST_PACKAGES", "TARGETS", "BundleError", "config_for", "course_packages",
           "exercise_files", "gradescope_zip", "package", "packages_for", "prairielearn_folder"]
