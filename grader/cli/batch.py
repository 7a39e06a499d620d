"""`grader batch`: a class folder graded in parallel sandboxes into the store, resumably; its summary,
each student's score, and the gradebook CSV."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from grader.cli.common import (
    BELOW,
    DB_HELP,
    EXERCISE_HELP,
    INTERRUPTED,
    OK,
    TIER_HELP,
    USAGE,
    UsageError,
    add_sandbox_options,
    open_store,
    sandbox_for,
    threshold,
    write_output,
)

if TYPE_CHECKING:
    from rich.console import Console

    from grader.core.exercise import Exercise
    from grader.course.batch import BatchSummary, Candidate

EXAMPLES = {
    "batch": ["grader batch submissions/ --exercise continuous_batching --jobs 2 --gradebook gradebook.csv",
              "grader batch submissions/ --exercise continuous_batching --regrade --gradebook - > gradebook.csv"],
}


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    batch = commands.add_parser("batch", help="grade a folder of submissions in parallel, resumably")
    batch.add_argument("folder", help="a file per student (alice.py) or a folder per student holding the file")
    batch.add_argument("--exercise", required=True, help=EXERCISE_HELP)
    batch.add_argument("--jobs", type=int, default=2, help="submissions graded at once")
    batch.add_argument("--tier", help=TIER_HELP)
    add_sandbox_options(batch)
    batch.add_argument("--regrade", action="store_true",
                       help="grade every submission again, even those already graded with the same file and "
                            "exercise (without it, only new files, results of a changed exercise and errors are)")
    batch.add_argument("--gradebook", metavar="FILE",
                       help="write the gradebook CSV here, owner-only ('-': standard output)")
    batch.add_argument("--fail-under", metavar="SCORE", type=threshold,
                       help="exit with status 4 when any student's result is below this (points, or a "
                            "percentage of the maximum: 80%%) or could not be graded")
    batch.add_argument("--db", metavar="PATH", help=DB_HELP)
    batch.set_defaults(run=command_batch)


def command_batch(args: argparse.Namespace, console: Console) -> int:
    from rich.text import Text

    from grader.core.exercise import load_exercise
    from grader.course.batch import discover

    exercise = load_exercise(args.exercise)
    args.tier = exercise.tier(args.tier)
    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    candidates = discover(Path(args.folder), exercise)
    refuse_an_empty_folder(args.folder, candidates, exercise)
    sandbox_for(args, console)  # fail now, not in every thread, when the sandbox is unavailable
    summary = grade_folder(args, exercise, candidates, console)
    print_batch_summary(summary, console)
    print_scores(summary, console)
    if args.gradebook:
        write_gradebook(args, exercise, {c.student for c in candidates if not c.ignored}, console)
    if summary.interrupted:
        console.print(Text("interrupted: what was graded is saved; run the same command again to resume",
                           style="yellow bold"))
        return INTERRUPTED
    return exit_status(args, candidates, summary, console)


def refuse_an_empty_folder(folder: str, candidates: list[Candidate], exercise: Exercise) -> None:
    """A folder with no student's file is a wrong folder, not a class graded: say what it holds, before a
    store is made for nothing."""
    if any(not c.ignored for c in candidates):
        return
    ignored = [c.student for c in candidates]
    holds = f"it holds only {', '.join(ignored)}" if ignored else "it is empty"
    raise UsageError(f"{folder}: no submission of {exercise.slug} to grade ({holds}); a class folder holds a "
                     f"file per student (alice.py) or a folder per student (alice/{exercise.submission_file})")


def grade_folder(args: argparse.Namespace, exercise: Exercise, candidates: list[Candidate],
                 console: Console) -> BatchSummary:
    """The folder's submissions graded into the store under a progress bar."""
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from grader.course.batch import run_batch
    from grader.sandbox.choose import choose_backend

    with open_store(args) as store, Progress(TextColumn("[bold]grading"), BarColumn(), MofNCompleteColumn(),
                                             TimeElapsedColumn(), TextColumn("{task.description}"),
                                             console=console, transient=False) as progress:
        task = progress.add_task("", total=None)
        return run_batch(
            store, exercise, args.tier, lambda: choose_backend(args.sandbox, unsafe_local=args.unsafe_local, warm=True),
            candidates, jobs=args.jobs,
            on_start=lambda total: progress.update(task, total=total),
            on_done=lambda student, card, problem: progress.update(  # the description is rich markup
                task, advance=1, description=escape(f"{student}: {card.score}/{card.max_score}" if card
                                                    else f"{student}: {problem}")),
            regrade=args.regrade,
        )


