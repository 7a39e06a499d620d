"""A grader killed outright (SIGKILL, out of memory, a crashed service worker) leaves nothing behind:
its local harnesses, zygotes and workers end with it, and the next grader of the same user removes the
job folders it left (each holds a grading's secret suites and reference) and, on a Docker engine, the
grading containers it made."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from grader.confined.forking import stat_number
from grader.sandbox import folders
from grader.sandbox.docker_backend import OWNER_LABEL
from grader.sandbox.folders import (
    OWNER_FILE,
    UNOWNED_AGE_S,
    make_job_folder,
    owned_folder,
    remove_owned_folder,
    sweep_abandoned,
)
from grader.sandbox.isolation import isolation_problem
from grader.sandbox.owners import is_gone, owner_of, this_process
from tests.helpers import EXERCISE, REFERENCE, wait_until
from tests.service import child_env, grader_command

USER_TIME_FIELD = 14  # proc(5): a process's user-mode CPU time, in clock ticks

# Holds a folder of its own until killed: the path on its first line.
HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from grader.sandbox.folders import make_owned_folder
    print(make_owned_folder(Path(sys.argv[1]), sys.argv[2]), flush=True)
    time.sleep(120)
""")


def hold_a_job_folder(parent: Path, prefix: str = folders.JOB_PREFIX) -> tuple[subprocess.Popen, Path]:
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(parent), prefix], stdout=subprocess.PIPE,
                               env=child_env())
    assert process.stdout is not None
    return process, Path(process.stdout.readline().decode().strip())


def end(process: subprocess.Popen) -> None:
    with process:  # waits for it, and closes the pipe it printed its folder on
        process.kill()


def test_a_job_folder_is_swept_once_its_maker_is_dead_and_never_while_it_lives(tmp_path):
    killed, abandoned = hold_a_job_folder(tmp_path)
    alive, held = hold_a_job_folder(tmp_path)
    mine = make_job_folder(tmp_path)
    try:
        assert abandoned.is_dir() and held.is_dir() and (abandoned / OWNER_FILE).exists()
        assert sweep_abandoned(tmp_path, force=True) == []  # every owner is alive
        end(killed)
        assert sweep_abandoned(tmp_path, force=True) == [abandoned]
        assert not abandoned.exists() and held.is_dir() and mine.is_dir()
    finally:
        end(alive)
    assert sweep_abandoned(tmp_path, force=True) == [held]
    assert mine.is_dir()  # this process's own, held by it
    remove_owned_folder(mine)
    assert not mine.exists() and mine not in folders._held


def test_a_sweep_removes_only_folders_of_its_own_kind(tmp_path):
    """An image build's abandoned scratch folder goes with the next build's sweep, not a job's; and a
    folder made for a `with` block goes at its end."""
    killed, build = hold_a_job_folder(tmp_path, "grader-base-")
    other, job = hold_a_job_folder(tmp_path)
    end(killed)
    end(other)
    assert sweep_abandoned(tmp_path, "grader-base-", force=True) == [build]
    assert job.is_dir()
    with owned_folder(tmp_path, "grader-base-") as scratch:  # sweeps again first: nothing of the kind left
        assert scratch.is_dir() and scratch.name.startswith("grader-base-")
    assert not scratch.exists() and job.is_dir()


@pytest.mark.unit
def test_a_folder_without_an_owner_file_is_removed_only_once_it_is_old(tmp_path):
    """One being made this instant has no owner file yet; one made by a grader without owner files may
    still be in use: only a day-old one is taken for abandoned."""
    fresh = tmp_path / f"{folders.JOB_PREFIX}fresh"
    old = tmp_path / f"{folders.JOB_PREFIX}old"
    other = tmp_path / "not-a-job"
    for folder in (fresh, old, other):
        folder.mkdir()
    long_ago = time.time() - UNOWNED_AGE_S - 60
    os.utime(old, (long_ago, long_ago))
    os.utime(other, (long_ago, long_ago))
    assert sweep_abandoned(tmp_path, force=True) == [old]
    assert fresh.is_dir() and other.is_dir()


