"""`grader package --run` and `--run-each`: the image a bundle's trial builds on, pulled when missing; the
bundle's image built once, and each submission graded in a fresh container of it (`trial`), as its
platform does, with a score line each.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import docker

from grader.bundles.trial import GRADESCOPE, GRADESCOPE_BASE, PRAIRIELEARN, GradescopeAutograder, PrairieLearnGrader
from grader.bundles.trial_outcome import Outcome, score_line

Say = Callable[[str], None]

PRAIRIELEARN_BASE = "debian:bookworm-slim"  # the image/ Dockerfile's default BASE


class MissingImage(RuntimeError):
    """The image a trial builds on is neither on the engine nor to be pulled (the message says how to get it)."""


def ensure_base(client: docker.DockerClient, target: str, base: str | None, say: Say) -> str:
    """The image the trial builds on, pulled when the engine lacks it. A missing image otherwise ends in
    the engine's bare "404 Not Found": this says which image, and the command that gets it."""
    image = base or (GRADESCOPE_BASE if target == "gradescope" else PRAIRIELEARN_BASE)
    try:
        client.images.get(image)
        return image
    except docker.errors.ImageNotFound:
        pass
    say(f"{image} is not on this Docker engine: pulling it")
    try:
        client.images.pull(image)
    except docker.errors.DockerException as exc:
        whose = ("Gradescope's own base image" if image == GRADESCOPE_BASE else
                 "the grading image's default base" if image == PRAIRIELEARN_BASE else "the image --base names")
        raise MissingImage(
            f"--run builds on {image} ({whose}), which this Docker engine does not have and could not pull "
            f"({_first_line(exc)}). Get it where the network reaches Docker Hub: docker pull {image} (or docker load "
            "-i a saved copy), or give --base IMAGE naming an Ubuntu 22.04 or Debian image you have "
            "(docker images lists them)") from None
    return image


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def make_runner(client: docker.DockerClient, target: str, output: Path, base: str) -> GradescopeAutograder | PrairieLearnGrader:
    if target == "gradescope":
        return GradescopeAutograder(client, output.read_bytes(), base)
    return PrairieLearnGrader(client, output, base)


def try_bundle(client: docker.DockerClient, target: str, output: Path, submission: Path, folder: Path,
               base: str | None, say: Say) -> Outcome:
    """Build `output`'s image (the zip's autograder, or the question's grading image) and grade one
    submission with it; the results are kept in `folder`."""
    [(_, outcome)] = try_each(client, target, output, [submission], folder, base, say)
    return outcome


def submissions_in(folder: Path) -> list[Path]:
    """Each submission of a folder of them: every file, and every subfolder as one student's upload
    (dotfiles aside), by name."""
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder")
    found = sorted(p for p in folder.iterdir() if not p.name.startswith(".") and (p.is_file() or p.is_dir()))
    if not found:
        raise FileNotFoundError(f"{folder} holds no submission (a file, or a folder of one student's files)")
    return found


def try_each(client: docker.DockerClient, target: str, output: Path, submissions: list[Path], folder: Path,
             base: str | None, say: Say) -> list[tuple[Path, Outcome]]:
    """Build the bundle's image once, then grade each submission in a fresh container of it, as the
    platform does; each one's results are kept in a folder of its own under `folder`. Says a score line
    per submission as it is graded."""
    image = ensure_base(client, target, base, say)
    spec = GRADESCOPE if target == "gradescope" else PRAIRIELEARN
    say(f"building the autograder's image on {image} (setup.sh as root)" if target == "gradescope"
        else f"building {output / 'image'} on {image}")
    outcomes: list[tuple[Path, Outcome]] = []
    with make_runner(client, target, output, image) as runner:
        for number, submission in enumerate(submissions, 1):
            say(f"grading {submission} as {target} runs it: {spec.memory_mb} MB, {spec.cpus:g} CPU, "
                "Docker's default confinement")
            where = folder if len(submissions) == 1 else folder / f"{number:03d}-{_safe(submission.name)}"
            outcome = runner.grade(submission, where)
            outcomes.append((submission, outcome))
            if len(submissions) > 1:
                say(score_line(submission.name, outcome))
    return outcomes


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:80] or "submission"
