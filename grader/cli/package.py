"""`grader package`: a bundle that grades on Gradescope (a zip) or PrairieLearn (a question folder), and
with `--run`/`--run-each` the bundle tried in a container started as its platform starts it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from grader.cli.common import OK, TIER_HELP, UNVOUCHED, VISIBILITIES, UsageError

if TYPE_CHECKING:
    from rich.console import Console

TARGETS = ("gradescope", "prairielearn")  # grader.bundles.TARGETS, spelt here to keep the bundles unimported
EXAMPLES = {
    "package": ["grader package --target gradescope --exercise continuous_batching -o autograder.zip",
                "grader package --target gradescope --hidden-visibility after_published -o autograder.zip",
                "grader package --target gradescope -o autograder.zip --run solutions/continuous_batching/scheduler.py",
                "grader package --target gradescope -o autograder.zip --run-each submissions/",
                "grader package --target prairielearn --exercise continuous_batching --image me/grader:1 "
                "-o questions/scheduler"],
}


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bundle = commands.add_parser("package", help="a bundle that grades on Gradescope or PrairieLearn as they are")
    bundle.add_argument("--target", required=True, choices=TARGETS, help="the platform the bundle is for")
    bundle.add_argument("--exercise", help="the exercise's name (slug) or folder (default: the project's only one)")
    bundle.add_argument("--tier", help=TIER_HELP)
    bundle.add_argument("--hidden-visibility", choices=VISIBILITIES,
                        help="gradescope: when students see the results of the suites they cannot read")
    bundle.add_argument("--image", metavar="ACCOUNT/NAME:TAG",
                        help="prairielearn (required): the course's one grading image, as you push it (info.json names "
                             "it; give every exercise the same)")
    bundle.add_argument("-o", "--output", required=True, metavar="ZIP|DIR", help="gradescope: the zip; prairielearn: "
                                                                                  "the question folder")
    bundle.add_argument("--run", metavar="SUBMISSION", dest="try_submission",  # `run` is the command's function
                        help="then build the bundle's image and grade this file (or folder of files, as a student "
                             "uploads them) in a container started as the platform starts it, and show its result")
    bundle.add_argument("--run-each", metavar="FOLDER",
                        help="like --run, for every submission in FOLDER (each file, and each subfolder as one "
                             "student's upload): the image is built once, and each submission gets a score line")
    bundle.add_argument("--base", metavar="IMAGE",
                        help="with --run: the image to build on (gradescope: default gradescope/autograder-base:"
                             "ubuntu-22.04; prairielearn: the Dockerfile's BASE, default debian:bookworm-slim)")
    bundle.set_defaults(run=command_package)


def check_trial_options(args: argparse.Namespace) -> None:
    if args.try_submission and args.run_each:
        raise UsageError("--run grades one submission, --run-each a folder of them: give one of the two")
    if args.base and not (args.try_submission or args.run_each):
        raise UsageError("--base chooses the image --run builds on: give --run SUBMISSION too (or --run-each FOLDER)")
    if args.try_submission and not Path(args.try_submission).exists():
        raise UsageError(f"--run {args.try_submission}: no such file or folder")
    if args.run_each and not Path(args.run_each).is_dir():
        raise UsageError(f"--run-each {args.run_each}: no such folder (it holds one file, or one folder, per submission)")


def command_package(args: argparse.Namespace, console: Console) -> int:
    from grader.bundles import BundleError, package

    check_trial_options(args)
    try:
        console.print(package(args.target, args.exercise, args.tier, Path(args.output), args.hidden_visibility,
                              args.image), soft_wrap=True)
    except BundleError as exc:
        raise UsageError(str(exc)) from None
    if args.try_submission or args.run_each:
        return try_package(args, console)
    return OK


def try_package(args: argparse.Namespace, console: Console) -> int:
    """`package --run` / `--run-each`: the bundle just written, tried as its platform runs it, on one
    submission or on each of a folder of them (the image built once)."""
    import tempfile

    import docker
    from rich.text import Text

    from grader.bundles.trial_outcome import score_line
    from grader.bundles.try_bundle import submissions_in, try_each
    from grader.errors import GradingError
    from grader.sandbox.engine import engine_status

    try:
        submissions = submissions_in(Path(args.run_each)) if args.run_each else [Path(args.try_submission)]
    except FileNotFoundError as exc:
        raise UsageError(f"--run-each: {exc}") from None
    client, why_not = engine_status()
    if client is None:
        raise GradingError(f"--run needs a Docker engine: {why_not}")
    folder = Path(tempfile.mkdtemp(prefix=f"grader-{args.target}-run-"))
    try:
        outcomes = try_each(client, args.target, Path(args.output), submissions, folder, args.base,
                            lambda line: console.print(Text(line, style="dim"), soft_wrap=True))
    except (docker.errors.DockerException, RuntimeError, OSError, ValueError) as exc:  # a failed build, the engine's error
        raise GradingError(f"--run could not try the bundle: {exc}") from None
    finally:
        client.close()
    if len(outcomes) == 1:
        console.print(Text(outcomes[0][1].summary()), soft_wrap=True)
    else:
        console.print(Text("\n".join([f"{len(outcomes)} submissions graded with one image; results under {folder}:",
                                       *(score_line(path.name, outcome) for path, outcome in outcomes)])),
                      soft_wrap=True)
    return OK if all(outcome.results is not None for _, outcome in outcomes) else UNVOUCHED
