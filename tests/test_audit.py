"""`grader audit`: the real exercise passes it, and a weak suite is caught."""

from __future__ import annotations

import shutil

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
