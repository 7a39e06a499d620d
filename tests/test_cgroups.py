"""A grading's control group: found where the host has one, made for each confinement where the harness
may write the hierarchy, and the one count of CPU and memory no process of the grading can leave."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.confined import cgroups
from grader.confined.clock import Charge, GroupCPU, OwnDeadline, process_charge

HYBRID = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
DOCKER_V1 = """\
700 690 0:30 /docker/abc123 /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup cgroup rw,cpu,cpuacct
701 690 0:32 /docker/abc123 /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory
"""


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.unit
def test_the_hierarchies_are_read_from_mountinfo_with_their_controllers(tmp_path):
    found = cgroups.hierarchies(write(tmp_path, "mountinfo", HYBRID))
    assert [(h.mountpoint, h.unified, "memory" in h.controllers) for h in found] == [
        ("/sys/fs/cgroup/cpuacct", False, False), ("/sys/fs/cgroup/memory", False, True),
        ("/sys/fs/cgroup/unified", True, False)]


@pytest.mark.unit
def test_a_group_is_found_under_its_mount_on_a_host_and_in_a_container(tmp_path):
    host = cgroups.Hierarchy(str(tmp_path), "/", False, frozenset({"memory"}))
    (tmp_path / "process_api" / "x").mkdir(parents=True)
    assert host.folder("/process_api/x") == str(tmp_path / "process_api" / "x")
    assert host.folder("/") == str(tmp_path)
    # A container's mount shows its own group as the mount's root: /proc/self/cgroup names the host's path.
    container = cgroups.hierarchies(write(tmp_path, "mountinfo", DOCKER_V1))[0]
    inside = cgroups.Hierarchy(str(tmp_path), container.root, False, container.controllers)
    assert inside.folder("/docker/abc123") == str(tmp_path)
    assert inside.folder("/docker/other") is None and inside.folder("/") is None


@pytest.mark.unit
def test_each_controller_of_a_v1_line_is_named(tmp_path):
    path = write(tmp_path, "cgroup", "4:memory:/process_api/x\n2:cpu,cpuacct:/\n0::/grader-1\n")
    assert cgroups.own_groups(path) == {"memory": "/process_api/x", "cpu": "/", "cpuacct": "/", "": "/grader-1"}


@pytest.mark.unit
def test_a_deadline_moves_later_by_its_own_length_at_most_whatever_its_readings_say():
    """The wall clock's hang guard: no reading (work hidden from /proc, a grading in another container)
    moves a limit of L past 2 L."""
    class Unproven:
        credit = 0.0

        def recheck(self) -> float:
            self.credit += 100.0  # a submission that made every reading say "the machine was busy"
            return 100.0

    deadline = OwnDeadline(0.2, Unproven())
    time.sleep(0.25)
    assert deadline.left() <= 0.2 and deadline.credited() == 0.2
    time.sleep(0.25)
    assert deadline.left() <= 0


@pytest.mark.unit
def test_many_groups_count_a_new_group_whole_and_a_gone_one_no_more():
    readings = iter([{"a": 1.0, "b": 2.0}, {"a": 1.5, "c": 0.25}, {"a": 1.5, "c": 1.0}])
    count = GroupCPU(lambda: next(readings))
    assert count.used() == pytest.approx(0.75)  # a: 0.5, c (new): 0.25, b (gone): nothing more
    assert count.used() == pytest.approx(0.75)


@pytest.mark.unit
def test_a_group_that_cannot_be_read_counts_as_busy_all_the_time():
    readings = iter([1.0, None])
    assert GroupCPU(lambda: next(readings)).used() == float("inf")


def groups_can_be_made() -> bool:
    group = cgroups.make_own(64 << 20)
    if group is not None:
        group.remove()
    return group is not None


# CI runs as root on a host whose hierarchy it may write: there these tests must run.
own_groups_here = pytest.mark.skipif(not groups_can_be_made() and os.environ.get("CI") != "true",
                                     reason="needs root on a writable cgroup hierarchy")

SPINNERS = """
import os, signal, threading, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps them: their CPU reaches no parent
def spinners():
    while True:
        if os.fork() == 0:
            end = time.monotonic() + 0.04
            while time.monotonic() < end:
                pass
            os._exit(0)
        time.sleep(0.035)
for _ in range(2 * os.cpu_count()):
    threading.Thread(target=spinners, daemon=True).start()
os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
while True:
    pass
