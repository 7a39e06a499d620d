"""The `grader` command: what the console script and `python -m grader` run (the platform bundles too).

`grader grade` starts its harness here, before its command line is even read: the harness's interpreter
and pytest's import then run beside everything this process does before the job is ready (its own
imports, the arguments, the exercise, the isolation's check), instead of after it (see
`grader.sandbox.interpreter`). A harness that no grading took is ended before the command ends.

Once a grading is over, the process leaves at once (`leave`): its output flushed and its exit handlers
run, as at any exit, but without the interpreter's teardown of every module and object it loaded.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import threading


def run(argv: list[str] | None = None) -> int:
    """Run the command line `argv` (the process's own by default); returns its exit status."""
    arguments = sys.argv[1:] if argv is None else argv
    started_first = arguments[:1] == ["grade"] and not {"-h", "--help"} & set(arguments)
    if started_first:
        from grader.sandbox.interpreter import start_first

        start_first(arguments[1:])
    try:
        from grader.cli import main

        status = main(arguments)
    finally:
        if started_first:
            from grader.sandbox.interpreter import discard_first

            discard_first()
    if started_first:
        leave(status)
    # The command is over: the interpreter's exit need not walk every object it made in a last full
    # collection (docs/benchmarks.md); they are freed as their modules are, and files are closed as ever.
    gc.freeze()
    return status


def leave(status: int) -> None:
    """End the process with `status` now that its command is over, where nothing else runs: standard
    output and error flushed and the exit handlers run, as at any exit, then the interpreter's teardown
    skipped (every file the command writes is closed by then). Returns where another thread still runs
    or the output cannot be flushed: the ordinary exit then waits for it, or says why."""
    if threading.active_count() > 1:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        return
    atexit._run_exitfuncs()
    os._exit(status)


if __name__ == "__main__":
    sys.exit(run())
