"""The harness's side of the worker's confinement: start it, fork workers in it, end it.

One `Confinement` per grading run holds the zygote (see `zygote`) inside the isolation the job asks
for (`contract.ISOLATIONS`):

- namespaces: `bwrap` runs the zygote in mount, PID, network, IPC, UTS and cgroup namespaces of its
  own, as the worker's user, with every capability dropped. It sees a read-only `/usr` (the Python it
  needs and its libraries), a fresh `/proc` and `/dev`, a private tmpfs as `/tmp`, and the worker's
  code, copied in from a descriptor the harness opened. Nothing of the host's folders, the project,
  the store, other jobs or the network. Pids inside are the namespace's:
  the harness signals workers only through the zygote, or ends the namespace by killing `bwrap`.
- container / none: the zygote is a plain process as the worker's account; the container (or, for
  `none`, nothing) confines it, and the harness may signal its children directly.

A confinement is started before the submission exists (a warm sandbox waits for one ready to go);
the submission then reaches the zygote as a descriptor (`load`), and the zygote keeps its copy in its
own folder. The trusted side never acts by path on anything a worker can write: each worker's folder
is made and removed by the zygote (as the worker's user), and the files the harness hands a worker
(its output file, the zygote's log) are created in the harness's own private folder with
O_EXCL | O_NOFOLLOW.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from grader.harness.contract import SANDBOX_CODE, Job, bootstrap
from grader.harness.processes import kill_group

REPLY_TIMEOUT_S = 2.0
# The worker's own environment (`client.WORKER_ENV`) is set per worker; this is its fork server's, from
# which the worker inherits what its C library read at start: with at most two malloc arenas, each thread
# a submission starts reserves its stack and no 64 MiB arena of address space, so a pool of 32 threads
# fits the memory limit (RLIMIT_AS) as it fits a student's machine.
SANDBOX_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "MALLOC_ARENA_MAX": "2"}
# The name a worker's account has: a program that asks who runs it (getpass, pwd) gets an answer.
WORKER_NAME = "student"
# The system folders a worker's Python may need, read-only. On a merged-/usr system the top-level ones
# are symlinks into /usr and are recreated as such.
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


class ZygoteUnavailable(Exception):
    """The zygote did not answer: the confinement must be ended and started again."""


def private_file(path: str, mode: int = 0o600) -> int:
    """Create a new file in the harness's own folder, refusing to follow or reuse anything there."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)


def account_files(uid: int, gid: int) -> dict[str, bytes]:
    """/etc/passwd and /etc/group as a namespaced worker sees them: its own account among root's and
    nobody's (the machine's own are not shown)."""
    return {"/etc/passwd": (f"root:x:0:0:root:/root:/usr/sbin/nologin\n"
                            f"{WORKER_NAME}:x:{uid}:{gid}:{WORKER_NAME}:/tmp:/usr/sbin/nologin\n"
                            "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n").encode(),
            "/etc/group": f"root:x:0:\n{WORKER_NAME}:x:{gid}:\nnogroup:x:65534:\n".encode()}


def bwrap_arguments(bwrap: str, code_fd: int, accounts: dict[str, int] | None = None) -> list[str]:
    """The bubblewrap command line, up to the program it runs (see the module docstring). `accounts`:
    a descriptor for each of `account_files`."""
    arguments = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
                 "--clearenv", "--hostname", "sandbox", "--ro-bind", "/usr", "/usr"]
    for top in SYSTEM_LINKS:
        if os.path.islink(top):
            arguments += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            arguments += ["--ro-bind", top, top]
    for name, value in SANDBOX_ENV.items():
        arguments += ["--setenv", name, value]
    for path, fd in (accounts or {}).items():
        arguments += ["--ro-bind-data", str(fd), path]
    arguments += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--chdir", "/tmp",
                  "--ro-bind-data", str(code_fd), SANDBOX_CODE, "--"]
    return arguments


def _memory_file(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, 0)  # inheritable on purpose: bwrap reads it
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


