"""The seed of random workloads: per submission, secret-keyed, recorded, and the same on a regrade."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import pytest

from grader.core.exercise import load_exercise
from grader.core.grading import grade_bytes, new_run
from grader.core.seeding import KEY_FILE, derive_seed, seed_for_source
from grader.sandbox.layout import run_input
from grader.sandbox.local import run_local
from tests.helpers import EXERCISE, REFERENCE, exercise_copy, mutant_file

# Fails the crowd workload (more than 64 decodes) and nothing in the visible suite.
MUTANT = mutant_file("29_at_most_64_decodes")


@pytest.fixture(scope="module")
def exercise():
    return load_exercise(EXERCISE)


@pytest.mark.unit
def test_the_seed_depends_on_the_submission_and_the_key(exercise, tmp_path, monkeypatch):
    monkeypatch.delenv("GRADER_SEED_KEY", raising=False)
    a, b = "a" * 64, "b" * 64
    assert derive_seed(a, exercise) == derive_seed(a, exercise)
    assert derive_seed(a, exercise) != derive_seed(b, exercise)
    assert 0 <= derive_seed(a, exercise) < 2**63
    # The exercise's key file is what makes it unpredictable: another key, other seeds.
    assert (exercise.root / "hidden_tests" / EXERCISE / KEY_FILE).is_file()
    copy = load_exercise(str(exercise_copy(tmp_path)))
    (copy.root / "hidden_tests" / EXERCISE / KEY_FILE).write_text("another key\n")
    assert derive_seed(a, copy) != derive_seed(a, exercise)
    monkeypatch.setenv("GRADER_SEED_KEY", "a course's own key")
    assert derive_seed(a, exercise) == derive_seed(a, copy) != derive_seed(a, replace(copy, slug="another"))


@pytest.mark.unit
def test_the_job_carries_the_seed_the_scorecard_records(exercise):
    source = REFERENCE.read_bytes()
    run = new_run(exercise, source)
    assert run.seed == seed_for_source(source, exercise)
    assert json.loads(run_input(run, source)[8:8 + int.from_bytes(run_input(run, source)[:8], "big")])["seed"] == run.seed
    assert seed_for_source(source, exercise) == derive_seed(hashlib.sha256(source).hexdigest(), exercise)


def test_a_regrade_reproduces_the_random_workloads_and_a_changed_file_draws_others(exercise):
    data = MUTANT.read_bytes()
    first, again = (grade_bytes(data, exercise, "premium", run_local, "local") for _ in range(2))
    changed = grade_bytes(data + b"\n# resubmitted\n", exercise, "premium", run_local, "local")
    assert first.seed == again.seed == seed_for_source(data, exercise)
    assert changed.seed not in (None, first.seed)
    failing = {t.name: t.message for t in first.tests if t.status != "passed"}
    assert "test_hundreds_of_running_requests_match_the_reference" in failing
    assert failing == {t.name: t.message for t in again.tests if t.status != "passed"}
    crowd = "test_hundreds_of_running_requests_match_the_reference"
    assert next(t.message for t in changed.tests if t.name == crowd) != failing[crowd]
