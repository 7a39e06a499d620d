"""What every bundle carries and checks, whatever its platform: the grader's own source, the exercise
as a project of its own, bundle.json (what the runner inside the platform reads), the Debian packages
the platform's container needs, and a timeout that lets the grader, not the platform, end every run.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import grader
from grader.core.exercise import Exercise
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
# What a platform's timeout covers beyond the grading itself: the container's start, the runner's checks
# of the sandbox, the export.
STARTUP_S = 60
# The longest a platform lets one grading run: PrairieLearn's externalGradingOptions.timeout "cannot
# exceed 600 seconds" (docs/externalGrading.md; larger values are clamped), Gradescope's autograder
# timeout goes up to 40 minutes (its default is 10).
PLATFORM_TIMEOUT_MAX_S = {"prairielearn": 600, "gradescope": 40 * 60}
EXECUTABLE = 0o755
Member = tuple[str, bytes, int]  # a file of a bundle: its path in the bundle, its bytes, its mode


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


def runner_members(packages: list[str]) -> list[Member]:
    """What installs and runs the grader in the platform's container, whatever the platform: the script
    that installs the Debian `packages` (listed in packages.txt), the one that checks the container's
    Python, and the grader's own source."""
    return [("install-packages.sh", (FILES / "install-packages.sh").read_bytes(), EXECUTABLE),
            ("check-python.sh", (FILES / "check-python.sh").read_bytes(), EXECUTABLE),
            ("packages.txt", "\n".join(packages).encode() + b"\n", 0o644),
            *((path, data, 0o644) for path, data in grader_files())]


def exercise_members(target: str, exercise: Exercise, tier: str, hidden_visibility: str | None) -> list[Member]:
    """What the runner grades with: bundle.json (what to grade, and how) and the exercise as a project."""
    return [(CONFIG, config_for(target, exercise, tier, hidden_visibility).to_json().encode(), 0o644),
            *((path, data, 0o644) for path, data in exercise_files(exercise))]

