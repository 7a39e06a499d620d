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
from typing import Any

from grader.confined import control, loader
from grader.confined.forking import PR_SET_CHILD_SUBREAPER, PR_SET_DUMPABLE, ChildWatch, become_worker, prctl

# Standard modules a solution commonly imports, loaded once here so that each worker inherits them
# instead of importing them again (dataclasses is the costly one). Nothing of a
# submission is involved: they are the standard library's, loaded before any submission exists.
PRELOADED = ("abc", "bisect", "collections", "dataclasses", "enum", "functools", "heapq", "itertools", "math",
             "operator", "random", "re", "typing")


def serve() -> None:
    import importlib

    from grader.confined import worker  # imported once here, inherited by every child
    from grader.confined.limits import apply_limits
    from grader.confined.printing import keep_printing

    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    # What is loaded now lives as long as every worker: out of the collector's sight, a worker's full
    # collections skip it, and forked children don't copy its pages by touching their gc headers.
    gc.collect()
    gc.freeze()

    config = json.loads(sys.argv[-1])
    limits = dict(config["limits"])
    processes = limits.pop("processes", None)
    apply_limits(limits)  # the process limit is set in each child: it counts this user's processes
    keep_printing()
    prctl(PR_SET_DUMPABLE, 0)
    if config.get("subreaper"):
        # Workers whose loader died are reparented here, so that their ends are still reported.
        prctl(PR_SET_CHILD_SUBREAPER, 1)
    channel = socket.socket(fileno=config["fd"])
    scratch_root = config["scratch"]
    account = os.getuid() if config.get("account_is_own", True) else None  # loader.Loader.account
    restricted = config.get("restrict")
    if restricted is not None:
        scratch_root = _restrict(restricted, scratch_root)
    folders: dict[int, str] = {}
    submission = ""
    code = None
    children = ChildWatch()
    if os.getpid() == 1:
        # The namespace's PID 1 (bwrap --as-pid-1): a signal from a worker reaches it only through a handler
        # it has, and Python's for SIGINT would end it (and the namespace with it). Its children get
        # Python's back (`ChildWatch.forget`).
        children.ignore(signal.SIGINT)
    own_forks = 0
    current: loader.Loader | None = None
    zygote = os.getpid()
    loaders: set[int] = set()  # never reported: the harness knows no loader

    def report(pid: int, status: int) -> None:
        folder = folders.pop(pid, None)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        control.send(channel, {control.EXIT: pid, control.CODE: status})

    def drop(reason: str) -> None:
        nonlocal current
        if current is not None:
            print(f"zygote: the loader is set aside ({reason}); workers import the submission", flush=True)
            current.end()
            current = None

    while True:
        waiting: list[socket.socket | ChildWatch] = [channel, children]
        if current is not None:
            waiting.append(current.sock)
        timeout = None if current is None or current.ready else max(0.0, current.deadline - time.monotonic())
        ready, _, _ = select.select(waiting, [], [], timeout)
        if current is not None and not current.ready and time.monotonic() >= current.deadline:
            drop("its import took too long")
        if children in ready:
            for pid, status in children.ended():
                if pid not in loaders:
                    report(pid, status)
        if current is not None and current.sock in ready:
            try:
                current.note(current.receive(), report)
            except loader.LoaderGone as gone:
                drop(str(gone))
        if channel in ready:
            try:
                data, fds, _, _ = socket.recv_fds(channel, control.MAX_BYTES, 3)
            except OSError:
                os._exit(0)
            if not data:
                os._exit(0)  # the harness is gone
            request = control.decode(data)
            op = request.get(control.OP)
            if op == control.LOAD:
                drop("a new submission")
                submission = _keep(fds[0], str(request[control.NAME]), scratch_root)
                code = _compiled(submission)
            elif op == control.KILL:
                _kill_tree(int(request[control.PID]))
            elif op == control.SWEEP:
                keep = set(request[control.KEEP]) | ({current.pid} if current is not None else set())
                control.send(channel, {control.SWEPT: _sweep(keep)})
            elif op == control.FORK:
                folder = tempfile.mkdtemp(prefix="worker-", dir=scratch_root)
                pid, refused = 0, ""
                if current is not None and current.serves(request):
                    try:
                        pid = current.fork(folder, fds, report)
                    except loader.LoaderGone as gone:
                        drop(str(gone))
                        if gone.sent:
                            # A worker of the loader's may hold this order's pipes: no other may get them. The
                            # harness starts a new confinement; this one ends when the test running in it does.
                            refused = f"the loader did not fork ({gone})"
                if refused:
                    shutil.rmtree(folder, ignore_errors=True)
                    control.send(channel, {control.REFUSED: refused[:300]})
                else:
                    if not pid:
                        pid = os.fork()
                        if pid == 0:
                            become_worker(worker, zygote, channel, children, request, fds, processes, folder,
                                          submission, code)
                        own_forks += 1
                        if own_forks == 2 and code is not None:
                            # The harness orders a second worker only once the first one's import succeeded:
                            # from now on the submission is imported once, in a loader, and workers forked there.
                            current = loader.start(worker, children, channel, request, processes,
                                                   tempfile.mkdtemp(prefix="loader-", dir=scratch_root), submission,
                                                   code, account)
                            loaders.add(current.pid)
                    folders[pid] = folder
                    control.send(channel, {control.PID: pid})
            for fd in fds:
                os.close(fd)


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
        confined = confine_self(read=restricted.get("read", []), write=[scratch, "/dev/shm"])
    except (RestrictionFailed, OSError) as exc:
        print(f"zygote: the worker's restrictions could not be put in place ({exc})", flush=True)
        os._exit(3)
    print(f"zygote: restricted: {confined.describe()}", flush=True)
    return scratch


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
