"""`grader grade`: one submission file, graded on the tier asked for, summarised on the terminal, with
the scorecard and the reports written where asked."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from grader.cli.common import (
    EXERCISE_HELP,
    FAIL_UNDER_HELP,
    TIER_HELP,
    UNVOUCHED,
    add_sandbox_options,
    gate,
    note_graded_as,
    print_written,
    read_submission,
    sandbox_for,
    threshold,
    write_output,
    write_reports,
)

if TYPE_CHECKING:
    from rich.console import Console

    from grader.core.exercise import Exercise
    from grader.core.scorecard import Scorecard
    from grader.sandbox.interpreter import WaitingHarness

EXAMPLES = {
    "grade": ["grader grade solutions/continuous_batching/scheduler.py --exercise continuous_batching",
              "grader grade alice.py --exercise continuous_batching --tier free --json - | jq .score",
              "grader grade alice.py --exercise continuous_batching --fail-under 80% --html report.html"],
}


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    grade = commands.add_parser("grade", help="grade one submission file")
    grade.add_argument("submission", help="the student's solution file")
    grade.add_argument("--exercise", required=True, help=EXERCISE_HELP)
    grade.add_argument("--tier", help=TIER_HELP)
    add_sandbox_options(grade)
    grade.add_argument("--json", metavar="F", help="write the scorecard JSON here ('-': standard output)")
    grade.add_argument("--html", metavar="F", help="write the HTML report here ('-': standard output)")
    grade.add_argument("--md", metavar="F", help="write the Markdown report here ('-': standard output)")
    grade.add_argument("--fail-under", metavar="SCORE", type=threshold, help=FAIL_UNDER_HELP)
    grade.set_defaults(run=command_grade)


def command_grade(args: argparse.Namespace, console: Console) -> int:
    from grader.sandbox.interpreter import early_harness

    # The harness's interpreter starts first, so that its start and pytest's import run beside this
    # process's own imports and checks rather than after them (it waits for its job meanwhile, and is
    # ended unused when the grading does not happen).
    waiting = early_harness(args.sandbox) if Path(args.submission).is_file() else None
    try:
        from grader.core.exercise import load_exercise

        exercise = load_exercise(args.exercise)
        args.tier = exercise.tier(args.tier)
        data = read_submission(args.submission, exercise.max_submission_bytes)
        # What comes after the grading is imported now too, while the harness starts, not after it ends.
        from grader.cli.terminal import print_summary

        card = grade_data(data, exercise, args, console, waiting)
    finally:
        if waiting is not None:
            waiting.discard()  # unless the grading took it
    written = [("scorecard", write_output(args.json, card.to_json() + "\n"))] if args.json else []
    print_summary(card, console)
    print_written([*written, *write_reports(card, args.html, args.md)], console)
    if card.status not in ("graded", "rejected"):
        return UNVOUCHED
    return gate(card, args.fail_under, console)


def grade_data(data: bytes, exercise: Exercise, args: argparse.Namespace, console: Console,
               waiting: WaitingHarness | None) -> Scorecard:
    from grader.audit.match import diagnose_graded
    from grader.core.grading import grade_bytes

    note_graded_as(args.submission, exercise.submission_file, console)
    return grade_bytes(data, exercise, args.tier, sandbox_for(args, console, waiting), diagnose=diagnose_graded)
