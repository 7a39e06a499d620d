"""What a fork server's child is given before any submission code runs (grader.confined.forking)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from grader.confined.forking import prctl, settle


def _settled_environment(tmp_path, env: dict[str, str], temp: str | None) -> dict[str, object]:
    """Fork a child with extra variables of the parent's own, `settle` it, and read back its
    environment as Python sees it and as a program it runs sees it (the C library's)."""
    out = tmp_path / "out.json"
    pid = os.fork()
    if pid == 0:
        try:
            os.environ["LEFT_BEHIND"] = "the parent's"
            os.environ["HOME"] = "/somewhere/else"
            os.environ.pop("TMPDIR", None)
            if temp:
                os.environ["TMPDIR"] = temp
            # Variables the C library holds that os.environ never knew (put there by C code): out of
            # settle's reach, as they were out of Python's.
            before = subprocess.run(["/usr/bin/env"], capture_output=True, text=True).stdout
            unknown = [line.split("=", 1)[0] for line in before.splitlines() if line.split("=", 1)[0] not in os.environ]
            write = os.open(out, os.O_WRONLY | os.O_CREAT, 0o600)
            folder = settle(os.open(os.devnull, os.O_WRONLY), [write], str(tmp_path), env, None)
            program = subprocess.run(["/usr/bin/env"], capture_output=True, text=True).stdout
            seen = dict(line.split("=", 1) for line in program.splitlines() if line.split("=", 1)[0] not in unknown)
            os.write(3, json.dumps({"python": dict(os.environ), "program": seen, "folder": folder,
                                    "cwd": os.getcwd()}).encode())
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    return json.loads(out.read_text())


@pytest.mark.parametrize("temp", [None, "/tmp/own-scratch"])
def test_a_settled_child_has_exactly_the_environment_it_was_given(tmp_path, temp):
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "USER": "student", "LOGNAME": "student"}
    seen = _settled_environment(tmp_path, env, temp)
    wanted = {**env, "HOME": str(tmp_path), **({"TMPDIR": temp} if temp else {})}
    assert seen["python"] == wanted
    assert seen["program"] == wanted  # the C library's environment too, not only os.environ
    assert seen["folder"] == seen["cwd"] == str(tmp_path)


def test_prctl_is_looked_up_once_and_still_says_what_the_kernel_did():
    """A fork server looks the C library's prctl up once, and its children call it without a lookup
    of their own; each call still answers for itself (PR_GET_DUMPABLE's answer is its return value)."""
    pid = os.fork()
    if pid == 0:
        try:
            PR_GET_DUMPABLE, PR_SET_DUMPABLE = 3, 4
            dumpable_before = not prctl(PR_GET_DUMPABLE, 0)  # returns 1: "not 0"
            set_ok = prctl(PR_SET_DUMPABLE, 0)
            dumpable_after = not prctl(PR_GET_DUMPABLE, 0)
            refused = not prctl(0x7FFFFFF, 0)
            os._exit(0 if (dumpable_before, set_ok, dumpable_after, refused) == (True, True, False, True) else 1)
        finally:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
