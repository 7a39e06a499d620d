"""What a platform bundle runs for each submission, inside the platform's container:
`python3 -m grader.bundles.run gradescope|prairielearn`.

1. The submission folder must hold exactly one file (dotfiles and macOS's `__MACOSX/` aside). No file,
   or several, is a `rejected` scorecard that says what was received and what is expected. A single
   file under another name (`scheduler (2).py`, as browsers save a second download) is graded as
   the exercise's file: refusing it would teach nothing, and the name is said in the log.
2. `grader grade FILE --sandbox local --json card.json` grades it (in namespaces where the container
   allows them, else as an account of its own). When that writes no scorecard (the sandbox cannot
   start), the runner writes an `error` scorecard: the run failed, never a pass.
3. What the grader said about its own failure (an `error` run's reason: the sandbox's refusal, the
   tail of a worker's sandbox log) is for the course staff: it goes to the run's log (Gradescope keeps
   run_autograder's output for the staff; PrairieLearn's job log), and the student reads that the
   autograder could not produce a result, with the submission id to quote.
4. `grader export card.json --format PLATFORM -o RESULTS` writes the platform's results.json.

Each step is a `python3 -m grader` process, so a crash in grading still leaves the runner to
report it. The runner exits 0 whenever results.json is written, whatever the outcome: PrairieLearn
reads results.json only after an exit status 0. If the export itself fails, no results.json is written
and the runner exits 1; the platform's shell script (`files/run_autograder`, `files/entrypoint`) then
writes a result that is no grade, as it does when the runner itself is ended (by the out-of-memory
killer): every run ends with a result.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from grader.core.scorecard import Scorecard

IGNORED = ("__MACOSX",)  # folders a zip made on macOS carries beside the files


@dataclass(frozen=True)
class Platform:
    name: str
    bundle: Path  # the folder holding bundle.json and project/
    submission: Path
    results: Path
    export_format: str
    log: str  # where the staff read what the runner prints


PLATFORMS = {
    "gradescope": Platform("gradescope", Path("/autograder/source"), Path("/autograder/submission"),
                           Path("/autograder/results/results.json"), "gradescope", "the autograder's output"),
    "prairielearn": Platform("prairielearn", Path("/grade/tests"), Path("/grade/student"),
                             Path("/grade/results/results.json"), "prairielearn", "the grading job's log"),
}


def submitted_files(folder: Path) -> list[Path]:
    """Everything submitted that is not a folder, however deep (links and other non-files included,
    to be refused), without dotfiles and `__MACOSX/`."""
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.rglob("*")):
        parts = path.relative_to(folder).parts
        if any(part.startswith(".") or part in IGNORED for part in parts):
            continue
        if path.is_symlink() or not path.is_dir():
            found.append(path)
    return found


def refusal(files: list[Path], folder: Path, expected: str) -> str | None:
    """Why these files cannot be graded (None: one file, graded)."""
    if not files:
        return f"no file was submitted: submit your {expected}"
    for path in files:  # a link could name the reference itself: only the student's own bytes are graded
        if path.is_symlink() or not path.is_file():
            return f"{path.relative_to(folder).as_posix()} is a link, not a file: submit your {expected} itself"
    if len(files) > 1:
        names = ", ".join(path.relative_to(folder).as_posix() for path in files[:10])
        more = f" and {len(files) - 10} more" if len(files) > 10 else ""
        return (f"{len(files)} files were submitted ({names}{more}); submit only your {expected}, "
                "as one file")
    return None


def grader_command(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "grader", *arguments]


def export_command(card: Path, platform: Platform, hidden_visibility: str | None) -> list[str]:
    """The one place that turns a scorecard into the platform's results.json."""
    command = grader_command("export", str(card), "--format", platform.export_format, "-o", str(platform.results))
    if hidden_visibility is not None:
        command += ["--hidden-visibility", hidden_visibility]
    return command


