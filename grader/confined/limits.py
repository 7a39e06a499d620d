"""Every limit in one place, with its default. `exercise.toml`'s [limits] table overrides them.

Both backends and the harness read this one type: the local backend and the worker turn it into
rlimits and deadlines, the Docker backend also into container settings.
"""

from __future__ import annotations

import resource
import signal
from dataclasses import asdict, dataclass, fields
from typing import Any

# Below these the grader's own processes cannot work (the worker's Python does not start under a smaller
# address space; the worker and its fork server need their pipes and files), so every student would fail.
MINIMUMS = {"memory_mb": 32, "open_files": 16}
# What a confinement's control group holds beside the worker's `memory_mb`: the grader's own processes
# there (bubblewrap, the zygote, the loader, the next test's worker while it imports).
GROUP_HEADROOM_MB = 160
# The grader's own processes under a worker's account: bubblewrap, the zygote, the loader, the next test's worker.
ACCOUNT_PROCESSES = 4


@dataclass(frozen=True)
class Limits:
    # The time limits count the submission's own time (its CPU, and the time it chose to sleep or block),
    # not the time its processes waited for a CPU that other work held (see grader/confined/clock.py).
    call_timeout_s: float = 5.0  # one call into the submission (a method or function call)
    import_timeout_s: float = 5.0  # importing the submission, once per worker
    test_timeout_s: float = 60.0  # one whole test, the harness's work on it included
    total_timeout_s: float = 600.0  # the whole grading: past it the tests left are not run
    memory_mb: int = 512  # the worker's address space; the container's memory (+ harness headroom)
    processes: int = 32  # processes and threads a test's worker may start, besides itself (see `nproc`)
    file_size_mb: int = 16  # the largest file the worker may write (its printed output included)
    open_files: int = 64
    cpu_s: int = 60  # CPU seconds of one worker
    cpus: float = 1.0  # CPUs for the worker in a container (the harness has one more of its own)
    disk_mb: int = 64  # the container's writable scratch space (tmpfs)
    output_kb: int = 8  # how much of a test's printed output the scorecard keeps (the tail)
    # Whether workers may open network sockets (TCP, UDP: on the sandbox's own loopback, never a network).
    # Refused unless an exercise needs them: their buffers are memory outside the address space.
    sockets: bool = False

    @classmethod
    def from_table(cls, table: dict[str, Any]) -> Limits:
        """Build from a TOML table, rejecting unknown names and values of the wrong kind."""
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        for name, value in table.items():
            if name not in known:
                raise ValueError(f"unknown limit {name!r}; known limits: {', '.join(sorted(known))}")
            if known[name].type in ("bool", bool):
                if type(value) is not bool:
                    raise ValueError(f"limit {name!r} must be true or false, got {value!r}")
                values[name] = value
                continue
            kind = float if known[name].type in ("float", float) else int
            if type(value) is bool or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
                raise ValueError(f"limit {name!r} must be a{'n integer' if kind is int else ' number'}, got {value!r}")
            if value <= 0:
                raise ValueError(f"limit {name!r} must be positive, got {value!r}")
            if value < MINIMUMS.get(name, 0):
                raise ValueError(f"limit {name!r} must be at least {MINIMUMS[name]} (the grader's own processes need "
                                 f"that much), got {value!r}")
            values[name] = kind(value)
        return cls(**values)

    @property
    def hard_stop_s(self) -> float:
        """Wall time after which the host stops a harness that has not ended: only a harness that stopped
        answering gets there. The harness ends a grading itself when its time runs out (the tests left
        are not run), and on a busy machine that time is charged time, which takes longer on the wall."""
        return self.total_timeout_s * 3 + 60

    @property
    def group_memory_mb(self) -> int:
        """The memory (every form: mapped, memory files, shared memory, tmpfs, pipe and socket buffers) of a
        confinement's control group, where it has one."""
        return self.memory_mb + GROUP_HEADROOM_MB

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def nproc(self) -> int:
        """The worker's RLIMIT_NPROC. The kernel counts every task of the worker's account: beside what
        the submission starts (`processes`) and the worker itself, the account runs the grader's own
        bubblewrap, zygote and loader and the next test's worker, which must not take from the
        submission's share (a pool of `processes` threads would otherwise fail whenever it starts all
        its threads before any is idle, as it does on a busy machine). A fork bomb stops at this bound."""
        return self.processes + 1 + ACCOUNT_PROCESSES

    def for_worker(self) -> dict[str, int]:
        return {
            "memory_mb": self.memory_mb, "file_size_mb": self.file_size_mb, "open_files": self.open_files,
            "cpu_s": self.cpu_s, "processes": self.nproc,
        }


def apply_limits(limits: dict[str, int]) -> None:
    """Resource limits on this process and what it starts, before any student code runs."""
    mib = 1024 * 1024
    wanted = {
        resource.RLIMIT_AS: limits["memory_mb"] * mib,
        resource.RLIMIT_FSIZE: limits["file_size_mb"] * mib,
        resource.RLIMIT_NOFILE: limits["open_files"],
        resource.RLIMIT_CPU: limits["cpu_s"],
        resource.RLIMIT_CORE: 0,
    }
    if limits.get("processes"):  # absent for the zygote, which sets it in each child
        wanted[resource.RLIMIT_NPROC] = limits["processes"]
    for which, value in wanted.items():
        _soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(which, (value, value))
    # Writing past the file-size limit should be an OSError the student sees, not a silent kill.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
