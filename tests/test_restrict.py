"""The restrictions a worker puts on itself where no namespace can be made (the `account` isolation):
a seccomp filter without network and a Landlock domain, each checked by a process that tries what
they refuse, as an account of its own."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from grader.confined.restrict import landlock_abi, seccomp_program
from grader.sandbox.isolation import worker_python
from tests.helpers import PROJECT

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="runs a probe as an account of its own: root only")
UID = 61990  # an account no real user has (as the worker accounts: grader.sandbox.worker_accounts.WORKER_UIDS)

PROBE = """
import json, os, socket, subprocess, sys
sys.path.insert(0, sys.argv[1])
from grader.confined.restrict import confine_self
scratch, secret = sys.argv[2], sys.argv[3]
confined = confine_self(read=[], write=[scratch])
seen = {"landlock": confined.landlock_abi}
def attempt(name, action):
    try:
        action()
        seen[name] = "allowed"
    except OSError as exc:
        seen[name] = type(exc).__name__
attempt("read the project", lambda: open(secret, "rb").read())
attempt("read the system", lambda: open("/etc/os-release" if os.path.exists("/etc/os-release") else "/usr/lib/os-release").read())
attempt("write its folder", lambda: open(os.path.join(scratch, "f"), "w").write("x"))
attempt("write /tmp", lambda: open(os.path.join(os.path.dirname(scratch), "grader-probe-outside"), "w").write("x"))
attempt("tcp", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
attempt("udp", lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM))
attempt("netlink", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW))
attempt("unix", lambda: socket.socketpair())
attempt("start a program", lambda: subprocess.run(["/bin/true"], check=True))
print(json.dumps(seen))
"""


def probe(tmp_path: Path) -> dict[str, object]:
    scratch = Path(tempfile.mkdtemp(prefix="grader-probe-", dir="/tmp"))
    # The modules the probe imports and a file to keep from it, where every account may read them: the
    # project itself may sit in a folder only its owner reaches (a clone in a private temporary folder).
    shared = Path(tempfile.mkdtemp(prefix="grader-probe-code-", dir="/tmp"))
    try:
        os.chown(scratch, UID, UID)
        for module in ("__init__.py", "confined/__init__.py", "confined/restrict.py"):
            (shared / "grader" / module).parent.mkdir(parents=True, exist_ok=True)
            (shared / "grader" / module).write_bytes((PROJECT / "grader" / module).read_bytes())
        secret = shared / "secret.txt"  # readable by every account: only Landlock keeps it from the probe
        secret.write_text("not for the probe\n")
        for path in (shared, *shared.rglob("*")):
            path.chmod(0o755 if path.is_dir() else 0o644)
        done = subprocess.run([worker_python(UID), "-I", "-c", PROBE, str(shared), str(scratch), str(secret)],
                              user=UID, group=UID, extra_groups=[], capture_output=True, text=True, timeout=60,
                              env={"PATH": "/usr/bin:/bin"})
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)
    finally:
        subprocess.run(["rm", "-rf", str(scratch), str(shared)], check=False)


@pytest.mark.unit
def test_the_filter_refuses_sockets_of_every_family_but_unix_and_keeps_the_namespaced_program():
    namespaced, account = seccomp_program(network=True), seccomp_program(network=False)
    assert namespaced is not None and account is not None
    assert len(account) > len(namespaced) and len(namespaced) % 8 == 0 and len(account) % 8 == 0
    assert seccomp_program("riscv64") is None  # no numbers for it: no filter, never a wrong one


@needs_root
def test_a_restricted_process_reaches_no_network_and_only_its_own_folder(tmp_path):
    seen = probe(tmp_path)
    assert seen["tcp"] == seen["udp"] == seen["netlink"] == "PermissionError"
    assert seen["unix"] == "allowed" and seen["start a program"] == "allowed"
    assert seen["write its folder"] == "allowed" and seen["read the system"] == "allowed"
    if landlock_abi():
        assert seen["landlock"] == landlock_abi()
        assert seen["read the project"] == "PermissionError" and seen["write /tmp"] == "PermissionError"
