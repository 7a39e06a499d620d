"""Warm sandboxes: a sandbox started before its submission exists grades exactly that one submission,
as a cold one would, whatever the submission before it did."""

from __future__ import annotations

import time

import pytest

from grader.confined.forking import stat_fields
from grader.core.exercise import load_exercise
from grader.core.grading import grade_bytes
from grader.sandbox.local import LocalBackend
from tests.helpers import ATTACKS, EXERCISE, REFERENCE, STUB, WHO_AM_I, mutant_file

MUTANT = mutant_file("03_skip_blocked_head")
# Hostile submissions that leave the most behind: processes, frozen processes, moved folders, files.
HOSTILE = ["kill_everything", "stop_everything", "fork_bomb", "symlink_race", "escape_process_group",
           "spinning_thread", "disk_fill", "patch_pytest"]


@pytest.fixture(params=["local", "docker"])
def warm_backend(request):
    if request.param == "docker":
        from grader.sandbox.docker_backend import DockerBackend

        request.getfixturevalue("grading_image")  # skips without an engine (fails under CI=true)
        backend = DockerBackend(request.getfixturevalue("docker_client"), warm=True)
    else:
        backend = LocalBackend(warm=True)
    yield backend
    backend.close()


def grade(backend, data: bytes, tier: str = "premium"):
    return grade_bytes(data, load_exercise(EXERCISE), tier, backend, "warm")


def test_a_warm_sandbox_grades_the_submission_it_is_given(warm_backend):
    reference, stub, mutant = REFERENCE.read_bytes(), STUB.read_bytes(), MUTANT.read_bytes()
    cards = [grade(warm_backend, data) for data in (reference, stub, reference, mutant, reference)]
    assert [c.status for c in cards] == ["graded"] * 5, [c.reason for c in cards]
    assert cards[0].score == cards[2].score == cards[4].score == cards[0].max_score > 0
    assert cards[1].score == 0
    assert 0 < cards[3].score < cards[3].max_score
    # Each run has its own seed, the submission's: a warm sandbox carries nothing from the one before.
    assert cards[0].seed == cards[2].seed != cards[3].seed
    assert len(warm_backend._ready) == 1  # the next one waits


@pytest.mark.slow
def test_hostile_submissions_keep_their_outcome_and_leave_nothing_for_the_next(warm_backend):
    """Each hostile submission through the warm pool scores 0, and the reference graded right after
    it, in the sandbox that got ready while it ran, still gets full marks."""
    for name in HOSTILE:
        hostile = grade(warm_backend, (ATTACKS / f"{name}.py").read_bytes(), tier="free")
        assert hostile.score == 0 and hostile.status in ("graded", "error"), (name, hostile.reason)
        honest = grade(warm_backend, REFERENCE.read_bytes(), tier="free")
        assert honest.status == "graded" and honest.score == honest.max_score > 0, (name, honest.reason)


def test_a_closed_pool_leaves_no_sandbox_behind(tmp_path):
    import subprocess

    backend = LocalBackend(warm=True)
    grade(backend, STUB.read_bytes(), tier="free")
    (waiting,) = backend._ready.ready.values()
    (fork_server,) = backend._fork_servers.values()
    assert waiting.process.poll() is None  # forked from the fork server, waiting for its submission
    folders, pids = [waiting.base, fork_server.base], [waiting.process.pid, fork_server.process.pid]
    assert all(folder.is_dir() for folder in folders)
    backend.close()
    assert not any(folder.exists() for folder in folders) and len(backend._ready) == 0

    def running(pid: int) -> bool:  # a zombie waiting for its reaper counts as ended
        fields = stat_fields(pid)
        return fields is not None and fields[0] != b"Z"

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(running(pid) for pid in pids):
        time.sleep(0.05)
    assert not any(running(pid) for pid in pids)
    left = subprocess.run(["pgrep", "-f", str(fork_server.base)], capture_output=True, text=True).stdout.split()
    assert left == []



def test_each_grading_forked_from_a_template_has_its_own_process_folder_and_account():
    """A warm local backend forks every harness from one fork server of the tier; each fork grades one
    submission, in its own folder, with its own worker account (as root) and confinement."""
    import os
    import re

    backend = LocalBackend(warm=True)
    try:
        seen = []
        for _ in range(3):
            card = grade(backend, WHO_AM_I, tier="free")
            assert card.status == "graded" and card.score == 0, card.reason
            uids = {re.search(r"worker uid (\d+)", t.message).group(1) for t in card.tests}
            (waiting,) = backend._ready.ready.values()
            (fork_server,) = backend._fork_servers.values()
            seen.append((uids, fork_server.process.pid, waiting.process.poll(), waiting.process.pid, waiting.base))
        assert len({pid for _, pid, _, _, _ in seen}) == 1  # one fork server for the three
        assert all(code is None for _, _, code, _, _ in seen)  # each next one waits, alive
        children = {child for _, _, _, child, _ in seen}
        assert len(children) == 3 and seen[0][1] not in children
        assert len({folder for *_, folder in seen}) == 3
        assert all(len(uids) == 1 for uids, *_ in seen)  # every test of a grading: the same account
        if os.geteuid() == 0:
            # The next grading gets ready while this one runs: the two hold different accounts.
            assert seen[0][0] != seen[1][0] != seen[2][0]
            assert not {"0", str(os.geteuid())} & set.union(*(uids for uids, *_ in seen))
    finally:
        backend.close()


