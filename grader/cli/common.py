"""What several commands share: exit statuses, usage errors, the options' types and help, output files,
the submission file, the sandbox and the store.

Registering the parsers imports this module and nothing heavier than argparse: everything a command
needs to run (the exercise, the sandbox, rich, the store) is imported inside the functions that use
it, so that `grader grade` pays neither for the store nor for the web service.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from grader.core.backend import Backend
    from grader.core.scorecard import Scorecard
    from grader.course.store import Store
    from grader.sandbox.interpreter import WaitingHarness

OK, UNVOUCHED, USAGE, BROKEN, BELOW = 0, 1, 2, 3, 4
BROKEN_PIPE = 141  # what a shell reports for a writer ended by SIGPIPE
INTERRUPTED = 130  # what a shell reports for a program ended by Ctrl-C
TIER_HELP = "one of the tiers the exercise declares (default: its default tier)"
EXERCISE_HELP = "the exercise's name (slug) or folder"
SANDBOX_HELP = ("where the code runs: docker, local (Linux namespaces), or auto: Docker when an engine answers, "
                "else local")
UNSAFE_HELP = "run the local sandbox without namespaces: only for your own trusted code"
COMMAND_HELP = "one of these (`COMMAND --help` tells more)"
DB_HELP = "the submissions store (default: $GRADER_DB or ./grader.db)"
STDOUT = "-"  # an output path that means standard output
OUTPUT_OPTIONS = ("json", "html", "md", "output", "gradebook")  # the options that may be given STDOUT
FAIL_UNDER_HELP = ("exit with status 4 when the score is below this: points (8) or a percentage of the "
                   "maximum (80%%); a gate for CI. Without it the exit status does not depend on the score")
# The choices of options, spelt here so that building the parser imports none of the modules they come
# from (the sandbox's, the exercise's); tests/test_cli.py checks that they agree with those modules.
SANDBOXES = ("auto", "docker", "local")  # grader.sandbox.choose.SANDBOXES
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")  # grader.core.exercise.VISIBILITIES


class UsageError(Exception):
    pass


@dataclass(frozen=True)
class Threshold:
    """The score `--fail-under` asks for: points, or a percentage of the maximum."""
    value: float
    percent: bool

    def met_by(self, card: Scorecard) -> bool:
        if self.percent:
            return card.score * 100 >= self.value * card.max_score
        return card.score >= self.value

    def __str__(self) -> str:
        return f"{self.value:g}%" if self.percent else f"{self.value:g} points"


def threshold(text: str) -> Threshold:
    """`80%` or `8`: the argparse type of --fail-under."""
    percent = text.strip().endswith("%")
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (percent and value > 100):
        raise argparse.ArgumentTypeError(f"{text!r}: give points (8) or a percentage of the maximum, 0-100 (80%)")
    return Threshold(value, percent)


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1, refused with a sentence otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be at least 1")
    return value


def add_sandbox_options(parser: argparse.ArgumentParser, unsafe_local: bool = True) -> None:
    parser.add_argument("--sandbox", choices=SANDBOXES, default="auto", help=SANDBOX_HELP)
    if unsafe_local:
        parser.add_argument("--unsafe-local", action="store_true", help=UNSAFE_HELP)


def takes_stdout(args: argparse.Namespace) -> bool:
    """Whether an output option was given `-`; at most one may be, or the documents would mix."""
    named = [name for name in OUTPUT_OPTIONS if getattr(args, name, None) == STDOUT]
    if len(named) > 1:
        raise UsageError(f"only one output can go to standard output ('-'): not {', '.join(named)} together")
    return bool(named)


def check_outputs(args: argparse.Namespace) -> None:
    """Every file a command will write, checked before any work: a grading of a whole class is not lost
    to a misspelt folder found only at the end."""
    files = [(f"--{name.replace('_', '-')}", getattr(args, name, None)) for name in (*OUTPUT_OPTIONS, "pseudonym_map")]
    if args.command == "package":
        files = []  # its --output is a zip or a folder, checked by the packager
    for option, value in files:
        if not value or value == STDOUT:
            continue
        path = Path(value)
        if path.is_dir():
            raise UsageError(f"{option} {value}: is a folder; give a file name")
        if not path.parent.is_dir():
            raise UsageError(f"{option} {value}: the folder {path.parent} does not exist")
    out = getattr(args, "out", None)
    if out and Path(out).exists() and not Path(out).is_dir():
        raise UsageError(f"--out {out}: is a file; give a folder for the site")


def write_output(path: str, text: str, private: bool = False) -> str:
    """Write `text` to the file `path`, or to standard output for `-`; returns what to call it."""
    from grader.text import without_surrogates

    if path == STDOUT:
        sys.stdout.write(without_surrogates(text))
        sys.stdout.flush()
        return "standard output"
    if private:
        from grader.db.engine import write_private

        write_private(Path(path), text)
    else:
        Path(path).write_text(text, encoding="utf-8", errors="replace")
    return path


def read_submission(path: str, max_bytes: int) -> bytes:
    from grader.core.validate import read_capped

    file = Path(path)
    if not file.exists():
        raise UsageError(f"{path}: no such file")
    if not file.is_file():
        raise UsageError(f"{path}: not a file (submit the solution's .py file)")
    try:
        return read_capped(file, max_bytes)
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror})") from None


def note_graded_as(path: str, submission_file: str, console: Console) -> None:
    """One line when the file's name is not the one the exercise grades: the tests import it under the
    exercise's name whatever it was called, which a student who handed in `notes.txt` should be told."""
    from rich.text import Text

    name = Path(path).name
    if name != submission_file:
        console.print(Text(f"note: {name} graded as {submission_file}, the exercise's submission file",
                           style="yellow"), soft_wrap=True)


