"""The `grader` command line.

Exit status: 0 when grading finished (whatever the score, and also when the submission was rejected
for a syntax error and the like); 1 when the grader cannot vouch for a result (the scorecard, if
asked for, is still written, with status `error`); 2 for a usage problem (no such file, exercise,
tier or sandbox); 3 when the grader itself could not run (Docker unreachable, image build failed);
4 only when `--fail-under` was given and the score is below it (a gate for CI).

An output option given `-` (`--json -`, `--md -`, `export -o -`, `--gradebook -`) writes to standard
output, and then everything meant for a person (summaries, progress, paths) goes to standard error,
so that `grader grade x.py --exercise e --json - | jq .score` reads a clean document.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import math
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from grader.bundles import TARGETS
from grader.core.exercise import VISIBILITIES, ExerciseError, load_exercise, project_root
from grader.core.grading import Backend, grade_bytes
from grader.core.scorecard import SCHEMA_VERSION, Scorecard
from grader.core.validate import read_capped
from grader.errors import GradingError, StoreError
from grader.report.terminal import PipedConsole, print_summary
from grader.sandbox.choose import SANDBOXES, choose, choose_backend
from grader.sandbox.local import UNSAFE_WARNING
from grader.text import without_surrogates

if TYPE_CHECKING:  # the store (SQLAlchemy) is imported only by the commands that use it
    from grader.course.batch import BatchSummary
    from grader.course.store import Store
    from grader.similarity import Report

OK, UNVOUCHED, USAGE, BROKEN, BELOW = 0, 1, 2, 3, 4
BROKEN_PIPE = 141  # what a shell reports for a writer ended by SIGPIPE
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
    if args.run is command_package:
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
    file = Path(path)
    if not file.exists():
        raise UsageError(f"{path}: no such file")
    if not file.is_file():
        raise UsageError(f"{path}: not a file (submit the solution's .py file)")
    try:
        return read_capped(file, max_bytes)
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror})") from None


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1, refused with a sentence otherwise."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be at least 1")
    return value


def sandbox_for(args: argparse.Namespace, console: Console) -> Backend:
    """The backend to grade with; says which one `auto` chose, warns on every unprotected run, and shows
    the lines of a first image build."""
    unsafe = getattr(args, "unsafe_local", False)
    choice = choose(args.sandbox, progress=lambda line: console.print(Text(line, style="dim")), unsafe_local=unsafe)
    backend, name, why = choice.backend, choice.name, choice.why
    if args.sandbox == "auto":
        console.print(Text(f"sandbox: {name} ({why})", style="dim"))
    if choice.unsafe:
        PipedConsole(stderr=True).print(Text(f"warning: {UNSAFE_WARNING}", style="red bold"))
    return backend


def command_grade(args: argparse.Namespace, console: Console) -> int:
    exercise = load_exercise(args.exercise)
    args.tier = exercise.tier(args.tier)
    data = read_submission(args.submission, exercise.max_submission_bytes)
    card = grade_bytes(data, exercise, args.tier, sandbox_for(args, console))
    written = [("scorecard", write_output(args.json, card.to_json() + "\n"))] if args.json else []
    print_summary(card, console)
    for label, path in (*written, *write_reports(card, args.html, args.md)):
        console.print(Text(f"{label}: {path}", style="dim"))
    if card.status not in ("graded", "rejected"):
        return UNVOUCHED
    return gate(card, args.fail_under, console)


def gate(card: Scorecard, fail_under: Threshold | None, console: Console) -> int:
    """OK, or BELOW when --fail-under was given and the score is below it (a rejected file scores 0)."""
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


def read_scorecard(args: argparse.Namespace) -> Scorecard:
    """The scorecard a command works on: a JSON file, or the current scorecard of a stored submission
    (`--submission N`, or the latest of `--student` for `--exercise`)."""
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


def existing_store(args: argparse.Namespace) -> Store:
    """The store of --db for reading: one that does not exist is a mistake, not a new empty store."""
    location = store_location(args.db)
    if "://" not in location and not Path(location).is_file():
        raise UsageError(f"no store at {location}: grade into it first, or give --db")
    return open_store(args)


def command_report(args: argparse.Namespace, console: Console) -> int:
    card = read_scorecard(args)
    if not (args.html or args.md):
        print_summary(card, console)
    for label, path in write_reports(card, args.html, args.md):
        console.print(Text(f"{label}: {path}", style="dim"))
    return OK


def command_export(args: argparse.Namespace, console: Console) -> int:
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


def command_new(args: argparse.Namespace, console: Console) -> int:
    from grader.course.scaffold import new_exercise

    project = Path(args.project)
    written = new_exercise(args.slug, project, args.file)
    for path in written:
        console.print(Text(f"  {path}", style="dim"))
    console.print(Text(f"exercise {args.slug} written. Next: grader audit {project / 'exercises' / args.slug} "
                       f"(it is strong as written), then make it your own: the statement in "
                       f"{project / 'exercises' / args.slug / 'README.md'}, the stub, the reference, the suites "
                       "and mutants; docs/authoring.md says what each key does."), soft_wrap=True)
    return OK


def command_misconceptions(args: argparse.Namespace, console: Console) -> int:
    from grader.diagnosis.build import BuildError, build_signatures
    from grader.diagnosis.signatures import current_signatures, signatures_path

    exercise = load_exercise(args.exercise)
    path = signatures_path(exercise)
    if args.check:
        current = current_signatures(exercise) is not None
        console.print(f"{path}: {'current' if current else 'missing or stale: run grader misconceptions ' + exercise.slug}")
        return 0 if current else 1
    if args.seeds < 1:
        raise UsageError("--seeds must be at least 1")
    backend = sandbox_for(args, console)
    console.print(f"grading {len(exercise.mutants)} mutants of {exercise.slug} on {args.seeds} seeds each")
    try:
        found = build_signatures(exercise, backend, args.seeds, on_mutant=lambda mutant, signature: console.print(
            Text(f"  {mutant.stem}: fails {len(signature.fails)} tests", style="dim")))
    except BuildError as exc:
        raise GradingError(str(exc)) from None
    finally:
        backend.close()
    path.write_text(found.to_json(), encoding="utf-8")
    console.print(f"wrote {path}")
    return 0


def command_audit(args: argparse.Namespace, console: Console) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from grader.course.audit import run_audit
    from grader.course.audit_view import print_audit

    exercise = load_exercise(args.exercise)
    backend = sandbox_for(args, console)
    console.print(f"auditing {exercise.slug} on the {backend.name} sandbox: reference, stub, its "
                  f"{len(exercise.mutants)} mutants" + ("" if args.no_generated else " and the mutants made from the reference"))
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        task = progress.add_task("grading", total=None)
        audit = run_audit(exercise, backend, backend.name, seeds=args.seeds, generated=not args.no_generated,
                          jobs=args.jobs, on_start=lambda count: progress.update(task, total=count),
                          make_backend=lambda: choose_backend(args.sandbox, unsafe_local=args.unsafe_local, warm=True),
                          on_row=lambda row: progress.advance(task) if row.label not in ("reference", "stub") else None)
    print_audit(audit, console, exercise.submission_file)
    return OK if audit.ok else UNVOUCHED


def open_store(args: argparse.Namespace) -> Store:
    from grader.course.store import Store

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
    from grader.course.store import validate_student_id

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
            card = grade_bytes(data, exercise, args.tier, sandbox_for(args, console))
            store.save_scorecard(submission_id, card)
        print_summary(card, console)
        report = store_report(store.path, student, exercise.slug, submission_id, card)
        console.print(Text(f"submission {submission_id} stored in {store.path}; report: {report}"))
    return OK if card.status in ("graded", "rejected") else UNVOUCHED


def command_batch(args: argparse.Namespace, console: Console) -> int:
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from grader.course.batch import discover, run_batch
    from grader.course.deadlines import of_project
    from grader.course.gradebook import entry_of, pick, to_csv

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
            on_done=lambda student, card, problem: progress.update(  # the description is rich markup
                task, advance=1, description=escape(f"{student}: {card.score}/{card.max_score}" if card
                                                    else f"{student}: {problem}")),
            regrade=args.regrade,
        )
    print_batch_summary(summary, console)
    if args.gradebook:
        # The folder's students on this tier: their latest submission of it, of this run or an earlier one.
        students = {c.student for c in candidates if not c.ignored}
        with open_store(args) as store:
            stored, names = store.submissions(exercise.slug), store.student_names()
            deadlines, adjustments = of_project(store, [exercise.slug]), store.adjustments()
            predictions = store.prediction_results()
        chosen = pick([sub for sub in stored if sub.tier == args.tier and sub.student in students], "latest")
        entries = [entry_of(student, sub, names.get(student, ""), deadlines, adjustments, predictions)
                   for (student, _), sub in chosen.items() if sub.card]
        where = write_output(args.gradebook, to_csv(entries), private=True)  # names and scores: owner-only
        console.print(Text(f"gradebook: {where}", style="dim"))
    if summary.interrupted:
        console.print(Text("interrupted: what was graded is saved; run the same command again to resume",
                           style="yellow bold"))
        return 130
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


def command_publish(args: argparse.Namespace, console: Console) -> int:
    from grader.course.deadlines import of_project
    from grader.course.publish import SiteError, publish

    if args.names and args.pseudonymous:
        raise UsageError("--names and --pseudonymous contradict each other: give one (pseudonyms are the default)")
    map_file = Path(args.pseudonym_map) if args.pseudonym_map else None
    if map_file is not None:
        if args.names:
            raise UsageError("--pseudonym-map goes with pseudonyms: leave out --names")
        out = Path(args.out).resolve()
        if map_file.resolve() == out or map_file.resolve().is_relative_to(out):
            raise UsageError(f"{map_file}: the pseudonym map must be outside --out (the site is for others)")
    with existing_store(args) as store:
        try:
            deadlines = of_project(store, (s.exercise for s in store.submissions()))
            site = publish(store, Path(args.out), policy=args.policy, pseudonymous=not args.names,
                           deadlines=deadlines)
        except SiteError as exc:
            raise UsageError(str(exc)) from None
        if map_file is not None:
            write_pseudonym_map(store, map_file)
            console.print(Text(f"pseudonym map (owner-only, keep it private): {map_file}", style="dim"))
    console.print(Text(f"published {site.students} students over {site.exercises} exercise(s) to {site.out}: "
                       f"open {site.out / 'index.html'}"))
    return OK


def command_similarity(args: argparse.Namespace, console: Console) -> int:
    """The pairs of students whose files are most alike: in the terminal, and as --out's pages or --json."""
    from grader.course.publish import pseudonym
    from grader.similarity import compare, sources
    from grader.similarity.view import to_json, write_folder

    exercise = load_exercise(args.exercise)
    if args.top < 1:
        raise UsageError(f"--top {args.top}: give how many pairs to keep, 1 or more")
    if args.folder is not None and not Path(args.folder).is_dir():
        raise UsageError(f"{args.folder}: not a folder of submissions")
    # A class folder is read alone, unless --db (its scorecards) or --pseudonymous (the store's key) is given.
    use_store = args.folder is None or args.db is not None or args.pseudonymous
    key = ""
    with existing_store(args) if use_store else contextlib.nullcontext() as store:
        if args.folder is not None:
            documents = sources.from_folder(Path(args.folder), exercise)
        if store is not None:
            if args.folder is not None:
                sources.attach_scorecards(documents, store, exercise.slug)
            else:
                documents = sources.from_store(store, exercise.slug, args.policy)
            if args.pseudonymous:
                key = store.setting("pseudonym_key")
    for source in args.against or []:
        documents += sources.earlier(source, exercise, args.policy)
    if not args.no_reference:
        documents += sources.reference(exercise)
    if key:
        for document in documents:
            prefix, _, student = document.label.rpartition("/") if document.kind == "earlier" else ("", "", document.label)
            if document.kind != "reference":
                document.label = f"{prefix}/{pseudonym(key, student)}" if prefix else pseudonym(key, student)
    students = sum(1 for d in documents if d.kind == "student")
    if students == 0:
        where = args.folder or store_location(args.db)
        raise UsageError(f"no submission of {exercise.slug} in {where}: nothing to compare")
    report = compare(documents, sources.given_code(exercise), exercise.slug, limit=args.top)
    if args.json:
        text = to_json(report, "" if args.folder else args.policy)
        if args.json == STDOUT:
            sys.stdout.write(text)
        else:
            from grader.db.engine import write_private
            write_private(Path(args.json), text)
    if args.out:
        index = write_folder(report, Path(args.out), "" if args.folder else args.policy, bool(key))
        console.print(Text(f"similarity report (owner-only, for instructors): open {index}", style="dim"))
    print_similarity(report, console)
    return OK