def test_a_template_that_dies_is_replaced_and_no_grading_is_lost():
    import os
    import signal

    backend = LocalBackend(warm=True)
    try:
        assert grade(backend, REFERENCE.read_bytes(), tier="free").score > 0
        (fork_server,) = backend._fork_servers.values()
        os.kill(fork_server.process.pid, signal.SIGKILL)
        fork_server.process.wait()
        # The harness that was waiting ends with its fork server: each grading comes from a new fork server.
        for _ in range(2):
            card = grade(backend, REFERENCE.read_bytes(), tier="free")
            assert card.status == "graded" and card.score == card.max_score > 0, card.reason
        (replacement,) = backend._fork_servers.values()
        assert replacement.process.pid != fork_server.process.pid and replacement.process.poll() is None
    finally:
        backend.close()


def test_a_template_that_dies_during_a_grading_costs_that_grading_nothing():
    """A harness ends with the fork server it was forked from: one whose fork server dies while it grades is
    graded again in a new fork server's sandbox (nothing a submission can do reaches a fork server)."""
    import os
    import signal
    import threading

    slow = REFERENCE.read_bytes().replace(
        b"    def schedule(self) -> list[tuple[Req, int]]:\n",
        b"    def schedule(self) -> list[tuple[Req, int]]:\n        import time\n        time.sleep(0.1)\n", 1)
    backend = LocalBackend(warm=True)
    try:
        assert grade(backend, REFERENCE.read_bytes(), tier="free").score > 0  # and the next harness waits
        (fork_server,) = backend._fork_servers.values()
        killer = threading.Timer(1.0, os.kill, (fork_server.process.pid, signal.SIGKILL))
        killer.start()
        card = grade(backend, slow, tier="free")
        killer.join()
        assert fork_server.process.wait(timeout=10) == -signal.SIGKILL  # it died while the grading ran
        assert card.status == "graded" and card.score == card.max_score > 0, card.reason
    finally:
        backend.close()


def test_an_order_to_a_dead_template_gets_no_harness_and_leaves_nothing():
    from grader.sandbox.harness_process import start_fork_server

    exercise = load_exercise(EXERCISE)
    backend = LocalBackend(warm=True)
    fork_server = start_fork_server(exercise, "free", backend.settings(None, None))
    fork_server.process.kill()
    fork_server.process.wait()
    try:
        assert fork_server.order(None, None) is None and fork_server.gone
        assert not fork_server.fresh_for(exercise, "free")
    finally:
        fork_server.close()
    assert not fork_server.base.exists()


def test_a_template_that_does_not_fork_in_time_costs_no_grading(monkeypatch):
    """A fork server that never answers an order: the submission is not sent to it, it is graded by a
    harness of its own, and the backend uses no fork server again."""
    import os
    import signal

    from grader.sandbox import forkservers

    monkeypatch.setattr(forkservers, "FORK_SERVER_REPLY_S", 1.0)
    backend = LocalBackend(warm=True)
    try:
        assert grade(backend, STUB.read_bytes(), tier="free").status == "graded"
        (fork_server,) = backend._fork_servers.values()
        backend._ready.close()  # the harness it forked already: the next order is the stopped fork server's
        os.kill(fork_server.process.pid, signal.SIGSTOP)
        try:
            card = grade(backend, REFERENCE.read_bytes(), tier="free")
            assert card.status == "graded" and card.score == card.max_score > 0, card.reason
            assert "did not fork" in backend.fork_servers_off
            assert fork_server.abandoned and fork_server.gone
            again = grade(backend, REFERENCE.read_bytes(), tier="free")
            assert again.status == "graded" and again.score == again.max_score
        finally:
            os.kill(fork_server.process.pid, signal.SIGCONT)
    finally:
        backend.close()


def test_an_edit_of_exercise_toml_retires_the_template_and_the_waiting_sandbox(tmp_path):
    """Limits and names travel in every job: a sandbox or fork server made before exercise.toml changed
    is not used after."""
    from tests.helpers import exercise_copy

    folder = exercise_copy(tmp_path)
    backend = LocalBackend(warm=True)
    try:
        assert grade_bytes(REFERENCE.read_bytes(), load_exercise(folder), "free", backend, "warm").status == "graded"
        (before,) = backend._fork_servers.values()
        toml = folder / "exercise.toml"
        toml.write_text(toml.read_text().replace("memory_mb = 512", "memory_mb = 500"))
        edited = load_exercise(folder)
        assert edited.limits.memory_mb == 500
        card = grade_bytes(REFERENCE.read_bytes(), edited, "free", backend, "warm")
        assert card.status == "graded" and card.score == card.max_score, card.reason
        (after,) = backend._fork_servers.values()
        assert after is not before and after.layout.job.limits.memory_mb == 500
    finally:
        backend.close()
