"""A fork server for workers, inside the worker's confinement: one clean interpreter per grading that
forks a fresh worker per test.

Starting a Python interpreter for every test costs tens of milliseconds; forking a process that has
already started costs one or two. The zygote is started by the harness before the first test, as the
worker's user, under the worker's limits and inside the worker's confinement (see `confine`), and it
never imports a submission or anything secret: it compiles the submission once (which runs none of
its code, and the code each worker runs stays the file as it came, whatever an earlier worker did to
it), and each child imports it from that, after the fork, in a fresh session, in a fresh folder of
its own that the zygote made (as the worker's user: the trusted side never creates, owns or removes
anything a worker can write). Once a worker's import has succeeded, the zygote forks a `loader` that
imports the submission once; later workers are forked from it (the zygote still makes their folders,
reports their ends and does everything the harness asks), unless the import left something a fork
would not carry over (see `loader`). The zygote makes itself non-dumpable, so its children cannot
trace it or read its memory. Under the namespaces isolation it is the namespace's PID 1 (bubblewrap
starts no init beside it): every process a worker can reach is then a worker's, under the worker's
limits; the kernel keeps a worker's SIGKILL and SIGSTOP from it (and it ignores SIGINT), and its end
ends the namespace. Without a namespace, if a worker kills or stops it anyway, the harness tears the
whole confinement down and starts a new one, and that submission only slows its own grading.

Under the namespaces isolation the pids the zygote reports are those of the worker's own PID
namespace: the harness never signals them itself, it asks the zygote (and, failing that, ends the
whole confinement).

Messages on the zygote's socket (`control`): the harness loads a submission (kept as a file of the
zygote's own), orders forks, kills a worker's group (no answer) and sweeps whatever else runs in the
namespace; the zygote answers each fork with a pid or a refusal, each sweep with the number killed, and
says whenever a worker ends (its code as Popen.returncode).
"""

from __future__ import annotations

import gc
import json
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
from types import ModuleType
from typing import Any

from grader.confined import control, loader
from grader.confined.forking import PR_SET_CHILD_SUBREAPER, PR_SET_DUMPABLE, ChildWatch, become_worker, prctl

# Standard modules a solution commonly imports, loaded once here so that each worker inherits them
# instead of importing them again (dataclasses is the costly one). Nothing of a
# submission is involved: they are the standard library's, loaded before any submission exists.
PRELOADED = ("abc", "bisect", "collections", "dataclasses", "enum", "functools", "heapq", "itertools", "math",
             "operator", "random", "re", "typing")


def serve() -> None:
    """The zygote's life: load what every worker shares, take the harness's configuration (the last
    argument), then answer the harness until it is gone."""
    worker = _preload()
    Zygote(worker, json.loads(sys.argv[-1])).run()


def _preload() -> ModuleType:
    """The worker's code and the standard modules solutions use, loaded once here and inherited by every
    child; returns the worker module."""
    import importlib

    from grader.confined import worker  # imported once here, inherited by every child

    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    # What is loaded now lives as long as every worker: out of the collector's sight, a worker's full
    # collections skip it, and forked children don't copy its pages by touching their gc headers.
    gc.collect()
    gc.freeze()
    return worker