def print_similarity(report: Report, console: Console, rows: int = 15) -> None:
    from grader.report.terminal import escaped

    console.print(Text(f"{report.students} students of {report.exercise} compared; "
                       f"{report.pairs_found} pair(s) share code beyond what the exercise gave them"))
    if not report.pairs:
        return
    table = Table(header_style="bold", box=None)
    for column in ("#", "first", "second", "score", "shares", "their results"):
        table.add_column(column, justify="right" if column in ("#", "score") else "left")
    for rank, pair in enumerate(report.pairs[:rows], start=1):
        table.add_row(str(rank), escaped(pair.a.label), escaped(pair.b.label), f"{pair.score:.0%}",
                      f"{pair.a_share:.0%} · {pair.b_share:.0%}", pair.behaviour.summary(),
                      style="red" if pair.behaviour.strong or pair.score >= 0.6 else None)
    console.print(table)
    for cluster in report.clusters:
        console.print(Text(f"cluster: {', '.join(escaped(label) for label in cluster)}", style="yellow"))
    if report.widely_shared:
        console.print(Text(f"{len(report.widely_shared)} student(s) handed in mostly code that more than "
                           f"{report.common_limit} students hold (not counted between students; see their pairs "
                           f"with the reference): {', '.join(escaped(s) for s in report.widely_shared)}",
                           style="yellow"))


