"""A fork server for workers, inside the worker's confinement: one clean interpreter per grading that
forks a fresh worker per test.

Starting a Python interpreter for every test costs tens of milliseconds; forking a process that has
already started costs one or two. The zygote is started by the harness before the first test, as the
worker's user, under the worker's limits and inside the worker's confinement (see `confine`), and it
never imports a submission or anything secret: it compiles the submission once (which runs none of
its code, and the code each worker runs stays the file as it came, whatever an earlier worker did to
it), and each child imports it from that, after the fork, in a fresh session, in a fresh folder of
its own that the zygote made (as the worker's user: the trusted side never creates, owns or removes
anything a worker can write). The zygote makes itself non-dumpable, so its children cannot trace it
or read its memory; if one kills or stops it anyway, the harness tears the whole confinement down and
starts a new one, and that submission only slows its own grading.

Under the namespaces isolation the pids the zygote reports are those of the worker's own PID
namespace: the harness never signals them itself, it asks the zygote (and, failing that, ends the
whole confinement).

Messages on the zygote's socket (SOCK_SEQPACKET, JSON, file descriptors passed alongside):
    harness -> zygote   {"op": "load", "name"} + [the submission]   keep it as the file `name`
                        {"op": "fork", "env", "module"} + [to_worker_r, from_worker_w, output]
                        {"op": "kill", "pid": n}      kill that worker's group (no answer)
                        {"op": "sweep", "keep": [n]}  kill every other process of the namespace
    zygote -> harness   {"pid": n}   once per fork
                        {"swept": k}   once per sweep
                        {"exit": n, "code": c}   whenever a child ends (c as Popen.returncode)
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
from typing import Any

from grader.harness.forking import ChildWatch

PR_SET_DUMPABLE = 4
# Standard modules a solution commonly imports, loaded once here so that each worker inherits them
# instead of importing them again (dataclasses alone costs about 10 ms a worker). Nothing of a
# submission is involved: they are the standard library's, loaded before any submission exists.
PRELOADED = ("abc", "bisect", "collections", "dataclasses", "enum", "functools", "heapq", "itertools", "math",
             "operator", "random", "re", "typing")


def serve() -> None:
    import importlib

    from grader.harness import worker  # imported once here, inherited by every child

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
    worker.apply_limits(limits)  # the process limit is set in each child: it counts this user's processes
    try:
        import ctypes

        ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    channel = socket.socket(fileno=config["fd"])
    scratch_root = config["scratch"]
    folders: dict[int, str] = {}
    submission = ""
    code = None
    children = ChildWatch()
    while True:
        ready, _, _ = select.select([channel, children.fd], [], [])
        if children.fd in ready:
            _report_exits(channel, folders, children)
        if channel in ready:
            try:
                data, fds, _, _ = socket.recv_fds(channel, 65536, 3)
            except OSError:
                os._exit(0)
            if not data:
                os._exit(0)  # the harness is gone
            request = json.loads(data)
            op = request.get("op")
            if op == "load":
                submission = _keep(fds[0], str(request["name"]), scratch_root)
                code = _compiled(submission)
            elif op == "kill":
                _kill_tree(int(request["pid"]))
            elif op == "sweep":
                channel.send(json.dumps({"swept": _sweep(set(request["keep"]))}).encode())
            elif op == "fork":
                folder = tempfile.mkdtemp(prefix="worker-", dir=scratch_root)
                pid = os.fork()
                if pid == 0:
                    _become_worker(worker, channel, children, request, fds, processes, folder, submission, code)
                folders[pid] = folder
                channel.send(json.dumps({"pid": pid}).encode())
            for fd in fds:
                os.close(fd)


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
    """Kill every process this namespace holds but the zygote, its init and `keep` (the spare worker)."""
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


def _report_exits(channel: socket.socket, folders: dict[int, str], children: ChildWatch) -> None:
    for pid, code in children.ended():
        folder = folders.pop(pid, None)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        channel.send(json.dumps({"exit": pid, "code": code}).encode())


def _become_worker(worker: Any, channel: socket.socket, children: ChildWatch, request: dict[str, Any],
                   fds: list[int], processes: int | None, folder: str, submission: str, code: Any) -> None:
    try:
        children.forget()
        channel.close()
        to_worker_r, from_worker_w, output = fds
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(output, 1)
        os.dup2(output, 2)
        # The two pipe ends become 3 and 4; every other descriptor is closed.
        os.dup2(to_worker_r, 3)
        os.dup2(from_worker_w, 4)
        os.closerange(5, 65536)
        try:
            os.chdir(folder)
        except OSError:  # an earlier worker of the same submission moved it: its own loss, not a crash
            folder = "/"
            os.chdir(folder)
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ["HOME"] = folder
        if processes:
            import resource

            resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
        worker.Worker(submission, request["module"], 3, 4, code).serve()
    finally:
        os._exit(0)