def test_the_sweep_runs_at_most_once_a_minute_unless_forced(tmp_path):
    killed, abandoned = hold_a_job_folder(tmp_path)
    end(killed)
    sweep_abandoned(tmp_path, force=True)
    killed, abandoned = hold_a_job_folder(tmp_path)
    end(killed)
    assert sweep_abandoned(tmp_path) == [] and abandoned.is_dir()
    assert sweep_abandoned(tmp_path, force=True) == [abandoned]


def slow_submission(folder: Path) -> Path:
    """The reference, but each schedule() sleeps: a grading of it is still under way seconds later."""
    path = folder / "scheduler.py"
    folder.mkdir()
    path.write_text(REFERENCE.read_text().replace(
        "    def schedule(self) -> list[tuple[Req, int]]:\n",
        "    def schedule(self) -> list[tuple[Req, int]]:\n        import time\n        time.sleep(2)\n", 1))
    return path


def test_an_owner_is_gone_only_when_it_is_certainly_this_machines_and_dead():
    """A dead process of this boot and PID namespace is gone; a live one is not, nor one named by
    another boot or PID namespace (another machine or container on a shared engine), nor garbage."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    named = owner_of(dead.pid)
    dead.wait()
    assert is_gone(named)
    assert not is_gone(this_process())
    here, pid, start = named.split("/")
    boot, namespace = here.split(":", 1)
    assert not is_gone(f"{boot}:pid:[1]/{pid}/{start}")  # another PID namespace's pid
    assert not is_gone(f"00000000-0000-0000-0000-000000000000:{namespace}/{pid}/{start}")  # another boot
    for garbage in ("", "x", "a/b/c", f"{here}/{pid}", f"{here}/-/{start}"):
        assert not is_gone(garbage)


def processes_naming(text: str) -> list[str]:
    """The command lines of this machine's processes that mention `text`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in command:
                found.append(f"{entry.name}: {command}")
    return found