def write_pseudonym_map(store: Store, path: Path) -> None:
    """pseudonym,student as CSV, readable by its owner only: the one file that undoes the pseudonyms."""
    import csv
    import io

    from grader.course.publish import pseudonym_map
    from grader.db.engine import write_private

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["pseudonym", "student"])
    writer.writerows(pseudonym_map(store).items())
    write_private(path, buffer.getvalue())


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
    from grader.course.store import default_db_path

    return explicit if explicit and "://" in explicit else str(default_db_path(explicit))


def command_serve(args: argparse.Namespace, console: Console) -> int:
    from grader.web.serve import ServeOptions, serve

    if args.workers < 1:
        raise UsageError("--workers must be at least 1")
    if args.broker and "://" not in (args.db or ""):
        raise UsageError("--broker needs --db with a database URL that the workers share (postgresql://...)")
    serve(ServeOptions(host=args.host, port=args.port, db=store_location(args.db), broker=args.broker,
                       workers=args.workers, sandbox=args.sandbox, submission_interval_s=args.interval,
                       max_request_kb=args.max_request_kb, lease_s=args.lease, base_url=given_address(args),
                       spool=args.spool))
    return OK


def given_address(args: argparse.Namespace) -> str | None:
    """`--base-url` checked (UsageError saying what is wrong with it), or None when not given."""
    from grader.web.serve import public_address

    if args.base_url is None:
        return None
    try:
        return public_address(args.base_url)
    except ValueError as exc:
        raise UsageError(f"--base-url {exc}") from None


def command_worker(args: argparse.Namespace, console: Console) -> int:
    from grader.service.queue_worker import run_worker

    console.print(f"grader worker: taking submissions from {args.broker.split('@')[-1]}", style="dim")
    run_worker(args.broker, store_location(args.db), args.sandbox, args.lease, burst=args.burst)
    return OK


