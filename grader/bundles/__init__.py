"""Bundles that run the grader unchanged inside a course platform's own container.

- Gradescope (https://gradescope-autograders.readthedocs.io/en/latest/specs/): a zip with `setup.sh`
  and `run_autograder` at its root. Gradescope unpacks it to /autograder/source, runs setup.sh as root
  once while building its image, then runs /autograder/run_autograder for each submission, the
  student's files in /autograder/submission; the results go to /autograder/results/results.json.
- PrairieLearn (https://prairielearn.readthedocs.io/en/latest/externalGrading/): a question folder
  (info.json with external grading options, question.html, clientFilesQuestion/ with the statement,
  tests/ with the exercise) and, in image/, the grading image's recipe (a Dockerfile on Debian
  bookworm and its entrypoint), which reads /grade/student and writes /grade/results/results.json.

Both carry the grader's own source and the exercise as a small project of its own (the exercise's
folder, every suite, the reference, the seed key), grade with the local sandbox (bubblewrap) inside
the platform's container and write the platform's results with `grader export`
(`grader/bundles/run.py`). Everything the platform runs is in `grader/bundles/files/`.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import string
import uuid
import zipfile
from dataclasses import asdict, dataclass
from html import escape
from pathlib import Path

import grader
from grader.exercise import VISIBILITIES, Exercise

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
PL_STARTUP_S = 60  # PrairieLearn's timeout covers the container's start and the suites' collection too
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


def packages_for(exercise: Exercise) -> list[str]:
    """The Debian packages the platform's container needs: the grader's and the exercise's own (its
    workers see the container's /usr)."""
    return sorted({*HOST_PACKAGES, *exercise.packages})


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


