"""How a diagnosis is said to a student, the same in every report and page."""

from __future__ import annotations

from grader.core.scorecard import Diagnosis, Scorecard

OPENING = "Your program behaves like one that"


def diagnosis_sentence(found: list[Diagnosis]) -> str:
    """"Your program behaves like one that <hint>." ("..., or one that <hint>." for a tie); "" for none."""
    hints = [d.hint.strip().rstrip(".") for d in found if d.hint.strip()]
    if not hints:
        return ""
    return f"{OPENING} " + ", or one that ".join(hints) + "."


def card_diagnosis(card: Scorecard) -> str:
    """The sentence a card's reader is told; "" unless the run is graded and below full marks, whatever
    a stored card holds."""
    if card.status != "graded" or card.score >= card.max_score:
        return ""
    return diagnosis_sentence(card.diagnosis)
