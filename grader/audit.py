"""`grader audit`: proof that an exercise's suites are strong enough to trust.

The reference must get full marks, the stub nothing (every test failing cleanly, no harness error),
and every mutant (a plausible bug, one per file) must fail at least one test of the top tier: the
tier that runs the most suites. Each tier the exercise declares also gets its figure, how many
mutants its own suites catch, so an author sees what the free tier leaves unchecked.

Everything is graded once, on the top tier; a tier's figure counts the failing tests of the suites
that tier runs. A tier running a suite the top tier does not is graded on its own.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grader.exercise import Exercise, ExerciseError
from grader.grading import Backend, grade_bytes
from grader.scorecard import Scorecard
from grader.seed_checks import check_seeds


@dataclass
class AuditRow:
    label: str
    path: Path
    card: Scorecard  # graded on the top tier
    description: str = ""
    problems: list[str] = field(default_factory=list)
    other_cards: dict[str, Scorecard] = field(default_factory=dict)  # tiers the top tier does not cover

    @property
    def caught_by(self) -> list[str]:
        """The top tier's tests this submission fails."""
        return [t.name for t in self.card.tests if t.status != "passed"]

    def caught_by_suites(self, suites: tuple[str, ...], tier: str) -> list[str]:
        card = self.other_cards.get(tier, self.card)
        return [t.name for t in card.tests if t.status != "passed" and t.suite in suites]


@dataclass
class TierFigure:
    tier: str
    suites: tuple[str, ...]
    caught: int  # mutants that at least one test of these suites fails
    mutants: int


@dataclass
class Audit:
    reference: AuditRow
    stub: AuditRow
    mutants: list[AuditRow]
    tier: str = ""  # the top tier, everything is graded on
    tiers: list[TierFigure] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)  # of the suites as written (their seeds): not strong
    warnings: list[str] = field(default_factory=list)  # said, for the author to judge

    @property
    def rows(self) -> list[AuditRow]:
        return [self.reference, self.stub, *self.mutants]

    @property
    def ok(self) -> bool:
        return not self.refusals and not any(row.problems for row in self.rows)


def mutant_description(path: Path) -> str:
    try:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    except (SyntaxError, UnicodeDecodeError):
        return "(the mutant does not parse)"
    return doc.strip().splitlines()[0] if doc else "(no description)"


def run_audit(exercise: Exercise, backend: Backend, backend_name: str, tier: str | None = None,
              on_row: Callable[[AuditRow], None] | None = None) -> Audit:
    tier = tier or exercise.top_tier
    for what, path in (("the reference", exercise.reference), ("the stub", exercise.stub)):
        if not path.is_file():
            raise ExerciseError(f"an audit grades {what}, and there is no {path}")
    covered = set(exercise.tiers[tier])
    uncovered = [name for name, suites in exercise.tiers.items() if not set(suites) <= covered]

    def grade(label: str, path: Path, mutant: bool = False) -> AuditRow:
        data = path.read_bytes()
        row = AuditRow(label, path, grade_bytes(data, exercise, tier, backend, backend_name))
        if mutant:
            row.other_cards = {name: grade_bytes(data, exercise, name, backend, backend_name) for name in uncovered}
        for card in (row.card, *row.other_cards.values()):
            if card.status != "graded":
                row.problems.append(f"{card.tier}: {card.status}: {card.reason}")
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
        row = grade(f"mutant {path.stem}", path, mutant=True)
        row.description = mutant_description(path)
        if row.card.status == "graded" and not row.caught_by:
            row.problems.append("no test catches this mutant")
        mutants.append(row)
    if len(mutants) == 0:
        stub.problems.append(f"no mutants in {exercise.root / 'solutions' / exercise.slug / 'mutants'}")
    figures = [TierFigure(name, suites, sum(1 for row in mutants if row.caught_by_suites(suites, name)), len(mutants))
               for name, suites in exercise.tiers.items()]
    seeds = check_seeds(exercise)
    return Audit(reference, stub, mutants, tier, figures, seeds.refusals, seeds.warnings)
