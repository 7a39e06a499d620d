"""What a platform bundle runs for each submission, inside the platform's container:
`python3 -m grader.bundles.run gradescope|prairielearn`.

1. The submission folder must hold exactly one file (dotfiles and macOS's `__MACOSX/` aside). No file,
   or several, is a `rejected` scorecard that says what was received and what is expected. A single
   file under another name (`scheduler (2).py`, as browsers save a second download) is graded as
   the exercise's file: refusing it would teach nothing, and the name is said in the log.
2. `grader grade FILE --sandbox local --json card.json` grades it (bubblewrap inside the container).
   When that writes no scorecard (the sandbox cannot start: the container forbids namespaces), the
   runner writes an `error` scorecard with the reason: the run failed, never a 0 or a pass.
3. `grader export card.json --format PLATFORM -o RESULTS` writes the platform's results.json.

Each step is a `python3 -m grader.cli` process, so a crash in grading still leaves the runner to
report it. If the export itself fails, no results.json is written and the runner exits 1: the
platform then shows a failed autograder run (Gradescope) or grading job (PrairieLearn).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from grader.scorecard import Scorecard

IGNORED = ("__MACOSX",)  # folders a zip made on macOS carries beside the files


@dataclass(frozen=True)
class Platform:
    name: str
    bundle: Path  # the folder holding bundle.json and project/
    submission: Path
    results: Path
    export_format: str
    # PrairieLearn tells a failed grading job from a graded one by the entrypoint's exit status: an
    # `error` scorecard (the grader could not vouch for a result) must not read as a graded 0 there.
    error_exits_nonzero: bool = False


PLATFORMS = {
    "gradescope": Platform("gradescope", Path("/autograder/source"), Path("/autograder/submission"),
                           Path("/autograder/results/results.json"), "gradescope"),
    "prairielearn": Platform("prairielearn", Path("/grade/tests"), Path("/grade/student"),
                             Path("/grade/results/results.json"), "prairielearn", error_exits_nonzero=True),
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
    return [sys.executable, "-m", "grader.cli", *arguments]


def export_command(card: Path, platform: Platform, hidden_visibility: str | None) -> list[str]:
    """The one place that turns a scorecard into the platform's results.json."""
    command = grader_command("export", str(card), "--format", platform.export_format, "-o", str(platform.results))
    if hidden_visibility is not None:
        command += ["--hidden-visibility", hidden_visibility]
    return command


def unrun_card(config: dict, status: str, reason: str, project: Path) -> Scorecard:
    """A scorecard of a run refused (`rejected`) or failed (`error`) before any test ran."""
    from grader.exercise import load_exercise
    from grader.grading import new_scorecard

    exercise = load_exercise(str(project / "exercises" / config["exercise"]))
    card = new_scorecard(exercise, config["tier"], "local")
    card.status, card.reason = status, reason
    return card


def grade(file: Path, config: dict, project: Path, work: Path) -> tuple[Path | None, str]:
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
    """Why the local sandbox cannot start in this container, said for the course staff (None: it can)."""
    from grader.sandbox.local import isolation_problem

    problem = isolation_problem()
    if problem is None:
        return None
    return (f"the platform's container does not let the grader isolate submissions: {problem}. The container "
            "must allow user namespaces and mounts (for Docker: --security-opt seccomp=unconfined "
            "--security-opt apparmor=unconfined --security-opt systempaths=unconfined); see the grader's "
            "README, \"Platform bundles\"")


def scorecard_for(files: list[Path], platform: Platform, config: dict, project: Path, work: Path) -> Path:
    """The submission's scorecard, written in `work`: graded by `grader grade`, or refused or failed
    before any test ran."""
    refused = refusal(files, platform.submission, config["submission"])
    if refused is not None:
        return write_card(unrun_card(config, "rejected", refused, project), work)
    if files[0].name != config["submission"]:
        print(f"grading {files[0].name} as {config['submission']}", flush=True)
    why = sandbox_problem()
    if why is None:
        card, why = grade(files[0], config, project, work)
        if card is not None:
            return card
    return write_card(unrun_card(config, "error", f"the autograder could not run: {why}", project), work)


def write_card(card: Scorecard, work: Path) -> Path:
    path = work / "card.json"
    card.write(str(path))
    return path


def run(platform: Platform) -> int:
    config = json.loads((platform.bundle / "bundle.json").read_text(encoding="utf-8"))
    platform.results.parent.mkdir(parents=True, exist_ok=True)
    platform.results.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="grader-bundle-") as folder:
        card = scorecard_for(submitted_files(platform.submission), platform, config, platform.bundle / "project",
                             Path(folder))
        card_text = card.read_text(encoding="utf-8")
        done = subprocess.run(export_command(card, platform, config.get("hidden_visibility")),
                              capture_output=True, text=True, errors="replace")
    if done.returncode != 0 or not platform.results.is_file():
        platform.results.unlink(missing_ok=True)  # no results at all: the platform shows a failed run, not a score
        print(f"grader export failed (exit status {done.returncode}): {done.stderr.strip()}", flush=True)
        return 1
    print(f"results written to {platform.results}", flush=True)
    failed = json.loads(card_text).get("status") == "error"
    return 1 if failed and platform.error_exits_nonzero else 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or argv[0] not in PLATFORMS:
        print(f"usage: python3 -m grader.bundles.run {'|'.join(PLATFORMS)}", file=sys.stderr)
        return 2
    return run(PLATFORMS[argv[0]])


if __name__ == "__main__":
    sys.exit(main())
