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
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from grader.bundles import TARGETS, VISIBILITIES
from grader.exercise import ExerciseError, load_exercise, project_root
from grader.errors import GradingError, StoreError
from grader.grading import Backend, grade_bytes
from grader.sandbox.choose import SANDBOXES, choose, choose_backend
from grader.sandbox.local import UNSAFE_WARNING
from grader.scorecard import Scorecard
from grader.terminal import print_summary
from grader.validate import read_capped

if TYPE_CHECKING:  # the store (SQLAlchemy) is imported only by the commands that use it
    from grader.store import Store

OK, UNVOUCHED, USAGE, BROKEN = 0, 1, 2, 3
TIER_HELP = "one of the tiers the exercise declares (default: its default tier)"


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


def sandbox_for(args: argparse.Namespace, console: Console) -> tuple[Backend, str]:
    """The backend to grade with; says which one `auto` chose, warns on every unprotected run, and shows
    the lines of a first image build."""
    unsafe = getattr(args, "unsafe_local", False)
    choice = choose(args.sandbox, progress=lambda line: console.print(Text(line, style="dim")), unsafe_local=unsafe)
    backend, name, why = choice.backend, choice.name, choice.why
    if args.sandbox == "auto":
        console.print(Text(f"sandbox: {name} ({why})", style="dim"))
    if getattr(backend, "unsafe", False):
        Console(stderr=True).print(Text(f"warning: {UNSAFE_WARNING}", style="red bold"))
    return backend, name


def command_grade(args: argparse.Namespace, console: Console) -> int:
    exercise = load_exercise(args.exercise)
    args.tier = exercise.tier(args.tier)
    data = read_submission(args.submission, exercise.max_submission_bytes)
    backend, name = sandbox_for(args, console)
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
    from grader.exports import export

    card = read_scorecard(args.scorecard)
    try:
        text = export(card, args.format, hidden_visibility=args.hidden_visibility)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8", errors="replace")
        console.print(Text(f"{args.format}: {args.output}", style="dim"))
    else:
        sys.stdout.write(text)
    return OK


def command_audit(args: argparse.Namespace, console: Console) -> int:
    from grader.audit import run_audit

    exercise = load_exercise(args.exercise)
    backend, name = sandbox_for(args, console)
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
    for figure in audit.tiers:  # what each tier's suites catch: the free tier's blind spots, in one number
        console.print(f"tier {figure.tier} ({', '.join(figure.suites)}): its tests catch {figure.caught} of "
                      f"{figure.mutants} mutants; {figure.mutants - figure.caught} go unnoticed on this tier")
    console.print(Text(f"{verdict}: reference {audit.reference.card.score}/{audit.reference.card.max_score}, "
                       f"stub {audit.stub.card.score}, {caught}/{len(audit.mutants)} mutants caught "
                       f"on the {audit.tier} tier",
                       style="green bold" if audit.ok else "red bold"))
    return OK if audit.ok else UNVOUCHED


def open_store(args: argparse.Namespace) -> Store:
    from grader.store import Store

    return Store(store_location(args.db))


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
    from grader.store import validate_student_id

    student = validate_student_id(args.student)
    exercise = load_exercise(args.exercise)
    args.tier = exercise.tier(args.tier)
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
            backend, name = sandbox_for(args, console)
            card = grade_bytes(data, exercise, args.tier, backend, name)
            store.save_scorecard(submission_id, card)
        print_summary(card, console)
        report = store_report(store.path, student, exercise.slug, submission_id, card)
        console.print(f"submission {submission_id} stored in {store.path}; report: {report}")
    return OK if card.status in ("graded", "rejected") else UNVOUCHED