class Confinement:
    """The worker's confinement for one grading run, and the zygote inside it."""

    def __init__(self, job: Job, base: str, number: int) -> None:
        self.job = job
        self.namespaced = job.isolation == "namespaces"
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        code_root = SANDBOX_CODE if self.namespaced else job.at(base, job.worker_code)
        config = {"fd": theirs.fileno(), "limits": job.limits.for_worker(), "scratch": "/tmp",
                  "subreaper": self.namespaced,  # outside a namespace the harness takes the orphans
                  "job": str(base)}  # the job's folder names the processes of this grading, for whoever looks
        program = [job.worker_python, "-I", "-u", "-X", "faulthandler",
                   "-c", bootstrap(code_root, "grader.harness.zygote", "serve"), json.dumps(config)]
        privileges: dict[str, Any] = {}
        if job.worker_user is not None:
            privileges = {"user": job.worker_user, "group": job.worker_group, "extra_groups": []}
        passed = [theirs.fileno()]
        if self.namespaced:
            assert job.bwrap is not None
            code_fd = _memory_file("worker.zip", Path(job.at(base, job.worker_code)).read_bytes())
            uid = job.worker_user if job.worker_user is not None else os.getuid()
            gid = job.worker_group if job.worker_group is not None else os.getgid()
            accounts = {path: _memory_file(path.rsplit("/", 1)[1], data) for path, data in account_files(uid, gid).items()}
            passed += [code_fd, *accounts.values()]
            program = bwrap_arguments(job.bwrap, code_fd, accounts) + program
        log = private_file(os.path.join(job.at(base, job.private), f"zygote-{number}.log"))
        try:
            self.process = subprocess.Popen(
                program, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd="/",
                env=dict(SANDBOX_ENV), pass_fds=tuple(passed), start_new_session=True, **privileges)
        finally:
            os.close(log)
            for fd in passed[1:]:
                os.close(fd)
            theirs.close()
        self.channel = ours
        self.exits: dict[int, int] = {}
        self.broken = False
        self.loaded = False

    # -- requests ------------------------------------------------------------------------------------
    def load(self, name: str, source: bytes) -> None:
        """Hand the zygote the submission, which it keeps in its own folder for every worker it forks."""
        fd = _memory_file(name, source)
        try:
            socket.send_fds(self.channel, [json.dumps({"op": "load", "name": name}).encode()], [fd])
            self.loaded = True
        except OSError:
            self.broken = True
        finally:
            os.close(fd)

    def fork(self, *, env: dict[str, str], module: str, fds: tuple[int, int, int]) -> "ForkedProcess":
        if self.broken or not self.loaded:
            raise ZygoteUnavailable("the zygote is gone" if self.broken else "no submission was loaded")
        request = {"op": "fork", "env": env, "module": module}
        try:
            socket.send_fds(self.channel, [json.dumps(request).encode()], list(fds))
            deadline = time.monotonic() + REPLY_TIMEOUT_S
            while True:
                message = self._next(deadline)
                if "pid" in message:
                    return ForkedProcess(self, int(message["pid"]))
                if "refused" in message:
                    raise ZygoteUnavailable(f"the zygote refused the fork: {str(message['refused'])[:300]}")
        except (OSError, ValueError, KeyError, TypeError, ZygoteUnavailable) as exc:
            self.broken = True
            raise ZygoteUnavailable(str(exc)) from None

    def kill(self, pid: int) -> None:
        """Kill one worker's group. Outside a PID namespace the harness does it itself as well."""
        if not self.namespaced:
            kill_group(_Pid(pid), timeout=0)
        if not self.broken:
            try:
                self.channel.send(json.dumps({"op": "kill", "pid": pid}).encode())
            except OSError:
                self.broken = True

    def sweep(self, keep: set[int]) -> bool:
        """Kill whatever else runs in the namespace (leftovers of a finished worker). False when the
        zygote does not answer: then only ending the whole confinement can clean up."""
        if not self.namespaced or self.broken:
            return not self.broken
        try:
            self.channel.send(json.dumps({"op": "sweep", "keep": sorted(keep)}).encode())
            deadline = time.monotonic() + REPLY_TIMEOUT_S
            while "swept" not in self._next(deadline):
                pass
            return True
        except (OSError, ValueError, KeyError, TypeError, ZygoteUnavailable):
            self.broken = True
            return False

    def _next(self, deadline: float) -> dict[str, Any]:
        """The next message; exit notes are filed in `exits` and returned too."""
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([self.channel], [], [], left)[0]:
            raise ZygoteUnavailable("the zygote did not answer in time")
        data = self.channel.recv(65536)
        if not data:
            raise ZygoteUnavailable("the zygote closed its socket")
        message = json.loads(data)
        if not isinstance(message, dict):
            raise ValueError("a message that is not an object")
        if "exit" in message:
            self.exits[int(message["exit"])] = int(message["code"])
        return message

    def exit_code(self, pid: int, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while pid not in self.exits and not self.broken:
            try:
                self._next(deadline)
            except (ZygoteUnavailable, OSError, ValueError, KeyError, TypeError):
                if time.monotonic() >= deadline:
                    return None
                self.broken = True
        return self.exits.get(pid)

    def close(self) -> None:
        """End the confinement: every process in it dies (under namespaces, with `bwrap` itself)."""
        self.broken = True
        try:
            self.channel.close()
        except OSError:
            pass
        kill_group(self.process)


class _Pid:
    def __init__(self, pid: int) -> None:
        self.pid = pid

    def wait(self, timeout: float | None = None) -> None:
        return None


class ForkedProcess:
    """A worker forked by the zygote, with the part of `subprocess.Popen`'s interface the client uses."""

    def __init__(self, confinement: Confinement, pid: int) -> None:
        self.confinement, self.pid = confinement, pid
        self.returncode: int | None = None

    def kill(self, timeout: float = 2.0, wait: bool = True) -> None:
        """Kill the worker's group and (unless `wait` is False: then `await_end` follows) wait for the
        zygote's note of its end."""
        if self.returncode is not None:
            return
        self.confinement.kill(self.pid)
        if wait:
            self.await_end(timeout)

    def await_end(self, timeout: float = 2.0) -> bool:
        """Wait for the zygote's note of the worker's end. A zygote that does not give it is no longer
        trusted to keep order: the confinement is marked broken, to be ended; False then."""
        try:
            self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.confinement.broken = True
        return not self.confinement.broken

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.confinement.exit_code(self.pid, 0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self.confinement.exit_code(self.pid, timeout if timeout is not None else 3600)
        if self.returncode is None:
            if self.confinement.broken:
                self.returncode = -signal.SIGKILL  # its note was lost with the zygote, which takes it along
                return self.returncode
            raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0)
        return self.returncode
