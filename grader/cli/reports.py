"""`grader report` and `grader export`: a scorecard (a file, or one in the store) rendered as reports or
converted for Gradescope, PrairieLearn, JUnit or GitLab."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from grader.cli.common import (
    DB_HELP,
    OK,
    STDOUT,
    VISIBILITIES,
    UsageError,
    existing_store,
    print_written,
    write_output,
    write_reports,
)

if TYPE_CHECKING:
    from rich.console import Console

    from grader.core.scorecard import Scorecard

EXAMPLES = {
    "report": ["grader report card.json --html report.html",
               "grader report card.json --md - > comment.md"],
    "export": ["grader export card.json --format gradescope -o results.json",
               "grader export card.json --format gradescope --hidden-visibility after_due_date -o results.json",
               "grader export card.json --format junit > junit.xml",
               "grader export card.json --format gitlab -o report.xml"],
}


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    report = commands.add_parser("report", help="render a stored scorecard as HTML and/or Markdown")
    report.add_argument("scorecard", nargs="?", help="a scorecard JSON file (or one in the store: see --submission)")
    add_stored_scorecard_options(report)
    report.add_argument("--html", metavar="F", help="write the HTML report here ('-': standard output)")
    report.add_argument("--md", metavar="F", help="write the Markdown report here ('-': standard output)")
    report.set_defaults(run=command_report)

    export = commands.add_parser("export", help="convert a scorecard for Gradescope, PrairieLearn or JUnit")
    export.add_argument("scorecard", nargs="?", help="a scorecard JSON file (or one in the store: see --submission)")
    add_stored_scorecard_options(export)
    export.add_argument("--format", required=True, choices=("gradescope", "prairielearn", "junit", "gitlab"),
                        help="Gradescope's or PrairieLearn's results.json, JUnit XML for Jenkins, or JUnit XML "
                             "with GitLab's testcase file attribute")
    export.add_argument("-o", "--output", metavar="FILE", help="write here instead of standard output")
    export.add_argument("--hidden-visibility", choices=VISIBILITIES, default=None,
                        help="gradescope only: when students see the results of the suites outside the free "
                             "tier (default: each suite's `visibility` in exercise.toml, else after_published)")
    export.set_defaults(run=command_export)


def add_stored_scorecard_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--submission", type=int, metavar="N", help="the current scorecard of submission N of the store")
    parser.add_argument("--student", metavar="ID", help="the scorecard of the student's latest submission (with --exercise)")
    parser.add_argument("--exercise", metavar="SLUG", help="the exercise of --student")
    parser.add_argument("--db", metavar="PATH|URL", help=DB_HELP)


def read_scorecard(args: argparse.Namespace) -> Scorecard:
    """The scorecard a command works on: a JSON file, or the current scorecard of a stored submission
    (`--submission N`, or the latest of `--student` for `--exercise`)."""
    from grader.core.scorecard import Scorecard

    from_store = args.submission is not None or args.student is not None
    if from_store == bool(args.scorecard):
        raise UsageError("give a scorecard file, or --submission N (or --student ID --exercise SLUG) for one "
                         "in the store")
    if not from_store:
        try:
            return Scorecard.read(args.scorecard)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    with existing_store(args) as store:
        if args.submission is not None:
            card = store.scorecard(args.submission)
            what = f"submission {args.submission}"
        else:
            if not args.exercise:
                raise UsageError("--student goes with --exercise")
            # The latest file she handed in, whatever its result: a rejected one too (its report says why),
            # although a gradebook counts it nowhere.
            cards = [sub.card for sub in store.submissions(args.exercise, args.student) if sub.card is not None]
            card, what = (cards[-1] if cards else None), f"{args.student}'s {args.exercise}"
    if card is None:
        raise UsageError(f"the store holds no scorecard of {what}")
    return card


def command_report(args: argparse.Namespace, console: Console) -> int:
    from grader.cli.terminal import print_summary

    card = read_scorecard(args)
    if not (args.html or args.md):
        print_summary(card, console)
    print_written(write_reports(card, args.html, args.md), console)
    return OK


def command_export(args: argparse.Namespace, console: Console) -> int:
    from rich.text import Text

    from grader.report.exports import export

    card = read_scorecard(args)
    try:
        text = export(card, args.format, hidden_visibility=args.hidden_visibility)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.output and args.output != STDOUT:
        console.print(Text(f"{args.format}: {write_output(args.output, text)}", style="dim"))
    else:
        write_output(STDOUT, text)
    return OK