def command_batch(args: argparse.Namespace, console: Console) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from grader.batch import discover, run_batch
    from grader.db.engine import write_private
    from grader.gradebook import to_csv

    exercise = load_exercise(args.exercise)
    args.tier = exercise.tier(args.tier)
    if args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    sandbox_for(args, console)  # fail now, not in every thread, when the sandbox is unavailable
    candidates = discover(Path(args.folder), exercise)
    with open_store(args) as store, Progress(TextColumn("[bold]grading"), BarColumn(), MofNCompleteColumn(),
                                             TimeElapsedColumn(), TextColumn("{task.description}"),
                                             console=console, transient=False) as progress:
        task = progress.add_task("", total=None)
        summary = run_batch(
            store, exercise, args.tier, lambda: choose_backend(args.sandbox, unsafe_local=args.unsafe_local, warm=True), candidates, jobs=args.jobs,
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
        write_private(Path(args.gradebook), to_csv(entries))  # names and scores: owner-only
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
    from grader.sandbox.engine import engine_status
    from grader.sandbox.image import build_image

    client, why_not = engine_status()
    if client is None:
        raise GradingError(f"{why_not}; start one (for example with .ci/docker-up.sh)")
    bases_built: set[tuple[str, ...]] = set()
    for packages, slug in sorted(image_package_sets(args.exercise).items()):
        started = time.monotonic()
        if packages:
            console.print(f"{slug} needs the Debian packages {', '.join(packages)}")
        # --force bootstraps each base once; the harness layer is rebuilt on it either way.
        tag = build_image(client, force=args.force and packages not in bases_built, extra=packages,
                          progress=lambda line: console.print(Text(line, style="dim")))
        bases_built.add(packages)
        console.print(f"grading image {tag} ready in {time.monotonic() - started:.1f} s")
    return OK


def image_package_sets(named: list[str] | None) -> dict[tuple[str, ...], str]:
    """The images `image build` makes, as {extra Debian packages: an exercise that needs them}: those
    of the exercises named, else the plain image and those of every exercise in the project."""
    if named:
        return {exercise.packages: exercise.slug for exercise in map(load_exercise, named)}
    sets: dict[tuple[str, ...], str] = {(): "the grader"}
    try:
        root = project_root()
    except ExerciseError:
        return sets
    for toml in sorted((root / "exercises").glob("*/exercise.toml")):
        exercise = load_exercise(toml.parent.name, root)
        sets.setdefault(exercise.packages, exercise.slug)
    return sets


def store_location(explicit: str | None) -> str:
    """A database URL as given, else the SQLite path of --db / $GRADER_DB / ./grader.db."""
    from grader.store import default_db_path

    return explicit if explicit and "://" in explicit else str(default_db_path(explicit))


def command_serve(args: argparse.Namespace, console: Console) -> int:
    from grader.web.serve import ServeOptions, serve

    if args.workers < 1:
        raise UsageError("--workers must be at least 1")
    if args.broker and "://" not in (args.db or ""):
        raise UsageError("--broker needs --db with a database URL that the workers share (postgresql://...)")
    serve(ServeOptions(host=args.host, port=args.port, db=store_location(args.db), broker=args.broker,
                       workers=args.workers, sandbox=args.sandbox, submission_interval_s=args.interval,
                       max_request_kb=args.max_request_kb, lease_s=args.lease))
    return OK


def command_worker(args: argparse.Namespace, console: Console) -> int:
    from grader.service.worker import run_worker

    console.print(f"grader worker: taking submissions from {args.broker.split('@')[-1]}", style="dim")
    run_worker(args.broker, store_location(args.db), args.sandbox, args.lease, burst=args.burst)
    return OK


def command_roster_import(args: argparse.Namespace, console: Console) -> int:
    from grader.service.accounts import import_roster
    from grader.web.serve import base_url

    try:
        text = Path(args.file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{args.file}: cannot be read ({exc})") from None
    with open_store(args) as store:
        made = import_roster(store, text)
    url = args.base_url or base_url("127.0.0.1", 8000)
    for student, token in made:
        console.print(f"{student}: " + (f"{url.rstrip('/')}/signin/{token}" if token else "has an active link (kept)"),
                      soft_wrap=True)
    console.print(f"{len(made)} student(s) imported", style="dim")
    return OK


def command_package(args: argparse.Namespace, console: Console) -> int:
    from grader.bundles import BundleError, package

    try:
        console.print(package(args.target, args.exercise, args.tier, Path(args.output), args.hidden_visibility,
                              args.image), soft_wrap=True)
    except BundleError as exc:
        raise UsageError(str(exc)) from None
    return OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grader", description="Grade coding exercises in a sandbox.")
    commands = parser.add_subparsers(dest="command", required=True)

    grade = commands.add_parser("grade", help="grade one submission file")
    grade.add_argument("submission", help="the student's solution file")
    grade.add_argument("--exercise", required=True, help="the exercise's name (slug) or folder")
    grade.add_argument("--tier", help=TIER_HELP)
    grade.add_argument("--sandbox", choices=SANDBOXES, default="auto", help="auto: Docker when an engine answers")
    grade.add_argument("--unsafe-local", action="store_true",
                       help="run the local sandbox without namespaces: only for your own trusted code")
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
    from grader.exercise import VISIBILITIES

    export.add_argument("--hidden-visibility", choices=VISIBILITIES, default=None,
                        help="gradescope only: when students see the results of the suites outside the free "
                             "tier (default: each suite's `visibility` in exercise.toml, else after_published)")
    export.set_defaults(run=command_export)

    db_help = "the submissions store (default: $GRADER_DB or ./grader.db)"
    submit = commands.add_parser("submit", help="store a student's submission, grade it, keep the report")
    submit.add_argument("submission", help="the student's solution file")
    submit.add_argument("--student", required=True, help="the student's id")
    submit.add_argument("--exercise", required=True)
    submit.add_argument("--tier", help=TIER_HELP)
    submit.add_argument("--sandbox", choices=SANDBOXES, default="auto")
    submit.add_argument("--unsafe-local", action="store_true",
                       help="run the local sandbox without namespaces: only for your own trusted code")
    submit.add_argument("--db", metavar="PATH", help=db_help)
    submit.set_defaults(run=command_submit)

    batch = commands.add_parser("batch", help="grade a folder of submissions in parallel, resumably")
    batch.add_argument("folder", help="a file per student (alice.py) or a folder per student holding the file")
    batch.add_argument("--exercise", required=True)
    batch.add_argument("--jobs", type=int, default=2, help="submissions graded at once (default 2)")
    batch.add_argument("--tier", help=TIER_HELP)
    batch.add_argument("--sandbox", choices=SANDBOXES, default="auto")
    batch.add_argument("--unsafe-local", action="store_true",
                       help="run the local sandbox without namespaces: only for your own trusted code")
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
    image_build.add_argument("--exercise", action="append", metavar="SLUG|PATH",
                             help="build the image this exercise grades in, with the Debian packages it declares "
                                  "(repeatable; default: every exercise of the project)")
    image_build.set_defaults(run=command_image_build)

    serve = commands.add_parser("serve", help="the web service: students submit, instructors follow the class")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--db", metavar="PATH|URL", help=db_help + "; a postgresql:// URL with --broker")
    serve.add_argument("--broker", metavar="URL", help="a Redis URL: queue gradings for `grader worker` processes")
    serve.add_argument("--workers", type=int, default=2, help="grading threads in this process (without --broker)")
    serve.add_argument("--sandbox", choices=SANDBOXES, default="auto")
    serve.add_argument("--interval", type=float, default=30.0, metavar="S",
                       help="least seconds between two submissions of a student to an exercise (an exercise's "
                            "[web] submission_interval_s wins)")
    serve.add_argument("--max-request-kb", type=int, default=1024, help="the largest request body accepted")
    serve.add_argument("--lease", type=float, default=60.0, metavar="S",
                       help="a grading whose grader is silent this long is given to another")
    serve.set_defaults(run=command_serve)

    worker = commands.add_parser("worker", help="grade submissions queued by `grader serve --broker`")
    worker.add_argument("--broker", required=True, metavar="URL", help="the Redis URL given to `grader serve`")
    worker.add_argument("--db", required=True, metavar="URL", help="the store given to `grader serve`")
    worker.add_argument("--sandbox", choices=SANDBOXES, default="auto")
    worker.add_argument("--lease", type=float, default=60.0, metavar="S")
    worker.add_argument("--burst", action="store_true", help="stop when the queue is empty")
    worker.set_defaults(run=command_worker)

    roster = commands.add_parser("roster", help="the class roster of the web service")
    roster_commands = roster.add_subparsers(dest="roster_command", required=True)
    roster_import = roster_commands.add_parser("import", help="add students from a CSV (id,name,tier) and print "
                                                              "each new student's sign-in link")
    roster_import.add_argument("file", help="roster.csv")
    roster_import.add_argument("--db", metavar="PATH|URL", help=db_help)
    roster_import.add_argument("--base-url", metavar="URL", help="the address of `grader serve` "
                                                                  "(default http://127.0.0.1:8000)")
    roster_import.set_defaults(run=command_roster_import)

    bundle = commands.add_parser("package", help="a bundle that grades on Gradescope or PrairieLearn as they are")
    bundle.add_argument("--target", required=True, choices=TARGETS)
    bundle.add_argument("--exercise", help="the exercise's name (slug) or folder (default: the project's only one)")
    bundle.add_argument("--tier", help=TIER_HELP)
    bundle.add_argument("--hidden-visibility", choices=VISIBILITIES,
                        help="gradescope: when students see the results of the suites they cannot read")
    bundle.add_argument("--image", help="prairielearn: the grading image info.json names (default grader-SLUG:VERSION)")
    bundle.add_argument("-o", "--output", required=True, metavar="ZIP|DIR", help="gradescope: the zip; prairielearn: "
                                                                                  "the question folder")
    bundle.set_defaults(run=command_package)

    audit = commands.add_parser("audit", help="check an exercise: reference full marks, stub 0, every mutant caught")
    audit.add_argument("exercise", help="the exercise's name (slug) or folder")
    audit.add_argument("--sandbox", choices=SANDBOXES, default="auto")
    audit.add_argument("--unsafe-local", action="store_true",
                       help="run the local sandbox without namespaces: only for your own trusted code")
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