class Zygote:
    """One grading's fork server: the submission it holds, the workers it forked (with their folders),
    the loader workers are forked from once there is one, and the harness's socket it answers on."""

    def __init__(self, worker: ModuleType, config: dict[str, Any]) -> None:
        from grader.confined.limits import apply_limits
        from grader.confined.printing import keep_printing

        self.worker = worker
        limits = dict(config["limits"])
        self.processes = limits.pop("processes", None)
        apply_limits(limits)  # the process limit is set in each child: it counts this user's processes
        keep_printing()
        prctl(PR_SET_DUMPABLE, 0)
        if config.get("subreaper"):
            # Workers whose loader died are reparented here, so that their ends are still reported.
            prctl(PR_SET_CHILD_SUBREAPER, 1)
        self.channel = socket.socket(fileno=config["fd"])
        self.scratch_root: str = config["scratch"]
        self.account = os.getuid() if config.get("account_is_own", True) else None  # loader.Loader.account
        restricted = config.get("restrict")
        if restricted is not None:
            self.scratch_root = _restrict(restricted, self.scratch_root)
        filtered = config.get("seccomp")
        if filtered is not None:
            _filter(bool(filtered.get("network")))
        self.folders: dict[int, str] = {}  # each worker's folder, removed when its end is reported
        self.submission = ""
        self.code: Any = None  # the submission compiled (`_compiled`)
        self.children = ChildWatch()
        if os.getpid() == 1:
            # The namespace's PID 1 (bwrap --as-pid-1): a signal from a worker reaches it only through a handler
            # it has, and Python's for SIGINT would end it (and the namespace with it). Its children get
            # Python's back (`ChildWatch.forget`).
            self.children.ignore(signal.SIGINT)
        self.own_forks = 0
        self.current: loader.Loader | None = None
        self.pid = os.getpid()
        self.loaders: set[int] = set()  # never reported: the harness knows no loader

    def report(self, pid: int, status: int) -> None:
        """Tell the harness that a worker ended, once its folder is gone."""
        folder = self.folders.pop(pid, None)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        control.send(self.channel, {control.EXIT: pid, control.CODE: status})

    def drop(self, reason: str) -> None:
        """Set the loader aside: workers import the submission themselves from now on."""
        if self.current is not None:
            print(f"zygote: the loader is set aside ({reason}); workers import the submission", flush=True)
            self.current.end()
            self.current = None

    def run(self) -> None:
        """Wait for whatever comes first (an order, a child's end, the loader's word, the loader's import
        deadline) and deal with it; the zygote ends when the harness is gone."""
        channel, children = self.channel, self.children
        while True:
            current = self.current
            waiting: list[socket.socket | ChildWatch] = [channel, children]
            if current is not None:
                waiting.append(current.sock)
            timeout = None if current is None or current.ready else max(0.0, current.deadline - time.monotonic())
            ready, _, _ = select.select(waiting, [], [], timeout)
            if current is not None and not current.ready and time.monotonic() >= current.deadline:
                self.drop("its import took too long")
            if children in ready:
                for pid, status in children.ended():
                    if pid not in self.loaders:
                        self.report(pid, status)
            current = self.current
            if current is not None and current.sock in ready:
                try:
                    current.note(current.receive(), self.report)
                except loader.LoaderGone as gone:
                    self.drop(str(gone))
            if channel in ready:
                self.answer()

    def answer(self) -> None:
        """Take the harness's next order (with the descriptors it brought) and carry it out."""
        try:
            data, fds, _, _ = socket.recv_fds(self.channel, control.MAX_BYTES, 3)
        except OSError:
            os._exit(0)
        if not data:
            os._exit(0)  # the harness is gone
        request = control.decode(data)
        op = request.get(control.OP)
        if op == control.LOAD:
            self.drop("a new submission")
            self.submission = _keep(fds[0], str(request[control.NAME]), self.scratch_root)
            self.code = _compiled(self.submission)
        elif op == control.KILL:
            _kill_tree(int(request[control.PID]))
        elif op == control.SWEEP:
            keep = set(request[control.KEEP]) | ({self.current.pid} if self.current is not None else set())
            control.send(self.channel, {control.SWEPT: _sweep(keep)})
        elif op == control.FORK:
            self.fork(request, fds)
        for fd in fds:
            os.close(fd)

    def fork(self, request: dict[str, Any], fds: list[int]) -> None:
        """A worker for the harness's order, in a folder of its own: from the loader when it serves the
        order, else forked here; the harness is told its pid, or why there is none."""
        folder = tempfile.mkdtemp(prefix="worker-", dir=self.scratch_root)
        pid, refused = 0, ""
        if self.current is not None and self.current.serves(request):
            try:
                pid = self.current.fork(folder, fds, self.report)
            except loader.LoaderGone as gone:
                self.drop(str(gone))
                if gone.sent:
                    # A worker of the loader's may hold this order's pipes: no other may get them. The
                    # harness starts a new confinement; this one ends when the test running in it does.
                    refused = f"the loader did not fork ({gone})"
        if refused:
            shutil.rmtree(folder, ignore_errors=True)
            control.send(self.channel, {control.REFUSED: refused[:300]})
            return
        if not pid:
            pid = self.fork_own(request, fds, folder)
        self.folders[pid] = folder
        control.send(self.channel, {control.PID: pid})

    def fork_own(self, request: dict[str, Any], fds: list[int], folder: str) -> int:
        """A worker forked here, which imports the submission itself; after the second, the loader."""
        pid = os.fork()
        if pid == 0:
            become_worker(self.worker, self.pid, self.channel, self.children, request, fds, self.processes, folder,
                          self.submission, self.code)
        self.own_forks += 1
        if self.own_forks == 2 and self.code is not None:
            # The harness orders a second worker only once the first one's import succeeded:
            # from now on the submission is imported once, in a loader, and workers forked there.
            self.current = loader.start(self.worker, self.children, self.channel, request, self.processes,
                                        tempfile.mkdtemp(prefix="loader-", dir=self.scratch_root), self.submission,
                                        self.code, self.account)
            self.loaders.add(self.current.pid)
        return pid


