"""Holds memory that no address-space limit counts: memory files, shared memory, pipes and sockets.
expect: failed, crashed

schedule() starts three processes that each fill, and keep, memory in every form a process can hold
outside its address space: memory files (memfd_create) never mapped, files in /dev/shm and /tmp,
pipes grown to their largest and filled, socket pairs filled to their buffers; then its address space
too, to its limit (three of them are more than a 768 MB platform container holds). Each reports what
it holds; the call raises with the total ("held N MiB in all"), counting what a process that ended left in
files. The grading's memory must stay within its limit whatever the form: the routes are refused or
its control group's limit ends the processes, short of memory the kernel ends the submission's
processes and never the grader's, and the total it reports stays under that limit.
"""

import fcntl
import os
import socket
import time
from collections import deque

MIB = 1 << 20
TARGET_MIB = 1536  # per process: well past any grading's limit
F_SETPIPE_SZ = 1031


def _fill(report):
    held = []
    total = in_files = 0

    def tell(amount, kept=False):
        nonlocal total, in_files
        total += amount
        in_files += amount if kept else 0
        try:
            os.write(report, f"{total} {in_files}\n".encode())
        except OSError:
            pass

    block = b"\x5a" * MIB
    try:  # memory files, never mapped
        for _ in range(TARGET_MIB):
            fd = os.memfd_create("hold")
            for _ in range(64):
                os.write(fd, block)
                tell(1)
            held.append(fd)
    except OSError:
        pass
    for folder in ("/dev/shm", "/tmp", os.environ.get("TMPDIR", "/tmp")):
        try:
            with open(os.path.join(folder, f"hold-{os.getpid()}-{len(held)}"), "wb") as file:
                for _ in range(TARGET_MIB):
                    file.write(block)
                    file.flush()
                    tell(1, kept=True)
        except OSError:
            pass
    try:  # pipes at their largest, full
        while total < TARGET_MIB:
            r, w = os.pipe()
            held += [r, w]
            try:
                fcntl.fcntl(w, F_SETPIPE_SZ, MIB)
            except OSError:
                pass
            os.set_blocking(w, False)
            written = 0
            try:
                while True:
                    written += os.write(w, block)
            except BlockingIOError:
                pass
            tell(written // MIB)
    except OSError:
        pass
    try:  # socket pairs, full both ways
        while total < TARGET_MIB:
            a, b = socket.socketpair()
            held += [a, b]
            for end in (a, b):
                end.setblocking(False)
                try:
                    while True:
                        end.send(block)
                except (BlockingIOError, OSError):
                    pass
            tell(1)
    except OSError:
        pass
    grown = []
    try:  # and the address space, to its limit
        while total < 4 * TARGET_MIB:
            grown.append(bytearray(block))
            tell(1)
    except MemoryError:
        pass
    time.sleep(30)


class Req:
    def __init__(self, rid, prompt_len, max_new, prefilled=0, generated=0):
        self.rid, self.prompt_len, self.max_new = rid, prompt_len, max_new
        self.prefilled, self.generated = prefilled, generated


class Scheduler:
    def __init__(self, token_budget, max_seqs, kv_tokens):
        self.waiting, self.running = deque(), []

    def add(self, req):
        self.waiting.append(req)

    def schedule(self):
        reports = []
        for _ in range(3):
            r, w = os.pipe()
            if os.fork() == 0:
                os.close(r)
                try:
                    _fill(w)
                finally:
                    os._exit(0)
            os.close(w)
            reports.append(r)
        held = {r: (0, 0) for r in reports}  # (all it holds, what of it stays in files once it ends)
        unread = {r: b"" for r in reports}
        end = time.monotonic() + 3.5
        while time.monotonic() < end and reports:
            for r in list(reports):
                os.set_blocking(r, False)
                try:
                    data = os.read(r, 1 << 16)
                except BlockingIOError:
                    continue
                if not data:  # it ended: what it held goes with it, but for its files
                    reports.remove(r)
                    held[r] = (held[r][1], held[r][1])
                    continue
                *lines, unread[r] = (unread[r] + data).split(b"\n")
                if lines:
                    total, in_files = lines[-1].split()
                    held[r] = (int(total), int(in_files))
            time.sleep(0.05)
        raise RuntimeError(f"held {sum(total for total, _ in held.values())} MiB in all")

    def complete(self, plan):
        return []
