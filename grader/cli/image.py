"""`grader image build`: the Docker grading images, the plain one and one a set of Debian packages the
exercises declare."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from grader.cli.common import COMMAND_HELP, OK

if TYPE_CHECKING:
    from rich.console import Console

EXAMPLES = {
    "image": ["grader image build"],
    "image build": ["grader image build", "grader image build --exercise continuous_batching --force"],
}


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    image = commands.add_parser("image", help="the Docker grading image")
    image_commands = image.add_subparsers(dest="image_command", required=True, metavar="COMMAND", help=COMMAND_HELP)
    image_build = image_commands.add_parser("build", help="build the grading image (no registry needed)")
    image_build.add_argument("--force", action="store_true", help="bootstrap the Debian base again too")
    image_build.add_argument("--exercise", action="append", metavar="SLUG|PATH",
                             help="build the image this exercise grades in, with the Debian packages it declares "
                                  "(repeatable; default: every exercise of the project)")
    image_build.set_defaults(run=command_image_build)


def command_image_build(args: argparse.Namespace, console: Console) -> int:
    from rich.text import Text

    from grader.errors import GradingError
    from grader.sandbox.engine import engine_status
    from grader.sandbox.image import build_image

    client, why_not = engine_status()
    if client is None:
        raise GradingError(f"{why_not}; start one (for example with .ci/docker-up.sh)")
    bases_built: set[tuple[str, ...]] = set()
    for packages, slug in sorted(image_package_sets(args.exercise).items()):
        started = time.monotonic()
        if packages:
            console.print(f"{slug} needs the Debian packages {', '.join(packages)}")
        # --force bootstraps each base once; the harness layer is rebuilt on it either way.
        tag = build_image(client, force=args.force and packages not in bases_built, extra=packages,
                          progress=lambda line: console.print(Text(line, style="dim")))
        bases_built.add(packages)
        console.print(f"grading image {tag} ready in {time.monotonic() - started:.1f} s")
    return OK


def image_package_sets(named: list[str] | None) -> dict[tuple[str, ...], str]:
    """The images `image build` makes, as {extra Debian packages: an exercise that needs them}: those
    of the exercises named, else the plain image and those of every exercise in the project."""
    from grader.core.exercise import ExerciseError, load_exercise, project_root

    if named:
        return {exercise.packages: exercise.slug for exercise in map(load_exercise, named)}
    sets: dict[tuple[str, ...], str] = {(): "the grader"}
    try:
        root = project_root()
    except ExerciseError:
        return sets
    for toml in sorted((root / "exercises").glob("*/exercise.toml")):
        exercise = load_exercise(toml.parent.name, root)
        sets.setdefault(exercise.packages, exercise.slug)
    return sets