def _restrict(restricted: dict[str, Any], parent: str) -> str:
    """Without a namespace: a scratch folder of this account's own in `parent`, then the restrictions
    on this process and every worker it forks (Landlock to read the system and `read`, and to write
    only that folder and /dev/shm; seccomp without network). What the account
    leaves there is removed with the grading. Where the restrictions cannot be put in place the zygote
    ends before it serves: the harness reports its log, and the grading is an error."""
    from grader.confined.restrict import RestrictionFailed, confine_self

    scratch = tempfile.mkdtemp(prefix="grader-worker-", dir=parent)
    # The machine's /tmp is shared with every other account: the workers write (and read) only their own
    # scratch folder, which becomes their temporary folder, as a namespaced worker's /tmp is its own.
    os.environ["TMPDIR"] = scratch
    tempfile.tempdir = scratch
    try:
        confined = confine_self(read=restricted.get("read", []), write=[scratch, "/dev/shm"],
                                network=bool(restricted.get("network")))
    except (RestrictionFailed, OSError) as exc:
        print(f"zygote: the worker's restrictions could not be put in place ({exc})", flush=True)
        os._exit(3)
    print(f"zygote: restricted: {confined.describe()}", flush=True)
    return scratch


def _filter(network: bool) -> None:
    """In a container: the seccomp filter on this process and every worker it forks (no network socket
    unless `network`: the container's loopback is still there, and socket buffers are memory outside
    the address space). Where it cannot be put in place the zygote ends before it serves."""
    from grader.confined.restrict import RestrictionFailed, install_seccomp, seccomp_program

    program = seccomp_program(network=network)
    try:
        if program is None:
            raise RestrictionFailed("no seccomp filter is known for this machine")
        install_seccomp(program)
    except (RestrictionFailed, OSError) as exc:
        print(f"zygote: the worker's seccomp filter could not be put in place ({exc})", flush=True)
        os._exit(3)


def _keep(fd: int, name: str, scratch_root: str) -> str:
    """Copy the submission from the harness's descriptor into a folder of the zygote's own."""
    folder = tempfile.mkdtemp(prefix="submission-", dir=scratch_root)
    path = os.path.join(folder, os.path.basename(name))
    with os.fdopen(os.dup(fd), "rb") as source, open(path, "wb") as target:
        source.seek(0)
        target.write(source.read())
    return path


def _compiled(path: str) -> Any:
    """The submission compiled once, as its import would compile it, for every worker to run (compiling
    runs none of its code). None when it does not compile: each worker's import then reports why."""
    try:
        with open(path, "rb") as handle:
            return compile(handle.read(), path, "exec", dont_inherit=True)
    except Exception:
        return None


def _kill_tree(pid: int) -> None:
    for kill, target in ((os.killpg, pid), (os.kill, pid)):
        try:
            kill(target, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _sweep(keep: set[int]) -> int:
    """Kill every process this namespace holds but the zygote (its PID 1), the loader and the spare
    worker (`keep`)."""
    keep |= {1, os.getpid()}
    killed = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in keep:
            try:
                os.kill(int(entry), signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
    return killed