def sandbox_for(args: argparse.Namespace, console: Console, waiting: WaitingHarness | None = None) -> Backend:
    """The backend to grade with; says which one `auto` chose, warns on every unprotected run, and shows
    the lines of a first image build. `waiting`: a harness started early, for a local backend to take."""
    from rich.text import Text

    from grader.cli.console import PipedConsole
    from grader.sandbox.choose import choose
    from grader.sandbox.local import UNSAFE_WARNING

    unsafe = getattr(args, "unsafe_local", False)
    choice = choose(args.sandbox, progress=lambda line: console.print(Text(line, style="dim")), unsafe_local=unsafe,
                    waiting=waiting)
    if args.sandbox == "auto":
        console.print(Text(f"sandbox: {choice.name} ({choice.why})", style="dim"))
    if choice.unsafe:
        PipedConsole(stderr=True).print(Text(f"warning: {UNSAFE_WARNING}", style="red bold"))
    return choice.backend


def gate(card: Scorecard, fail_under: Threshold | None, console: Console) -> int:
    """OK, or BELOW when --fail-under was given and the score is below it (a rejected file scores 0)."""
    from rich.text import Text

    if fail_under is None or fail_under.met_by(card):
        return OK
    console.print(Text(f"score {card.score}/{card.max_score} is below --fail-under {fail_under}", style="red bold"))
    return BELOW


def write_reports(card: Scorecard, html: str | None, md: str | None) -> list[tuple[str, str]]:
    """Render the asked-for reports from the scorecard alone; returns (label, where) pairs written."""
    written = []
    if html or md:
        from grader.report import render_html, render_markdown

        for label, path, render in (("HTML report", html, render_html), ("Markdown report", md, render_markdown)):
            if path:
                written.append((label, write_output(path, render(card))))
    return written


def print_written(written: list[tuple[str, str]], console: Console) -> None:
    """`label: path` for each file written, dim: what a person reads after the summary."""
    from rich.text import Text

    for label, path in written:
        console.print(Text(f"{label}: {path}", style="dim"))


def store_location(explicit: str | None) -> str:
    """A database URL as given (--db, else $GRADER_DB), else the SQLite path of --db / $GRADER_DB / ./grader.db."""
    from grader.course.store import default_db_path

    given = explicit or os.environ.get("GRADER_DB")
    return given if given and "://" in given else str(default_db_path(explicit))


def open_store(args: argparse.Namespace) -> Store:
    from grader.course.store import Store

    return Store(store_location(args.db))


def existing_store(args: argparse.Namespace) -> Store:
    """The store of --db for reading: one that does not exist is a mistake, not a new empty store."""
    location = store_location(args.db)
    if "://" not in location and not Path(location).is_file():
        raise UsageError(f"no store at {location}: grade into it first, or give --db")
    return open_store(args)


def given_address(args: argparse.Namespace) -> str | None:
    """`--base-url` checked (UsageError saying what is wrong with it), or None when not given."""
    from grader.web.serve import public_address

    if args.base_url is None:
        return None
    try:
        return public_address(args.base_url)
    except ValueError as exc:
        raise UsageError(f"--base-url {exc}") from None


def service_address(args: argparse.Namespace) -> str:
    """The address of `grader serve` that printed links use: --base-url, else the service's default."""
    from grader.web.serve import base_url

    return given_address(args) or base_url("127.0.0.1", 8000)
