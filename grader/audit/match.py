"""A graded scorecard's failures against the mutants' signatures: which mistake they look like.

Only the tests the card ran count (a free run's tests are its open suites' alone, so nothing it says
comes from a test the student's tier did not run). For each mutant, a weighted Jaccard similarity of
the two sets of failing tests: a test both fail counts fully when it failed the same way (the same
status and masked first message line as one of the mutant's failures) and `OTHER_WAY` when it failed
otherwise; a random workload's test (its seed decides what it reaches) weighs `SEEDED_WEIGHT` and
counts as much as the share of seeds the mutant failed it on. "The same way" is per test: the first
call where the two part ways from the reference, what the reference gave there and what they gave
(grader/core/causes.py's `masked_divergence`). Only mutants that part ways from the reference where the
card does are candidates (its first failing test failed the same way).

One cause or none: the closest mutant is the diagnosis when its similarity is at least `THRESHOLD` and
it is ahead of the next mutant that says something else by at least `MARGIN`; two causes that fit about
as well are a guess, and a guess is not told. Mutants that behave alike everywhere (`indistinguishable`:
each, read as the other's failures, matches it within `MARGIN`) are one cause family, which no grading
can tell apart: the family is named once, by its closest member.
The figures are measured (docs/authoring.md#misconception-hints).
"""

from __future__ import annotations

import logging

from grader.audit.signatures import (
    Signature,
    Signatures,
    current_signatures,
    failure_kind,
    signatures_problem,
    test_key,
)
from grader.core.exercise import Exercise
from grader.core.scorecard import Diagnosis, Scorecard

THRESHOLD = 0.6
# What one named test of five, failing at another call, takes from a similarity (OTHER_WAY / 5): a best
# match ahead by less is ahead by less than one test's first divergence, and is not told.
MARGIN = 0.1
SEEDED_WEIGHT = 0.3
OTHER_WAY = 0.5

log = logging.getLogger("grader.diagnosis")


def failures(card: Scorecard) -> dict[str, str]:
    """The card's failing tests: test key -> how it failed."""
    return {test_key(t.suite, t.name): failure_kind(t) for t in card.tests if t.status != "passed"}


def similarity(failed: dict[str, str], ran: set[str], signature: Signature, seeded: set[str]) -> float:
    """How alike a run's failures (`failed`, among the tests it `ran`) and a mutant's are, 0..1."""
    shared = total = 0.0
    for key in ran:
        expected = signature.fails.get(key)
        mutant = expected.rate if expected is not None else 0.0
        submission = 1.0 if key in failed else 0.0
        if not mutant and not submission:
            continue
        weight = SEEDED_WEIGHT if key in seeded else 1.0
        agree = 1.0 if expected is not None and failed.get(key) in expected.kinds else OTHER_WAY
        shared += weight * min(mutant, submission) * agree
        total += weight * max(mutant, submission)
    return shared / total if total else 0.0


def ranked(card: Scorecard, signatures: Signatures) -> list[tuple[float, Signature]]:
    """Every mutant with its similarity to the card, the closest first."""
    failed = failures(card)
    ran = {test_key(t.suite, t.name) for t in card.tests}
    seeded = set(signatures.seeded)
    scored = [(similarity(failed, ran, signature, seeded), signature) for signature in signatures.mutants]
    return sorted(scored, key=lambda pair: -pair[0])


def has_failures(card: Scorecard) -> bool:
    """Whether the card has anything to diagnose: a graded run short of full marks, with a test not passed."""
    return card.status == "graded" and card.score < card.max_score and any(t.status != "passed" for t in card.tests)


def parts_ways_alike(card: Scorecard, signature: Signature, seeded: set[str]) -> bool:
    """Whether the mutant parts ways from the reference where the card does: the card's first failing
    named test (in the order the run met them) is one the mutant fails too, and the same way (the same
    status and masked first line, which for a scenario names the first call that differed). A random
    workload's first difference changes with the seed: where only those fail, the mutant must fail the
    first of them, whatever its message."""
    failing = [t for t in card.tests if t.status != "passed"]
    named = [t for t in failing if test_key(t.suite, t.name) not in seeded]
    if not failing:
        return False
    first = (named or failing)[0]
    expected = signature.fails.get(test_key(first.suite, first.name))
    return expected is not None and (not named or failure_kind(first) in expected.kinds)


def indistinguishable(one: Signature, other: Signature, seeded: set[str]) -> bool:
    """Whether no grading can tell two mutants apart: each, read as a run's failures, is as like the other
    as within `MARGIN` of a perfect match (the same tests failing, at the same first divergent calls, a
    random workload reaching them about as often). Such mutants are one cause family."""
    shared = total = 0.0
    for key in one.fails.keys() | other.fails.keys():
        mine, theirs = one.fails.get(key), other.fails.get(key)
        rates = (mine.rate if mine else 0.0, theirs.rate if theirs else 0.0)
        weight = SEEDED_WEIGHT if key in seeded else 1.0
        agree = 1.0 if mine and theirs and set(mine.kinds) & set(theirs.kinds) else OTHER_WAY
        shared += weight * min(rates) * agree
        total += weight * max(rates)
    return not total or shared / total >= 1 - MARGIN


def diagnose(card: Scorecard, signatures: Signatures) -> list[Diagnosis]:
    """The one misconception the card's failures look like, or none: none for a run that is not `graded`,
    has full marks, fails like no mutant, or fits two causes about as well (within `MARGIN`). A mutant
    counts only where it parts ways from the reference as the card does (`parts_ways_alike`): alike sets
    of failing tests reached by another first difference are another mistake."""
    if not has_failures(card) or signatures.exercise != card.exercise:
        return []
    scored = [(value, signature) for value, signature in ranked(card, signatures)
              if parts_ways_alike(card, signature, set(signatures.seeded))]
    if not scored or scored[0][0] < THRESHOLD:
        return []
    best_value, best = scored[0]
    seeded = set(signatures.seeded)
    rivals = [value for value, signature in scored[1:]
              if signature.hint != best.hint and not indistinguishable(signature, best, seeded)]
    if rivals and best_value - rivals[0] < MARGIN:
        return []
    return [Diagnosis(best.mutant, best.hint, round(best_value, 3))]


def diagnose_graded(card: Scorecard, exercise: Exercise) -> list[Diagnosis]:
    """`diagnose` against the exercise's current signatures; none without a current file (which is not
    even read for a card with nothing to diagnose). A missing or stale file is named in the log on every
    grading, whatever its result: a diagnosis turned off is never silent."""
    problem = signatures_problem(exercise)
    if problem:
        log.warning("%s: %s", exercise.slug, problem)
    if not has_failures(card):
        return []
    signatures = current_signatures(exercise)
    return diagnose(card, signatures) if signatures is not None else []
