"""The harness's side of the worker's confinement: start it, fork workers in it, end it.

One `Confinement` per grading run holds the zygote (see `zygote`) inside the isolation the job asks
for (`contract.ISOLATIONS`):

- namespaces: `bwrap` runs the zygote in mount, PID, network, IPC, UTS and cgroup namespaces of its
  own, as the worker's user, with every capability dropped. It sees a read-only `/usr` (the Python it
  needs and its libraries), a fresh `/proc` and a read-only `/dev`, private tmpfs of the exercise's
  `disk_mb` as `/tmp` and `/dev/shm` (the only places it can write), and the worker's code, copied in
  from a descriptor the harness opened. Nothing of the host's folders, the project, the store, other
  jobs or the network. The zygote is the namespace's PID 1, non-dumpable, and a seccomp filter refuses
  every process in it ptrace and System V IPC (see `bwrap_arguments`). Pids inside are the namespace's:
  the harness signals workers only through the zygote, or ends the namespace by killing `bwrap`.
- container / account / none: the zygote is a plain process as the worker's account; the container
  confines it (for `account`, a container someone else started, with the zygote's own restrictions
  on top: see `restrict`; for `none`, nothing), and the harness may signal its children directly.

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
import threading
import time
from pathlib import Path
from typing import Any

from grader.confined import cgroups, control
from grader.confined.bubblewrap import SANDBOX_CODE, SANDBOX_ENV, WORKER_NAME, bwrap_arguments
from grader.confined.clock import process_state
from grader.confined.processes import kill_group
from grader.confined.restrict import seccomp_program
from grader.harness.contract import Job, bootstrap

# How long the harness waits for the zygote's answer (a fork, a sweep, a worker's end). A zygote is
# told from a slow one by its state, never by a fixed deadline that a busy machine trips: every
# `REPLY_CHECK_S` without an answer, a zygote that has ended or was stopped is given up at once, and one
# still there is waited for, up to `REPLY_PATIENCE_S` (one that has not answered in that long, alive
# and running, is stuck: no machine is that busy).
REPLY_CHECK_S = 1.0
REPLY_PATIENCE_S = 120.0
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


def _memory_file(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, 0)  # inheritable on purpose: bwrap reads it
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


class Confinement:
    """The worker's confinement for one grading run, and the zygote inside it."""

    def __init__(self, job: Job, base: str, number: int, account: list[int | None] | None = None,
                 log_name: str | None = None) -> None:
        """Start confinement `number` of this lane, as the job's worker account, or as `account` ([uid,
        gid]: another lane's, for it to take over at its fork), its zygote's log `log_name` in the job's
        private folder."""
        self.job, self.base, self.number = job, base, number
        user, group = account if account is not None else (job.worker_user, job.worker_group)
        self.namespaced = job.isolation == "namespaces"
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        program = self._zygote(theirs.fileno(), user is not None)
        privileges: dict[str, Any] = dict(user=user, group=group, extra_groups=[]) if user is not None else {}
        passed = [theirs.fileno()]
        # A control group of its own, where the harness may make one (root on a host): it counts every CPU
        # second and limits every page of the confinement, whatever a process does (see `cgroups`).
        self.group = cgroups.make_own(job.limits.group_memory_mb << 20) if user is not None else None
        info: tuple[int, int] | None = os.pipe() if self.group is not None and self.namespaced else None
        if info is not None:
            passed.append(info[1])  # bubblewrap's word of the pid of the namespace's first process
        if self.namespaced:
            wrapper, memory_files = self._bubblewrap(user, group, info[1] if info is not None else None)
            program, passed = wrapper + program, passed + memory_files
        self.final_cpu: float | None = None
        joining = self.group.join_fds() if self.group is not None else []
        self.log_path = os.path.join(job.at(base, job.private), log_name or f"zygote-{number}.log")
        log = private_file(self.log_path)
        try:
            self.process: subprocess.Popen[bytes] | Adopted = subprocess.Popen(
                program, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd="/",
                env=dict(SANDBOX_ENV), pass_fds=tuple(passed), start_new_session=True, **privileges)
        except BaseException:
            for fd in [*joining, *([info[0]] if info is not None else [])]:
                os.close(fd)
            if self.group is not None:
                self.group.remove()
            raise
        finally:
            os.close(log)
            for fd in passed[1:]:  # bubblewrap's copies (the info pipe's end among them): ours are closed
                os.close(fd)
            theirs.close()
        # The confinement's processes join the group while they start, not before: the kernel makes a join
        # wait for a grace period of its own (milliseconds to tens of them), which would otherwise hold up
        # this process and the zygote's start alike. Nothing of a submission runs before they are in: the
        # zygote forks no worker before it is asked to, and the first fork waits for the join (`joined`).
        self.join_failure: str | None = None
        self._joining: threading.Thread | None = None
        if joining:
            self._joining = threading.Thread(target=self._join, args=(joining, info[0] if info else None),
                                             name="confinement-join", daemon=True)
            self._joining.start()
        self.channel = ours
        self.exits: dict[int, int] = {}
        self.forking: list[ForkedProcess] = []  # the forks asked for whose answer has not been read yet
        self.broken = False
        self.loaded = False

    def _zygote(self, fd: int, lent_account: bool) -> list[str]:
        """The zygote's command line: its configuration (the harness's socket `fd` among it) the last
        argument. `lent_account`: it runs as an account lent to this grading alone."""
        job, base = self.job, self.base
        code_root = SANDBOX_CODE if self.namespaced else job.at(base, job.worker_code)
        config: dict[str, Any] = {
            "fd": fd, "limits": job.limits.for_worker(), "scratch": "/tmp",
            "subreaper": self.namespaced,  # outside a namespace the harness takes the orphans
            "job": str(base),  # the job's folder names the processes of this grading, for whoever looks
            # Whether every process the zygote's account has in its /proc is this grading's: in a namespace
            # of its own, or as an account lent to it alone; not as the grader's own account.
            "account_is_own": self.namespaced or lent_account}
        if job.isolation == "account":
            # No namespace to hide the machine: the zygote restricts itself (and so every worker) to
            # reading the system and its own code, and writing a folder of its own (`restrict`).
            config["restrict"] = {"read": [code_root], "network": job.limits.sockets}
        elif job.isolation == "container":
            # The container has a loopback of its own: no network socket there either, unless the exercise
            # needs them (their buffers are memory outside the address space), and the namespaced
            # sandbox's other refusals (`restrict`).
            config["seccomp"] = {"network": job.limits.sockets}
        return [job.worker_python, "-I", "-u", "-X", "faulthandler",
                "-c", bootstrap(code_root, "grader.confined.zygote", "serve"), json.dumps(config)]

    def _bubblewrap(self, user: int | None, group: int | None, info_fd: int | None) -> tuple[list[str], list[int]]:
        """bubblewrap's command line up to the zygote's, and the memory files it reads (the worker's code,
        the account's files, the seccomp filter): descriptors to pass it, closed once it has started."""
        job = self.job
        assert job.bwrap is not None
        code_fd = _memory_file("worker.zip", Path(job.at(self.base, job.worker_code)).read_bytes())
        uid = user if user is not None else os.getuid()
        gid = group if group is not None else os.getgid()
        accounts = {path: _memory_file(path.rsplit("/", 1)[1], data) for path, data in account_files(uid, gid).items()}
        refusals = seccomp_program(network=job.limits.sockets)
        seccomp_fd = _memory_file("seccomp", refusals) if refusals is not None else None
        arguments = bwrap_arguments(job.bwrap, code_fd, accounts, job.limits.disk_mb, seccomp_fd, info_fd)
        return arguments, [code_fd, *accounts.values(), *([seccomp_fd] if seccomp_fd is not None else [])]

    # -- requests ------------------------------------------------------------------------------------
    def load(self, name: str, source: bytes) -> None:
        """Hand the zygote the submission, which it keeps in its own folder for every worker it forks."""
        fd = _memory_file(name, source)
        try:
            control.send(self.channel, {control.OP: control.LOAD, control.NAME: name}, [fd])
            self.loaded = True
        except OSError:
            self.broken = True
        finally:
            os.close(fd)

    def _join(self, fds: list[int], info: int | None) -> None:
        """In a thread of this process's: put the confinement's processes in its control group (bubblewrap
        and the namespace's first process, which becomes the zygote; else the zygote)."""
        try:
            pids = [self.process.pid]
            if info is not None:
                said = b""
                while chunk := os.read(info, 4096):
                    said += chunk
                pids.append(int(json.loads(said)["child-pid"]))
            for fd in fds:
                for pid in pids:
                    os.write(fd, str(pid).encode())
        except (OSError, ValueError, KeyError, TypeError) as exc:
            self.join_failure = f"its processes could not join its control group ({exc})"
        finally:
            for fd in [*fds, *([info] if info is not None else [])]:
                os.close(fd)

    def joined(self) -> bool:
        """Wait until the confinement's processes are in its control group; False (the confinement then
        broken) when they could not be put there."""
        if self._joining is not None:
            self._joining.join()
            self._joining = None
            if self.join_failure is not None:
                self.broken = True
        return self.join_failure is None

    def fork(self, *, env: dict[str, str], module: str, fds: tuple[int, int, int], wait: bool = True) -> ForkedProcess:
        """A worker forked by the zygote. Without `wait`, the zygote's answer (the worker's pid, or its
        refusal) is read when it is first needed (`ForkedProcess.resolve`): a spare worker's fork then
        costs the test running meanwhile nothing."""
        if not self.joined():
            raise ZygoteUnavailable(f"the confinement is not whole: {self.join_failure}")
        if self.broken or not self.loaded:
            raise ZygoteUnavailable("the zygote is gone" if self.broken else "no submission was loaded")
        request = {control.OP: control.FORK, control.ENV: env, control.MODULE: module}
        try:
            control.send(self.channel, request, fds)
        except OSError as exc:
            self.broken = True
            raise ZygoteUnavailable(str(exc)) from None
        process = ForkedProcess(self)
        self.forking.append(process)  # the zygote answers its forks in order
        if wait:
            process.resolve()
        return process

    def kill(self, pid: int) -> None:
        """Kill one worker's group. Outside a PID namespace the harness does it itself as well."""
        if not self.namespaced:
            kill_group(_Pid(pid), timeout=0)
        if not self.broken:
            try:
                control.send(self.channel, {control.OP: control.KILL, control.PID: pid})
            except OSError:
                self.broken = True

    def sweep(self, keep: set[int]) -> bool:
        """Kill whatever else runs in the namespace (leftovers of a finished worker). False when the
        zygote does not answer: then only ending the whole confinement can clean up."""
        if not self.namespaced or self.broken:
            return not self.broken
        try:
            control.send(self.channel, {control.OP: control.SWEEP, control.KEEP: sorted(keep)})
            while control.SWEPT not in self._next(None):
                pass
            return True
        except (OSError, ValueError, KeyError, TypeError, ZygoteUnavailable):
            self.broken = True
            return False

    def _next(self, deadline: float | None) -> dict[str, Any]:
        """The next message; exit notes are filed in `exits` and returned too. Without a `deadline`,
        as long as the zygote is there to answer (see REPLY_PATIENCE_S)."""
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.channel], [], [], left)[0]:
                raise ZygoteUnavailable("the zygote did not answer in time")
        else:
            waited = time.monotonic()
            while not select.select([self.channel], [], [], REPLY_CHECK_S)[0]:
                problem = self.unable()
                if problem is None and time.monotonic() - waited >= REPLY_PATIENCE_S:
                    problem = f"the zygote did not answer within {REPLY_PATIENCE_S:g} s, though it was running"
                if problem is not None:
                    raise ZygoteUnavailable(problem)
        data = self.channel.recv(control.MAX_BYTES)
        if not data:
            raise ZygoteUnavailable("the zygote closed its socket")
        message = control.decode(data)
        if control.EXIT in message:
            self.exits[int(message[control.EXIT])] = int(message[control.CODE])
        elif (control.PID in message or control.REFUSED in message) and self.forking:
            self.forking.pop(0).answered(message)
        return message

    def adopt(self) -> None:
        """In the lane that takes this confinement over from the lane that started it (its parent, at the
        fork): watch its first process through a pidfd from now on. Raises OSError where there is none."""
        self.process = Adopted(self.process.pid)

    def unable(self) -> str | None:
        """Why the zygote cannot answer now (it ended, or it was stopped), or None while it can."""
        if isinstance(self.process, Adopted):
            if self.process.poll() is not None:
                return "the zygote's sandbox ended"
        elif self.process.poll() is not None:
            code = self.process.returncode
            how = f"signal {-code}" if code < 0 else f"exit status {code}"
            return f"the zygote's sandbox ended ({how})"
        if not self.namespaced and process_state(self.process.pid) in ("T", "t"):
            # Outside a namespace a worker of the same account can stop it; inside one it is out of reach.
            return "the zygote was stopped"
        return None

    def log_tail(self, limit: int = 2000) -> str:
        """The end of the zygote's log, for the reason of a grading its failure ended (the log itself
        is removed with the job's folder). Read, never acted on: it is shown as text."""
        try:
            fd = os.open(self.log_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            return ""
        with os.fdopen(fd, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            file.seek(max(0, size - limit))
            text = file.read(limit).decode("utf-8", "replace")
        return "".join(c if c.isprintable() or c == "\n" else "?" for c in text).strip()

    def exit_code(self, pid: int, timeout: float | None) -> int | None:
        """The worker's exit status once the zygote reports it; None if it has not by `timeout` seconds
        (without one: for as long as the zygote is there to report it)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while pid not in self.exits and not self.broken:
            try:
                self._next(deadline)
            except (ZygoteUnavailable, OSError, ValueError, KeyError, TypeError):
                if deadline is not None and time.monotonic() >= deadline:
                    return None
                self.broken = True
        return self.exits.get(pid)

    def cpu_seconds(self) -> float | None:
        """The CPU every process of this confinement has used (its control group), None without one."""
        if self.final_cpu is not None:
            return self.final_cpu
        return cgroups.cpu_seconds(self.group.cpu) if self.group is not None else None

    def close(self) -> None:
        """End the confinement: every process in it dies (under namespaces, with `bwrap` itself; with a
        control group, every process in the group and no other)."""
        self.joined()  # what is in the group when it ends is all there is to kill by it
        self.broken = True
        try:
            self.channel.close()
        except OSError:
            pass
        if self.group is not None:
            self.group.kill_all()
        kill_group(self.process)
        if isinstance(self.process, Adopted):
            os.close(self.process.pidfd)
        if self.group is not None and self.final_cpu is None:
            self.final_cpu = cgroups.cpu_seconds(self.group.cpu)
            self.group.remove()


class Adopted:
    """A confinement's first process that another lane of this grading started, and so reaps: only a
    parent can wait for a process and learn how it ended, so this lane watches it through a pidfd.
    The part of `subprocess.Popen`'s interface a confinement uses, with no exit status."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.pidfd = os.pidfd_open(pid)
        self.returncode: int | None = None  # never known here

    def poll(self) -> bool | None:
        """True once the process has ended, None while it runs."""
        return True if select.select([self.pidfd], [], [], 0)[0] else None

    def wait(self, timeout: float | None = None) -> None:
        if not select.select([self.pidfd], [], [], timeout)[0]:
            raise subprocess.TimeoutExpired("bwrap", timeout or 0.0)


class _Pid:
    def __init__(self, pid: int) -> None:
        self.pid = pid

    def wait(self, timeout: float | None = None) -> None:
        return None


def pid_in_namespace(root: int, pid: int) -> int | None:
    """The pid, as this process sees it, of the descendant of `root` whose pid in the PID namespace
    below this one is `pid` (`NSpid` of /proc/PID/status lists a process's pid in each namespace, from
    the one of this /proc down). A namespaced worker's pid is its namespace's: the harness reads its
    /proc entries (never signals it) by the pid found here."""
    seen, todo = 0, [root]
    while todo and seen < 4096:
        current = todo.pop()
        seen += 1
        try:
            with open(f"/proc/{current}/status", "rb") as file:
                for line in file:
                    if line.startswith(b"NSpid:"):
                        levels = line.split()[1:]
                        if len(levels) >= 2 and int(levels[1]) == pid and current != root:
                            return current
                        break
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children", "rb") as file:
                    todo.extend(int(child) for child in file.read().split())
        except (OSError, ValueError):
            continue
    return None


class ForkedProcess:
    """A worker forked by the zygote, with the part of `subprocess.Popen`'s interface the client uses."""

    def __init__(self, confinement: Confinement) -> None:
        self.confinement = confinement
        self._pid: int | None = None  # once the zygote has answered the fork
        self.refused: str | None = None
        self.returncode: int | None = None
        self._seen_as: int | None = None

    def answered(self, message: dict[str, Any]) -> None:
        if control.PID in message:
            self._pid = int(message[control.PID])
        else:
            self.refused = str(message[control.REFUSED])[:300]

    def resolve(self) -> int:
        """The worker's pid in the confinement, once the zygote has answered its fork (waiting for the
        answer, as long as the zygote is there to give it). ZygoteUnavailable when it refused the fork or
        did not answer: the confinement is then marked broken."""
        confinement = self.confinement
        while self._pid is None:
            if self.refused is not None:
                confinement.broken = True
                raise ZygoteUnavailable(f"the zygote refused the fork: {self.refused}")
            if confinement.broken:
                raise ZygoteUnavailable("the zygote is gone")
            try:
                confinement._next(None)
            except (OSError, ValueError, KeyError, TypeError, ZygoteUnavailable) as exc:
                confinement.broken = True
                raise ZygoteUnavailable(str(exc)) from None
        return self._pid

    @property
    def pid(self) -> int:
        return self.resolve()

    def _forked(self) -> bool:
        """Whether a worker exists to act on; a fork that never happened ends as killed (a zygote that is
        gone takes its workers along)."""
        try:
            self.resolve()
            return True
        except ZygoteUnavailable:
            if self.returncode is None:
                self.returncode = -signal.SIGKILL
            return False

    def seen_as(self) -> int | None:
        """The worker's pid in this process's /proc (for the time it waited for a CPU), None when it is
        gone or cannot be found."""
        if self.returncode is not None or not self._forked():
            return None
        if not self.confinement.namespaced:
            return self.pid
        if self._seen_as is None:
            self._seen_as = pid_in_namespace(self.confinement.process.pid, self.pid)
        return self._seen_as

    def kill(self, timeout: float | None = None, wait: bool = True) -> None:
        """Kill the worker's group and (unless `wait` is False: then `await_end` follows) wait for the
        zygote's note of its end."""
        if self.returncode is not None or not self._forked():
            return
        self.confinement.kill(self.pid)
        if wait:
            self.await_end(timeout)

    def await_end(self, timeout: float | None = None) -> bool:
        """Wait for the zygote's note of the worker's end (without a `timeout`: for as long as the
        zygote is there to give it). A zygote that does not give it is no longer trusted to keep order:
        the confinement is marked broken, to be ended; False then."""
        try:
            self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.confinement.broken = True
        return not self.confinement.broken

    def poll(self) -> int | None:
        if self.returncode is None and self._forked():
            self.returncode = self.confinement.exit_code(self.pid, 0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None and self._forked():
            self.returncode = self.confinement.exit_code(self.pid, timeout)
        if self.returncode is None:
            if self.confinement.broken:
                self.returncode = -signal.SIGKILL  # its note was lost with the zygote, which takes it along
                return self.returncode
            raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0)
        return self.returncode
