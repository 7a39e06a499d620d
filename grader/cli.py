"""The `grader` command line.

Exit status: 0 when grading finished (whatever the score, and also when the submission was rejected
for a syntax error and the like); 1 when the grader cannot vouch for a result (the scorecard, if
asked for, is still written, with status `error`); 2 for a usage problem (no such file, exercise,
tier or sandbox); 3 when the grader itself could not run (Docker unreachable, image build failed).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from grader.exercise import TIERS, ExerciseError, load_exercise
from grader.errors import GradingError
from grader.grading import Backend, grade_bytes
from grader.sandbox.choose import SANDBOXES, choose_backend
from grader.scorecard import Scorecard
from grader.store import Store, StoreError
from grader.terminal import print_summary
from grader.validate import read_capped

OK, UNVOUCHED, USAGE, BROKEN = 0, 1, 2, 3


class UsageError(Exception):
    pass


def read_submission(path: str, max_bytes: int) -> bytes:
    file = Path(path)
    if not file.exists():
        raise UsageError(f"{path}: no such file")
    if not file.is_file():
        raise UsageError(f"{path}: not a file (submit the solution's .py file)")
    try:
        return read_capped(file, max_bytes)
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror})") from None


def sandbox_for(choice: str, console: Console) -> tuple[Backend, str]:
    """The backend to grade with; says which one `auto` chose, and shows the lines of a first image build."""
    backend, name = choose_backend(choice, progress=lambda line: console.print(Text(line, style="dim")))
    if choice == "auto":
        why = "Docker engine found" if name == "docker" else "no Docker engine reachable"
        console.print(Text(f"sandbox: {name} ({why})", style="dim"))
    return backend, name


def command_grade(args: argparse.Namespace, console: Console) -> int:
    exercise = load_exercise(args.exercise)
    data = read_submission(args.submission, exercise.max_submission_bytes)
    backend, name = sandbox_for(args.sandbox, console)
    card = grade_bytes(data, exercise, args.tier, backend, name)
    if args.json:
        card.write(args.json)
    print_summary(card, console)
    for label, path in (("scorecard", args.json), *write_reports(card, args.html, args.md)):
        if path:
            console.print(Text(f"{label}: {path}", style="dim"))
    return OK if card.status in ("graded", "rejected") else UNVOUCHED


def write_reports(card: Scorecard, html: str | None, md: str | None) -> list[tuple[str, str]]:
    """Render the asked-for reports from the scorecard alone; returns (label, path) pairs written."""
    written = []
    if html or md:
        from grader.report import render_html, render_markdown

        for label, path, render in (("HTML report", html, render_html), ("Markdown report", md, render_markdown)):
            if path:
                Path(path).write_text(render(card), encoding="utf-8", errors="replace")
                written.append((label, path))
    return written


def read_scorecard(path: str) -> Scorecard:
    try:
        return Scorecard.read(path)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def command_report(args: argparse.Namespace, console: Console) -> int:
    card = read_scorecard(args.scorecard)
    if not (args.html or args.md):
        print_summary(card, console)
    for label, path in write_reports(card, args.html, args.md):
        console.print(Text(f"{label}: {path}", style="dim"))
    return OK


def command_export(args: argparse.Namespace, console: Console) -> int:
    from grader.exports import EXPORTS

    card = read_scorecard(args.scorecard)
    text = EXPORTS[args.format](card)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8", errors="replace")
        console.print(Text(f"{args.format}: {args.output}", style="dim"))
    else:
        sys.stdout.write(text)
    return OK


def command_audit(args: argparse.Namespace, console: Console) -> int:
    from grader.audit import run_audit

    exercise = load_exercise(args.exercise)
    backend, name = choose_backend(args.sandbox)
    console.print(f"auditing {exercise.slug} on the {name} sandbox: reference, stub and {len(exercise.mutants)} mutants")
    audit = run_audit(exercise, backend, name,
                      on_row=lambda row: console.print(Text(f"  graded {row.label}: {row.card.score}/{row.card.max_score}", style="dim")))
    tests = [t.name for t in audit.reference.card.tests]
    table = Table(title="which tests catch which mutant (x = the test fails)", header_style="bold")
    table.add_column("submission")
    table.add_column("score")
    table.add_column("caught by")
    for row in audit.mutants:
        caught = row.caught_by
        table.add_row(Text(f"{row.path.stem}\n{row.description}"), f"{row.card.score}/{row.card.max_score}",
                      Text(", ".join(caught) if caught else "NOTHING", style="" if caught else "red bold"))
    console.print(table)
    # One compact line of marks per test, so the matrix fits a terminal whatever the number of mutants.
    matrix = Table(header_style="bold", box=None, title="x = the test catches mutant n (columns 1..N, in order)")
    matrix.add_column("test", overflow="fold")
    matrix.add_column("".join(str(i % 10) for i in range(1, len(audit.mutants) + 1)), no_wrap=True)
    matrix.add_column("kills", justify="right")
    for test in tests:
        marks = "".join("x" if test in row.caught_by else "·" for row in audit.mutants)
        matrix.add_row(test, marks, str(marks.count("x")))
    console.print(matrix)
    for row in audit.rows:
        for problem in row.problems:
            console.print(Text(f"{row.label}: {problem}", style="red bold"))
    verdict = "the suite is strong" if audit.ok else "the suite is WEAK"
    caught = sum(1 for row in audit.mutants if row.caught_by)
    console.print(Text(f"{verdict}: reference {audit.reference.card.score}/{audit.reference.card.max_score}, "
                       f"stub {audit.stub.card.score}, {caught}/{len(audit.mutants)} mutants caught",
                       style="green bold" if audit.ok else "red bold"))
    return OK if audit.ok else UNVOUCHED


def open_store(args: argparse.Namespace) -> Store:
    from grader.store import default_db_path

    return Store(default_db_path(args.db))


def report_path(store_path: Path, student: str, exercise: str, submission_id: int) -> Path:
    return store_path.parent / "reports" / student / f"{exercise}-{submission_id}.html"


def command_submit(args: argparse.Namespace, console: Console) -> int:
    from grader.store import validate_student_id

    student = validate_student_id(args.student)
    exercise = load_exercise(args.exercise)
    exercise.suites_for(args.tier)
    data = read_submission(args.submission, exercise.max_submission_bytes)
    with open_store(args) as store:
        sha = hashlib.sha256(data).hexdigest()
        submission_id, new = store.add_submission(student, exercise.slug, args.tier, sha,
                                                  Path(args.submission).name, data)
        card = None if new else store.scorecard(submission_id)
        if card is not None:
            console.print(Text(f"this exact file was already graded for {student} (submission {submission_id}); "
                               "showing that result", style="yellow"))
        else:
            backend, name = sandbox_for(args.sandbox, console)
            card = grade_bytes(data, exercise, args.tier, backend, name)
            store.save_scorecard(submission_id, card)
        print_summary(card, console)
        report = report_path(store.path, student, exercise.slug, submission_id)
        report.parent.mkdir(parents=True, exist_ok=True)
        write_reports(card, str(report), None)
        console.print(f"submission {submission_id} stored in {store.path}; report: {report}")
    return OK if card.status in ("graded", "rejected") else UNVOUCHED


def command_batch(args: argparse.Namespace, console: Console) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from grader.batch import discover, run_batch
    from grader.gradebook import to_csv

    exercise = load_exercise(args.exercise)
    exercise.suites_for(args.tier)
    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    choose_backend(args.sandbox)  # fail now, not in every thread, when the sandbox is unavailable
    candidates = discover(Path(args.folder), exercise)
    with open_store(args) as store, Progress(TextColumn("[bold]grading"), BarColumn(), MofNCompleteColumn(),
                                             TimeElapsedColumn(), TextColumn("{task.description}"),
                                             console=console, transient=False) as progress:
        task = progress.add_task("", total=None)
        summary = run_batch(
            store, exercise, args.tier, lambda: choose_backend(args.sandbox), candidates, jobs=args.jobs,
            on_start=lambda total: progress.update(task, total=total),
            on_done=lambda student, card, problem: progress.update(
                task, advance=1, description=f"{student}: {card.score}/{card.max_score}" if card else f"{student}: {problem}"),
        )
    graded = summary.graded
    mean = sum(c.score for _, c in graded) / len(graded) if graded else 0.0
    console.print(f"graded {len(graded)}, skipped {len(summary.skipped)} already graded, "
                  f"{len(summary.problems)} with problems" + (f"; mean score {mean:.1f}" if graded else ""))
    for student, problem in summary.problems:
        console.print(Text(f"  {student}: {problem}", style="yellow"))
    if args.gradebook:
        from grader.gradebook import pick

        chosen = pick(store_submissions(args, exercise.slug), "latest")
        entries = [(student, sub.card) for (student, _), sub in chosen.items() if sub.tier == args.tier and sub.card]
        Path(args.gradebook).write_text(to_csv(entries), encoding="utf-8")
        console.print(Text(f"gradebook: {args.gradebook}", style="dim"))
    if summary.interrupted:
        console.print(Text("interrupted: what was graded is saved; run the same command again to resume",
                           style="yellow bold"))
        return 130
    return OK


def store_submissions(args: argparse.Namespace, exercise: str | None = None) -> list:
    with open_store(args) as store:
        return store.submissions(exercise)


def command_publish(args: argparse.Namespace, console: Console) -> int:
    from grader.publish import publish

    with open_store(args) as store:
        site = publish(store, Path(args.out), policy=args.policy, pseudonymous=args.pseudonymous)
    console.print(f"published {site.students} students over {site.exercises} exercise(s) to {site.out}: "
                  f"open {site.out / 'index.html'}")
    return OK


def command_image_build(args: argparse.Namespace, console: Console) -> int:
    from grader.sandbox.engine import engine_client
    from grader.sandbox.image import build_image

    client = engine_client()
    if client is None:
        raise GradingError("no Docker engine is reachable; start one (for example with .ci/docker-up.sh)")
    started = time.monotonic()
    tag = build_image(client, force=args.force, progress=lambda line: console.print(Text(line, style="dim")))
    console.print(f"grading image {tag} ready in {time.monotonic() - started:.1f} s")
    return OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grader", description="Grade coding exercises in a sandbox.")
    commands = parser.add_subparsers(dest="command", required=True)

    grade = commands.add_parser("grade", help="grade one submission file")
    grade.add_argument("submission", help="the student's solution file")
    grade.add_argument("--exercise", required=True, help="the exercise's name (slug) or folder")
    grade.add_argument("--tier", choices=TIERS, default="premium", help="free runs the visible suite only")
    grade.add_argument("--sandbox", choices=SANDBOXES, default="auto", help="auto: Docker when an engine answers")
    grade.add_argument("--json", metavar="F", help="write the scorecard JSON here")
    grade.add_argument("--html", metavar="F", help="write the HTML report here")
    grade.add_argument("--md", metavar="F", help="write the Markdown report here")
    grade.set_defaults(run=command_grade)

    report = commands.add_parser("report", help="render a stored scorecard as HTML and/or Markdown")
    report.add_argument("scorecard", help="a scorecard JSON file")
    report.add_argument("--html", metavar="F")
    report.add_argument("--md", metavar="F")
    report.set_defaults(run=command_report)

    export = commands.add_parser("export", help="convert a scorecard for Gradescope, PrairieLearn or JUnit")
    export.add_argument("scorecard", help="a scorecard JSON file")
    export.add_argument("--format", required=True, choices=("gradescope", "prairielearn", "junit"))
    export.add_argument("-o", "--output", metavar="FILE", help="write here instead of standard output")
    export.set_defaults(run=command_export)

    db_help = "the submissions store (default: $GRADER_DB or ./grader.db)"
    submit = commands.add_parser("submit", help="store a student's submission, grade it, keep the report")
    submit.add_argument("submission", help="the student's solution file")
    submit.add_argument("--student", required=True, help="the student's id")
    submit.add_argument("--exercise", required=True)
    submit.add_argument("--tier", choices=TIERS, default="premium")
    submit.add_argument("--sandbox", choices=SANDBOXES, default="auto")
    submit.add_argument("--db", metavar="PATH", help=db_help)
    submit.set_defaults(run=command_submit)

    batch = commands.add_parser("batch", help="grade a folder of submissions in parallel, resumably")
    batch.add_argument("folder", help="a file per student (alice.py) or a folder per student (alice/scheduler.py)")
    batch.add_argument("--exercise", required=True)
    batch.add_argument("--jobs", type=int, default=2, help="submissions graded at once (default 2)")
    batch.add_argument("--tier", choices=TIERS, default="premium")
    batch.add_argument("--sandbox", choices=SANDBOXES, default="auto")
    batch.add_argument("--gradebook", metavar="FILE", help="write the gradebook CSV here")
    batch.add_argument("--db", metavar="PATH", help=db_help)
    batch.set_defaults(run=command_batch)

    publish = commands.add_parser("publish", help="a static site of the store: overview, student pages, gradebooks")
    publish.add_argument("--out", required=True, metavar="DIR", help="the folder to write the site into")
    publish.add_argument("--policy", choices=("latest", "best"), default="latest",
                         help="which submission of each student counts")
    publish.add_argument("--pseudonymous", action="store_true", help="show students under stable pseudonyms")
    publish.add_argument("--db", metavar="PATH", help=db_help)
    publish.set_defaults(run=command_publish)

    image = commands.add_parser("image", help="the Docker grading image")
    image_commands = image.add_subparsers(dest="image_command", required=True)
    image_build = image_commands.add_parser("build", help="build the grading image (no registry needed)")
    image_build.add_argument("--force", action="store_true", help="bootstrap the Debian base again too")
    image_build.set_defaults(run=command_image_build)

    audit = commands.add_parser("audit", help="check an exercise: reference full marks, stub 0, every mutant caught")
    audit.add_argument("exercise", help="the exercise's name (slug) or folder")
    audit.add_argument("--sandbox", choices=SANDBOXES, default="auto")
    audit.set_defaults(run=command_audit)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    console = Console()
    errors = Console(stderr=True)
    try:
        return args.run(args, console)
    except (UsageError, ExerciseError, StoreError) as exc:
        errors.print(Text(f"grader: {exc}", style="red"))
        return USAGE
    except GradingError as exc:
        errors.print(Text(f"grader: {exc}", style="red"))
        return BROKEN
    except KeyboardInterrupt:
        errors.print(Text("grader: interrupted", style="red"))
        return 130


if __name__ == "__main__":
    sys.exit(main())
