"""An exercise's random workloads: drawn per submission from a key, or refused by `audit` and `package`;
a constant seed in a suite is named with its line."""

from __future__ import annotations

import textwrap

import pytest

from grader.audit.audit import Audit, AuditRow
from grader.cli import main
from grader.core.exercise import load_exercise
from grader.core.scorecard import Scorecard
from grader.core.seed_checks import check_seeds
from tests.helpers import EXERCISE, exercise_copy

pytestmark = pytest.mark.unit


def test_the_shipped_exercises_draw_per_submission_from_their_keys():
    for slug in (EXERCISE, "paged_kv_cache"):
        findings = check_seeds(load_exercise(slug))
        assert findings.refusals == [] and findings.warnings == [], (slug, findings)


@pytest.fixture
def copy_without_key(tmp_path, monkeypatch):
    monkeypatch.delenv("GRADER_SEED_KEY", raising=False)
    folder = exercise_copy(tmp_path)
    (tmp_path / "hidden_tests" / EXERCISE / "seed.key").unlink()
    return folder


def test_random_tests_without_a_key_are_refused_by_package_and_by_audit(copy_without_key, tmp_path, capsys):
    exercise = load_exercise(str(copy_without_key))
    refusal = check_seeds(exercise).refusals
    assert len(refusal) == 1 and "draw from the `seed` fixture" in refusal[0] and "seed.key" in refusal[0]
    code = main(["package", "--target", "gradescope", "--exercise", str(exercise.folder), "-o",
                 str(tmp_path / "autograder.zip")])
    assert code == 2 and "has no key" in capsys.readouterr().err
    assert not (tmp_path / "autograder.zip").exists()
    # audit grades as ever, and its verdict counts the refusal: a suite anyone can predict is not strong.
    graded = Scorecard(exercise=EXERCISE, tier="premium", submission_sha256="", status="graded", score=1, max_score=1)
    row = AuditRow("reference", exercise.reference, graded)
    assert Audit(row, row, [], "premium").ok and not Audit(row, row, [], "premium", refusals=refusal).ok


def test_a_fixed_seed_in_a_suite_is_named_with_its_line(tmp_path):
    folder = exercise_copy(tmp_path)
    suite = tmp_path / "hidden_tests" / EXERCISE / "test_hidden_fixed.py"
    suite.write_text(textwrap.dedent('''
        import random


        def test_the_same_workload_for_everyone(ns):
            rng = random.Random(7)
            assert rng.random() < 2


        def test_a_drawn_workload(ns, seed):
            assert random.Random(f"x{seed}").random() < 2
        '''))
    findings = check_seeds(load_exercise(str(folder)))
    assert findings.refusals == []
    assert len(findings.warnings) == 1 and "test_hidden_fixed.py:6: random.Random(7) draws from a fixed seed" \
        in findings.warnings[0]
