"""Warm sandboxes: a sandbox started before its submission exists grades exactly that one submission,
as a cold one would, whatever the submission before it did."""

from __future__ import annotations

import pytest

from grader.exercise import load_exercise
from grader.grading import grade_bytes
from grader.sandbox.local import LocalBackend
from tests.helpers import ATTACKS, EXERCISE, PROJECT, REFERENCE, STUB

MUTANT = PROJECT / "solutions" / EXERCISE / "mutants" / "03_skip_blocked_head.py"
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
    import os
    import subprocess

    backend = LocalBackend(warm=True)
    grade(backend, STUB.read_bytes(), tier="free")
    (waiting,) = backend._ready.ready.values()
    base, pid = waiting.base, waiting.process.pid
    assert base.is_dir()
    backend.close()
    assert not base.exists() and len(backend._ready) == 0
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    left = subprocess.run(["pgrep", "-f", str(base)], capture_output=True, text=True).stdout.split()
    assert left == []