def command_roster_import(args: argparse.Namespace, console: Console) -> int:
    from grader.service.accounts import decode_roster, import_roster
    from grader.web.serve import base_url

    try:
        text = decode_roster(Path(args.file).read_bytes())
    except OSError as exc:
        raise UsageError(f"{args.file}: cannot be read ({exc.strerror})") from None
    except StoreError as exc:
        raise UsageError(f"{args.file}: {exc}") from None
    url = given_address(args) or base_url("127.0.0.1", 8000)
    with open_store(args) as store:
        made = import_roster(store, text)
    for student, token in made:
        link = f"{url.rstrip('/')}/signin/{token}" if token else "has an active link (kept)"
        console.print(Text(f"{student}: {link}"), soft_wrap=True)
    console.print(f"{len(made)} student(s) imported", style="dim")
    return OK


def command_instructor_link(args: argparse.Namespace, console: Console) -> int:
    """A new one-time instructor sign-in link, without restarting `grader serve`."""
    from grader.service.accounts import new_link
    from grader.web.serve import base_url

    url = given_address(args) or base_url("127.0.0.1", 8000)
    with open_store(args) as store:
        token = new_link(store, "instructor")
    console.print(Text(f"instructor sign-in (works once): {url.rstrip('/')}/signin/{token}"), soft_wrap=True)
    return OK


def command_lti_add_platform(args: argparse.Namespace, console: Console) -> int:
    from grader.lti.keys import tool_key
    from grader.lti.platforms import add_platform
    from grader.web.serve import base_url

    url = (given_address(args) or base_url("127.0.0.1", 8000)).rstrip("/")
    with open_store(args) as store:
        platform = add_platform(store, args.issuer, args.client_id, args.deployment, args.auth_login_url,
                                args.auth_token_url, args.keyset_url, args.tier)
        tool_key(store)  # made now, so the JWKS the LMS fetches first is the one it keeps
    console.print(Text(f"platform {platform.issuer} (client id {platform.client_id}) registered, deployment(s) "
                       f"{', '.join(platform.deployments)}; new students: {platform.tier}"), soft_wrap=True)
    for label, path in (("login (OIDC initiation) URL", "/lti/login"), ("redirect and target link URL", "/lti/launch"),
                        ("public JWK set URL", "/lti/jwks")):
        console.print(Text(f"  {label}: {url}{path}"), soft_wrap=True)
    if not url.startswith("https://"):
        console.print("LTI needs `grader serve --base-url https://...`: a browser drops the launch's cookie otherwise",
                      style="yellow")
    return OK


def command_lti_list(args: argparse.Namespace, console: Console) -> int:
    from grader.lti import ags, nrps
    from grader.lti.platforms import platforms

    with open_store(args) as store:
        found, courses, pending = platforms(store), nrps.courses(store), ags.pending(store)
    for platform in found:
        console.print(Text(f"{platform.issuer}  client id {platform.client_id}  deployment(s) "
                           f"{', '.join(platform.deployments)}  tier {platform.tier}"), soft_wrap=True)
        for course in (c for c in courses if c.platform_id == platform.id):
            roster = "roster sync ready" if course.memberships_url else "no roster service"
            console.print(Text(f"  course {course.title or '(untitled)'} (context {course.context_id}): {roster}"),
                          soft_wrap=True)
    if not found:
        console.print("no platform registered: `grader lti add-platform --help`", style="dim")
    for row in pending:
        console.print(Text(f"unsent: {row.student} {row.exercise} {row.score:g}/{row.max_score:g} after "
                           f"{row.attempts} tries: {row.last_error or 'not tried yet'}"), soft_wrap=True)
    return OK


def command_lti_sync_roster(args: argparse.Namespace, console: Console) -> int:
    from grader.lti import nrps
    from grader.lti.services import ServiceError

    with open_store(args) as store:
        courses = [c for c in nrps.courses(store) if args.context in (None, c.context_id)]
        if not courses:
            raise UsageError("no course to sync: a course is known once someone launched the tool from it"
                             + (f" (none has context id {args.context})" if args.context else ""))
        failed = False
        for course in courses:
            try:
                result = nrps.sync_roster(store, course)
            except ServiceError as exc:
                console.print(Text(f"{course.title or course.context_id}: {exc}", style="red"), soft_wrap=True)
                failed = True
                continue
            console.print(Text(f"{course.title or course.context_id}: {len(result.added)} learner(s) added"
                               f"{': ' + ', '.join(result.added) if result.added else ''}; {result.known} on the "
                               "roster already"), soft_wrap=True)
    return BROKEN if failed else OK


def command_package(args: argparse.Namespace, console: Console) -> int:
    from grader.bundles import BundleError, package

    if args.try_submission and args.run_each:
        raise UsageError("--run grades one submission, --run-each a folder of them: give one of the two")
    if args.base and not (args.try_submission or args.run_each):
        raise UsageError("--base chooses the image --run builds on: give --run SUBMISSION too (or --run-each FOLDER)")
    if args.try_submission and not Path(args.try_submission).exists():
        raise UsageError(f"--run {args.try_submission}: no such file or folder")
    if args.run_each and not Path(args.run_each).is_dir():
        raise UsageError(f"--run-each {args.run_each}: no such folder (it holds one file, or one folder, per submission)")
    try:
        console.print(package(args.target, args.exercise, args.tier, Path(args.output), args.hidden_visibility,
                              args.image), soft_wrap=True)
    except BundleError as exc:
        raise UsageError(str(exc)) from None
    if args.try_submission or args.run_each:
        return try_package(args, console)
    return OK


