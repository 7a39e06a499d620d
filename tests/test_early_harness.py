"""A harness started before its job: `grader grade` starts the harness's interpreter first of all, and
the grading takes it; whatever does not take it (another sandbox, a folder of another
kind, a refused exercise, a failure) ends it and leaves nothing behind."""

from __future__ import annotations

import os
import subprocess

import pytest

from grader.cli import main
from grader.core.exercise import load_exercise
from grader.core.grading import grade_bytes
from grader.sandbox import interpreter
from grader.sandbox.interpreter import WaitingHarness, early_harness
from grader.sandbox.local import LocalBackend
from tests.helpers import EXERCISE, REFERENCE

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the local sandbox's namespaces as root")


def ended_and_gone(waiting: WaitingHarness) -> bool:
    return waiting.process.poll() is not None and not waiting.base.exists()


@pytest.fixture
def started(monkeypatch) -> list[WaitingHarness]:
    """Every harness process started in this test, early or not."""
    from grader.sandbox import harness_process

    made: list[WaitingHarness] = []
    real = interpreter.start_harness_process

    def recorded(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(interpreter, "start_harness_process", recorded)
    monkeypatch.setattr(harness_process, "start_harness_process", recorded)
    return made


def test_an_early_harness_waits_for_its_job_and_is_ended_when_nothing_takes_it():
    waiting = early_harness("local")
    assert waiting is not None
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            waiting.process.wait(timeout=0.5)  # started, waiting on its input
        assert waiting.base.is_dir() and waiting.base.parent == interpreter.jobs_root()
    finally:
        waiting.discard()
    assert ended_and_gone(waiting)


@pytest.mark.unit
def test_no_early_harness_where_the_grading_will_not_be_local(monkeypatch):
    assert early_harness("docker") is None
    monkeypatch.setenv("DOCKER_HOST", "unix:///nowhere/docker.sock")
    assert early_harness("auto") is None


def test_grade_takes_the_harness_it_started_early_and_leaves_nothing(started, tmp_path, capsys):
    card = tmp_path / "card.json"
    assert main(["grade", str(REFERENCE), "--exercise", EXERCISE, "--sandbox", "local", "--tier", "free",
                 "--json", str(card)]) == 0
    assert '"status": "graded"' in card.read_text()
    assert len(started) == 1, "one harness: the one started early did the grading"
    assert started[0].claimed and ended_and_gone(started[0])


def test_grade_ends_the_early_harness_when_the_exercise_is_refused(started, tmp_path, capsys):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "exercise.toml").write_text("this is not toml [")
    assert main(["grade", str(REFERENCE), "--exercise", str(folder), "--sandbox", "local"]) == 2
    assert "must sit in an exercises/ folder" in capsys.readouterr().err
    assert len(started) == 1 and ended_and_gone(started[0])


def test_grade_ends_the_early_harness_when_the_grading_cannot_start(started, tmp_path, capsys, monkeypatch):
    from grader.sandbox import choose

    def no_sandbox(*args, **kwargs):
        raise choose.SandboxUnavailable("no sandbox here, for this test")

    monkeypatch.setattr(choose, "choose", no_sandbox)
    assert main(["grade", str(REFERENCE), "--exercise", EXERCISE, "--sandbox", "local"]) == 3
    assert "no sandbox here" in capsys.readouterr().err
    assert len(started) == 1 and ended_and_gone(started[0])


def test_a_harness_started_in_another_kind_of_folder_is_ended_and_a_fresh_one_grades(started, monkeypatch):
    from grader.sandbox import harness_process

    waiting = early_harness("local")
    assert waiting is not None
    # A grading whose job folder belongs elsewhere (the temporary folder, as without namespaces).
    monkeypatch.setattr(harness_process, "job_parent", lambda settings: None)
    card = grade_bytes(REFERENCE.read_bytes(), load_exercise(EXERCISE), "free", LocalBackend(waiting=waiting))
    assert card.status == "graded" and card.score == card.max_score, card.reason
    assert len(started) == 2 and ended_and_gone(waiting)
    assert not started[1].base.exists()
