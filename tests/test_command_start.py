"""The `grader` command's own start (`grader/__main__.py`): `grader grade` starts its harness before it
reads its command line, the grading takes that harness, a command that does not grade ends it and
leaves nothing behind, and a finished grading leaves at once with its output and exit handlers done."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader.sandbox.interpreter import sandbox_named
from tests.helpers import EXERCISE, PROJECT, REFERENCE

# Runs `grader ARGS` as the console script does, telling (on standard error, as JSON lines) each harness
# started and what was imported by then (the command line; the heavier modules the grading needs later),
# and (in a file) that the exit handlers ran.
CONSOLE = textwrap.dedent('''
    import atexit, json, sys
    from grader.sandbox import interpreter

    real = interpreter.start_harness_process

    def recorded(base, *options, **kwargs):
        waiting = real(base, *options, **kwargs)
        print(json.dumps({"base": str(base), "pid": waiting.process.pid,
                          "command_line_read": "grader.cli" in sys.modules,
                          "heavy": [name for name in ("grader.harness.contract", "dataclasses")
                                    if name in sys.modules]}), file=sys.stderr, flush=True)
        return waiting

    interpreter.start_harness_process = recorded
    atexit.register(lambda: open(sys.argv[1], "w").write("the exit handlers ran"))
    from grader.__main__ import run
    sys.exit(run(sys.argv[2:]))
''')

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local sandbox's namespaces as root")


def console(tmp_path: Path, *arguments: str) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    done = subprocess.run([sys.executable, "-c", CONSOLE, str(tmp_path / "exited"), *arguments], cwd=PROJECT,
                          capture_output=True, text=True, timeout=300)
    started = [json.loads(line) for line in done.stderr.splitlines() if line.startswith('{"base"')]
    return done, started


def gone(started: dict) -> bool:
    return not Path(started["base"]).exists() and not Path(f"/proc/{started['pid']}").exists()


def test_grade_starts_its_harness_before_its_command_line_and_grades_with_it(tmp_path):
    card = tmp_path / "card.json"
    done, started = console(tmp_path, "grade", str(REFERENCE), "--exercise", EXERCISE, "--sandbox", "local",
                            "--tier", "free", "--json", str(card))
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(card.read_text())["status"] == "graded"
    assert len(started) == 1 and not started[0]["command_line_read"]  # the one harness, started first
    assert started[0]["heavy"] == []  # nothing but what starting it takes comes before it
    assert gone(started[0])
    assert (tmp_path / "exited").read_text() == "the exit handlers ran"
    assert "Visible tests: 2/2 tests passed" in done.stdout  # the summary, flushed before the process left


@pytest.mark.parametrize("arguments", [
    ["grade", "--sandbox", "local", str(REFERENCE)],  # no --exercise: a usage error from argparse
    ["grade", "missing.py", "--exercise", EXERCISE, "--sandbox", "local"],  # no such file
])
def test_a_grade_that_does_not_grade_ends_the_harness_it_started(arguments, tmp_path):
    done, started = console(tmp_path, *arguments)
    assert done.returncode == 2, done.stderr[-2000:]
    assert len(started) == 1 and gone(started[0])
    assert (tmp_path / "exited").read_text() == "the exit handlers ran"


def test_other_commands_start_no_harness(tmp_path):
    done, started = console(tmp_path, "grade", "--help")
    assert done.returncode == 0 and started == []
    done, started = console(tmp_path, "--version")
    assert done.returncode == 0 and started == []


@pytest.mark.unit
def test_the_sandbox_asked_for_is_read_from_the_arguments_as_a_first_look_sees_it():
    assert sandbox_named(["x.py", "--sandbox", "docker"]) == "docker"
    assert sandbox_named(["x.py", "--sandbox=local", "--exercise", "e"]) == "local"
    assert sandbox_named(["x.py", "--exercise", "e"]) == "auto"
    assert sandbox_named(["x.py", "--sandbox"]) == "auto"


@pytest.mark.unit
def test_a_command_with_another_thread_still_running_leaves_as_python_does():
    import threading

    from grader.__main__ import leave

    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert leave(0) is None  # returned: the ordinary exit waits for the thread
    finally:
        release.set()
        other.join()
