"""Holds memory in loopback TCP and UDP socket buffers, which no address-space limit counts.
expect: failed, crashed

schedule() starts three processes that each open as many loopback TCP connections as their open-file
limit allows (a listener of their own, on the loopback every isolation leaves: a network namespace's,
a container's with no network) and fill them both ways without reading, then UDP sockets the same
way. Each reports what it holds; the call raises with the total ("held N MiB in all"). Socket buffers
are charged to the grading, or sockets of these families are refused: the total stays within the
grading's memory limit.
"""

import os
import socket
import time
from collections import deque

MIB = 1 << 20


def _hold(report):
    total = 0
    held = []

    def tell(amount):
        nonlocal total
        total += amount
        try:
            os.write(report, f"{total // MIB}\n".encode())
        except OSError:
            pass

    block = b"\x5a" * (1 << 16)
    try:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(512)
        held.append(listener)
        while True:
            client = socket.create_connection(listener.getsockname())
            server, _ = listener.accept()
            held += [client, server]
            for end in (client, server):
                end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * MIB)
                end.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * MIB)
                end.setblocking(False)
            for end in (client, server):
                try:
                    while True:
                        tell(end.send(block))
                except (BlockingIOError, OSError):
                    pass
    except OSError:
        pass
    try:
        while True:
            a = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            a.bind(("127.0.0.1", 0))
            a.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * MIB)
            held.append(a)
            sender = held[-2] if len(held) > 1 and held[-2].type == socket.SOCK_DGRAM else a
            sender.setblocking(False)
            try:
                for _ in range(4096):
                    tell(sender.sendto(block[:60000], a.getsockname()))
            except (BlockingIOError, OSError):
                pass
    except OSError:
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
                    _hold(w)
                finally:
                    os._exit(0)
            os.close(w)
            reports.append(r)
        held = {r: 0 for r in reports}
        unread = {r: b"" for r in reports}
        end = time.monotonic() + 3.5
        while time.monotonic() < end and reports:
            for r in list(reports):
                os.set_blocking(r, False)
                try:
                    data = os.read(r, 1 << 16)
                except BlockingIOError:
                    continue
                if not data:  # it ended: what it held went with it
                    reports.remove(r)
                    held[r] = 0
                    continue
                *lines, unread[r] = (unread[r] + data).split(b"\n")
                if lines:
                    held[r] = int(lines[-1])
            time.sleep(0.05)
        raise RuntimeError(f"held {sum(held.values())} MiB in all")

    def complete(self, plan):
        return []
