"""`grader audit`: the real exercise passes it, and a weak suite is caught."""

from __future__ import annotations

import shutil
from dataclasses import replace

from grader.cli import main
from tests.helpers import EXERCISE, REFERENCE, exercise_copy


def test_the_exercise_passes_its_audit_with_fifteen_or_more_mutants(capsys):
    assert main(["audit", EXERCISE, "--sandbox", "local"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "the suite is strong" in out
    caught, total = out.split(" mutants caught")[0].rsplit(" ", 1)[1].split("/")
    assert caught == total and int(total) >= 15
    # Every tier the exercise declares gets its figure; the free tier's suite catches only some.
    free = out.split("tier free (visible): its tests catch ")[1].split(" mutants")[0]
    premium = out.split("tier premium (visible, hidden): its tests catch ")[1].split(" mutants")[0]
    assert premium == f"{total} of {total}"
    assert 0 < int(free.split(" of ")[0]) < int(total)


def test_a_mutant_that_no_test_catches_makes_the_audit_fail(tmp_path, capsys):
    folder = exercise_copy(tmp_path)
    mutants = tmp_path / "solutions" / EXERCISE / "mutants"
    shutil.rmtree(mutants)
    mutants.mkdir()
    survivor = mutants / "01_same_as_reference.py"
    survivor.write_text(REFERENCE.read_text())  # identical to the reference: nothing can catch it
    assert main(["audit", str(folder), "--sandbox", "local"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "no test catches this mutant" in out and "the suite is WEAK" in out



def test_tier_figures_follow_the_declared_tiers_whatever_their_names(tmp_path, monkeypatch):
    """No tier name is assumed: the top tier runs the most suites, and a tier it does not cover is
    graded on its own. Grading is stood in for: a file's text names the suite whose test it fails."""
    import grader.audit as audit
    from grader.exercise import load_exercise
    from grader.scorecard import Scorecard, TestResult

    copy = load_exercise(str(exercise_copy(tmp_path)))
    exercise = replace(copy, tiers={"taster": ("visible",), "everything": ("visible", "hidden"), "odd": ("other",)})
    copy.reference.write_text("ok")
    copy.stub.write_text("stub")
    mutants = copy.reference.parent / "mutants"
    shutil.rmtree(mutants)
    mutants.mkdir()
    for name, bug in (("m1", "visible"), ("m2", "hidden"), ("m3", "other")):
        (mutants / f"{name}.py").write_text(bug)
    graded = []

    def fake_grade(data, exercise, tier, backend, name):
        graded.append(tier)
        bug = data.decode()
        tests = [TestResult(f"{suite}::t", f"test_{suite}", suite, "failed" if bug in (suite, "stub") else "passed",
                            0 if bug in (suite, "stub") else 1, 1, message="not implemented" if bug == "stub" else "")
                 for suite in exercise.tiers[tier]]
        return Scorecard(exercise.slug, tier, "", "graded", sum(t.score for t in tests), len(tests), tests=tests)

    monkeypatch.setattr(audit, "grade_bytes", fake_grade)
    result = audit.run_audit(exercise, backend=None, backend_name="none")
    assert result.tier == "everything"
    assert [(f.tier, f.caught, f.mutants) for f in result.tiers] == [("taster", 1, 3), ("everything", 2, 3),
                                                                     ("odd", 1, 3)]
    assert graded.count("odd") == 3  # each mutant once more, on the tier the top tier does not cover
    assert [row.problems for row in result.mutants] == [[], [], ["no test catches this mutant"]]


def test_an_audit_without_the_stub_says_so(tmp_path, capsys):
    folder = exercise_copy(tmp_path)
    (folder / "scheduler.py").unlink()
    assert main(["audit", str(folder), "--sandbox", "local"]) == 2
    assert f"an audit grades the stub, and there is no {folder / 'scheduler.py'}" in " ".join(capsys.readouterr().err.split())


def test_an_exercise_that_cannot_be_graded_gets_no_verdict_on_its_suite(tmp_path, capsys):
    folder = exercise_copy(tmp_path)
    shutil.rmtree(tmp_path / "solutions" / EXERCISE / "mutants")
    visible = folder / "tests" / "test_visible.py"  # a visible test asks for the reference it may not use
    visible.write_text(visible.read_text().replace("def test_decodes_run_before_the_prompt(ns):",
                                                   "def test_decodes_run_before_the_prompt(ns, reference):"))
    assert main(["audit", str(folder), "--sandbox", "local"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "the exercise is misconfigured" in out and "must say reference = true" in out
    assert "the exercise cannot be graded" in out and "WEAK" not in out
