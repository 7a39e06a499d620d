"""Suites and tiers are the exercise's data: a third exercise with names of its own grades correctly
on every tier it declares, and exercise.toml mistakes are caught with the file and the key."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from grader.cli import main
from grader.exercise import ExerciseError, list_tests, load_exercise
from grader.grading import grade_bytes
from grader.sandbox.local import run_local
from tests.helpers import EXERCISE, PROJECT

COURSE = PROJECT / "tests" / "course"
FOLDER = COURSE / "exercises" / "tiny_stats"
REFERENCE = COURSE / "solutions" / "tiny_stats" / "stats.py"
MUTANT = COURSE / "solutions" / "tiny_stats" / "mutants" / "01_spread_from_the_first_value.py"
STUB = FOLDER / "stats.py"


@pytest.fixture(scope="module")
def exercise():
    return load_exercise(str(FOLDER))


def test_the_exercise_declares_its_own_suites_and_tiers(exercise):
    assert list(exercise.tiers) == ["practice", "exam", "exam_only"] and exercise.default_tier == "practice"
    warmup, exam = exercise.suites["warmup"], exercise.suites["exam"]
    assert (warmup.label, warmup.points, warmup.reference, warmup.details) == ("Warm-up checks", 3, True, True)
    assert (exam.label, exam.points, exam.reference, exam.details) == ("Exam checks", 1, True, False)
    assert warmup.path == FOLDER / "checks" and exam.path == COURSE / "exam_tests" / "tiny_stats"


@pytest.mark.parametrize("tier", ["practice", "exam", "exam_only"])
def test_the_reference_gets_full_marks_on_every_tier(exercise, tier):
    card = grade_bytes(REFERENCE.read_bytes(), exercise, tier, run_local, "local")
    assert card.status == "graded", card.reason
    run = set(exercise.tiers[tier])
    assert {t.suite for t in card.tests} == run
    assert card.score == card.max_score == sum(
        exercise.points_for(name, suite) for suite in run for name in list_tests(exercise.suites[suite]))
    assert {(t.suite, t.name) for t in card.locked} == {
        (suite.name, name) for suite in exercise.suites.values() if suite.name not in run for name in list_tests(suite)}
    assert card.suite_labels == {"warmup": "Warm-up checks", "exam": "Exam checks"}


def test_the_stub_scores_zero_with_not_implemented(exercise):
    card = grade_bytes(STUB.read_bytes(), exercise, "exam", run_local, "local")
    assert card.status == "graded" and card.score == 0 and len(card.tests) == 6
    assert all(t.status == "failed" and "not implemented" in t.message for t in card.tests)


def test_details_follow_each_suite_flag(exercise):
    card = grade_bytes(MUTANT.read_bytes(), exercise, "exam", run_local, "local")
    by_name = {t.name: t for t in card.tests}
    # warmup shows details: the bare assertion's expression; exam does not.
    assert by_name["test_spread_of_three_values"].status == "failed"
    assert by_name["test_spread_of_three_values"].message == "assert 5 == 8"
    assert by_name["test_spread_of_a_random_list"].status == "failed"
    assert by_name["test_spread_of_a_random_list"].message == "a check of this test failed"
    assert card.score == card.max_score - 3 - 2  # [points] gives the random test 2 points


def test_the_cli_takes_the_declared_tiers_and_defaults_to_the_declared_one(tmp_path, capsys):
    out = tmp_path / "card.json"
    assert main(["grade", str(REFERENCE), "--exercise", str(FOLDER), "--sandbox", "local", "--json", str(out)]) == 0
    card = json.loads(out.read_text())
    assert card["tier"] == "practice" and card["score"] == card["max_score"] == 12
    assert "Warm-up checks: 4/4 tests passed" in " ".join(capsys.readouterr().out.split())
    assert main(["grade", str(REFERENCE), "--exercise", str(FOLDER), "--tier", "premium"]) == 2
    assert "unknown tier 'premium'; this exercise has: practice, exam, exam_only" in capsys.readouterr().err


def test_the_first_exercise_keeps_its_tiers_and_premium_default():
    exercise = load_exercise(EXERCISE)
    assert exercise.tiers == {"free": ("visible",), "premium": ("visible", "hidden")}
    assert exercise.default_tier == "premium" and not exercise.needs_reference("free")
    assert [s.label for s in exercise.suites.values()] == ["Visible tests", "Premium tests"]


def course_copy(tmp_path: Path, old: str, new: str) -> Path:
    """A private copy of the course with one edit of exercise.toml."""
    shutil.copytree(COURSE, tmp_path / "course", ignore=shutil.ignore_patterns("__pycache__"))
    toml = tmp_path / "course" / "exercises" / "tiny_stats" / "exercise.toml"
    text = toml.read_text()
    assert old in text
    toml.write_text(text.replace(old, new, 1))
    return toml.parent


def test_a_suite_that_uses_the_reference_without_declaring_it_fails_with_the_reason(tmp_path):
    folder = course_copy(tmp_path, "reference = true          #", "reference = false         #")
    exercise = load_exercise(str(folder))
    card = grade_bytes(REFERENCE.read_bytes(), exercise, "exam", run_local, "local")
    failing = {t.name: t.message for t in card.tests if t.status != "passed"}
    assert set(failing) == {f"test_mean_matches_the_reference[values{i}]" for i in range(3)}
    assert all("suite 'warmup' uses the reference solution: exercise.toml must say reference = true" in m
               for m in failing.values())


@pytest.mark.parametrize("old, new, expected", [
    ('folder = "exam_tests/tiny_stats"', 'folder = "../elsewhere"', "[suites.exam] needs folder"),
    ('folder = "exam_tests/tiny_stats"', 'folder = "exam_tests/nothing"', "exam_tests/nothing does not exist"),
    ('default_tier = "practice"', 'default_tier = "premium"', "default_tier 'premium' is not one of [tiers]"),
    ('exam_only = ["exam"]', 'exam_only = ["exam", "bonus"]', "tier 'exam_only' runs suite 'bonus'"),
    ("details = false", 'details = "no"', "reference and details are true or false"),
    ("details = false", "detail = false", "[suites.exam] has unknown keys: detail"),
    ("[limits]", '[sandbox]\npackages = ["Not a package!"]\n\n[limits]', "packages must be a list of Debian"),
    ('folder = "exam_tests/tiny_stats"', 'folder = "exercises/tiny_stats"',
     "suite 'warmup' lies in the folder of suite 'exam'"),
    ('default_tier = "practice"', 'default_tier = ["practice"]', "default_tier ['practice'] is not one of [tiers]"),
])
def test_exercise_toml_mistakes_are_named(tmp_path, old, new, expected):
    folder = course_copy(tmp_path, old, new)
    with pytest.raises(ExerciseError) as caught:
        load_exercise(str(folder))
    assert expected in str(caught.value) and "exercise.toml" in str(caught.value)


@pytest.mark.slow
def test_every_tier_grades_the_same_in_docker(exercise, docker_client, grading_image):
    from grader.sandbox.docker_backend import DockerBackend

    backend = DockerBackend(docker_client)
    for tier in exercise.tiers:
        card = grade_bytes(REFERENCE.read_bytes(), exercise, tier, backend, "docker")
        assert card.status == "graded", card.reason
        assert card.score == card.max_score > 0 and {t.suite for t in card.tests} == set(exercise.tiers[tier])
    card = grade_bytes(MUTANT.read_bytes(), exercise, "exam_only", backend, "docker")
    assert [t.name for t in card.tests if t.status != "passed"] == ["test_spread_of_a_random_list"]
