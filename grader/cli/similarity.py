"""`grader similarity`: the pairs of students whose files are most alike, the given code left out, in
the terminal and as owner-only pages or JSON."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from grader.cli.common import DB_HELP, EXERCISE_HELP, OK, STDOUT, UsageError, existing_store, store_location

if TYPE_CHECKING:
    from rich.console import Console

    from grader.core.exercise import Exercise
    from grader.similarity import Report
    from grader.similarity.compare import Document

EXAMPLES = {
    "similarity": ["grader similarity --exercise continuous_batching --out similarity/",
                   "grader similarity submissions/ --exercise continuous_batching --json - | jq '.pairs[0]'",
                   "grader similarity --exercise continuous_batching --against last-term.db --pseudonymous"],
}


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


def command_similarity(args: argparse.Namespace, console: Console) -> int:
    """The pairs of students whose files are most alike: in the terminal, and as --out's pages or --json."""
    from rich.text import Text

    from grader.core.exercise import load_exercise
    from grader.similarity import compare, sources
    from grader.similarity.view import to_json, write_folder

    exercise = load_exercise(args.exercise)
    if args.top < 1:
        raise UsageError(f"--top {args.top}: give how many pairs to keep, 1 or more")
    if args.folder is not None and not Path(args.folder).is_dir():
        raise UsageError(f"{args.folder}: not a folder of submissions")
    documents, key = gather(args, exercise)
    if key:
        pseudonymise(documents, key)
    if sum(1 for d in documents if d.kind == "student") == 0:
        where = args.folder or store_location(args.db)
        raise UsageError(f"no submission of {exercise.slug} in {where}: nothing to compare")
    report = compare(documents, sources.given_code(exercise), exercise.slug, limit=args.top)
    if args.json:
        text = to_json(report, "" if args.folder else args.policy)
        if args.json == STDOUT:
            sys.stdout.write(text)
        else:
            from grader.private_files import write_private
            write_private(Path(args.json), text)
    if args.out:
        index = write_folder(report, Path(args.out), "" if args.folder else args.policy, bool(key))
        console.print(Text(f"similarity report (owner-only, for instructors): open {index}", style="dim"))
    print_similarity(report, console)
    return OK


def gather(args: argparse.Namespace, exercise: Exercise) -> tuple[list[Document], str]:
    """The documents compared (the class's, earlier terms', the reference) and the pseudonyms' key ('' for
    names). A class folder is read alone, unless --db (its scorecards) or --pseudonymous (the store's key)
    is given."""
    from grader.similarity import sources

    use_store = args.folder is None or args.db is not None or args.pseudonymous
    key = ""
    documents: list[Document] = []
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
    return documents, key


def pseudonymise(documents: list[Document], key: str) -> None:
    """Every student's label as `publish` shows it (an earlier term's keeps its term's prefix)."""
    from grader.course.publish import pseudonym

    for document in documents:
        prefix, _, student = document.label.rpartition("/") if document.kind == "earlier" else ("", "", document.label)
        if document.kind != "reference":
            document.label = f"{prefix}/{pseudonym(key, student)}" if prefix else pseudonym(key, student)


def print_similarity(report: Report, console: Console, rows: int = 15) -> None:
    from rich.table import Table
    from rich.text import Text

    from grader.cli.console import escaped

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
