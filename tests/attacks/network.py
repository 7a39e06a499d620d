"""Tries the network (TCP, UDP DNS, lookups, cloud metadata) and container-engine sockets.
expect: failed

Every probe has a short timeout and all run in parallel under a 2 s budget, so the call itself
stays well inside its deadline. Reaching something is reported as "NETWORK-REACHED <probe>" in the
exception message and the output; in neither backend may any appear (see network_reached_crashes.py for
the variant that turns a reach into a crash). The scheduler never answers.
"""

import os
import socket
import sys
import threading
from collections import deque

TIMEOUT = 1.0
# A DNS query for example.com, type A.
DNS_QUERY = bytes.fromhex("abcd01000001000000000000076578616d706c6503636f6d0000010001")
ENGINE_SOCKETS = ["/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock",
                  "/run/podman/podman.sock", "/var/run/crio/crio.sock"]


def _tcp(host, port):
    with socket.create_connection((host, port), timeout=TIMEOUT):
        return f"tcp {host}:{port} connected"


def _udp_dns(host):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(TIMEOUT)
        s.sendto(DNS_QUERY, (host, 53))
        return f"udp dns {host}: {len(s.recv(512))}-byte answer"


def _lookup(name):
    return f"lookup {name}: {socket.getaddrinfo(name, 80)[0][4]}"


def _engine(path):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(TIMEOUT)
        s.connect(path)
        s.sendall(b"GET /containers/json HTTP/1.0\r\nHost: docker\r\n\r\n")
        return f"engine {path}: {s.recv(200)!r}"


PROBES = [(_tcp, ("1.1.1.1", 53)), (_tcp, ("1.1.1.1", 443)), (_tcp, ("8.8.8.8", 53)),
          (_udp_dns, ("1.1.1.1",)), (_lookup, ("example.com",)),
          (_tcp, ("169.254.169.254", 80)), (_tcp, ("172.17.0.1", 2375)), (_tcp, ("127.0.0.1", 2375))]
PROBES += [(_engine, (p,)) for p in ENGINE_SOCKETS]
if os.environ.get("DOCKER_HOST", "").startswith("unix://"):
    PROBES.append((_engine, (os.environ["DOCKER_HOST"][7:],)))


def probe_all():
    report = []

    def run(fn, args):
        try:
            report.append("NETWORK-REACHED " + fn(*args))
        except Exception as e:
            report.append(f"blocked {fn.__name__}{args}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=run, args=p, daemon=True) for p in PROBES]
    for t in threads:
        t.start()
    for t in threads:
        t.join(2.0 / len(threads))
    return "\n".join(report)


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
            raise RuntimeError(probe_all())  # RuntimeError where a ValueError belongs
        self.waiting.append(req)

    def schedule(self):
        report = probe_all()
        print(report, file=sys.stderr)
        raise RuntimeError(report)

    def complete(self, plan):
        raise RuntimeError(probe_all())
