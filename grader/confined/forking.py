"""What the fork servers (the zygote, the harness fork server) share: noticing their children's ends.

Kept to the standard library's lightest modules: the zygote imports it on every grading.
"""

from __future__ import annotations

import os
import select
import signal
import socket
from collections.abc import Iterator
from typing import Any

from grader.confined import control

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
# A harness's exit status when its input closed before a grading's end: no submission came (a warm
# sandbox never used) or its host is gone. No one waits for its results.
INPUT_CLOSED = 4


_prctl: Any = None  # the C library's prctl, found once per process and inherited by its forks


def prctl(option: int, value: int) -> bool:
    """`prctl(option, value)` on this process; False where it failed or the C library has none.

    The function is looked up once: the fork servers call it before they fork, so a worker calls it
    without loading the C library again (a lookup in every worker touched a hundred pages of its
    parent's memory, each a copy-on-write fault)."""
    global _prctl
    try:
        if _prctl is None:
            import ctypes  # here, not at the top: only the processes that need it pay for it

            _prctl = ctypes.CDLL(None, use_errno=True).prctl
        return bool(_prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def die_with_parent(parent: int) -> None:
    """In a child just forked by `parent`, a single-threaded process: be killed when it ends (the
    kernel's parent-death signal), and end now if it already has."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def end_with_parent() -> None:
    """Kill this process when the process that started it ends, however it ends (a host killed outright
    takes its harness along instead of leaving it to grade for nobody, its workers running as an
    account the next grading may be given). Watched from a thread through a pidfd: the parent-death
    signal would follow the host's thread that started this process, and that thread may end first."""
    import threading

    parent = os.getppid()
    try:
        pidfd = os.pidfd_open(parent)
    except OSError:  # no pidfds here: a killed host leaves its harness running, as it always could
        return
    if os.getppid() != parent:  # it ended before it was watched
        os._exit(1)

    def watch() -> None:
        select.select([pidfd], [], [])
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="end-with-parent", daemon=True).start()


def end_with_input(stream: Any) -> None:
    """Leave, from a thread, once `stream` reaches its end: for a harness whose host holds its input open
    for the whole grading and whose parent it cannot watch (in a container the harness is the first
    process of its own PID namespace; the engine closes its input when the host's connection ends).
    Leaving ends the container, and with it every process the grading started there."""
    import threading

    fd = stream.fileno()

    def watch() -> None:
        while True:
            select.select([fd], [], [])
            try:
                if not os.read(fd, 65536):
                    break
            except OSError:
                break
        os._exit(INPUT_CLOSED)

    threading.Thread(target=watch, name="end-with-input", daemon=True).start()


def stat_fields(pid: int) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the command name (the process state first, then the parent
    pid, ...; see proc(5), field 3 onwards); None when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: the fields after the last ")" are fixed.
    return stat[stat.rfind(b")") + 2:].split()


PARENT_FIELD = 4  # proc(5)'s numbering of /proc/PID/stat
START_TIME_FIELD = 22  # in clock ticks since boot


def stat_number(pid: int, field: int) -> int | None:
    """Field `field` (as proc(5) numbers them, from 3) of /proc/PID/stat as an int; None when the
    process is gone or the field is not there."""
    fields = stat_fields(pid)
    try:
        return int(fields[field - 3]) if fields is not None else None
    except (ValueError, IndexError):
        return None


def parent_of(pid: int) -> int | None:
    """The parent pid of `pid`, from /proc; None when it is gone."""
    return stat_number(pid, PARENT_FIELD)


