"""How a confinement is made with bubblewrap: the command line, the environment its processes start
with, and the account name a worker has. The host uses it to confine the harness, the harness to
confine the workers: the same namespaces on both levels, written once.
"""

from __future__ import annotations

import os

# Where the worker finds its code inside a namespaced sandbox.
SANDBOX_CODE = "/grader/worker.zip"
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


def bwrap_arguments(bwrap: str, code_fd: int, accounts: dict[str, int] | None = None, disk_mb: int = 64,
                    seccomp_fd: int | None = None, info_fd: int | None = None) -> list[str]:
    """The bubblewrap command line, up to the program it runs (see `grader.harness.confine`). `accounts`:
    a descriptor for each of `account_files`; `disk_mb`: the size of /tmp and of /dev/shm each (the
    exercise's `disk_mb`, the size of the Docker sandbox's /tmp); `seccomp_fd`: `seccomp_program`;
    `info_fd`: a pipe bubblewrap writes its information to (the pid of the namespace's first process).

    The command is PID 1 of the namespace (`--as-pid-1`: no init of bubblewrap's beside it, a process
    that would run as the worker's account without the worker's limits, traceable by every worker). A
    namespace's PID 1 gets no signal from inside it that it has no handler for, and when it ends the
    kernel ends every process of the namespace. The only writable places are the two sized tmpfs: the
    root and /dev, tmpfs of bubblewrap's without a size, are made read-only once everything is there."""
    arguments = [bwrap, "--unshare-all", "--as-pid-1", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
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
    size = str(disk_mb * 1024 * 1024)
    arguments += ["--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
                  "--size", size, "--tmpfs", "/tmp", "--chdir", "/tmp",
                  "--ro-bind-data", str(code_fd), SANDBOX_CODE]
    if seccomp_fd is not None:
        arguments += ["--seccomp", str(seccomp_fd)]
    if info_fd is not None:  # where bubblewrap tells the pid of the namespace's first process, then closes
        arguments += ["--info-fd", str(info_fd)]
    return arguments + ["--remount-ro", "/", "--"]
