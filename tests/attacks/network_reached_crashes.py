"""Dies with exit status 0 if it can reach the network or a container-engine socket.
expect: failed

Neither sandbox has a network or an engine socket (the local one gives the worker a network namespace
of its own, Docker no network at all), so every probe fails fast and the call raises an ordinary
exception (failed). If any probe succeeds, the worker calls os._exit(0),
which turns the breach into a `crashed` test that the expectation above rejects.
"""

import os
import socket
from collections import deque

TARGETS = [("1.1.1.1", 53), ("8.8.8.8", 53), ("169.254.169.254", 80), ("172.17.0.1", 2375)]
ENGINE_SOCKETS = ["/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock"]


def _breach():
    """Returns a description of the first thing reached, or None."""
    for host, port in TARGETS:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return f"tcp {host}:{port}"
        except OSError:
            pass
    for path in ENGINE_SOCKETS:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(0.5)
                s.connect(path)
                return path
        except OSError:
            pass
    return None


def _probe():
    reached = _breach()
    if reached:
        print("NETWORK-REACHED", reached, flush=True)
        os._exit(0)
    raise RuntimeError("no network, no engine socket")


class Req:
    def __init__(self, rid, prompt_len, max_new, prefilled=0, generated=0):
        self.rid, self.prompt_len, self.max_new = rid, prompt_len, max_new
        self.prefilled, self.generated = prefilled, generated


class Scheduler:
    def __init__(self, token_budget, max_seqs, kv_tokens):
        self.kv_tokens = kv_tokens
        self.waiting, self.running = deque(), []

    def add(self, req):
        if req.prompt_len + req.max_new > self.kv_tokens:
            _probe()  # RuntimeError where a ValueError belongs
        self.waiting.append(req)

    def schedule(self):
        _probe()

    def complete(self, plan):
        _probe()