class ChildWatch:
    """A pipe that becomes readable whenever a child of this process ends (SIGCHLD, through
    `signal.set_wakeup_fd`), for a fork server's `select` loop."""

    def __init__(self) -> None:
        self.fd, self._write = os.pipe()
        self._given_back: dict[int, Any] = {}
        os.set_blocking(self._write, False)
        signal.set_wakeup_fd(self._write)
        signal.signal(signal.SIGCHLD, lambda *_: None)

    def fileno(self) -> int:
        """For `select`: the watch itself is waited on beside the sockets."""
        return self.fd

    def ended(self) -> Iterator[tuple[int, int]]:
        """(pid, exit code as `Popen.returncode`) of each child that has ended since, reaped."""
        os.read(self.fd, 4096)
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            yield pid, os.waitstatus_to_exitcode(status)

    def ignore(self, number: int) -> None:
        """Ignore signal `number` in this fork server, not in its children (`forget` gives theirs back)."""
        self._given_back.setdefault(number, signal.signal(number, signal.SIG_IGN))

    def forget(self) -> None:
        """In a forked child: leave the signals as they were and close the pipe."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for number, handler in self._given_back.items():
            signal.signal(number, handler)
        os.close(self.fd)
        os.close(self._write)


def settle(stdout: int, extra: list[int], folder: str, env: dict[str, str], processes: int | None) -> str:
    """In a fork server's child, before any submission code runs: /dev/null as standard input, `stdout`
    as standard output and error, `extra` as descriptors 3, 4, ... (every other one closed), `folder` as
    the working and home folder, `env` as the environment, and the account's process limit. Returns the
    folder in use."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(stdout, 1)
    os.dup2(stdout, 2)
    for number, fd in enumerate(extra, 3):
        os.dup2(fd, number)
    os.closerange(3 + len(extra), 65536)
    try:
        os.chdir(folder)
    except OSError:  # an earlier worker of the same submission moved it: its own loss, not a crash
        folder = "/"
        os.chdir(folder)
    own_temp = os.environ.get("TMPDIR")  # a restricted zygote's scratch folder (zygote._restrict)
    wanted = {**env, "HOME": folder, **({"TMPDIR": own_temp} if own_temp else {})}
    # Only what differs is changed: a loader's workers inherit its environment, all but HOME already as
    # wanted, and every variable set again cost a fresh worker its C environment's rewrite.
    environ = os.environ
    for name in [name for name in environ if name not in wanted]:
        del environ[name]
    for name, value in wanted.items():
        if environ.get(name) != value:
            environ[name] = value
    if processes:
        import resource

        resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
    prefer_to_be_killed()
    return folder


def prefer_to_be_killed() -> None:
    """Make this process (and what it starts) the out-of-memory killer's first choice, before any of the
    grader's: short of memory, the kernel ends the submission's process, never the grader (raising the
    score needs no privilege). A process forked from the non-dumpable zygote has its /proc files owned by
    root: it is dumpable for the moment of the write (no submission code has run yet), then not again."""
    prctl(PR_SET_DUMPABLE, 1)
    try:
        with open("/proc/self/oom_score_adj", "w", encoding="ascii") as file:
            file.write("1000")
    except OSError:
        pass
    finally:
        prctl(PR_SET_DUMPABLE, 0)


def become_worker(worker: Any, parent: int, channel: socket.socket, children: ChildWatch, request: dict[str, Any],
                  fds: list[int], processes: int | None, folder: str, submission: str, code: Any,
                  module: Any = None) -> None:
    """In a fork server's child (of `parent`): become the worker of one test, with the descriptors `fds`
    (its pipes and output), in a session and `folder` of its own, and serve; never returns. `module` is
    the submission already imported (by a loader), else the worker imports it. It ends with its fork
    server: without a PID namespace nothing else would end a worker busy in the submission's code when
    its grader is killed outright."""
    try:
        die_with_parent(parent)
        children.forget()
        channel.close()
        to_worker_r, from_worker_w, output = fds
        os.setsid()
        settle(output, [to_worker_r, from_worker_w], folder, request[control.ENV], processes)  # the pipes: 3 and 4
        worker.Worker(submission, request[control.MODULE], 3, 4, code, module=module).serve()
    finally:
        os._exit(0)