def try_package(args: argparse.Namespace, console: Console) -> int:
    """`package --run` / `--run-each`: the bundle just written, tried as its platform runs it, on one
    submission or on each of a folder of them (the image built once)."""
    import tempfile

    import docker

    from grader.bundles.trial import submissions_in, try_each
    from grader.sandbox.engine import engine_status

    try:
        submissions = submissions_in(Path(args.run_each)) if args.run_each else [Path(args.try_submission)]
    except FileNotFoundError as exc:
        raise UsageError(f"--run-each: {exc}") from None
    client, why_not = engine_status()
    if client is None:
        raise GradingError(f"--run needs a Docker engine: {why_not}")
    folder = Path(tempfile.mkdtemp(prefix=f"grader-{args.target}-run-"))
    try:
        outcomes = try_each(client, args.target, Path(args.output), submissions, folder, args.base,
                            lambda line: console.print(Text(line, style="dim"), soft_wrap=True))
    except (docker.errors.DockerException, RuntimeError, OSError, ValueError) as exc:  # a failed build, the engine's error
        raise GradingError(f"--run could not try the bundle: {exc}") from None
    finally:
        client.close()
    if len(outcomes) == 1:
        console.print(Text(outcomes[0][1].summary()), soft_wrap=True)
    else:
        from grader.bundles.trial import score_line

        console.print(Text("\n".join([f"{len(outcomes)} submissions graded with one image; results under {folder}:",
                                       *(score_line(path.name, outcome) for path, outcome in outcomes)])),
                      soft_wrap=True)
    return OK if all(outcome.results is not None for _, outcome in outcomes) else UNVOUCHED


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Each option's help ends with its default when it has one worth saying (not None or False, and
    not already said); the epilog (the examples) keeps its lines."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.option_strings and action.default not in (None, False, argparse.SUPPRESS) and "default" not in text:
            text += " (default: %(default)s)"
        return text


class Parser(argparse.ArgumentParser):
    """The parser of `grader` and of every subcommand: add_subparsers makes subparsers of the parser's
    own class, so a subcommand added anywhere gets this formatter."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def version_text() -> str:
    from importlib.metadata import PackageNotFoundError, version

    import grader

    try:
        installed = version("grader")
    except PackageNotFoundError:  # run from a checkout that is not installed
        installed = grader.__version__
    return f"grader {installed} (scorecard schema {SCHEMA_VERSION})"


class VersionAction(argparse.Action):
    """--version, worked out only when asked (reading the package metadata is not free)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(version_text())
        parser.exit()


# Real command lines for each command's --help, by the command's words after `grader`.
EXAMPLES: dict[str, list[str]] = {
    "grade": ["grader grade solutions/continuous_batching/scheduler.py --exercise continuous_batching",
              "grader grade alice.py --exercise continuous_batching --tier free --json - | jq .score",
              "grader grade alice.py --exercise continuous_batching --fail-under 80% --html report.html"],
    "report": ["grader report card.json --html report.html",
               "grader report card.json --md - > comment.md"],
    "export": ["grader export card.json --format gradescope -o results.json",
               "grader export card.json --format gradescope --hidden-visibility after_due_date -o results.json",
               "grader export card.json --format junit > junit.xml",
               "grader export card.json --format gitlab -o report.xml"],
    "package": ["grader package --target gradescope --exercise continuous_batching -o autograder.zip",
                "grader package --target gradescope --hidden-visibility after_published -o autograder.zip",
                "grader package --target gradescope -o autograder.zip --run solutions/continuous_batching/scheduler.py",
                "grader package --target gradescope -o autograder.zip --run-each submissions/",
                "grader package --target prairielearn --exercise continuous_batching --image me/grader:1 "
                "-o questions/scheduler"],
    "submit": ["grader submit alice.py --student alice --exercise continuous_batching --db class.db"],
    "batch": ["grader batch submissions/ --exercise continuous_batching --jobs 2 --gradebook gradebook.csv",
              "grader batch submissions/ --exercise continuous_batching --regrade --gradebook - > gradebook.csv"],
    "publish": ["grader publish --out site/ --policy best",
                "grader publish --out site/ --pseudonym-map pseudonyms.csv",
                "grader publish --out site/ --names"],
    "similarity": ["grader similarity --exercise continuous_batching --out similarity/",
                   "grader similarity submissions/ --exercise continuous_batching --json - | jq '.pairs[0]'",
                   "grader similarity --exercise continuous_batching --against last-term.db --pseudonymous"],
    "image": ["grader image build"],
    "image build": ["grader image build", "grader image build --exercise continuous_batching --force"],
    "serve": ["grader serve --port 8000 --workers 2",
              "grader serve --base-url https://grader.example.edu/",
              "grader serve --db postgresql://grader@db/grader --broker redis://localhost:6379/0"],
    "worker": ["grader worker --broker redis://localhost:6379/0 --db postgresql://grader@db/grader"],
    "roster": ["grader roster import roster.csv --base-url https://grader.example.edu",
               "grader roster instructor-link --db postgresql://grader@db/course --base-url https://grader.example.edu"],
    "roster import": ["grader roster import roster.csv --base-url https://grader.example.edu"],
    "roster instructor-link": ["grader roster instructor-link --db postgresql://grader@db/course "
                               "--base-url https://grader.example.edu"],
    "audit": ["grader audit continuous_batching", "grader audit exercises/continuous_batching --sandbox local"],
    "misconceptions": ["grader misconceptions continuous_batching --sandbox local",
                       "grader misconceptions paged_kv_cache --check"],
    "new": ["grader new running_max", "grader new word_count --file counter --project ~/course"],
    "lti": ["grader lti add-platform --issuer https://canvas.instructure.com --client-id 10000000000001 "
            "--deployment 1:abc --auth-login-url https://sso.canvaslms.com/api/lti/authorize_redirect "
            "--auth-token-url https://sso.canvaslms.com/login/oauth2/token "
            "--keyset-url https://sso.canvaslms.com/api/lti/security/jwks",
            "grader lti list", "grader lti sync-roster"],
    "lti add-platform": ["grader lti add-platform --issuer https://moodle.example.edu --client-id AbC123 "
                         "--deployment 2 --auth-login-url https://moodle.example.edu/mod/lti/auth.php "
                         "--auth-token-url https://moodle.example.edu/mod/lti/token.php "
                         "--keyset-url https://moodle.example.edu/mod/lti/certs.php --tier premium"],
    "lti list": ["grader lti list --db postgresql://grader@db/course"],
    "lti sync-roster": ["grader lti sync-roster", "grader lti sync-roster --context 4 --db class.db"],
}


