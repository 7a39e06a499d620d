"""The `grader` command line: `main`, and the parser every command's module adds its own to.

Exit status: 0 when grading finished (whatever the score, and also when the submission was rejected
for a syntax error and the like); 1 when the grader cannot vouch for a result (the scorecard, if
asked for, is still written, with status `error`); 2 for a usage problem (no such file, exercise,
tier or sandbox); 3 when the grader itself could not run (Docker unreachable, image build failed);
4 only when `--fail-under` was given and the score is below it (a gate for CI).

An output option given `-` (`--json -`, `--md -`, `export -o -`, `--gradebook -`) writes to standard
output, and then everything meant for a person (summaries, progress, paths) goes to standard error,
so that `grader grade x.py --exercise e --json - | jq .score` reads a clean document.

Each command lives in a module of this package with a `register(commands)` that adds its parser and
sets its handler. Registering imports nothing heavier than argparse: a command's handler imports what
it needs when it runs, so `grader grade` never loads the store, the web service or the bundles.
"""

from __future__ import annotations

import argparse
import os
import sys
from types import ModuleType

from grader.cli import (
    audit,
    backup,
    batch,
    grade,
    image,
    lti,
    new,
    package,
    publish,
    reports,
    roster,
    serve,
    similarity,
    submit,
)
from grader.cli.common import (
    BELOW,
    BROKEN,
    BROKEN_PIPE,
    COMMAND_HELP,
    INTERRUPTED,
    USAGE,
    UsageError,
    check_outputs,
    takes_stdout,
    threshold,
)
from grader.cli.parser import Parser, VersionAction, add_examples, subcommands

__all__ = ["BELOW", "EXAMPLES", "build_parser", "main", "subcommands", "threshold"]

# The commands' modules, in the order `grader --help` lists their commands.
COMMANDS: tuple[ModuleType, ...] = (grade, reports, submit, batch, publish, similarity, image, serve, roster, lti,
                                    backup, package, new, audit)

#: Real command lines for each command's --help, by the command's words after `grader`.
EXAMPLES: dict[str, list[str]] = {words: lines for module in COMMANDS for words, lines in module.EXAMPLES.items()}

#: The extra that brings each optional top-level module (pyproject.toml's optional-dependencies):
#: `pip install grader` grades, reports and exports; the store, the web service and Docker are extras.
EXTRAS = {"docker": "docker", "requests": "docker", "sqlalchemy": "service", "alembic": "service",
          "starlette": "service", "uvicorn": "service", "multipart": "service", "python_multipart": "service",
          "redis": "service", "rq": "service", "psycopg": "service", "jwt": "lti", "cryptography": "lti"}


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="grader", description="Grade coding exercises in a sandbox.",
                    epilog="exit status: 0 graded (whatever the score; a rejected file too), 1 the grader cannot "
                           "vouch for a result,\n2 usage problem, 3 the grader could not run, 4 below --fail-under. "
                           "`grader COMMAND --help` for each command.")
    parser.add_argument("--version", action=VersionAction, help="print the grader's version and the scorecard "
                                                                "schema version, then exit")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", help=COMMAND_HELP)
    for module in COMMANDS:
        module.register(commands)
    add_examples(parser, EXAMPLES)
    return parser


def missing_extra(exc: ModuleNotFoundError) -> str | None:
    """The extra to install for a module that is not there, or None if it is not one of ours."""
    return EXTRAS.get((exc.name or "").partition(".")[0])


def usage_errors() -> tuple[type[Exception], ...]:
    """The errors that mean the grader was misused. Looked up only once an error is on its way out (an
    `except` clause's expression is evaluated then), so that no command pays for the exercise module's
    import to be able to catch its error."""
    from grader.core.exercise import ExerciseError
    from grader.errors import StoreError

    return (UsageError, ExerciseError, StoreError)


def grading_errors() -> tuple[type[Exception], ...]:
    from grader.errors import GradingError

    return (GradingError,)


def main(argv: list[str] | None = None) -> int:
    from rich.text import Text

    from grader.cli.console import PipedConsole

    args = build_parser().parse_args(argv)
    errors = PipedConsole(stderr=True)
    try:
        # With an output on standard output, what is meant for a person goes to standard error.
        console = errors if takes_stdout(args) else PipedConsole()
        check_outputs(args)
        status: int = args.run(args, console)  # every command's run returns its exit status
        return status
    # Messages are soft-wrapped: a path or test id in them is never broken over two lines.
    except usage_errors() as exc:
        errors.print(Text(f"grader: {exc}", style="red"), soft_wrap=True)
        return USAGE
    except grading_errors() as exc:
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
        return INTERRUPTED
    except BrokenPipeError:  # `grader ... | head`: the reader left; say nothing more, as a killed writer would
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nor at the interpreter's exit
        return BROKEN_PIPE
