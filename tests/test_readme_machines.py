"""The README's two commands, exactly as written, on a fresh Debian 12, Debian 13 and Ubuntu 24.04.

Each machine is a container of a rootfs bootstrapped from its own archive (tests/fresh_machines.py): no
Python, no bubblewrap, nothing of the project's but its files, as a fresh clone. The first command runs as
root and as a user who may use sudo: it must install what it needs, grade the reference in the local
sandbox and give it full marks. The second runs on the two machines unlike CI's own Debian 12 (their
Pythons are 3.13 and 3.12), up to its quick tier: the whole suite after it needs what `.ci/run` installs,
and runs here, on Debian 12, as CI.

A container stands in for a machine: bubblewrap makes namespaces and mounts /proc there only with the
rights a machine's root has (CAP_SYS_ADMIN, no seccomp or AppArmor filter, /proc unmasked), so the
containers get those. What this cannot show: a host's own AppArmor rules on unprivileged user namespaces
(Ubuntu 24.04 restricts them; docs/security.md says what the local sandbox needs).

Slow: it bootstraps three systems (once; their images are kept by tag), then installs from Debian's,
Ubuntu's and PyPI's archives. It needs a Docker engine and mmdebstrap: skipped without them, except
under CI=true, where .ci/run installs them and it must run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.fresh_machines import MACHINES, PROJECT, SUDO_USER, ensure_machine, project_archive

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

# A machine's root may make namespaces and mount /proc: what bubblewrap needs of it.
LIKE_A_MACHINE = ("--cap-add", "SYS_ADMIN", "--security-opt", "seccomp=unconfined", "--security-opt",
                  "apparmor=unconfined", "--security-opt", "systempaths=unconfined")
WHOLE_SUITE = " && python -m pytest"


def readme_commands() -> tuple[str, str]:
    """The two commands of the README's "The two commands", their comments left out."""
    text = (PROJECT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"^## The two commands\n.*?```sh\n(.*?)```", text, re.S | re.M)
    assert found, "the README has no sh block under '## The two commands'"
    commands = ["\n".join(line for line in part.splitlines() if not line.startswith("#")).strip()
                for part in found.group(1).split("\n\n")]
    assert len(commands) == 2 and all(commands), commands
    return commands[0], commands[1]


@pytest.fixture(scope="module")
def engine() -> None:
    missing = [tool for tool in ("docker", "mmdebstrap", "dpkg-deb") if shutil.which(tool) is None]
    if not missing and subprocess.run(["docker", "info"], capture_output=True, timeout=60).returncode != 0:
        missing = ["a Docker engine that answers"]
    if missing:
        message = f"needs {', '.join(missing)} (Debian: apt-get install docker.io mmdebstrap)"
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(f"CI=true but {message}", pytrace=False)
        pytest.skip(message)


@contextmanager
def fresh(machine: str, user: str) -> Iterator[tuple[str, str]]:
    """A running container of the machine with the project in the user's home: (its name, the folder)."""
    tag = ensure_machine(machine)
    name = f"grader-readme-{uuid.uuid4().hex[:10]}"
    home = "/root" if user == "root" else f"/home/{user}"
    subprocess.run(["docker", "run", "-d", "--name", name, *LIKE_A_MACHINE, tag], check=True, capture_output=True,
                   timeout=120)
    try:
        subprocess.run(["docker", "cp", "-", f"{name}:{home}"], input=project_archive(), check=True,
                       capture_output=True, timeout=300)
        subprocess.run(["docker", "exec", name, "chown", "-R", f"{user}:", f"{home}/grader"], check=True,
                       capture_output=True, timeout=120)
        yield name, f"{home}/grader"
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=120)


def run(name: str, user: str, folder: str, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", "exec", "-u", user, "-w", folder, name, "bash", "-c", command],
                          capture_output=True, text=True, timeout=1500)


@pytest.mark.parametrize(("machine", "user", "quick_tier"), [
    ("debian-12", "root", False),
    ("debian-13", "root", False),
    ("debian-13", SUDO_USER, True),
    ("ubuntu-24.04", "root", True),
    ("ubuntu-24.04", SUDO_USER, False),
])
def test_the_readme_s_commands_work_on_a_fresh_machine_as_written(engine, machine, user, quick_tier):
    grade_command, test_command = readme_commands()
    with fresh(machine, user) as (name, folder):
        graded = run(name, user, folder, grade_command)
        said = graded.stdout + graded.stderr
        assert graded.returncode == 0, f"{MACHINES[machine].name} as {user}:\n{said[-4000:]}"
        assert re.search(r"tier premium\s+·\s+98/98 points\s+·\s+local sandbox", said), said[-4000:]
        if quick_tier:
            assert test_command.endswith(WHOLE_SUITE), test_command
            tested = run(name, user, folder, test_command[:-len(WHOLE_SUITE)])
            said = tested.stdout + tested.stderr
            assert tested.returncode == 0, f"{MACHINES[machine].name} as {user}:\n{said[-4000:]}"
            summary = re.search(r"\n=+ (\d+ passed[^\n]*) in [\d.]+s", said)
            assert summary and not re.search(r"failed|error", summary.group(1)), said[-2000:]
