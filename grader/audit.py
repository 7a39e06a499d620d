"""`grader audit`: proof that an exercise's suites are strong enough to trust.

The reference must get full marks, the stub nothing (every test failing cleanly, no harness error),
and every mutant (a plausible bug, one per file) must fail at least one test.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grader.exercise import Exercise
from grader.grading import Backend, grade_bytes
from grader.scorecard import Scorecard


@dataclass
class AuditRow:
    label: str
    path: Path
    card: Scorecard
    description: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def caught_by(self) -> list[str]:
        return [t.name for t in self.card.tests if t.status != "passed"]


@dataclass
class Audit:
    reference: AuditRow
    stub: AuditRow
    mutants: list[AuditRow]

    @property
    def rows(self) -> list[AuditRow]:
        return [self.reference, self.stub, *self.mutants]

    @property
    def ok(self) -> bool:
        return not any(row.problems for row in self.rows)


def mutant_description(path: Path) -> str:
    try:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    except (SyntaxError, UnicodeDecodeError):
        return "(the mutant does not parse)"
    return doc.strip().splitlines()[0] if doc else "(no description)"


def run_audit(exercise: Exercise, backend: Backend, backend_name: str, tier: str | None = None,
              on_row: Callable[[AuditRow], None] | None = None) -> Audit:
    def grade(label: str, path: Path) -> AuditRow:
        card = grade_bytes(path.read_bytes(), exercise, tier, backend, backend_name)
        row = AuditRow(label, path, card)
        if card.status != "graded":
            row.problems.append(f"{card.status}: {card.reason}")
        if on_row:
            on_row(row)
        return row

    reference = grade("reference", exercise.reference)
    if reference.card.score != reference.card.max_score or not reference.card.tests:
        failing = [t.name for t in reference.card.tests if t.status != "passed"]
        reference.problems.append(f"the reference must get full marks; it fails: {', '.join(failing) or 'everything'}")
    stub = grade("stub", exercise.stub)
    if stub.card.score != 0:
        stub.problems.append(f"the stub must score 0, it scored {stub.card.score}")
    unclear = [t.name for t in stub.card.tests if t.status != "failed" or "not implemented" not in t.message]
    if unclear:
        stub.problems.append(f"these tests do not fail the stub with a clear 'not implemented': {', '.join(unclear)}")
    mutants = []
    for path in exercise.mutants:
        row = grade(f"mutant {path.stem}", path)
        row.description = mutant_description(path)
        if row.card.status == "graded" and not row.caught_by:
            row.problems.append("no test catches this mutant")
        mutants.append(row)
    if len(mutants) == 0:
        stub.problems.append(f"no mutants in {exercise.root / 'solutions' / exercise.slug / 'mutants'}")
    return Audit(reference, stub, mutants)
