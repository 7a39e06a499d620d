"""Bundles that run the grader unchanged inside a course platform's own container.

- Gradescope (https://gradescope-autograders.readthedocs.io/en/latest/specs/): a zip with `setup.sh`
  and `run_autograder` at its root. Gradescope unpacks it to /autograder/source, runs setup.sh as root
  once while building its image, then runs /autograder/run_autograder for each submission, the
  student's files in /autograder/submission; the results go to /autograder/results/results.json.
- PrairieLearn (https://prairielearn.readthedocs.io/en/latest/externalGrading/): a question folder
  (info.json with external grading options, question.html with the statement rendered in it,
  tests/ with the exercise) and, in image/, the grading image's recipe (a Dockerfile on Debian
  bookworm and its entrypoint), which reads /grade/student and writes /grade/results/results.json.

Both carry the grader's own source and the exercise as a small project of its own (the exercise's
folder, every suite, the reference, the seed key), grade with the local sandbox inside the platform's
container (in namespaces where the container allows them; with Docker's defaults, as the platforms
start theirs, each submission as an account of its own) and write the platform's results with
`grader export` (`grader/bundles/run.py`). Everything the platform runs is in `grader/bundles/files/`;
`grader/bundles/trial.py` tries a bundle on one submission as its platform would run it.
"""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import string
import uuid
import zipfile
from dataclasses import asdict, dataclass, replace
from html import escape
from pathlib import Path

import grader
from grader.core.exercise import VISIBILITIES, Exercise
from grader.core.seed_checks import check_seeds
from grader.harness.contract import Limits

TARGETS = ("gradescope", "prairielearn")
#: What `grader grade` and `grader export` need on the platform's side, as Debian (and Ubuntu)
#: packages: the harness's pytest and pytest-timeout (hypothesis for suites that want it), the
#: reports' Jinja, the command line's rich, and bubblewrap for the sandbox's namespaces.
HOST_PACKAGES = ("bubblewrap", "python3", "python3-hypothesis", "python3-jinja2", "python3-pytest",
                 "python3-pytest-timeout", "python3-rich")
CONFIG = "bundle.json"
PROJECT = "project"  # the exercise's files, laid out as a project folder (exercises/, hidden_tests/, ...)
FILES = Path(__file__).resolve().parent / "files"
PL_ENTRYPOINT = "/opt/grader/entrypoint"
# What a platform's timeout covers beyond the grading itself: the container's start, the runner's checks
# of the sandbox, the export.
STARTUP_S = 60
# The longest a platform lets one grading run: PrairieLearn's externalGradingOptions.timeout "cannot
# exceed 600 seconds" (docs/externalGrading.md; larger values are clamped), Gradescope's autograder
# timeout goes up to 40 minutes (its default is 10).
PLATFORM_TIMEOUT_MAX_S = {"prairielearn": 600, "gradescope": 40 * 60}
GRADESCOPE_DEFAULT_TIMEOUT_S = 10 * 60
IMAGE_EXAMPLE = "ACCOUNT/NAME:TAG"
# One image grades every exercise of a course: its suggested name says the course, not an exercise.
IMAGE_SUGGESTED = "myaccount/grader:" + grader.__version__
EXECUTABLE = 0o755


class BundleError(Exception):
    """The bundle cannot be made as asked (the message says why)."""


@dataclass(frozen=True)
class BundleConfig:
    """What the runner inside the platform reads from bundle.json."""

    target: str
    exercise: str
    tier: str
    submission: str
    hidden_visibility: str | None
    grader_version: str

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"


def platform_timeout_s(limits: Limits) -> int:
    """The platform's timeout a grading needs so that the grader, not the platform, ends every run: a
    harness that stops answering is stopped by the grader only after `hard_stop_s` (it then writes an
    `error` result); a platform that kills the container first shows a timeout instead, which PrairieLearn
    tells the student to fix in their code."""
    return math.ceil(limits.hard_stop_s + STARTUP_S)


def check_timeout(target: str, exercise: Exercise) -> int:
    """The platform's timeout for this exercise, or BundleError saying which limit to lower, and to what."""
    ceiling = PLATFORM_TIMEOUT_MAX_S[target]
    needed = platform_timeout_s(exercise.limits)
    if needed <= ceiling:
        return needed
    total = exercise.limits.total_timeout_s
    fits = next((seconds for seconds in range(math.floor(total), 0, -1)
                 if platform_timeout_s(replace(exercise.limits, total_timeout_s=float(seconds))) <= ceiling), 1)
    platform = "PrairieLearn" if target == "prairielearn" else "Gradescope"
    raise BundleError(
        f"{platform} stops a grading after at most {ceiling} s, and {exercise.slug}'s limits let one take "
        f"{needed} s: total_timeout_s = {total:g} s, a harness that stops answering is stopped after "
        f"hard_stop_s = 3 × total_timeout_s + 60 = {exercise.limits.hard_stop_s:g} s, and {STARTUP_S} s go to the container's start and "
        f"the export. Lower total_timeout_s to {fits} or less in {exercise.folder / 'exercise.toml'} ([limits])")


def packages_for(exercise: Exercise) -> list[str]:
    """The Debian packages the platform's container needs: the grader's and the exercise's own (its
    workers see the container's /usr)."""
    return sorted({*HOST_PACKAGES, *exercise.packages})


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


