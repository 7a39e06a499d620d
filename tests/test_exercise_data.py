"""Suites and tiers are the exercise's data: a third exercise with names of its own grades correctly
on every tier it declares, and exercise.toml mistakes are caught with the file and the key."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from grader.cli import main
from grader.core.exercise import ExerciseError, load_exercise
from grader.core.grading import grade_bytes
from grader.core.page_settings import Prediction, WebSettings
from grader.core.suite_tests import list_tests
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


@pytest.mark.unit
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
    # Held back, the values are not shown, but the rule the test checks is.
    assert by_name["test_spread_of_a_random_list"].message == \
        "a check of this test failed: spread() of a random list matches the reference."
    assert card.score == card.max_score - 3 - 2  # [points] gives the random test 2 points


def test_the_cli_takes_the_declared_tiers_and_defaults_to_the_declared_one(tmp_path, capsys):
    out = tmp_path / "card.json"
    assert main(["grade", str(REFERENCE), "--exercise", str(FOLDER), "--sandbox", "local", "--json", str(out)]) == 0
    card = json.loads(out.read_text())
    assert card["tier"] == "practice" and card["score"] == card["max_score"] == 12
    assert "Warm-up checks: 4/4 tests passed" in " ".join(capsys.readouterr().out.split())
    assert main(["grade", str(REFERENCE), "--exercise", str(FOLDER), "--tier", "premium"]) == 2
    assert "unknown tier 'premium'; this exercise has: practice, exam, exam_only" in capsys.readouterr().err


@pytest.mark.unit
def test_the_first_exercise_keeps_its_tiers_and_premium_default():
    exercise = load_exercise(EXERCISE)
    assert exercise.tiers == {"free": ("visible",), "premium": ("visible", "hidden")}
    assert exercise.default_tier == "premium" and not exercise.needs_reference("free")
    assert [s.label for s in exercise.suites.values()] == ["Visible tests", "Premium tests"]


PREDICTION = '[prediction]\nquestion = "Which is larger?"\nchoices = ["one", "two"]\n'


def course_copy(tmp_path: Path, old: str = "", new: str = "", files: dict[str, str] | None = None) -> Path:
    """A private copy of the course with one edit of exercise.toml and `files` (path in the course: text)
    written."""
    shutil.copytree(COURSE, tmp_path / "course", ignore=shutil.ignore_patterns("__pycache__"))
    toml = tmp_path / "course" / "exercises" / "tiny_stats" / "exercise.toml"
    text = toml.read_text()
    assert old in text
    toml.write_text(text.replace(old, new, 1))
    for name, content in (files or {}).items():
        (tmp_path / "course" / name).write_text(content)
    return toml.parent


def test_a_suite_that_uses_the_reference_without_declaring_it_is_an_error_naming_it(tmp_path):
    # The exercise's mistake: no student loses points to it, the grading is an error that says what to fix.
    folder = course_copy(tmp_path, "reference = true          #", "reference = false         #")
    exercise = load_exercise(str(folder))
    card = grade_bytes(REFERENCE.read_bytes(), exercise, "exam", run_local, "local")
    assert card.status == "error" and card.score == 0 and not card.tests
    assert "the exercise is misconfigured" in card.reason
    assert "suite 'warmup' uses the reference solution: exercise.toml must say reference = true" in card.reason


def test_a_test_that_asks_for_a_name_the_exercise_does_not_declare_is_an_error_naming_it(tmp_path):
    folder = course_copy(tmp_path, 'names = ["mean", "spread"]', 'names = ["mean"]')
    card = grade_bytes(REFERENCE.read_bytes(), load_exercise(str(folder)), "exam", run_local, "local")
    assert card.status == "error" and card.score == 0
    assert "the exercise is misconfigured" in card.reason and "does not declare the name 'spread'" in card.reason


def test_tests_in_classes_are_graded_and_named_with_their_class(tmp_path):
    folder = course_copy(tmp_path, "[points]\n", '[points]\n"TestSpread::test_of_two" = 4\n', files={
        "exercises/tiny_stats/checks/test_classes.py": (
            "class TestSpread:\n"
            "    def test_of_two(self, ns):\n"
            "        assert ns['spread']([1, 5]) == 4\n\n"
            "    def test_of_one(self, ns):\n"
            "        assert ns['spread']([7]) == 0\n")})
    exercise = load_exercise(str(folder))
    assert set(list_tests(exercise.suites["warmup"])) >= {"TestSpread::test_of_two", "TestSpread::test_of_one"}
    card = grade_bytes(REFERENCE.read_bytes(), exercise, "practice", run_local, "local")
    assert card.status == "graded", card.reason
    points = {t.name: (t.status, t.score) for t in card.tests}
    assert points["TestSpread::test_of_two"] == ("passed", 4) and points["TestSpread::test_of_one"] == ("passed", 3)
    assert card.score == card.max_score == 4 * 3 + 4 + 3


def test_two_tests_of_the_same_name_are_refused_naming_both_files(tmp_path, capsys):
    folder = course_copy(tmp_path, files={"exam_tests/tiny_stats/test_more.py": (
        "def test_spread_of_three_values(ns):\n    assert ns['spread']([4, 1, 9]) == 8\n")})
    exercise = load_exercise(str(folder))
    with pytest.raises(ExerciseError) as caught:
        grade_bytes(REFERENCE.read_bytes(), exercise, "practice", run_local, "local")
    message = str(caught.value)
    assert "two tests are named test_spread_of_three_values" in message
    assert "checks/test_warmup.py" in message and "exam_tests/tiny_stats/test_more.py" in message
    assert main(["grade", str(REFERENCE), "--exercise", str(folder), "--sandbox", "local"]) == 2
    assert "two tests are named test_spread_of_three_values" in capsys.readouterr().err


@pytest.mark.unit
def test_points_for_a_test_that_does_not_exist_are_refused_with_the_nearest_name(tmp_path):
    folder = course_copy(tmp_path, "test_spread_of_a_random_list = 2", "test_spread_of_a_random_lst = 2")
    with pytest.raises(ExerciseError) as caught:
        grade_bytes(REFERENCE.read_bytes(), load_exercise(str(folder)), "practice", run_local, "local")
    assert "[points] test_spread_of_a_random_lst names no test" in str(caught.value)
    assert "did you mean test_spread_of_a_random_list?" in str(caught.value)


@pytest.mark.unit
def test_a_missing_reference_is_refused_when_a_suite_uses_it(tmp_path):
    folder = course_copy(tmp_path)
    (folder.parent.parent / "solutions" / "tiny_stats" / "stats.py").unlink()
    with pytest.raises(ExerciseError) as caught:
        load_exercise(str(folder))
    assert "suite 'warmup' uses the reference solution (reference = true), and there is no" in str(caught.value)
    assert "solutions/tiny_stats/stats.py" in str(caught.value)


@pytest.mark.unit
def test_two_test_files_of_the_same_name_in_the_suites_are_refused(tmp_path):
    # pytest would import one in place of the other: every grading would fail to collect.
    folder = course_copy(tmp_path, files={"exam_tests/tiny_stats/test_warmup.py": "def test_other():\n    pass\n"})
    with pytest.raises(ExerciseError) as caught:
        load_exercise(str(folder))
    assert "two test files are named test_warmup.py" in str(caught.value) and "rename one" in str(caught.value)


@pytest.mark.unit
def test_an_exercise_folder_whose_name_is_not_an_exercise_name_is_refused(tmp_path):
    folder = course_copy(tmp_path)
    odd = folder.rename(folder.parent / "tiny stats;x")
    with pytest.raises(ExerciseError) as caught:
        load_exercise(str(odd))
    assert "the folder's name 'tiny stats;x' is the exercise's name" in str(caught.value)


def test_a_suite_that_cannot_be_imported_is_named_with_its_error(tmp_path, capsys):
    # On the host (the listing of the tests) and in the harness (here a module only the host's
    # listing has: the grading's pytest is not run with --collect-only).
    folder = course_copy(tmp_path, files={"exam_tests/tiny_stats/test_broken.py": (
        "import no_such_module_anywhere\n\ndef test_x():\n    pass\n")})
    with pytest.raises(ExerciseError) as caught:
        grade_bytes(REFERENCE.read_bytes(), load_exercise(str(folder)), "exam", run_local, "local")
    message = str(caught.value)
    assert "test_broken.py: ModuleNotFoundError: No module named 'no_such_module_anywhere'" in message
    assert "importlib" not in message and len(message.splitlines()) <= 3
    folder = course_copy(tmp_path / "again", files={"exam_tests/tiny_stats/test_broken.py": (
        "import sys\n\nif '--collect-only' not in sys.argv:\n    import only_where_tests_are_listed\n\n"
        "def test_x():\n    pass\n")})
    card = grade_bytes(REFERENCE.read_bytes(), load_exercise(str(folder)), "exam", run_local, "local")
    assert card.status == "error"
    assert card.reason == ("a test file could not be collected: exam/test_broken.py: ModuleNotFoundError: "
                           "No module named 'only_where_tests_are_listed'"), card.reason


@pytest.mark.parametrize("old, new, expected", [
    ('folder = "exam_tests/tiny_stats"', 'folder = "../elsewhere"', "[suites.exam] needs folder"),
    ('folder = "exam_tests/tiny_stats"', 'folder = "exam_tests/nothing"', "exam_tests/nothing does not exist"),
    ('default_tier = "practice"', 'default_tier = "premium"', "default_tier 'premium' is not one of [tiers]"),
    ('exam_only = ["exam"]', 'exam_only = ["exam", "bonus"]', "tier 'exam_only' runs suite 'bonus'"),
    ("details = false", 'details = "no"', "[suites.exam]: details is true or false, not 'no'"),
    ("details = false", "detail = false", "[suites.exam] has unknown keys: detail"),
    ("[limits]", '[sandbox]\npackages = ["Not a package!"]\n\n[limits]', "packages must be a list of Debian"),
    ('folder = "exam_tests/tiny_stats"', 'folder = "exercises/tiny_stats"',
     "suite 'warmup' lies in the folder of suite 'exam'"),
    ('default_tier = "practice"', 'default_tier = ["practice"]', "default_tier ['practice'] is not one of [tiers]"),
    ('default_tier = "practice"', 'default_teir = "exam"', "unknown key 'default_teir' (did you mean default_tier?)"),
    ("[limits]", '[sandbox]\npackage = ["python3-numpy"]\n\n[limits]',
     "[sandbox] unknown key 'package' (did you mean packages?)"),
    ("[limits]", '[web]\nsolutions = "never"\n\n[limits]', "[web] unknown key 'solutions' (did you mean solution?)"),
    ('names = ["mean", "spread"]', 'names = "mean"', "names must be [\"the\", \"names\""),
    ('names = ["mean", "spread"]', 'names = ["mean", "not a name"]', "names must list the submission's names"),
    ('title = "Tiny statistics"', "", "title is missing"),
    ("points = 1", "points = -3", "[suites.exam] needs points = <a whole number, 0 or more>, the points of each test, "
                                  "not -3"),
    ("reference = true\n", 'reference = "yes"\n', "[suites.exam]: reference is true or false, not 'yes'"),
    ("test_spread_of_a_random_list = 2", "test_spread_of_a_random_list = -2",
     "[points] test_spread_of_a_random_list must be a whole number of points (0 or more), not -2"),
    ("[limits]", "max_submission_kb = 0\n\n[limits]", "max_submission_kb must be a whole number of KiB above 0"),
    ("[limits]", "[limits]\nmemory_mb = 1", "limit 'memory_mb' must be at least 32"),
    ("[limits]", "[limits]\nopen_files = 8", "limit 'open_files' must be at least 16"),
    # The web page's settings are checked by every command, not first by a student opening the page.
    ("[limits]", f"{PREDICTION}answer = 3\n\n[limits]", "[prediction] answer must be the number of the right "
                                                          "choice, 1 to 2, not 3"),
    ("[limits]", f"{PREDICTION}answer = true\n\n[limits]", "[prediction] answer must be the number"),
    ("[limits]", '[prediction]\nquestion = "Which?"\nchoices = ["only one"]\nanswer = 1\n\n[limits]',
     "[prediction] choices must list two or more answers as text, not ['only one']"),
    ("[limits]", '[prediction]\nchoices = ["a", "b"]\nanswer = 1\n\n[limits]', "[prediction] question must be"),
    ("[limits]", f"{PREDICTION}answer = 1\nwhy = 3\n\n[limits]", "[prediction] why must be text"),
    ("[limits]", '[web]\nsolution = "sometimes"\n\n[limits]',
     "[web] solution must be one of never, after_first_graded, after_full_marks or a date (YYYY-MM-DD), not 'sometimes'"),
    ("[limits]", '[web]\nsolution = "2026-W01"\n\n[limits]', "[web] solution must be one of"),
    ("[limits]", '[web]\nsubmission_interval_s = "30s"\n\n[limits]',
     "[web] submission_interval_s must be a number of seconds, 0 or more, not '30s'"),
    ("[limits]", "[web]\nsubmission_interval_s = -1\n\n[limits]", "submission_interval_s must be a number"),
    ("[limits]", "[web]\nsubmission_interval_s = nan\n\n[limits]", "submission_interval_s must be a number"),
])
def test_exercise_toml_mistakes_are_named(tmp_path, old, new, expected):
    folder = course_copy(tmp_path, old, new)
    with pytest.raises(ExerciseError) as caught:
        load_exercise(str(folder))
    assert expected in str(caught.value) and "exercise.toml" in str(caught.value)


@pytest.mark.unit
def test_a_grading_refuses_an_exercise_whose_web_settings_are_wrong(tmp_path, capsys):
    folder = course_copy(tmp_path, "[limits]", '[web]\nsolution = "sometimes"\n\n[limits]')
    (tmp_path / "stats.py").write_text((folder / "stats.py").read_text())
    # Refused before any sandbox is asked for (with the local one, a harness started early is ended unused:
    # tests/test_early_harness.py).
    assert main(["grade", str(tmp_path / "stats.py"), "--exercise", str(folder), "--sandbox", "docker"]) == 2
    assert "[web] solution must be one of" in capsys.readouterr().err


@pytest.mark.unit
def test_the_web_pages_settings_are_read_with_the_exercise(tmp_path):
    folder = course_copy(tmp_path, "[limits]", f"{PREDICTION}answer = 2\nwhy = \"Because.\"\n\n"
                                               "[web]\nsolution = 2027-01-15\nsubmission_interval_s = 0\n\n[limits]")
    exercise = load_exercise(str(folder))
    assert exercise.prediction == Prediction("Which is larger?", ("one", "two"), 1, "Because.")
    assert exercise.web == WebSettings("2027-01-15", 0.0)  # a TOML date, as the text of one
    assert load_exercise("continuous_batching").web == WebSettings("after_first_graded", 30.0)


@pytest.mark.unit
def test_the_fingerprint_covers_what_decides_a_grade_and_no_date_or_page_text(tmp_path):
    """A due date, a closing date, the title, the question, a suite's label and the web page's settings
    change no grade: scorecards graded before such an edit are not another version's ("regrade all").
    A limit, a suite's points or a test's points do change it."""
    from grader.core.fingerprint import exercise_fingerprint

    folder = course_copy(tmp_path)
    toml = folder / "exercise.toml"
    original = toml.read_text()
    before = exercise_fingerprint(load_exercise(str(folder)))

    def edited(old: str, new: str) -> str:
        assert old in original
        toml.write_text(original.replace(old, new, 1))
        return exercise_fingerprint(load_exercise(str(folder)))

    for old, new in (
            ("[limits]", '[web]\ndue = 2026-12-20T23:59:00+01:00\ncloses = 2026-12-22T23:59:00+01:00\n\n[limits]'),
            ("[limits]", '[web]\nsolution = "never"\nsubmission_interval_s = 5\n\n[limits]'),
            ('title = "Tiny statistics"', 'title = "Tiny statistics, again"'),
            ("[limits]", f"{PREDICTION}answer = 2\nwhy = \"Because.\"\n\n[limits]"),
            ('label = "Warm-up checks"', 'label = "First checks"'),
            ('default_tier = "practice"', 'default_tier = "exam"')):
        assert edited(old, new) == before, new
    for old, new in (("call_timeout_s = 5", "call_timeout_s = 6"), ("points = 3", "points = 4"),
                     ("test_spread_of_a_random_list = 2", "test_spread_of_a_random_list = 3"),
                     ('exam_only = ["exam"]', 'exam_only = ["exam", "warmup"]')):
        assert edited(old, new) != before, new
    (folder / "checks" / "test_more.py").write_text("def test_more():\n    pass\n")
    toml.write_text(original)
    assert exercise_fingerprint(load_exercise(str(folder))) != before, "a suite's new test file left it the same"


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


@pytest.mark.unit
def test_an_asserts_own_message_comes_with_the_values_compared_where_details_are_shown():
    from grader.harness.outcomes import assertion_message

    rewritten = AssertionError("step 10: keys()\nassert [1, 2] == [1, 3]\n  At index 1 diff: 2 != 3")
    assert assertion_message(rewritten, True) == "step 10: keys()\nassert [1, 2] == [1, 3]\n  At index 1 diff: 2 != 3"
    assert assertion_message(rewritten, False, "keys() lists the live blocks") == "step 10: keys()"
    bare = AssertionError("assert 5 == 8")
    assert assertion_message(bare, True) == "assert 5 == 8"
    assert assertion_message(bare, False, "spread() is max - min") == "a check of this test failed: spread() is max - min"
    assert assertion_message(bare, False) == "a check of this test failed"
    assert assertion_message(AssertionError("the plan is empty"), True) == "the plan is empty"


@pytest.mark.unit
def test_an_authors_mutant_is_kept_as_the_change_it_makes_and_follows_the_reference():
    """solutions/<slug>/mutants/*.diff: a few lines each, where 85 whole files were; the file each makes
    is the mutant, and an edit of the reference elsewhere changes no change."""
    from grader.core.mutant_files import ChangeError, apply_change, make_change

    for slug in ("continuous_batching", "paged_kv_cache"):
        exercise = load_exercise(slug, PROJECT)
        changes = sorted((exercise.reference.parent / "mutants").glob("*.diff"))
        assert changes and not list((exercise.reference.parent / "mutants").glob("*.py"))
        assert [p.stem for p in exercise.mutants] == [p.stem for p in changes]
        assert sum(len(p.read_text().splitlines()) for p in changes) < 40 * len(changes)
    reference = "'''Doc.'''\n\n\ndef f(x):\n    if x > 0:\n        return 1\n    return 0\n\n\ndef g():\n    return 2\n"
    mutant = reference.replace("if x > 0:", "if x >= 0:")
    change = make_change(reference, mutant, "f.py")
    assert "-    if x > 0:\n+    if x >= 0:\n" in change and apply_change(reference, change) == mutant
    moved = "import os\n\n\n" + reference.replace("return 2", "return 3")  # edited above and below it
    assert apply_change(moved, change) == moved.replace("if x > 0:", "if x >= 0:")
    with pytest.raises(ChangeError, match="hunk 1"):
        apply_change(reference.replace("if x > 0:", "if x > 1:"), change, "m.diff")
