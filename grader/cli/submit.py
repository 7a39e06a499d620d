"""`grader submit`: one student's file, stored, graded (unless the same file was already) and its HTML
report kept beside the store."""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from grader.cli.common import (
    DB_HELP,
    EXERCISE_HELP,
    OK,
    TIER_HELP,
    UNVOUCHED,
    add_sandbox_options,
    note_graded_as,
    open_store,
    read_submission,
    sandbox_for,
)

if TYPE_CHECKING:
    from rich.console import Console

    from grader.core.scorecard import Scorecard

EXAMPLES = {
    "submit": ["grader submit alice.py --student alice --exercise continuous_batching --db class.db"],
}


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    submit = commands.add_parser("submit", help="store a student's submission, grade it, keep the report")
    submit.add_argument("submission", help="the student's solution file")
    submit.add_argument("--student", required=True, help="the student's id")
    submit.add_argument("--exercise", required=True, help=EXERCISE_HELP)
    submit.add_argument("--tier", help=TIER_HELP)
    add_sandbox_options(submit)
    submit.add_argument("--db", metavar="PATH", help=DB_HELP)
    submit.set_defaults(run=command_submit)


def report_path(store_path: Path, student: str, exercise: str, submission_id: int) -> Path:
    return store_path.parent / "reports" / student / f"{exercise}-{submission_id}.html"


def store_report(store_path: Path, student: str, exercise: str, submission_id: int, card: Scorecard) -> Path:
    """The HTML report kept beside the store: owner-only, like the store (only `publish` is for others)."""
    from grader.db.engine import make_private_folder, write_private
    from grader.report import render_html

    report = report_path(store_path, student, exercise, submission_id)
    make_private_folder(report.parent)
    return write_private(report, render_html(card))


def command_submit(args: argparse.Namespace, console: Console) -> int:
    from rich.text import Text

    from grader.audit.match import diagnose_graded
    from grader.cli.terminal import print_summary
    from grader.core.exercise import load_exercise
    from grader.core.grading import grade_bytes
    from grader.course.store import validate_student_id

    student = validate_student_id(args.student)
    exercise = load_exercise(args.exercise)
    args.tier = exercise.tier(args.tier)
    data = read_submission(args.submission, exercise.max_submission_bytes)
    note_graded_as(args.submission, exercise.submission_file, console)
    with open_store(args) as store:
        sha = hashlib.sha256(data).hexdigest()
        submission_id, new = store.add_submission(student, exercise.slug, args.tier, sha,
                                                  Path(args.submission).name, data)
        card = None if new else store.scorecard(submission_id)
        if card is not None:
            console.print(Text(f"this exact file was already graded for {student} (submission {submission_id}); "
                               "showing that result", style="yellow"))
        else:
            card = grade_bytes(data, exercise, args.tier, sandbox_for(args, console), diagnose=diagnose_graded)
            store.save_scorecard(submission_id, card)
        print_summary(card, console)
        report = store_report(store.path, student, exercise.slug, submission_id, card)
        console.print(Text(f"submission {submission_id} stored in {store.path}; report: {report}"))
    return OK if card.status in ("graded", "rejected") else UNVOUCHED
