"""`grader audit` and `grader misconceptions`: an exercise's suites proved strong against its mutants,
and what each mutant fails written down for the diagnosis of submissions."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from grader.cli.common import EXERCISE_HELP, OK, UNVOUCHED, UsageError, add_sandbox_options, positive_int, sandbox_for

if TYPE_CHECKING:
    from rich.console import Console

EXAMPLES = {
    "audit": ["grader audit continuous_batching", "grader audit exercises/continuous_batching --sandbox local"],
    "misconceptions": ["grader misconceptions continuous_batching --sandbox local",
                       "grader misconceptions paged_kv_cache --check"],
}


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


def command_audit(args: argparse.Namespace, console: Console) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from grader.audit.audit import run_audit
    from grader.audit.view import print_audit
    from grader.core.exercise import load_exercise
    from grader.sandbox.choose import choose_backend

    exercise = load_exercise(args.exercise)
    backend = sandbox_for(args, console)
    console.print(f"auditing {exercise.slug} on the {backend.name} sandbox: reference, stub, its "
                  f"{len(exercise.mutants)} mutants" + ("" if args.no_generated else " and the mutants made from the reference"))
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        task = progress.add_task("grading", total=None)
        audit = run_audit(exercise, backend, backend.name, seeds=args.seeds, generated=not args.no_generated,
                          jobs=args.jobs, keep_gradings=True, on_start=lambda count: progress.update(task, total=count),
                          make_backend=lambda: choose_backend(args.sandbox, unsafe_local=args.unsafe_local, warm=True),
                          on_row=lambda row: progress.advance(task) if row.label not in ("reference", "stub") else None)
    print_audit(audit, console, exercise.submission_file)
    return OK if audit.ok else UNVOUCHED


def command_misconceptions(args: argparse.Namespace, console: Console) -> int:
    from rich.text import Text

    from grader.audit.build import BuildError, build_signatures
    from grader.audit.signatures import current_signatures, signatures_path
    from grader.core.exercise import load_exercise
    from grader.errors import GradingError

    exercise = load_exercise(args.exercise)
    path = signatures_path(exercise)
    if args.check:
        current = current_signatures(exercise) is not None
        console.print(f"{path}: {'current' if current else 'missing or stale: run grader misconceptions ' + exercise.slug}")
        return OK if current else UNVOUCHED
    if args.seeds < 1:
        raise UsageError("--seeds must be at least 1")
    backend = sandbox_for(args, console)
    console.print(f"grading {len(exercise.mutants)} mutants of {exercise.slug} on {args.seeds} seeds each")
    try:
        found = build_signatures(exercise, backend, args.seeds, on_mutant=lambda mutant, signature: console.print(
            Text(f"  {mutant.stem}: fails {len(signature.fails)} tests", style="dim")), keep_gradings=True)
    except BuildError as exc:
        raise GradingError(str(exc)) from None
    finally:
        backend.close()
    path.write_text(found.to_json(), encoding="utf-8")
    console.print(f"wrote {path}")
    return OK