def subcommands(parser: argparse.ArgumentParser, words: str = "") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(command words, parser) for every subcommand, nested ones too: `grade`, ..., `image build`."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                path = f"{words} {name}".strip()
                yield path, sub
                yield from subcommands(sub, path)


def add_examples(parser: argparse.ArgumentParser) -> None:
    for words, sub in subcommands(parser):
        if sub.epilog is None and words in EXAMPLES:
            sub.epilog = "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[words])


def add_sandbox_options(parser: argparse.ArgumentParser, unsafe_local: bool = True) -> None:
    parser.add_argument("--sandbox", choices=SANDBOXES, default="auto", help=SANDBOX_HELP)
    if unsafe_local:
        parser.add_argument("--unsafe-local", action="store_true", help=UNSAFE_HELP)


def add_stored_scorecard_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--submission", type=int, metavar="N", help="the current scorecard of submission N of the store")
    parser.add_argument("--student", metavar="ID", help="the scorecard of the student's latest submission (with --exercise)")
    parser.add_argument("--exercise", metavar="SLUG", help="the exercise of --student")
    parser.add_argument("--db", metavar="PATH|URL", help=DB_HELP)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="grader", description="Grade coding exercises in a sandbox.",
                    epilog="exit status: 0 graded (whatever the score; a rejected file too), 1 the grader cannot "
                           "vouch for a result,\n2 usage problem, 3 the grader could not run, 4 below --fail-under. "
                           "`grader COMMAND --help` for each command.")
    parser.add_argument("--version", action=VersionAction, help="print the grader's version and the scorecard "
                                                                "schema version, then exit")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", help=COMMAND_HELP)

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

    submit = commands.add_parser("submit", help="store a student's submission, grade it, keep the report")
    submit.add_argument("submission", help="the student's solution file")
    submit.add_argument("--student", required=True, help="the student's id")
    submit.add_argument("--exercise", required=True, help=EXERCISE_HELP)
    submit.add_argument("--tier", help=TIER_HELP)
    add_sandbox_options(submit)
    submit.add_argument("--db", metavar="PATH", help=DB_HELP)
    submit.set_defaults(run=command_submit)

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

    publish = commands.add_parser("publish", help="a static site of the store: overview, student pages, gradebooks")
    publish.add_argument("--out", required=True, metavar="DIR", help="the folder to write the site into")
    publish.add_argument("--policy", choices=("latest", "best", "on-time"), default="latest",
                         help="which submission of each student counts (on-time: the latest before the "
                              "student's due date)")
    publish.add_argument("--names", action="store_true",
                         help="show students' ids and roster names (by default they appear under stable pseudonyms)")
    publish.add_argument("--pseudonymous", action="store_true",
                         help="pseudonyms, the default since 0.8.0 (still taken for scripts written before)")
    publish.add_argument("--pseudonym-map", metavar="FILE",
                         help="also write the pseudonym,student CSV here for the instructor (owner-only; refused "
                              "inside --out; not with --names)")
    publish.add_argument("--db", metavar="PATH", help=DB_HELP)
    publish.set_defaults(run=command_publish)

    similarity = commands.add_parser("similarity", help="which students' files are most alike, the given code left out")
    similarity.add_argument("folder", nargs="?", help="a class folder as batch reads it (default: the store's "
                                                      "submissions)")
    similarity.add_argument("--exercise", required=True, help=EXERCISE_HELP)
    similarity.add_argument("--policy", choices=("latest", "best"), default="latest",
                            help="which submission of each student is compared (from the store)")
    similarity.add_argument("--against", action="append", metavar="FOLDER|STORE",
                            help="also compare with an earlier term's submissions: a class folder or another "
                                 "store (repeatable)")
    similarity.add_argument("--no-reference", action="store_true",
                            help="do not compare with the exercise's reference solution")
    similarity.add_argument("--top", type=int, default=200, metavar="N", help="the most alike pairs to keep")
    similarity.add_argument("--out", metavar="DIR", help="write the report's pages here (owner-only)")
    similarity.add_argument("--json", metavar="FILE", help="write the report as JSON here ('-': standard output)")
    similarity.add_argument("--pseudonymous", action="store_true",
                            help="show students under the pseudonyms `publish` gives them")
    similarity.add_argument("--db", metavar="PATH", help=DB_HELP)
    similarity.set_defaults(run=command_similarity)

    image = commands.add_parser("image", help="the Docker grading image")
    image_commands = image.add_subparsers(dest="image_command", required=True, metavar="COMMAND", help=COMMAND_HELP)
    image_build = image_commands.add_parser("build", help="build the grading image (no registry needed)")
    image_build.add_argument("--force", action="store_true", help="bootstrap the Debian base again too")
    image_build.add_argument("--exercise", action="append", metavar="SLUG|PATH",
                             help="build the image this exercise grades in, with the Debian packages it declares "
                                  "(repeatable; default: every exercise of the project)")
    image_build.set_defaults(run=command_image_build)

    serve = commands.add_parser("serve", help="the web service: students submit, instructors follow the class")
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    serve.add_argument("--port", type=int, default=8000, help="the port to listen on")
    serve.add_argument("--db", metavar="PATH|URL", help=DB_HELP + "; a postgresql:// URL with --broker")
    serve.add_argument("--broker", metavar="URL", help="a Redis URL: queue gradings for `grader worker` processes")
    serve.add_argument("--workers", type=int, default=2, help="grading threads in this process (without --broker)")
    add_sandbox_options(serve, unsafe_local=False)
    serve.add_argument("--interval", type=float, default=30.0, metavar="S",
                       help="least seconds between two submissions of a student to an exercise (an exercise's "
                            "[web] submission_interval_s wins)")
    serve.add_argument("--max-request-kb", type=int, default=1024, help="the largest request body accepted")
    serve.add_argument("--lease", type=float, default=60.0, metavar="S",
                       help="a grading whose grader is silent this long is given to another")
    serve.add_argument("--base-url", metavar="URL",
                       help="the address browsers reach the service at, such as https://grader.example.edu/ "
                            "(behind a proxy that ends TLS): the links it prints and shows use it, and with "
                            "https its cookies are Secure (default: http://HOST:PORT)")
    serve.add_argument("--spool", metavar="DIR",
                       help="where a submission that arrives while the database is away waits, on disk, until it "
                            "is stored (default: beside an SQLite store, DB.spool; for a database URL, "
                            "grader-store/spool in the current folder)")
    serve.set_defaults(run=command_serve)

    worker = commands.add_parser("worker", help="grade submissions queued by `grader serve --broker`")
    worker.add_argument("--broker", required=True, metavar="URL", help="the Redis URL given to `grader serve`")
    worker.add_argument("--db", required=True, metavar="URL", help="the store given to `grader serve`")
    add_sandbox_options(worker, unsafe_local=False)
    worker.add_argument("--lease", type=float, default=60.0, metavar="S",
                        help="seconds a claimed grading stays this worker's without a sign of life")
    worker.add_argument("--burst", action="store_true", help="stop when the queue is empty")
    worker.set_defaults(run=command_worker)

    roster = commands.add_parser("roster", help="the class roster of the web service")
    roster_commands = roster.add_subparsers(dest="roster_command", required=True, metavar="COMMAND",
                                            help=COMMAND_HELP)
    roster_import = roster_commands.add_parser("import", help="add students from a CSV (id,name,tier) and print "
                                                              "each new student's sign-in link")
    roster_import.add_argument("file", help="roster.csv")
    roster_import.add_argument("--db", metavar="PATH|URL", help=DB_HELP)
    roster_import.add_argument("--base-url", metavar="URL", help="the address of `grader serve` "
                                                                  "(default http://127.0.0.1:8000)")
    roster_import.set_defaults(run=command_roster_import)
    instructor = roster_commands.add_parser("instructor-link", help="print a new one-time instructor sign-in link")
    instructor.add_argument("--db", metavar="PATH|URL", help=DB_HELP)
    instructor.add_argument("--base-url", metavar="URL", help="the address of `grader serve` "
                                                               "(default http://127.0.0.1:8000)")
    instructor.set_defaults(run=command_instructor_link)

    lti = commands.add_parser("lti", help="LTI 1.3: the LMSs (Canvas, Moodle) that launch `grader serve` (extra `lti`)")
    lti_commands = lti.add_subparsers(dest="lti_command", required=True, metavar="COMMAND", help=COMMAND_HELP)
    add_platform = lti_commands.add_parser("add-platform", help="register an LMS (or add a deployment to it), "
                                                                "and print the tool's addresses to give it")
    add_platform.add_argument("--issuer", required=True, metavar="URL", help="the platform's issuer (iss)")
    add_platform.add_argument("--client-id", required=True, metavar="ID", help="the client id the LMS gave the tool")
    add_platform.add_argument("--deployment", required=True, action="append", metavar="ID",
                              help="a deployment id the LMS launches from (repeatable)")
    add_platform.add_argument("--auth-login-url", required=True, metavar="URL", help="the platform's OIDC auth URL")
    add_platform.add_argument("--auth-token-url", required=True, metavar="URL",
                              help="the platform's OAuth2 token URL (grade passback, roster)")
    add_platform.add_argument("--keyset-url", required=True, metavar="URL", help="the platform's public key set (JWKS)")
    add_platform.add_argument("--tier", choices=("free", "premium"), default="free",
                              help="the plan of the students its launches add to the roster")
    add_platform.add_argument("--db", metavar="PATH|URL", help=DB_HELP)
    add_platform.add_argument("--base-url", metavar="URL", help="the https address of `grader serve`, for the "
                                                                "addresses printed (default http://127.0.0.1:8000)")
    add_platform.set_defaults(run=command_lti_add_platform)
    lti_list = lti_commands.add_parser("list", help="the platforms registered, their courses and unsent scores")
    lti_list.add_argument("--db", metavar="PATH|URL", help=DB_HELP)
    lti_list.set_defaults(run=command_lti_list)
    lti_sync = lti_commands.add_parser("sync-roster", help="add the learners of the courses launches came from "
                                                           "to the roster (Names and Role Provisioning)")
    lti_sync.add_argument("--context", metavar="ID", help="only the course of this context id")
    lti_sync.add_argument("--db", metavar="PATH|URL", help=DB_HELP)
    lti_sync.set_defaults(run=command_lti_sync_roster)

    bundle = commands.add_parser("package", help="a bundle that grades on Gradescope or PrairieLearn as they are")
    bundle.add_argument("--target", required=True, choices=TARGETS, help="the platform the bundle is for")
    bundle.add_argument("--exercise", help="the exercise's name (slug) or folder (default: the project's only one)")
    bundle.add_argument("--tier", help=TIER_HELP)
    bundle.add_argument("--hidden-visibility", choices=VISIBILITIES,
                        help="gradescope: when students see the results of the suites they cannot read")
    bundle.add_argument("--image", metavar="ACCOUNT/NAME:TAG",
                        help="prairielearn (required): the course's one grading image, as you push it (info.json names "
                             "it; give every exercise the same)")
    bundle.add_argument("-o", "--output", required=True, metavar="ZIP|DIR", help="gradescope: the zip; prairielearn: "
                                                                                  "the question folder")
    bundle.add_argument("--run", metavar="SUBMISSION", dest="try_submission",  # `run` is the command's function
                        help="then build the bundle's image and grade this file (or folder of files, as a student "
                             "uploads them) in a container started as the platform starts it, and show its result")
    bundle.add_argument("--run-each", metavar="FOLDER",
                        help="like --run, for every submission in FOLDER (each file, and each subfolder as one "
                             "student's upload): the image is built once, and each submission gets a score line")
    bundle.add_argument("--base", metavar="IMAGE",
                        help="with --run: the image to build on (gradescope: default gradescope/autograder-base:"
                             "ubuntu-22.04; prairielearn: the Dockerfile's BASE, default debian:bookworm-slim)")
    bundle.set_defaults(run=command_package)

    new = commands.add_parser("new", help="write a working exercise skeleton to start from (audit finds it strong)")
    new.add_argument("slug", help="the exercise's name: lower-case letters, digits, '_' and '-'")
    new.add_argument("--project", default=".", metavar="DIR", help="the project folder (default: this one)")
    new.add_argument("--file", default="solution", metavar="MODULE",
                     help="the submission's module name, without .py (default: solution)")
    new.set_defaults(run=command_new)

    audit = commands.add_parser("audit", help="check an exercise: reference full marks, stub 0, every mutant caught")
    audit.add_argument("exercise", help=EXERCISE_HELP)
    audit.add_argument("--seeds", type=positive_int, default=None,
                       help="grade each mutant on this many seeds (default: exercise.toml's [audit] seeds, else 3)")
    audit.add_argument("--jobs", type=positive_int, default=None,
                       help="gradings at a time (default: one a CPU)")
    audit.add_argument("--no-generated", action="store_true",
                       help="grade only the exercise's own mutants, not those made from the reference")
    add_sandbox_options(audit)
    audit.set_defaults(run=command_audit)

    misconceptions = commands.add_parser("misconceptions", help="grade the mutants and write what each fails, "
                                         "for the diagnosis of submissions (solutions/SLUG/misconceptions.json)")
    misconceptions.add_argument("exercise", help=EXERCISE_HELP)
    misconceptions.add_argument("--seeds", type=int, default=3, metavar="N",
                                help="gradings of each mutant, each on a seed of its own (default 3)")
    misconceptions.add_argument("--check", action="store_true",
                                help="grade nothing: exit 1 unless the file is there and current")
    add_sandbox_options(misconceptions)
    misconceptions.set_defaults(run=command_misconceptions)
    add_examples(parser)
    return parser


