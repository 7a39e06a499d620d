"""How many students' results look like each misconception: the class overview's and the dashboard's
table, so an instructor sees which mistakes a class makes most."""

from __future__ import annotations

from dataclasses import dataclass

from grader.core.scorecard import Scorecard
from grader.diagnosis.words import card_diagnosis


@dataclass
class MisconceptionCount:
    mutant: str
    hint: str
    students: int


def misconception_counts(cards: list[Scorecard]) -> list[MisconceptionCount]:
    """Per misconception, the cards (one a student) told it, the most common first. A card told a tie of
    two counts for both; a card no reader is told one (full marks, not graded) counts for none."""
    found: dict[str, MisconceptionCount] = {}
    for card in cards:
        if not card_diagnosis(card):
            continue
        for diagnosis in {d.mutant: d for d in card.diagnosis}.values():
            row = found.setdefault(diagnosis.mutant, MisconceptionCount(diagnosis.mutant, diagnosis.hint, 0))
            row.students += 1
    return sorted(found.values(), key=lambda row: (-row.students, row.mutant))
