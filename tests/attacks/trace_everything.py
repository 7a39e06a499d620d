"""Tries to trace every other process it sees (ptrace, /proc/PID/mem, process_vm_readv) and forks to its limit.
expect: failed

A process that a worker can trace or whose memory it can write runs whatever the worker injects, with
that process's own limits: bubblewrap's init as PID 1 of the namespace had none. This attack reports,
as its failure message, each process it sees with what it could do to it and the limits that process
has (`/proc/PID/limits`), then how many processes the namespace held at the peak of a fork loop. A
process it reached is detached again and left running; it never injects anything.
"""

import ctypes
import errno
import os
import time
from collections import deque

PTRACE_ATTACH, PTRACE_DETACH = 16, 17
LIMITS = {"Max address space": "as", "Max processes": "nproc", "Max file size": "fsize"}


def _limits(pid):
    found = {}
    try:
        with open(f"/proc/{pid}/limits") as handle:
            for line in handle:
                for label, short in LIMITS.items():
                    if line.startswith(label):
                        found[short] = line[len(label):].split()[0]
    except OSError as exc:
        found["error"] = exc.strerror
    return found


def _probe(libc, pid):
    seen = {"limits": _limits(pid)}
    try:
        with open(f"/proc/{pid}/comm") as handle:
            seen["comm"] = handle.read().strip()[:20]
    except OSError:
        seen["comm"] = "?"
    try:
        os.close(os.open(f"/proc/{pid}/mem", os.O_RDWR))
        seen["mem"] = "OPENED"
    except OSError as exc:
        seen["mem"] = exc.strerror
    if libc.ptrace(PTRACE_ATTACH, pid, None, None) == 0:
        seen["ptrace"] = "ATTACHED"
        try:
            os.waitpid(pid, 0x40000000)  # __WALL: the attach stops it
        except OSError:
            pass
        libc.ptrace(PTRACE_DETACH, pid, None, 0)
    else:
        seen["ptrace"] = os.strerror(ctypes.get_errno())
    local = (ctypes.c_char * 8)()
    iov = (ctypes.c_void_p * 2)(ctypes.addressof(local), 8)
    far = (ctypes.c_void_p * 2)(0x400000, 8)
    # A bad address (EFAULT) means the access check let it through: that counts as read.
    if libc.process_vm_readv(pid, iov, 1, far, 1, 0) >= 0 or ctypes.get_errno() == errno.EFAULT:
        seen["vm_read"] = "READ"
    else:
        seen["vm_read"] = os.strerror(ctypes.get_errno())
    return seen


def _fork_peak():
    """Fork sleeping children until refused; the number of processes the namespace then holds."""
    children = []
    try:
        while len(children) < 500:
            pid = os.fork()
            if pid == 0:
                time.sleep(30)
                os._exit(0)
            children.append(pid)
    except OSError:
        pass
    peak = sum(1 for entry in os.listdir("/proc") if entry.isdigit())
    for pid in children:
        try:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        except OSError:
            pass
    return peak


def _trace_all():
    libc = ctypes.CDLL(None, use_errno=True)
    me = os.getpid()
    report = []
    for entry in sorted(os.listdir("/proc"), key=lambda name: (len(name), name)):
        if entry.isdigit() and int(entry) != me:
            seen = _probe(libc, int(entry))
            report.append(f"pid {entry} {seen['comm']}: ptrace {seen['ptrace']}, mem {seen['mem']}, "
                          f"vm {seen['vm_read']}, limits {seen['limits']}")
    own = _limits(me)
    raise RuntimeError(f"TRACE own limits {own}; " + "; ".join(report[:30])
                       + f"; FORK peak {_fork_peak()} processes")


class Req:
    def __init__(self, rid, prompt_len, max_new, prefilled=0, generated=0):
        self.rid, self.prompt_len, self.max_new = rid, prompt_len, max_new
        self.prefilled, self.generated = prefilled, generated


class Scheduler:
    def __init__(self, token_budget, max_seqs, kv_tokens):
        self.waiting, self.running = deque(), []

    def add(self, req):
        self.waiting.append(req)  # never rejects an impossible request

    def schedule(self):
        _trace_all()

    def complete(self, plan):
        _trace_all()