def submission_id(files: list[Path], folder: Path) -> str:
    """The id a student quotes to the staff: for one file its sha256, as `grader grade` gives it; for none
    or several, the sha256 of their names and contents."""
    def digest(path: Path) -> str:
        found = hashlib.sha256()
        if path.is_file() and not path.is_symlink():
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    found.update(block)
        return found.hexdigest()

    if len(files) == 1:
        return digest(files[0])
    listing = "".join(f"{path.relative_to(folder).as_posix()}\0{digest(path)}\n" for path in files)
    return hashlib.sha256(listing.encode("utf-8", "surrogateescape")).hexdigest()


def unrun_card(config: dict[str, Any], status: Literal["rejected", "error"], reason: str, project: Path,
               sha256: str) -> Scorecard:
    """A scorecard of a run refused (`rejected`) or failed (`error`) before any test ran. Where the bundle's
    exercise cannot even be loaded, an `error` card that says so: the results are still written."""
    import grader
    from grader.core.exercise import ExerciseError, load_exercise
    from grader.core.grading import new_scorecard
    from grader.core.scorecard import Scorecard, utc_now
    from grader.errors import GradingError

    try:
        exercise = load_exercise(str(project / "exercises" / config["exercise"]))
        card = new_scorecard(exercise, config["tier"], "local")
    except (ExerciseError, GradingError, OSError, ValueError) as exc:
        return Scorecard(exercise=config["exercise"], tier=config["tier"], submission_sha256=sha256, status="error",
                         score=0, max_score=0, reason=f"the bundle's exercise cannot be loaded: {exc}",
                         grader_version=grader.__version__, graded_at=utc_now(), submission_file=config["submission"])
    card.status, card.reason, card.submission_sha256 = status, reason, sha256
    return card


def grade(file: Path, config: dict[str, Any], project: Path, work: Path) -> tuple[Path | None, str]:
    """(the scorecard written by `grader grade`, or None) and what the command said."""
    card = work / "card.json"
    command = grader_command("grade", str(file), "--exercise", str(project / "exercises" / config["exercise"]),
                             "--tier", config["tier"], "--sandbox", "local", "--json", str(card))
    done = subprocess.run(command, cwd=work, capture_output=True, text=True, errors="replace",
                          env={**os.environ, "COLUMNS": "120"})
    said = (done.stdout + done.stderr).strip()
    print(said, flush=True)
    if done.returncode in (0, 1) and card.is_file():
        return card, said
    lines = done.stderr.strip().splitlines()  # the error, wrapped by the console: from its last "grader: " on
    start = max((i for i, line in enumerate(lines) if line.startswith("grader: ")), default=len(lines))
    why = " ".join(line.strip() for line in lines[start:]).removeprefix("grader: ")
    return None, why or f"grader grade ended with exit status {done.returncode} and wrote no scorecard"


def sandbox_problem() -> str | None:
    """Why the local sandbox cannot start in this container, said for the course staff (None: it can:
    in namespaces, or, where the container allows none, as an account of its own)."""
    from grader.errors import SandboxUnavailable
    from grader.sandbox.isolation import local_isolation

    try:
        local_isolation()
    except SandboxUnavailable as refused:
        return str(refused)
    return None


def scorecard_for(files: list[Path], platform: Platform, config: dict[str, Any], project: Path, work: Path) -> Path:
    """The submission's scorecard, written in `work`: graded by `grader grade`, or refused or failed
    before any test ran."""
    sha256 = submission_id(files, platform.submission)
    refused = refusal(files, platform.submission, config["submission"])
    if refused is not None:
        return write_card(unrun_card(config, "rejected", refused, project, sha256), work)
    if files[0].name != config["submission"]:
        print(f"grading {files[0].name} as {config['submission']}", flush=True)
    invalid = invalid_file(files[0], config, project)
    if invalid is not None:  # a file that cannot be graded says why wherever it is handed in
        return write_card(unrun_card(config, "rejected", invalid, project, sha256), work)
    why = sandbox_problem()
    if why is None:
        card, why = grade(files[0], config, project, work)
        if card is not None:
            return card
    return write_card(unrun_card(config, "error", f"the autograder could not run: {why}", project, sha256), work)


