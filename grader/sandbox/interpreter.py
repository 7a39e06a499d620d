"""The harness's interpreter on this machine: how it is started, and a harness started before its job.

The harness runs as the grading user in a fresh job folder of its own, in a session of its own, started
with `-I -S` and an environment of its own (`HARNESS_ENV`). Once started it imports pytest and the
harness, then waits for its job on its standard input (see `grader.harness.__main__`): until the job
comes it holds nothing of an exercise. So a one-shot `grader grade` starts it first (`early_harness`),
and the interpreter's start and pytest's import run beside the host's own work (its imports, the
exercise, the isolation's check, the job's making) instead of after it. The `grader` command itself
starts it for `grader grade` before it reads its command line (`start_first`, from `grader/__main__.py`);
the grading takes that one (`early_harness`), and the command ends it if nothing did (`discard_first`).

An early harness sits in the folder a grading in namespaces uses (this user's private jobs folder); a
grading that needs another folder, or no local sandbox at all, discards it. Kept to light imports: the
command imports this module before anything else.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO

import grader
from grader.harness.start import bootstrap
from grader.sandbox.engine import engine_in_sight
from grader.sandbox.folders import make_job_folder, private_folder, remove_owned_folder

HARNESS_PACKAGE = Path(grader.__file__).resolve().parent
HARNESS_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    # No plugin the machine happens to have installed may join the grading run.
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
}


def jobs_root() -> Path:
    """The private parent of every job folder of this user."""
    return private_folder(Path(tempfile.gettempdir()) / f"grader-{os.geteuid()}")


def harness_paths() -> list[str]:
    """Where this interpreter finds pytest and its plugins (its path, with what site folders and their
    .pth files added), so that the harness starts with -S: no .pth file runs in it, which also saves
    their start-up on every grading."""
    return [entry for entry in sys.path[1:] if entry and os.path.exists(entry)]


def harness_command(base: Path, *options: str) -> list[str]:
    return [sys.executable, "-I", "-S", "-c",
            bootstrap(str(HARNESS_PACKAGE.parent), "grader.harness.__main__", "main", harness_paths()),
            str(base), *options]


class WaitingHarness:
    """A harness process started in a fresh job folder, waiting for its job on its standard input, and
    what it prints going to `output`. A grading claims it (`claim`); otherwise `discard` ends it.
    (A plain class: this module is imported before the harness starts, and a dataclass's import is not
    light.)"""

    def __init__(self, process: subprocess.Popen[bytes], base: Path, output: IO[bytes]) -> None:
        self.process, self.base, self.output = process, base, output
        self.claimed = False

    def claim(self, parent: Path) -> bool:
        """Take this harness for a grading whose job folder belongs in `parent`: False when it sits
        elsewhere, has ended, or was taken already (it is then discarded)."""
        if self.claimed or self.base.parent != parent or self.process.poll() is not None:
            self.discard()
            return False
        self.claimed = True
        return True

    def discard(self) -> None:
        """End it and remove its folder, unless a grading claimed it (the grading ends it then)."""
        if self.claimed:
            return
        self.claimed = True
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.output.close()
        remove_owned_folder(self.base)


def start_harness_process(base: Path, *options: str, pass_fds: tuple[int, ...] = ()) -> WaitingHarness:
    """The harness's interpreter started in `base` (a job folder this process made), with its output
    kept in a file of that folder."""
    output = tempfile.TemporaryFile(dir=base)
    try:
        process = subprocess.Popen(harness_command(base, *options), stdin=subprocess.PIPE, stdout=output,
                                   stderr=subprocess.STDOUT, cwd=base, env=HARNESS_ENV, start_new_session=True,
                                   pass_fds=pass_fds)
    except BaseException:
        output.close()
        raise
    return WaitingHarness(process, base, output)


# The harness `start_first` started, until a grading takes it (`early_harness`) or the command ends it.
_first: WaitingHarness | None = None


def local_likely(sandbox: str) -> bool:
    """Whether a grading with `--sandbox sandbox` will likely run in the local sandbox: `local`, or `auto`
    with no Docker engine in sight."""
    return sandbox == "local" or (sandbox == "auto" and not engine_in_sight())


def sandbox_named(arguments: list[str]) -> str:
    """The `--sandbox` of a command's arguments as a first look sees them (`--sandbox X`, `--sandbox=X`),
    `auto` otherwise. Only a guess: the parsed command line decides what is done with the harness."""
    for index, argument in enumerate(arguments):
        if argument == "--sandbox" and index + 1 < len(arguments):
            return arguments[index + 1]
        if argument.startswith("--sandbox="):
            return argument.partition("=")[2]
    return "auto"


def start_first(arguments: list[str]) -> None:
    """Start the harness of `grader grade ARGUMENTS` before anything else, where it will likely be local."""
    global _first
    if _first is None and local_likely(sandbox_named(arguments)):
        _first = _start_waiting()


def discard_first() -> None:
    """End the harness `start_first` started, unless a grading took it."""
    global _first
    first, _first = _first, None
    if first is not None:
        first.discard()


def early_harness(sandbox: str) -> WaitingHarness | None:
    """A harness started early for a grading that will likely run in the local sandbox (`--sandbox local`,
    or `auto` with no Docker engine in sight), else None: the one `start_first` started, else one started
    now. Nothing is lost when it cannot start: the grading then starts its own."""
    global _first
    first, _first = _first, None
    if not local_likely(sandbox):
        if first is not None:
            first.discard()
        return None
    if first is not None and first.process.poll() is None:
        return first
    if first is not None:
        first.discard()
    return _start_waiting()


def _start_waiting() -> WaitingHarness | None:
    try:
        base = make_job_folder(jobs_root())
    except Exception:
        return None
    try:
        return start_harness_process(base)
    except OSError:
        remove_owned_folder(base)
        return None
