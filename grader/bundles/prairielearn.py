"""The PrairieLearn bundle (https://prairielearn.readthedocs.io/en/latest/externalGrading/): a question
folder (info.json with external grading options, question.html with the statement rendered in it, tests/
with the exercise) and, in image/, the grading image's recipe (a Dockerfile on Debian bookworm and its
entrypoint), which reads /grade/student and writes /grade/results/results.json. One image grades every
exercise of a course.
"""

from __future__ import annotations

import json
import os
import shutil
import string
import uuid
from html import escape
from pathlib import Path

import grader
from grader.bundles.contents import (
    EXECUTABLE,
    FILES,
    Member,
    check_timeout,
    exercise_members,
    packages_for,
    runner_members,
)
from grader.core.exercise import Exercise

PL_ENTRYPOINT = "/opt/grader/entrypoint"
IMAGE_EXAMPLE = "ACCOUNT/NAME:TAG"
# One image grades every exercise of a course: its suggested name says the course, not an exercise.
IMAGE_SUGGESTED = "myaccount/grader:" + grader.__version__


def course_packages(exercise: Exercise) -> list[str]:
    """The Debian packages of PrairieLearn's one grading image: the grader's and those of every exercise
    of the project, so that the same image grades each of them (one image to build, push and sync for
    the course, not one per exercise). An exercise that does not load is left to its own packaging."""
    from grader.core.exercise import ExerciseError, load_exercise

    wanted = set(packages_for(exercise))
    for toml in sorted((exercise.root / "exercises").glob("*/exercise.toml")):
        try:
            wanted.update(load_exercise(str(toml.parent)).packages)
        except (ExerciseError, OSError, ValueError):
            continue
    return sorted(wanted)


def prairielearn_folder(exercise: Exercise, tier: str, out: Path, image: str) -> list[Path]:
    """Write the question folder (and its image recipe in image/) into `out`; returns what was written.
    A uuid already in out/info.json is kept, so that packaging again keeps the question's identity.
    The exercise's limits must fit PrairieLearn's timeout (BundleError says what to lower)."""
    timeout = check_timeout("prairielearn", exercise)
    question_uuid = _existing_uuid(out / "info.json") or str(uuid.uuid4())
    info = {
        "uuid": question_uuid,
        "title": exercise.title or exercise.slug,
        "topic": "Programming",
        "tags": ["grader", exercise.slug, tier],
        "type": "v3",
        "singleVariant": True,
        "gradingMethod": "External",
        "externalGradingOptions": {  # `enabled` is deprecated in PrairieLearn's schema: gradingMethod says it
            "image": image,
            "entrypoint": PL_ENTRYPOINT,
            "timeout": timeout,
            "enableNetworking": False,
        },
    }
    starter = f"starter_{exercise.submission_file}"
    html = string.Template((FILES / "question.html").read_text(encoding="utf-8")).substitute(
        title=_mustache_safe(exercise.title or exercise.slug), submission=escape(exercise.submission_file),
        starter=escape(starter), statement=statement_html(exercise))
    files: list[Member] = [
        ("info.json", (json.dumps(info, indent=2) + "\n").encode(), 0o644),
        ("question.html", html.encode(), 0o644),
        (starter, exercise.stub.read_bytes(), 0o644),
        *((f"tests/{path}", data, mode) for path, data, mode in exercise_members("prairielearn", exercise, tier, None)),
        ("image/Dockerfile", (FILES / "Dockerfile").read_bytes(), 0o644),
        ("image/entrypoint", (FILES / "entrypoint").read_bytes(), EXECUTABLE),
        *((f"image/{path}", data, mode) for path, data, mode in runner_members(course_packages(exercise))),
    ]
    for folder in ("tests", "image", "clientFilesQuestion"):  # what a previous packaging left goes
        if (out / folder).is_dir() and not (out / folder).is_symlink():
            shutil.rmtree(out / folder)
    written = []
    for path, data, mode in files:
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        os.chmod(target, mode)
        written.append(target)
    return written


def _existing_uuid(info: Path) -> str | None:
    try:
        value = json.loads(info.read_text(encoding="utf-8")).get("uuid")
        return str(uuid.UUID(value)) if isinstance(value, str) else None
    except (OSError, ValueError, AttributeError):
        return None


def statement_html(exercise: Exercise) -> str:
    """The exercise's README, rendered as the web service renders it (Markdown, raw HTML escaped), for
    the question itself: students read the statement where they write the code, not in another tab.
    Braces become entities, so that PrairieLearn's Mustache reads none of the statement as a tag."""
    from grader.web.exercise_page import statement_html as rendered

    if not (exercise.folder / "README.md").is_file():
        return ""
    return rendered(exercise).replace("{", "&#123;").replace("}", "&#125;")


def _mustache_safe(text: str) -> str:
    """HTML-escaped, and no `{` left for PrairieLearn's Mustache to read as a tag."""
    return escape(text).replace("{", "&#123;").replace("}", "&#125;")


def prairielearn_message(output: Path, exercise: Exercise, tier: str, image: str) -> str:
    recipe = output / "image"
    return (f"{output}: PrairieLearn question for {exercise.slug} ({tier} tier), graded by the course's one "
            f"grading image {image}, which serves every exercise of this project (package each with the same "
            "--image). Once for the course (again after upgrading the grader or adding an exercise whose "
            "exercise.toml asks for other sandbox packages):\n"
            f"  docker build --platform linux/amd64 -t {image} {recipe}\n"
            f"  docker push {image}\n"
            f"  then on the course's Sync page, under Docker images, sync {image}\n"
            f"For this question: move {recipe} out of the course (every question's image/ is the same recipe), "
            "commit, and sync the course. Try it first: grader package --target prairielearn ... --run SUBMISSION")


def image_warning(exercise: Exercise, image: str) -> str:
    if exercise.slug.lower() not in image.lower():
        return ""
    return (f"\nwarning: --image {image} names the exercise {exercise.slug}, but one image grades every exercise "
            "of the course: build it once, and give every question the same --image (such as "
            f"{IMAGE_SUGGESTED})")