#: The extra that brings each optional top-level module (pyproject.toml's optional-dependencies):
#: `pip install grader` grades, reports and exports; the store, the web service and Docker are extras.
EXTRAS = {"docker": "docker", "requests": "docker", "sqlalchemy": "service", "alembic": "service",
          "starlette": "service", "uvicorn": "service", "multipart": "service", "python_multipart": "service",
          "redis": "service", "rq": "service", "psycopg": "service", "jwt": "lti", "cryptography": "lti"}


def missing_extra(exc: ModuleNotFoundError) -> str | None:
    """The extra to install for a module that is not there, or None if it is not one of ours."""
    return EXTRAS.get((exc.name or "").partition(".")[0])


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    errors = PipedConsole(stderr=True)
    try:
        # With an output on standard output, what is meant for a person goes to standard error.
        console = errors if takes_stdout(args) else PipedConsole()
        check_outputs(args)
        return args.run(args, console)
    # Messages are soft-wrapped: a path or test id in them is never broken over two lines.
    except (UsageError, ExerciseError, StoreError) as exc:
        errors.print(Text(f"grader: {exc}", style="red"), soft_wrap=True)
        return USAGE
    except GradingError as exc:
        errors.print(Text(f"grader: {exc}", style="red"), soft_wrap=True)
        return BROKEN
    except ModuleNotFoundError as exc:
        extra = missing_extra(exc)
        if extra is None:
            raise
        errors.print(Text(f"grader {args.command}: needs {exc.name!r}, which comes with an extra: "
                          f"pip install 'grader[{extra}]'", style="red"), soft_wrap=True)
        return USAGE
    except KeyboardInterrupt:
        errors.print(Text("grader: interrupted", style="red"))
        return 130
    except BrokenPipeError:  # `grader ... | head`: the reader left; say nothing more, as a killed writer would
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nor at the interpreter's exit
        return BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