def write_gradebook(args: argparse.Namespace, exercise: Exercise, students: set[str], console: Console) -> None:
    """The folder's students on this tier: their latest submission of it, of this run or an earlier one."""
    from rich.text import Text

    from grader.course.deadlines import of_project
    from grader.course.gradebook import entry_of, pick, to_csv

    with open_store(args) as store:
        stored, names = store.submissions(exercise.slug), store.student_names()
        deadlines, adjustments = of_project(store, [exercise.slug]), store.adjustments()
        predictions = store.prediction_results()
    chosen = pick([sub for sub in stored if sub.tier == args.tier and sub.student in students], "latest")
    entries = [entry_of(student, sub, names.get(student, ""), deadlines, adjustments, predictions)
               for (student, _), sub in chosen.items() if sub.card]
    where = write_output(args.gradebook, to_csv(entries), private=True)  # names and scores: owner-only
    console.print(Text(f"gradebook: {where}", style="dim"))


def exit_status(args: argparse.Namespace, candidates: list[Candidate], summary: BatchSummary,
                console: Console) -> int:
    """USAGE while files are misnamed, BELOW when --fail-under is not met by everyone, else OK."""
    from rich.text import Text

    misnamed = [c.path.name if c.path.parent == Path(args.folder) else Path(c.path).parent.name
                for c in candidates if c.bad_name]
    if misnamed:
        # The rest is graded and stored; what is left is the instructor's to fix, so the run does not pass.
        console.print(Text(f"{len(misnamed)} file(s) not graded, their names are not student ids: "
                           f"{', '.join(repr(name) for name in misnamed)}; rename them and run again",
                           style="red bold"), soft_wrap=True)
        return USAGE
    if args.fail_under is not None:
        below = sorted(student for student, card in summary.results.items()
                       if card.status == "error" or not args.fail_under.met_by(card))
        not_graded = sorted({student for student, _ in summary.problems} - set(below))
        if below or not_graded:
            console.print(Text(f"below --fail-under {args.fail_under} or not graded: "
                               f"{', '.join(below + not_graded)}", style="red bold"))
            return BELOW
    return OK


def print_batch_summary(summary: BatchSummary, console: Console) -> None:
    """What this run did, then what the batch's files stand at: every stored result counts, those
    graded in an earlier run too (a resume), each under its own outcome."""
    from rich.text import Text

    counts = summary.counts()
    console.print(Text(f"graded {len(summary.graded)} in this run, {len(summary.skipped)} skipped (already "
                       f"graded with the same file and exercise), {len(summary.problems)} not gradable"))
    outcomes = ", ".join(f"{n} {name}" for name, n in counts.items() if n)
    line = f"results of the {len(summary.results)} submission(s): {outcomes or 'none'}"
    mean = summary.mean()
    if mean is not None:
        top = max(card.max_score for card in summary.results.values())
        line += f"; mean score {mean[0]:.1f}/{top} over {mean[1]}"
        if counts["error"] + counts["timed out"]:
            line += " (error and timed-out results left out; rejected files count as 0)"
    console.print(Text(line))
    for student, card in sorted(summary.results.items()):
        if card.status != "graded":
            console.print(Text(f"  {student}: {card.status}: {' '.join(card.reason.split())[:200]}", style="yellow"))
    for student, problem in summary.problems:
        console.print(Text(f"  {student}: {problem}", style="yellow"))
    if summary.ignored:
        console.print(Text(f"ignored (no student's file): {', '.join(name for name, _ in summary.ignored)}",
                           style="dim"))


def print_scores(summary: BatchSummary, console: Console) -> None:
    """Each student's stored result for the folder's file, by student: what the progress bar showed only
    one at a time, as it went by. A result the grader cannot vouch for shows no score."""
    from rich.table import Table
    from rich.text import Text

    from grader.course.batch import outcome

    if not summary.results:
        return
    table = Table(header_style="bold", box=None)
    for column in ("student", "score", "result"):
        table.add_column(column, justify="right" if column == "score" else "left")
    for student, card in sorted(summary.results.items()):
        result = outcome(card)
        score = "-" if result in ("error", "timed out") else f"{card.score}/{card.max_score}"
        table.add_row(Text(student), Text(score), Text(result), style=None if result == "graded" else "yellow")
    console.print(table)
