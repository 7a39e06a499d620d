"""Programs a class might write from the continuous_batching statement alone, graded on the premium tier.

tests/wrong_programs/continuous_batching/ holds whole `scheduler.py` files, each with one plausible
mistake that its docstring's first line says in a student's words; correct/ holds correct ones in other
styles. None is a copy of a mutant of solutions/continuous_batching/mutants/. Each is graded on three
seeds (the seed derives from the file's hash: a different comment line appended gives another): every
wrong one must lose points on every seed, in at least one test that does not draw a random workload
(a named test catches the mistake, not a lucky seed), and every correct one must get full marks.
"""

from __future__ import annotations

import ast
import concurrent.futures
from pathlib import Path

import pytest

from grader.exercise import load_exercise
from grader.grading import grade_bytes
from grader.sandbox.local import LocalBackend
from tests.helpers import EXERCISE, PROJECT

PROGRAMS = PROJECT / "tests" / "wrong_programs" / EXERCISE
WRONG = sorted(p.stem for p in PROGRAMS.glob("*.py"))
CORRECT = sorted(p.stem for p in (PROGRAMS / "correct").glob("*.py"))
SEEDS = 3
SUITES = [PROJECT / "exercises" / EXERCISE / "tests", PROJECT / "hidden_tests" / EXERCISE]


def seeded(path: Path, seed: int) -> bytes:
    """The program with a comment line of its own appended: the same code, another seed."""
    return path.read_bytes() + f"\n# graded as variant {seed}\n".encode()


def names_of_seeded_tests() -> set[str]:
    """The names of the tests that take the `seed` fixture (their workloads depend on the seed)."""
    names = set()
    for folder in SUITES:
        for file in folder.glob("test_*.py"):
            for node in ast.walk(ast.parse(file.read_text())):
                if isinstance(node, ast.FunctionDef) and node.name.startswith("test_") \
                        and any(arg.arg == "seed" for arg in node.args.args):
                    names.add(node.name)
    return names


def docstring_line(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


@pytest.fixture(scope="module")
def cards() -> dict[tuple[str, str, int], object]:
    """(kind, name, seed) -> scorecard, for every program on every seed; two gradings at a time."""
    exercise = load_exercise(EXERCISE)
    backend = LocalBackend()
    jobs = [("wrong", name, PROGRAMS / f"{name}.py") for name in WRONG]
    jobs += [("correct", name, PROGRAMS / "correct" / f"{name}.py") for name in CORRECT]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = {(kind, name, seed): pool.submit(grade_bytes, seeded(path, seed), exercise, "premium", backend, "local")
                   for kind, name, path in jobs for seed in range(SEEDS)}
        return {key: future.result() for key, future in futures.items()}


def test_there_are_enough_programs_and_each_wrong_one_says_its_mistake():
    assert len(WRONG) >= 14 and len(CORRECT) >= 3, (WRONG, CORRECT)
    reference = (PROJECT / "solutions" / EXERCISE / "scheduler.py").read_text()
    mutants = {p.read_text() for p in (PROJECT / "solutions" / EXERCISE / "mutants").glob("*.py")}
    for name in WRONG:
        path = PROGRAMS / f"{name}.py"
        assert len(docstring_line(path)) > 20, f"{name}: the docstring's first line says the mistake"
        assert path.read_text() not in mutants and path.read_text() != reference, name


def failed(card) -> list[str]:
    return [t.name for t in card.tests if t.status != "passed"]


@pytest.mark.slow
@pytest.mark.parametrize("name", WRONG)
def test_a_wrong_program_loses_points_on_every_seed_in_a_named_test(cards, name):
    drawing = names_of_seeded_tests()
    for seed in range(SEEDS):
        card = cards[("wrong", name, seed)]
        assert card.status == "graded", (name, seed, card.status, card.reason)
        assert card.score < card.max_score, f"{name} (seed variant {seed}) got full marks: {docstring_line(PROGRAMS / f'{name}.py')}"
        named = [test for test in failed(card) if test.split("[")[0] not in drawing]
        assert named, f"{name} (seed variant {seed}) fails only tests that draw random workloads: {failed(card)}"


@pytest.mark.slow
@pytest.mark.parametrize("name", CORRECT)
def test_a_correct_program_gets_full_marks_on_every_seed(cards, name):
    for seed in range(SEEDS):
        card = cards[("correct", name, seed)]
        assert card.status == "graded" and card.score == card.max_score > 0, (
            name, seed, [(t.name, t.message[:200]) for t in card.tests if t.status != "passed"])
