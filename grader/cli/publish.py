"""`grader publish`: the store's results as a static site, students under pseudonyms unless asked for
their names, and the instructor's pseudonym map kept apart."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from grader.cli.common import DB_HELP, OK, UsageError, existing_store

if TYPE_CHECKING:
    from rich.console import Console

    from grader.course.store import Store

EXAMPLES = {
    "publish": ["grader publish --out site/ --policy best",
                "grader publish --out site/ --pseudonym-map pseudonyms.csv",
                "grader publish --out site/ --names"],
}


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


def pseudonym_map_file(args: argparse.Namespace) -> Path | None:
    """--pseudonym-map checked against the other options: it goes with pseudonyms, outside the site."""
    if args.names and args.pseudonymous:
        raise UsageError("--names and --pseudonymous contradict each other: give one (pseudonyms are the default)")
    if not args.pseudonym_map:
        return None
    map_file = Path(args.pseudonym_map)
    if args.names:
        raise UsageError("--pseudonym-map goes with pseudonyms: leave out --names")
    out = Path(args.out).resolve()
    if map_file.resolve() == out or map_file.resolve().is_relative_to(out):
        raise UsageError(f"{map_file}: the pseudonym map must be outside --out (the site is for others)")
    return map_file


def command_publish(args: argparse.Namespace, console: Console) -> int:
    from rich.text import Text

    from grader.course.deadlines import of_project
    from grader.course.publish import SiteError, publish

    map_file = pseudonym_map_file(args)
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