"""


@own_groups_here
def test_spinners_the_kernel_reaps_earn_no_credit_once_their_group_counts_them():
    """The attack of tests/attacks/credit_gaming.py, measured: the answering thread waits for the CPUs
    its own short-lived spinners hold. /proc never sees most of their CPU, the control group does."""
    group = cgroups.make_own(256 << 20)
    assert group is not None
    joining = group.join_fds()
    try:
        process = subprocess.Popen([sys.executable, "-c", SPINNERS], start_new_session=True,
                                   preexec_fn=lambda: [os.write(fd, b"0") for fd in joining])
    finally:
        for fd in joining:
            os.close(fd)
    try:
        time.sleep(0.5)
        charge = process_charge(lambda: process.pid, group=lambda: GroupCPU(lambda: cgroups.cpu_seconds(group.cpu)))
        charge.baseline()
        started, before = time.monotonic(), cgroups.cpu_seconds(group.cpu)
        time.sleep(2.0)
        charge.recheck()
        span, used = time.monotonic() - started, cgroups.cpu_seconds(group.cpu) - before
    finally:
        group.kill_all()
        process.wait()
        group.remove()
    assert charge.proven
    assert used > 0.5 * span, f"the spinners hardly ran ({used:.2f} s of CPU in {span:.2f} s)"
    # Only the time the whole group had no CPU (other work on the machine) may be credited: on an idle
    # machine, none, though the answering thread waited nearly all the time.
    assert charge.credit <= max(0.0, span - used) + 0.1, (charge.credit, span, used)
    assert not os.path.exists(group.cpu.folder)


@own_groups_here
def test_memory_in_a_memory_file_counts_against_the_group_limit():
    group = cgroups.make_own(96 << 20)
    assert group is not None
    if group.memory is None:
        group.remove()
        pytest.skip("no memory controller the harness may write here")
    joining = group.join_fds()
    fill = "import os\nfd = os.memfd_create('x')\nfor _ in range(256):\n    os.write(fd, b'x' * (1 << 20))\nprint('held')\n"
    try:
        done = subprocess.run([sys.executable, "-c", fill], capture_output=True, check=False, timeout=60,
                              preexec_fn=lambda: [os.write(fd, b"0") for fd in joining])
    finally:
        for fd in joining:
            os.close(fd)
        group.remove()
    assert done.returncode == -signal.SIGKILL and b"held" not in done.stdout


@own_groups_here
def test_a_confinement_its_zygote_and_every_worker_are_in_its_own_group():
    """The confinement's processes join its group while they start (a thread of the harness puts them
    there); the first worker is forked once they are in, so every worker is born in it."""
    from grader.confined.processes import children_of
    from tests.helpers import confinement_for

    with confinement_for("VALUE = 1\n") as (confinement, spawn):
        assert confinement.group is not None
        client = spawn()  # ready: it imported the submission
        first = confinement.process.pid  # bubblewrap, or the zygote without namespaces
        members = [first, *children_of(first), client.process.seen_as()]
        assert None not in members
        name = os.path.basename(confinement.group.cpu.folder)
        for pid in members:
            assert name in Path(f"/proc/{pid}/cgroup").read_text(), (pid, members)
        assert set(members) <= set(confinement.group.processes())


@own_groups_here
def test_a_confinement_whose_processes_could_not_join_its_group_forks_no_worker(monkeypatch):
    from grader.harness.confine import Confinement, ZygoteUnavailable
    from tests.helpers import confinement_for

    def refused(self, fds, info):
        for fd in [*fds, *([info] if info is not None else [])]:
            os.close(fd)
        self.join_failure = "its processes could not join its control group (refused)"

    monkeypatch.setattr(Confinement, "_join", refused)
    with confinement_for("VALUE = 1\n") as (confinement, spawn):
        with pytest.raises(ZygoteUnavailable, match="could not join its control group"):
            spawn()
        assert confinement.broken


@pytest.mark.unit
def test_a_wait_is_credited_only_past_the_cpu_every_grading_used(tmp_path):
    """The credit is the wait less what the gradings' processes used besides the thread: the wait at
    most that CPU can have caused is never the machine's."""
    schedstat = tmp_path / "schedstat"

    class Gradings:
        includes_self = True

        def __init__(self) -> None:
            self.next = 0.0

        def used(self) -> float:
            return self.next

    def charged(used_by_gradings: float) -> float:
        schedstat.write_text("0 0 0\n")
        gradings = Gradings()
        charge = Charge(lambda: (str(schedstat), "self"), gradings).baseline()
        time.sleep(0.3)
        schedstat.write_text(f"{10_000_000} {250_000_000} 7\n")  # ran 0.01 s, waited 0.25 s
        gradings.next = used_by_gradings
        charge.recheck()
        return charge.credit

    assert charged(0.01) == pytest.approx(0.25, abs=1e-6)  # nothing but the thread itself ran: all of it
    assert charged(0.11) == pytest.approx(0.15, abs=1e-6)  # others used 0.1 s: that much is not credited
    assert charged(2.0) == 0.0  # a spinner anywhere in a grading: nothing
