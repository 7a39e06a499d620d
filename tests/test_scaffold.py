"""`grader new`: a skeleton that is a working exercise at once, audited strong on the local sandbox."""

from __future__ import annotations

import stat

import pytest
import tomllib

from grader.audit.audit import run_audit
from grader.cli import main
from grader.confined.limits import Limits
from grader.core.exercise import TOP_LEVEL_KEYS, load_exercise
from grader.core.seed_checks import check_seeds
from grader.sandbox.local import LocalBackend


@pytest.fixture(scope="module")
def skeleton(tmp_path_factory):
    project = tmp_path_factory.mktemp("course")
    assert main(["new", "running-max", "--project", str(project), "--file", "running"]) == 0
    return project


@pytest.mark.unit
def test_the_skeleton_is_a_whole_exercise_with_a_private_key_and_every_key_written_out(skeleton):
    exercise = load_exercise(str(skeleton / "exercises" / "running-max"))
    assert exercise.submission_file == "running.py" and set(exercise.tiers) == {"free", "premium"}
    assert check_seeds(exercise).refusals == [] and check_seeds(exercise).warnings == []
    key = skeleton / "hidden_tests" / "running-max" / "seed.key"
    assert len(key.read_text().strip()) == 64 and stat.S_IMODE(key.stat().st_mode) == 0o600
    text = (skeleton / "exercises" / "running-max" / "exercise.toml").read_text()
    uncommented = "\n".join(line.lstrip("# ") for line in text.splitlines())
    for key_name in (*TOP_LEVEL_KEYS, *(f.name for f in Limits.__dataclass_fields__.values())):
        assert f"{key_name} =" in uncommented or f"[{key_name}" in uncommented, key_name
    assert tomllib.loads(text)["submission"] == "running.py"


@pytest.mark.unit
def test_grader_new_refuses_an_exercise_that_exists_and_a_bad_name(skeleton, capsys):
    assert main(["new", "running-max", "--project", str(skeleton)]) == 2
    assert "exists: choose another name" in capsys.readouterr().err
    assert main(["new", "Bad Name", "--project", str(skeleton)]) == 2
    assert "lower-case letters" in capsys.readouterr().err


def test_the_skeleton_is_audited_strong_as_written(skeleton):
    exercise = load_exercise(str(skeleton / "exercises" / "running-max"))
    audit = run_audit(exercise, LocalBackend(), "local")
    problems = [(row.label, row.problems) for row in audit.rows if row.problems]
    assert audit.ok, (problems, audit.refusals)
    assert audit.reference.card.score == audit.reference.card.max_score == 5 + 4 * 2
    assert all(row.caught_by for row in audit.mutants)
    # The mutants made from the reference are caught on every seed, but the one it declares equivalent.
    assert len(audit.generated) >= 10 and not audit.survivors
    assert [row.equivalent for row in audit.generated if row.equivalent] == [
        "a value equal to the largest so far is appended either way: the same number"]


def test_each_skeleton_names_its_own_exercise(skeleton, tmp_path):
    assert main(["new", "word-count", "--project", str(tmp_path), "--file", "counter"]) == 0
    exercise = load_exercise(str(tmp_path / "exercises" / "word-count"))
    assert exercise.title == "Word count" and exercise.names == ("word_count",)
    statement = (tmp_path / "exercises" / "word-count" / "README.md").read_text()
    assert statement.startswith("# Word count\n") and "`word_count(values)`" in statement
    assert statement != (skeleton / "exercises" / "running-max" / "README.md").read_text()
    assert "def word_count(" in (tmp_path / "exercises" / "word-count" / "counter.py").read_text()
    hidden = (tmp_path / "hidden_tests" / "word-count" / "test_word_count_hidden.py").read_text()
    assert "def test_word_count_of_a_random_list(" in hidden and 'ns["word_count"]' in hidden
    # A name that would shadow a builtin the skeleton calls, or is no Python name, is made one.
    assert main(["new", "max", "--project", str(tmp_path)]) == 0 and main(["new", "2sum", "--project", str(tmp_path)]) == 0
    assert "def exercise_max(" in (tmp_path / "solutions" / "max" / "solution.py").read_text()
    assert "def exercise_2sum(" in (tmp_path / "exercises" / "2sum" / "solution.py").read_text()