@pytest.mark.slow
@pytest.mark.skipif(isolation_problem() is not None, reason="needs the local sandbox's namespaces")
@pytest.mark.parametrize("command", ["grade", "batch"])
def test_a_grader_killed_outright_takes_its_gradings_along_and_the_next_removes_its_folders(tmp_path, command):
    """A grading under way (a cold harness for `grade`, harnesses forked from a fork server for `batch`)
    when its grader is killed: within seconds none of its processes runs, and the next grading of the
    same user removes the job folders it left."""
    temporary = tmp_path / "tmp"  # this test's own temporary folder: its job folders, and no one else's
    temporary.mkdir()
    env = {**child_env(), "TMPDIR": str(temporary)}
    slow = slow_submission(tmp_path / "class")
    target = [str(slow)] if command == "grade" else [str(slow.parent), "--db", str(tmp_path / "grader.db")]
    grader = subprocess.Popen(grader_command(command, *target, "--exercise", EXERCISE, "--sandbox", "local"),
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    jobs = temporary / f"grader-{os.geteuid()}"
    try:
        # Under way: the grading's zygote (which names its job folder) has started.
        wait_until(lambda: any("grader.confined.zygote" in c for c in processes_naming(str(jobs))), 60,
                 "a grading under way")
        left = [p for p in jobs.iterdir() if p.name.startswith(folders.JOB_PREFIX)]
        assert left
    finally:
        grader.kill()  # SIGKILL, as the out-of-memory killer or `kill -9` would
        grader.wait()
    wait_until(lambda: not processes_naming(str(jobs)), 15, "every process of the killed grader's gradings ended")

    done = subprocess.run(grader_command("grade", str(REFERENCE), "--exercise", EXERCISE, "--tier", "free",
                                         "--sandbox", "local"), env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [p.name for p in jobs.iterdir() if p.name.startswith(folders.JOB_PREFIX)] == []


@pytest.mark.slow
def test_without_namespaces_a_killed_graders_worker_stuck_in_a_loop_ends_with_it(tmp_path):
    """`--unsafe-local`: no PID namespace takes the workers along. A worker looping in the submission's
    code when its grader is killed (nobody is left to enforce the call's time limit) ends within
    seconds, not at its CPU-time limit."""
    # A temporary folder of this test's own that the worker's account may pass through, as /tmp is
    # (pytest's are its user's alone): without namespaces the job is read there by that account.
    temporary = Path(tempfile.mkdtemp(prefix="grader-test-"))
    temporary.chmod(0o711)
    env = {**child_env(), "TMPDIR": str(temporary)}
    folder = tmp_path / "class"
    folder.mkdir()
    endless = folder / "scheduler.py"
    endless.write_text(REFERENCE.read_text().replace(
        "    def schedule(self) -> list[tuple[Req, int]]:\n",
        "    def schedule(self) -> list[tuple[Req, int]]:\n        while True:\n            pass\n", 1))
    grader = subprocess.Popen(grader_command("grade", str(endless), "--exercise", EXERCISE, "--tier", "free",
                                             "--sandbox", "local", "--unsafe-local"),
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    jobs = str(temporary)  # without namespaces a job's folder is made right there, for the worker's account

    def looping() -> list[str]:
        """A worker of this grading (forked from its zygote, so named like it) with a second of CPU used."""
        return [p for p in processes_naming(jobs) if "grader.confined.zygote" in p
                and (stat_number(int(p.split(":")[0]), USER_TIME_FIELD) or 0) >= os.sysconf("SC_CLK_TCK")]

    try:
        try:
            wait_until(looping, 60, "a worker looping in schedule()")
        finally:
            grader.kill()
            grader.wait()
        wait_until(lambda: not processes_naming(jobs), 15, "every process of the killed grader's grading ended")
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


@pytest.mark.slow
def test_the_containers_of_a_grader_killed_outright_end_and_are_removed_by_the_next(tmp_path, docker_client,
                                                                                   grading_image):
    """A Docker grading under way when its grader is killed: its container would grade on for nobody
    and then stay, exited. It ends within seconds (its input closes with its grader's connection), and
    the next grader on this machine removes it; no container of a live grader (this test's own process
    makes none) is touched."""
    slow = slow_submission(tmp_path / "class")
    grader = subprocess.Popen(grader_command("grade", str(slow), "--exercise", EXERCISE, "--sandbox", "docker"),
                              env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    mine = this_process().rsplit("/", 2)[0] + f"/{grader.pid}/"  # its owner label: this machine's, its pid

    def its_containers(**filters: str) -> list:
        return [c for c in docker_client.containers.list(all=True, sparse=True,
                                                         filters={"label": OWNER_LABEL, **filters})
                if (c.attrs.get("Labels") or {}).get(OWNER_LABEL, "").startswith(mine)]

    try:
        # Under way: the submission is in (each of its schedule() calls sleeps 2 s, so the grading would
        # take minutes), the container's input still open.
        running = wait_until(lambda: its_containers(status="running"), 120, "a grading container under way")
        time.sleep(3)
        assert its_containers(status="running")
    finally:
        grader.kill()
        grader.wait()
    wait_until(lambda: not its_containers(status="running"), 30, "the killed grader's container ended")
    # Left behind, exited: nothing of the killed grader removes it (not checked here, as another grader
    # on a shared machine may sweep it already, rightly).
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    kept = docker_client.containers.create(grading_image, ["true"], labels={OWNER_LABEL: owner_of(live.pid)})
    # A dead pid, but of another PID namespace (another container on this engine): not this grader's to judge.
    here, pid, start = running[0].attrs["Labels"][OWNER_LABEL].split("/")
    elsewhere = docker_client.containers.create(grading_image, ["true"], labels={
        OWNER_LABEL: f"{here.split(':', 1)[0]}:pid:[1]/{pid}/{start}"})
    try:
        done = subprocess.run(grader_command("grade", str(REFERENCE), "--exercise", EXERCISE, "--tier", "free",
                                             "--sandbox", "docker"),
                              env=child_env(), capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        assert its_containers() == []
        kept.reload()  # a live grader's container is still there
        elsewhere.reload()  # and so is the other namespace's
    finally:
        kept.remove(force=True)
        elsewhere.remove(force=True)
        end(live)