def exercise_files(exercise: Exercise, tier: str) -> list[tuple[str, bytes]]:
    """The exercise as a project of its own: its folder, every suite (the tests a tier does not run
    are listed by name, so they travel too), the reference when the tier's suites use it, the seed key."""
    root = exercise.root.resolve()
    folders = [exercise.folder, *(suite.path for suite in exercise.suites.values())]
    files: dict[str, bytes] = {}
    for folder in folders:
        for path in sorted(Path(folder).resolve().rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and not path.name.endswith(".pyc"):
                files[_inside(path, root)] = path.read_bytes()
    key = exercise.root / "hidden_tests" / exercise.slug / "seed.key"
    extras = [key] if key.is_file() else []
    if exercise.needs_reference(tier):
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
    """autograder.zip: setup.sh and run_autograder at the root, beside the grader and the exercise."""
    members = [
        ("setup.sh", (FILES / "setup.sh").read_bytes(), EXECUTABLE),
        ("run_autograder", (FILES / "run_autograder").read_bytes(), EXECUTABLE),
        ("install-packages.sh", (FILES / "install-packages.sh").read_bytes(), EXECUTABLE),
        ("check-python.sh", (FILES / "check-python.sh").read_bytes(), EXECUTABLE),
        ("packages.txt", "\n".join(packages_for(exercise)).encode() + b"\n", 0o644),
        (CONFIG, config_for("gradescope", exercise, tier, hidden_visibility).to_json().encode(), 0o644),
        *((path, data, 0o644) for path, data in grader_files()),
        *((path, data, 0o644) for path, data in exercise_files(exercise, tier)),
    ]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data, mode in members:
            info = zipfile.ZipInfo(path, date_time=(2020, 1, 1, 0, 0, 0))  # the same inputs, the same zip
            info.external_attr = (0o100000 | mode) << 16  # a regular file; run_autograder keeps its x bit
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return buffer.getvalue()


# -- PrairieLearn -------------------------------------------------------------------------------------

def prairielearn_folder(exercise: Exercise, tier: str, out: Path, image: str) -> list[Path]:
    """Write the question folder (and its image recipe in image/) into `out`; returns what was written.
    A uuid already in out/info.json is kept, so that packaging again keeps the question's identity."""
    question_uuid = _existing_uuid(out / "info.json") or str(uuid.uuid4())
    info = {
        "uuid": question_uuid,
        "title": exercise.title or exercise.slug,
        "topic": "Programming",
        "tags": ["grader", exercise.slug, tier],
        "type": "v3",
        "singleVariant": True,
        "gradingMethod": "External",
        "externalGradingOptions": {
            "enabled": True,
            "image": image,
            "entrypoint": PL_ENTRYPOINT,
            "timeout": int(exercise.limits.total_timeout_s) + PL_STARTUP_S,
            "enableNetworking": False,
        },
    }
    starter = f"starter_{exercise.submission_file}"
    html = string.Template((FILES / "question.html").read_text(encoding="utf-8")).substitute(
        title=_mustache_safe(exercise.title or exercise.slug), submission=escape(exercise.submission_file),
        starter=escape(starter))
    statement = exercise.folder / "README.md"
    files: list[tuple[str, bytes, int]] = [
        ("info.json", (json.dumps(info, indent=2) + "\n").encode(), 0o644),
        ("question.html", html.encode(), 0o644),
        (starter, exercise.stub.read_bytes(), 0o644),
        (f"tests/{CONFIG}", config_for("prairielearn", exercise, tier, None).to_json().encode(), 0o644),
        *((f"tests/{path}", data, 0o644) for path, data in exercise_files(exercise, tier)),
        ("image/Dockerfile", (FILES / "Dockerfile").read_bytes(), 0o644),
        ("image/entrypoint", (FILES / "entrypoint").read_bytes(), EXECUTABLE),
        ("image/install-packages.sh", (FILES / "install-packages.sh").read_bytes(), EXECUTABLE),
        ("image/check-python.sh", (FILES / "check-python.sh").read_bytes(), EXECUTABLE),
        ("image/packages.txt", "\n".join(packages_for(exercise)).encode() + b"\n", 0o644),
        *((f"image/{path}", data, 0o644) for path, data in grader_files()),
    ]
    if statement.is_file():
        files.append(("clientFilesQuestion/README.md", statement.read_bytes(), 0o644))
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


def _mustache_safe(text: str) -> str:
    """HTML-escaped, and no `{` left for PrairieLearn's Mustache to read as a tag."""
    return escape(text).replace("{", "&#123;").replace("}", "&#125;")


# -- the command --------------------------------------------------------------------------------------

def package(target: str, exercise_name: str | None, tier: str | None, output: Path,
            hidden_visibility: str | None = None, image: str | None = None) -> str:
    """Write the bundle for `target`; returns a line that says what was written and what comes next."""
    from grader.exercise import load_exercise

    exercise = load_exercise(exercise_name or _only_exercise())
    tier = exercise.tier(tier)
    if hidden_visibility is not None:
        if target != "gradescope":
            raise BundleError("--hidden-visibility is a Gradescope setting (PrairieLearn shows every test)")
    if image is not None and target != "prairielearn":
        raise BundleError("--image names PrairieLearn's grading image; Gradescope builds its own")
    if target == "gradescope":
        output.write_bytes(gradescope_zip(exercise, tier, hidden_visibility))
        return (f"{output}: Gradescope autograder for {exercise.slug} ({tier} tier); upload it with the "
                "Ubuntu 24.04 (or later) base image. The container must allow bubblewrap's namespaces "
                "(README: \"Platform bundles\")")
    image = image or f"grader-{exercise.slug}:{grader.__version__}"
    output.mkdir(parents=True, exist_ok=True)
    prairielearn_folder(exercise, tier, output, image)
    return (f"{output}: PrairieLearn question for {exercise.slug} ({tier} tier); build {output / 'image'} as "
            f"{image}, push it where PrairieLearn pulls from, then move {output / 'image'} out of the course")


def _only_exercise() -> str:
    from grader.exercise import project_root

    found = sorted(p.parent.name for p in (project_root() / "exercises").glob("*/exercise.toml"))
    if len(found) != 1:
        raise BundleError(f"name the exercise with --exercise (this project has {', '.join(found) or 'none'})")
    return found[0]