def grader_files() -> list[tuple[str, bytes]]:
    """The grader's own source, as (path in the bundle, bytes): every module, and the report templates
    as grader/templates/ (where an installed grader keeps them)."""
    from grader.report import templates_folder

    package = Path(grader.__file__).resolve().parent
    files = [(f"grader/{path.relative_to(package).as_posix()}", path.read_bytes())
             for path in sorted(package.rglob("*.py")) if "__pycache__" not in path.parts]
    files += [(f"grader/{path.relative_to(package).as_posix()}", path.read_bytes())
              for path in sorted(FILES.iterdir()) if path.is_file()]
    files += [(f"grader/templates/{path.name}", path.read_bytes()) for path in sorted(templates_folder().glob("*.j2"))]
    return files


def exercise_files(exercise: Exercise) -> list[tuple[str, bytes]]:
    """The exercise as a project of its own: its folder, every suite (the tests a tier does not run
    are listed by name, so they travel too), the reference, the seed key. The reference travels whenever
    a suite of the exercise uses it, whatever the tier: the exercise does not load without it (and the
    bundle holds the hidden suites anyway; neither is ever readable by a submission)."""
    root = exercise.root.resolve()
    folders = [exercise.folder, *(suite.path for suite in exercise.suites.values())]
    files: dict[str, bytes] = {}
    for folder in folders:
        for path in sorted(Path(folder).resolve().rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and not path.name.endswith(".pyc"):
                files[_inside(path, root)] = path.read_bytes()
    key = exercise.root / "hidden_tests" / exercise.slug / "seed.key"
    extras = [key] if key.is_file() else []
    if any(suite.reference for suite in exercise.suites.values()):
        extras.append(exercise.reference)
    for path in extras:
        files[_inside(path.resolve(), root)] = path.read_bytes()
    return sorted(files.items())


def _inside(path: Path, root: Path) -> str:
    try:
        return f"{PROJECT}/{path.relative_to(root).as_posix()}"
    except ValueError:
        raise BundleError(f"{path} lies outside the project folder {root}: a bundle carries the project's "
                          "files only") from None


def config_for(target: str, exercise: Exercise, tier: str, hidden_visibility: str | None) -> BundleConfig:
    return BundleConfig(target=target, exercise=exercise.slug, tier=tier, submission=exercise.submission_file,
                        hidden_visibility=hidden_visibility, grader_version=grader.__version__)


# -- Gradescope ---------------------------------------------------------------------------------------

def gradescope_zip(exercise: Exercise, tier: str, hidden_visibility: str | None) -> bytes:
    """autograder.zip: setup.sh and run_autograder at the root, beside the grader and the exercise, and a
    README.md that says how to set up the assignment (its point total first)."""
    readme = gradescope_readme(exercise, tier, hidden_visibility, check_timeout("gradescope", exercise))
    members = [
        ("README.md", readme.encode(), 0o644),
        ("setup.sh", (FILES / "setup.sh").read_bytes(), EXECUTABLE),
        ("run_autograder", (FILES / "run_autograder").read_bytes(), EXECUTABLE),
        ("install-packages.sh", (FILES / "install-packages.sh").read_bytes(), EXECUTABLE),
        ("check-python.sh", (FILES / "check-python.sh").read_bytes(), EXECUTABLE),
        ("packages.txt", "\n".join(packages_for(exercise)).encode() + b"\n", 0o644),
        (CONFIG, config_for("gradescope", exercise, tier, hidden_visibility).to_json().encode(), 0o644),
        *((path, data, 0o644) for path, data in grader_files()),
        *((path, data, 0o644) for path, data in exercise_files(exercise)),
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


# -- PrairieLearn -------------------------------------------------------------------------------------

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
    files: list[tuple[str, bytes, int]] = [
        ("info.json", (json.dumps(info, indent=2) + "\n").encode(), 0o644),
        ("question.html", html.encode(), 0o644),
        (starter, exercise.stub.read_bytes(), 0o644),
        (f"tests/{CONFIG}", config_for("prairielearn", exercise, tier, None).to_json().encode(), 0o644),
        *((f"tests/{path}", data, 0o644) for path, data in exercise_files(exercise)),
        ("image/Dockerfile", (FILES / "Dockerfile").read_bytes(), 0o644),
        ("image/entrypoint", (FILES / "entrypoint").read_bytes(), EXECUTABLE),
        ("image/install-packages.sh", (FILES / "install-packages.sh").read_bytes(), EXECUTABLE),
        ("image/check-python.sh", (FILES / "check-python.sh").read_bytes(), EXECUTABLE),
        ("image/packages.txt", "\n".join(course_packages(exercise)).encode() + b"\n", 0o644),
        *((f"image/{path}", data, 0o644) for path, data in grader_files()),
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


# -- the command --------------------------------------------------------------------------------------

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


def _only_exercise() -> str:
    from grader.core.exercise import project_root

    found = sorted(p.parent.name for p in (project_root() / "exercises").glob("*/exercise.toml"))
    if len(found) != 1:
        raise BundleError(f"name the exercise with --exercise (this project has {', '.join(found) or 'none'})")
    return found[0]