def invalid_file(file: Path, config: dict[str, Any], project: Path) -> str | None:
    """Why `grader grade` would reject the file without running it (a syntax error, with its line; not
    UTF-8; too big), checked before the sandbox so that no container's settings hide it. None where the
    file is valid or the exercise cannot be loaded (the grading then says so)."""
    from grader.core.exercise import ExerciseError, load_exercise
    from grader.core.validate import Rejected, validate

    try:
        exercise = load_exercise(str(project / "exercises" / config["exercise"]))
        validate(file.read_bytes(), config["submission"], exercise.max_submission_bytes)
    except Rejected as why:
        return str(why)
    except (ExerciseError, OSError, ValueError):
        return None
    return None


def student_error(platform: Platform) -> str:
    """What a student reads of a run the grader could not vouch for: the details are the staff's."""
    return (f"the autograder could not produce a result for this submission; the course staff can read why in "
            f"{platform.log}")


def for_the_log(card_path: Path, platform: Platform) -> None:
    """Say the outcome in the run's log, which the staff read, and keep what the grader said of its own
    failure there: an `error` card's reason becomes a sentence for the student."""
    from grader.core.scorecard import Scorecard

    try:
        card = Scorecard.read(card_path)
    except ValueError as exc:  # the export refuses it too: the platform shows a failed run
        print(f"the scorecard cannot be read: {exc}", flush=True)
        return
    print(f"outcome: {card.status}, {card.score}/{card.max_score} points, submission id {card.submission_sha256}"
          + (f", isolation {card.isolation}" if card.isolation else "")
          + f", Python {'.'.join(map(str, sys.version_info[:2]))}", flush=True)
    if card.status == "rejected":
        print(f"rejected: {card.reason}", flush=True)
    elif card.status == "error":
        print(f"for the course staff, why there is no result:\n{card.reason}", flush=True)
        card.reason = student_error(platform)
        card.write(card_path)


def write_card(card: Scorecard, work: Path) -> Path:
    path = work / "card.json"
    card.write(str(path))
    return path


def keep_from_workers(platform: Platform) -> None:
    """Where the container allows no namespaces, a submission runs on the container's own files, kept
    from it by their modes alone (the `account` isolation): the bundle (the hidden suites, the reference,
    the seed key) becomes root's alone, and the results folder root's to write. As root only; where a
    mode cannot be set, the grading's own check refuses to grade and names what stays readable."""
    if os.geteuid() != 0:
        return
    for folder, mode in ((platform.bundle, 0o700), (platform.results.parent, 0o755)):
        try:
            os.chown(folder, 0, 0)
            os.chmod(folder, mode)
        except OSError as exc:
            print(f"{folder} could not be made root's ({exc})", flush=True)


def run(platform: Platform) -> int:
    config = json.loads((platform.bundle / "bundle.json").read_text(encoding="utf-8"))
    platform.results.parent.mkdir(parents=True, exist_ok=True)
    platform.results.unlink(missing_ok=True)
    keep_from_workers(platform)
    with tempfile.TemporaryDirectory(prefix="grader-bundle-") as folder:
        card = scorecard_for(submitted_files(platform.submission), platform, config, platform.bundle / "project",
                             Path(folder))
        for_the_log(card, platform)
        done = subprocess.run(export_command(card, platform, config.get("hidden_visibility")),
                              capture_output=True, text=True, errors="replace")
    if done.returncode != 0 or not platform.results.is_file():
        platform.results.unlink(missing_ok=True)  # none of its own: the shell script writes one that is no grade
        print(f"grader export failed (exit status {done.returncode}): {done.stderr.strip()}", flush=True)
        return 1
    print(f"results written to {platform.results}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0] not in PLATFORMS:
        print(f"usage: python3 -m grader.bundles.run {'|'.join(PLATFORMS)}", file=sys.stderr)
        return 2
    return run(PLATFORMS[argv[0]])


if __name__ == "__main__":
    sys.exit(main())
