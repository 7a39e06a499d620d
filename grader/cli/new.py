"""`grader new`: a working exercise skeleton named after the new exercise, audited strong as written."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from grader.cli.common import OK

if TYPE_CHECKING:
    from rich.console import Console

EXAMPLES = {
    "new": ["grader new running_max", "grader new word_count --file counter --project ~/course"],
}


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    new = commands.add_parser("new", help="write a working exercise skeleton to start from (audit finds it strong)")
    new.add_argument("slug", help="the exercise's name: lower-case letters, digits, '_' and '-'")
    new.add_argument("--project", default=".", metavar="DIR", help="the project folder (default: this one)")
    new.add_argument("--file", default="solution", metavar="MODULE",
                     help="the submission's module name, without .py (default: solution)")
    new.set_defaults(run=command_new)


def command_new(args: argparse.Namespace, console: Console) -> int:
    from rich.text import Text

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
