"""`grader roster`: the web service's students from a CSV, each with a sign-in link, and a new
instructor's sign-in link."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from grader.cli.common import COMMAND_HELP, DB_HELP, OK, UsageError, open_store, service_address

if TYPE_CHECKING:
    from rich.console import Console

BASE_URL_HELP = "the address of `grader serve` (default http://127.0.0.1:8000)"
EXAMPLES = {
    "roster": ["grader roster import roster.csv --base-url https://grader.example.edu",
               "grader roster instructor-link --db postgresql://grader@db/course --base-url https://grader.example.edu"],
    "roster import": ["grader roster import roster.csv --base-url https://grader.example.edu"],
    "roster instructor-link": ["grader roster instructor-link --db postgresql://grader@db/course "
                               "--base-url https://grader.example.edu"],
}


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    roster = commands.add_parser("roster", help="the class roster of the web service")
    roster_commands = roster.add_subparsers(dest="roster_command", required=True, metavar="COMMAND",
                                            help=COMMAND_HELP)
    roster_import = roster_commands.add_parser("import", help="add students (and TAs) from a CSV "
                                                              "(id,name,tier,role) and print each new sign-in link")
    roster_import.add_argument("file", help="roster.csv")
    roster_import.add_argument("--db", metavar="PATH|URL", help=DB_HELP)
    roster_import.add_argument("--base-url", metavar="URL", help=BASE_URL_HELP)
    roster_import.set_defaults(run=command_roster_import)
    instructor = roster_commands.add_parser("instructor-link", help="print a new one-time instructor sign-in link")
    instructor.add_argument("--name", default="", metavar="NAME",
                            help="whom the link is for: what they change is recorded under this name")
    instructor.add_argument("--db", metavar="PATH|URL", help=DB_HELP)
    instructor.add_argument("--base-url", metavar="URL", help=BASE_URL_HELP)
    instructor.set_defaults(run=command_instructor_link)


def command_roster_import(args: argparse.Namespace, console: Console) -> int:
    from rich.text import Text

    from grader.errors import StoreError
    from grader.service.accounts import decode_roster, import_roster

    try:
        text = decode_roster(Path(args.file).read_bytes())
    except OSError as exc:
        raise UsageError(f"{args.file}: cannot be read ({exc.strerror})") from None
    except StoreError as exc:
        raise UsageError(f"{args.file}: {exc}") from None
    url = service_address(args)
    with open_store(args) as store:
        made = import_roster(store, text)
    for student, token in made:
        link = f"{url.rstrip('/')}/signin/{token}" if token else "has an active link (kept)"
        console.print(Text(f"{student}: {link}"), soft_wrap=True)
    console.print(f"{len(made)} student(s) imported", style="dim")
    return OK


def command_instructor_link(args: argparse.Namespace, console: Console) -> int:
    """A new one-time instructor sign-in link, without restarting `grader serve`."""
    from rich.text import Text

    from grader.service.accounts import new_link

    url = service_address(args)
    with open_store(args) as store:
        token = new_link(store, "instructor", label=args.name)
    console.print(Text(f"instructor sign-in (works once): {url.rstrip('/')}/signin/{token}"), soft_wrap=True)
    return OK
